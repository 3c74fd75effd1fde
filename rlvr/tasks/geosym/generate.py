"""GeoSym problems end to end: grammar -> enhancements -> question -> prompt, answer, chain of thought.

``generate_problem(seed, difficulty)`` is a pure function of its arguments (its random generator is
seeded by them), so a problem is reproduced from its seed alone. Pipeline (GeoSym Engine): sample the base
type by ``BASE_WEIGHTS``, run the type-conditional derivation (:mod:`.grammar`), apply the difficulty's
``NUM_ENHANCEMENTS`` operations (:mod:`.enhance`), ask one question with an exact answer
(:mod:`.solver`); the diagram is drawn on request (:mod:`.render`), at any resolution, from the same
figure. ``problem_meta`` is the JSON-able record kept with each example: the strata, the rules, the
construction steps and every point's float coordinates (what an independent check recomputes from).
Source: GeoSym / GeoSym127K (2026), github.com/Tomie56/GeoSym127K.
"""

from __future__ import annotations

import random
from dataclasses import dataclass
from typing import Any

from rlvr.tasks.geosym.enhance import NUM_ENHANCEMENTS, enhance
from rlvr.tasks.geosym.figure import Figure
from rlvr.tasks.geosym.grammar import BASE_WEIGHTS, build_base, derive, pick
from rlvr.tasks.geosym.solver import Question, ask

__all__ = ["DIFFICULTIES", "Problem", "generate_problem", "problem_meta", "prompt_of", "INSTRUCTION"]

DIFFICULTIES = tuple(NUM_ENHANCEMENTS)
INSTRUCTION = "Give the exact value (radicals and pi allowed), without units, in \\boxed{}."


@dataclass(frozen=True)
class Problem:
    seed: str
    difficulty: str
    base_type: str
    figure: Figure
    question: Question

    @property
    def prompt(self) -> str:
        return prompt_of(self.figure, self.question)

    @property
    def answer(self) -> str:
        return self.question.answer

    @property
    def cot(self) -> str:
        return self.question.cot

    def image(self, width: int = 1600, height: int = 1200):
        from rlvr.tasks.geosym.render import render

        return render(self.figure, width, height, self.question.shaded)


def prompt_of(fig: Figure, q: Question) -> str:
    return "<image>In the figure, " + " ".join(fig.text) + " " + q.text + " " + INSTRUCTION


def generate_problem(seed: int | str, difficulty: str, base_type: str | None = None) -> Problem:
    """One problem, determined by ``seed``, ``difficulty`` (easy/mid/hard) and optionally the base type."""
    if difficulty not in NUM_ENHANCEMENTS:
        raise ValueError(f"unknown difficulty {difficulty!r}; choose one of {', '.join(DIFFICULTIES)}")
    if base_type is not None and base_type not in BASE_WEIGHTS:
        raise ValueError(f"unknown base type {base_type!r}; choose one of {', '.join(sorted(BASE_WEIGHTS))}")
    for attempt in range(20):
        rng = random.Random(f"geosym:{seed}:{difficulty}:{base_type}:{attempt}")
        btype = base_type or pick(rng, BASE_WEIGHTS)
        fig, shape = build_base(rng, btype)
        derive(fig, shape, rng)
        enhance(fig, difficulty, rng)
        try:
            q = ask(fig, rng)
        except ValueError:
            continue
        return Problem(str(seed), difficulty, btype, fig, q)
    raise RuntimeError(f"no GeoSym problem found for seed {seed!r}")  # pragma: no cover


def problem_meta(p: Problem) -> dict[str, Any]:
    """The JSON-able description of a problem kept in ``Example.meta`` and in the JSONL rows."""
    fig = p.figure
    return {"difficulty": p.difficulty, "base_type": p.base_type, "rules": list(fig.rules),
            "enhancements": list(fig.enhancements), "question_kind": p.question.kind,
            "question_target": p.question.target, "points": fig.floats(), "segments": [list(s) for s in fig.segments],
            "circles": [{"center": c.center, "on": c.on, "r2": float(c.r2)} for c in fig.shapes if c.is_circle],
            "steps": fig.steps, "given": [list(g) for g in fig.given], "seed": p.seed}

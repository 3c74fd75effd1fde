"""The ``geosym`` task: GeoSym geometry problems with diagrams and exact symbolic answers.

Each example is one generated problem (:func:`~rlvr.tasks.geosym.generate.generate_problem`): the prompt
``"<image>In the figure, ... Find the area of triangle ABC. Give the exact value ..."``, the exact answer
(a SymPy string such as ``2*sqrt(3)`` or ``25*pi/4``), the diagram at ``width x height`` as the one image,
and ``meta`` with the difficulty, base type, derivation rules, enhancement operations, question kind and
the figure's coordinates. The difficulty of each problem is drawn from ``difficulty`` (weights of the
strata easy/mid/hard = 3/5/7 enhancement operations). Problem ``i`` of a split is seeded by
``(data_seed, split, i)``, so splits are reproducible and independent; a train problem whose prompt equals
an eval prompt is redrawn, so the held-out split shares no problem with training. The supervised target
is the solver's chain of thought ending in ``\\boxed{answer}`` (``cot: false``: the bare answer). The
verifier is ``geosym`` (:mod:`rlvr.verifiers.geosym`).

Importing this module loads neither SymPy nor Pillow (nor torch); building the task does.
Source: GeoSym / GeoSym127K (2026), github.com/Tomie56/GeoSym127K.
"""

from __future__ import annotations

import random
from typing import Literal

from pydantic import Field, model_validator

from rlvr.core.types import Example
from rlvr.registry import Params
from rlvr.tasks.base import TASKS, Task, WeightedVerifier
from rlvr.verifiers.geosym import GeoSymVerifier, GeoSymVerifierParams

__all__ = ["GeoSymParams", "geosym_task", "pick_difficulty", "make_example"]

Difficulty = Literal["easy", "mid", "hard"]


class GeoSymParams(Params):
    num_train: int = Field(1000, gt=0, description="train problems")
    num_eval: int = Field(100, gt=0, description="held-out problems")
    difficulty: dict[Difficulty, float] = Field({"easy": 1.0, "mid": 1.0, "hard": 1.0},
                                                description="difficulty mix: weight of each stratum "
                                                            "(easy/mid/hard = 3/5/7 enhancement operations)")
    width: int = Field(448, ge=64, description="diagram width in pixels (GeoSym renders 1600)")
    height: int = Field(336, ge=64, description="diagram height in pixels (GeoSym renders 1200)")
    data_seed: int = Field(0, description="seed of the problems (independent of the run seed)")
    cot: bool = Field(True, description="SFT target: the solver's chain of thought ending in \\boxed{answer} "
                                        "(false: the bare answer)")
    rel_tol: float = Field(1e-6, ge=0.0, description="relative tolerance of the verifier's numeric fallback")

    @model_validator(mode="after")
    def _check(self) -> "GeoSymParams":
        if any(w < 0 for w in self.difficulty.values()) or sum(self.difficulty.values()) <= 0:
            raise ValueError(f"difficulty weights must be >= 0 with a positive sum, got {self.difficulty}")
        return self


def pick_difficulty(weights: dict[str, float], seed: str) -> str:
    """The stratum of one problem, drawn by ``weights`` from its own seed."""
    keys = sorted(k for k, w in weights.items() if w > 0)
    return random.Random(f"difficulty:{seed}").choices(keys, weights=[weights[k] for k in keys])[0]


def make_example(problem, ex_id: str, width: int, height: int, cot: bool = True) -> Example:
    """The :class:`Example` of a generated problem, with its rendered diagram."""
    from rlvr.tasks.geosym.generate import problem_meta

    return Example(id=ex_id, prompt=problem.prompt, answer=problem.answer, task="geosym",
                   target=problem.cot if cot else None, meta=problem_meta(problem),
                   images=(problem.image(width, height),))


@TASKS.register("geosym", GeoSymParams)
def geosym_task(p: GeoSymParams) -> Task:
    """GeoSym geometry problems: diagrams, exact symbolic answers, difficulty strata (exact-match reward)."""
    from rlvr.tasks.geosym.generate import generate_problem

    seen: set[str] = set()
    splits: dict[str, list[Example]] = {}
    for split, n in (("eval", p.num_eval), ("train", p.num_train)):
        out = []
        for i in range(n):
            for attempt in range(50):
                seed = f"{p.data_seed}:{split}:{i}:{attempt}"
                problem = generate_problem(seed, pick_difficulty(p.difficulty, seed))
                if problem.prompt not in seen:
                    break
            seen.add(problem.prompt)
            out.append(make_example(problem, f"geosym-{split}{i}", p.width, p.height, p.cot))
        splits[split] = out
    verifier = GeoSymVerifier(GeoSymVerifierParams(rel_tol=p.rel_tol))
    return Task("geosym", {"train": splits["train"], "eval": splits["eval"]}, [WeightedVerifier(verifier)])

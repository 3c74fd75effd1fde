"""The ``defab`` RLVR task and verifier: procedurally generated DeFAb instances, scored exactly.

Each example's ``meta`` carries the instance (``theory`` text, ``target``, ``level``, ``rendering``,
``glossary``, ``gold``), so the verifier needs nothing else and ``rlvr verify`` can score any record
whose ``meta`` has at least ``theory``, ``target`` and ``level`` (``rendering`` defaults to ``formal``).
The reward is the exact check of :func:`rlvr.defab.score.score_answer` on the answer decoded by
:mod:`rlvr.defab.render` (1/0 at Levels 1–2, graded at Level 3); undecodable output scores 0.

Train and eval instances come from disjoint seed streams (``seed`` and ``seed + 1_000_003``) so an eval
instance is never a train instance generated with the same index; ``rendering: mixed`` cycles the four
renderings over the examples. ``eval_rendering: all`` puts every eval instance in all four renderings, and
evaluation then reports the rendering-robust accuracy (per instance, the worst of its four renderings). ``answer`` (and the SFT target) is the gold in the example's answer format.

``rlvr/tasks/__init__.py`` imports this module, which registers both; the engine, checks and generator it
uses live in :mod:`rlvr.defab`, a layer below the tasks.
"""

from __future__ import annotations

from functools import lru_cache
from typing import Literal as Lit

from pydantic import Field

from rlvr.core.types import Example, Score
from rlvr.defab.generate import Instance, generate
from rlvr.defab.parser import parse_literal, parse_theory
from rlvr.defab.render import STYLES, answer_text, render_prompt, score_completion
from rlvr.registry import Params
from rlvr.tasks.base import TASKS, Task, WeightedVerifier
from rlvr.verifiers.base import VERIFIERS, BaseVerifier

__all__ = ["DefabParams", "DefabVerifier", "defab_task", "instance_example"]

_EVAL_OFFSET = 1_000_003


class DefabParams(Params):
    level: int = Field(2, ge=1, le=3, description="DeFAb level: 1 fact, 2 rule, 3 defeater abduction")
    n_train: int = Field(200, ge=0, description="train instances")
    n_eval: int = Field(50, ge=1, description="eval instances")
    seed: int = Field(0, description="generation seed (independent of the run seed)")
    kb: str = Field("animals", description="shipped KB name (animals, vehicles, food, occupations) or a KB path")
    rendering: Lit["narrative", "semiformal", "annotated", "formal", "mixed"] = Field(
        "formal", description="surface rendering of the prompts (mixed cycles all four)")
    eval_rendering: Lit["same", "narrative", "semiformal", "annotated", "formal", "mixed", "all"] = Field(
        "same", description="renderings of the eval instances: same as rendering, one style, mixed, or all "
                            "(each instance in all four; evaluation then reports rendering-robust accuracy)")
    nonsense: bool = Field(False, description="made-up vocabulary (contamination control)")
    distractors: Lit["none", "random", "syntactic", "adversarial", "mixed"] = Field(
        "random", description="distractor strategy")


def instance_example(inst: Instance, style: str, task: str = "defab") -> Example:
    """An :class:`Example` for one instance in one rendering; ``meta`` carries the whole instance."""
    meta = {**inst.to_json(), "rendering": style}
    return Example(id=f"{inst.id}-{style}", prompt=render_prompt(inst.theory, inst.target, inst.level,
                                                                 inst.glossary, style),
                   answer=answer_text(inst.gold, inst.glossary, style, inst.gold_superiority, inst.theory),
                   task=task, meta=meta)


def _examples(p: DefabParams, n: int, seed: int, rendering: str) -> list[Example]:
    if n == 0:
        return []
    insts = generate(p.level, n, seed, kb=p.kb, strategy=p.distractors, nonsense=p.nonsense)
    if rendering == "all":  # the four renderings of an instance share meta["id"]: one rendering group
        return [instance_example(inst, style) for inst in insts for style in STYLES]
    return [instance_example(inst, STYLES[k % 4] if rendering == "mixed" else rendering)
            for k, inst in enumerate(insts)]


@TASKS.register("defab", DefabParams)
def defab_task(p: DefabParams) -> Task:
    """DeFAb defeasible abduction (Levels 1–3), generated from a KB and verified exactly."""
    eval_style = p.rendering if p.eval_rendering == "same" else p.eval_rendering
    splits = {"train": _examples(p, p.n_train, p.seed, p.rendering),
              "eval": _examples(p, p.n_eval, p.seed + _EVAL_OFFSET, eval_style)}
    return Task("defab", splits, [WeightedVerifier(DefabVerifier())])


@lru_cache(maxsize=1024)
def _parsed(theory: str, target: str):
    return parse_theory(theory), parse_literal(target)


class DefabVerifier(BaseVerifier):
    """Exact DeFAb reward from the instance in ``example.meta``; never raises on model output."""

    name = "defab"

    def score(self, example: Example, text: str) -> Score:
        m = example.meta
        theory, target = _parsed(m["theory"], m["target"])
        style = m.get("rendering", "formal")
        glossary = m.get("glossary") or {}
        v = score_completion(theory, target, int(m["level"]), glossary, style, text or "")
        return Score(v.score, {"correct": float(v.score >= 1.0)}, {"reason": v.reason})

    def validation_cases(self) -> list[tuple[Example, str, float]]:
        cases = []
        for level in (1, 2, 3):
            inst = generate(level, 1, 0, kb="animals", strategy="mixed")[0]
            for style in STYLES:
                ex = instance_example(inst, style)
                cases += [(ex, "Reasoning...\n" + ex.answer, 1.0), (ex, "I do not know.", 0.0),
                          (ex, ex.answer.replace("Answer:", "Result:"), 0.0)]
            wrong = instance_example(inst, "formal")
            cases.append((wrong, "Answer: " + str(inst.target) + ".", 0.0))  # restating the target
        return cases


@VERIFIERS.register("defab", Params)
def _defab_verifier(p: Params) -> DefabVerifier:
    """DeFAb exact check of the answer against the instance carried in the record's meta."""
    return DefabVerifier()

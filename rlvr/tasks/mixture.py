"""``mixture``: several tasks in one run, each with its weight and its own verifiers.

    task:
      name: mixture
      tasks:
        - {task: {name: arithmetic, ops: ["+"]}, weight: 3, name: add}
        - {task: {name: arithmetic, ops: ["*"], max_value: 12}, weight: 1, name: mul}

Every split is the union of the sub-tasks' splits; an example's id becomes ``<name>/<id>`` and its ``task``
field the entry's name (the domain), so prompt statistics, samplers and metrics can tell the tasks apart.
A sub-task without an ``sft`` split contributes its train split there. Scoring dispatches on ``task`` to the
sub-task, so each task keeps its own verifiers. The weights reach samplers as ``domain_weights``: the
default sampler draws each slot's task by weight (``rlvr.sampling.prompts.MixtureSampler``); the ``tac``
sampler learns them instead. Step metrics report ``task/<name>/{accuracy,reward,completions}``.
"""

from __future__ import annotations

from dataclasses import replace
from itertools import zip_longest
from typing import Any, Sequence

from pydantic import BaseModel, ConfigDict, Field, ValidationError, model_validator

from rlvr.core.types import Example, Score
from rlvr.registry import Params, RegistryError
from rlvr.tasks.base import TASKS, Task

__all__ = ["MixtureParams", "MixtureTask", "mixture_task"]


class MixtureEntry(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)
    task: dict[str, Any] = Field(..., description="the sub-task as a component: {name: ..., <params>}")
    weight: float = Field(1.0, gt=0.0, description="sampling weight of this task")
    name: str | None = Field(None, description="domain name (default: the task's name); must be unique")

    @property
    def domain(self) -> str:
        return self.name or str(self.task.get("name"))


class MixtureParams(Params):
    tasks: list[MixtureEntry] = Field(..., min_length=1, description="the mixed tasks with weights")

    @model_validator(mode="after")
    def _check(self) -> "MixtureParams":
        names = [e.domain for e in self.tasks]
        if len(set(names)) != len(names):
            raise ValueError(f"mixture task names must be unique (set `name:` per entry), got {names}")
        for e in self.tasks:
            _sub_params(e)
        return self


def _sub_params(e: MixtureEntry) -> tuple[str, Params]:
    raw = dict(e.task)
    name = raw.pop("name", None)
    if name is None or name == "mixture":
        raise ValueError(f"mixture entry {e.domain!r}: task needs a 'name' other than 'mixture'")
    try:
        entry = TASKS.get(str(name))
    except RegistryError as err:
        raise ValueError(str(err)) from None
    try:
        return str(name), entry.params.model_validate(raw)
    except ValidationError as err:
        raise ValueError(f"mixture entry {e.domain!r}: {err}") from None


class MixtureTask(Task):
    def __init__(self, parts: dict[str, Task], weights: dict[str, float]):
        splits: dict[str, list[Example]] = {}
        names = sorted({s for t in parts.values() for s in t.splits})
        for split in names:
            per_task = []
            for dom, t in parts.items():
                src = split if split in t.splits else ("train" if split == "sft" and "train" in t.splits else None)
                if src is not None:
                    per_task.append([replace(ex, id=f"{dom}/{ex.id}", task=dom) for ex in t.examples(src)])
            if split == "train":
                splits[split] = [ex for exs in per_task for ex in exs]
            else:  # round-robin, so the first K examples (eval.num_examples) cover every task
                splits[split] = [ex for row in zip_longest(*per_task) for ex in row if ex is not None]
        first = next(iter(parts.values()))
        super().__init__("mixture", splits, first.verifiers)
        self.parts, self.domain_weights = parts, dict(weights)

    def score(self, example: Example, text: str) -> Score:
        part = self.parts.get(example.task)
        if part is None:
            return Score(0.0, {"correct": 0.0}, {"reason": f"example of unknown mixture task {example.task!r}"})
        return part.score(example, text)

    @property
    def batched(self) -> bool:
        return any(part.batched for part in self.parts.values())

    def score_batch(self, examples: Sequence[Example], texts: Sequence[str]) -> list[Score]:
        """Each part scores its own examples, batched when it can."""
        out: list[Score | None] = [None] * len(texts)
        by_task: dict[str, list[int]] = {}
        for i, e in enumerate(examples):
            by_task.setdefault(e.task, []).append(i)
        for name, idx in by_task.items():
            part = self.parts.get(name)
            scores = (part.score_batch([examples[i] for i in idx], [texts[i] for i in idx]) if part is not None
                      else [self.score(examples[i], texts[i]) for i in idx])
            for i, sc in zip(idx, scores):
                out[i] = sc
        return out  # type: ignore[return-value]


@TASKS.register("mixture", MixtureParams)
def mixture_task(p: MixtureParams) -> MixtureTask:
    """Several tasks in one run, with sampling weights, per-task verifiers and per-task metrics."""
    parts, weights = {}, {}
    for e in p.tasks:
        name, params = _sub_params(e)
        parts[e.domain] = TASKS.get(name).fn(params)
        weights[e.domain] = e.weight
    return MixtureTask(parts, weights)

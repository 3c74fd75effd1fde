"""``arithmetic``: procedural integer arithmetic, the built-in demo task.

Prompts look like ``"37+48="`` and the answer is the exact result (``"85"``). Every operand pair in
``[min_value, max_value]`` is enumerated once, shuffled with ``data_seed`` and split into a held-out eval
set of ``num_eval`` problems and a disjoint train set, so the split never depends on the training seed.

``teacher_error`` models supervised data written by a sloppy teacher: the ``sft`` split holds
``teacher_samples`` renditions of each train problem, and in each rendition of an addition that carries,
the teacher drops every carry with probability ``teacher_error`` (``47+38=`` -> ``75``). A model
imitating that data learns the right algorithm and the teacher's habit; RL against the exact verifier
(rewards and evaluation always use the true answer) can then do better than its teacher. With
``teacher_error: 0`` the ``sft`` split is the train split with exact answers.
"""

from __future__ import annotations

import itertools
import random
from typing import Literal

from pydantic import Field, model_validator

from rlvr.core.types import Example
from rlvr.registry import Params
from rlvr.tasks.base import TASKS, Task, WeightedVerifier
from rlvr.verifiers.numeric import NumericVerifier

__all__ = ["ArithmeticParams", "arithmetic_task"]

_OPS = {"+": lambda a, b: a + b, "-": lambda a, b: a - b, "*": lambda a, b: a * b}


class ArithmeticParams(Params):
    ops: list[Literal["+", "-", "*"]] = Field(["+"], min_length=1, description="operators to draw from")
    min_value: int = Field(0, ge=0, description="smallest operand")
    max_value: int = Field(49, ge=0, description="largest operand")
    num_eval: int = Field(200, gt=0, description="held-out problems")
    num_train: int | None = Field(None, gt=0, description="train problems (default: all the rest)")
    data_seed: int = Field(0, description="seed of the train/eval split (independent of the run seed)")
    teacher_error: float = Field(0.0, ge=0.0, le=1.0,
                                 description="chance the SFT teacher drops the carries of an addition")
    teacher_samples: int = Field(1, gt=0, description="teacher renditions per train problem in the sft split")

    @model_validator(mode="after")
    def _check(self) -> "ArithmeticParams":
        if self.max_value < self.min_value:
            raise ValueError("max_value must be >= min_value")
        total = len(set(self.ops)) * (self.max_value - self.min_value + 1) ** 2
        need = self.num_eval + (self.num_train or 1)
        if total < need:
            raise ValueError(f"only {total} distinct problems exist, {need} requested")
        return self


@TASKS.register("arithmetic", ArithmeticParams)
def arithmetic_task(p: ArithmeticParams) -> Task:
    """Procedural integer arithmetic (the CPU demo task)."""
    values = range(p.min_value, p.max_value + 1)
    problems = [(a, op, b) for op in dict.fromkeys(p.ops) for a, b in itertools.product(values, values)]
    random.Random(p.data_seed).shuffle(problems)
    eval_p = problems[: p.num_eval]
    rest = problems[p.num_eval:]
    train_p = rest[: p.num_train] if p.num_train else rest

    def ex(a: int, op: str, b: int, target: str | None = None, k: int | None = None) -> Example:
        return Example(id=f"{a}{op}{b}" + ("" if k is None else f"#{k}"), prompt=f"{a}{op}{b}=",
                       answer=str(_OPS[op](a, b)), task="arithmetic", target=target)

    rng = random.Random(f"teacher-{p.data_seed}")
    sft = [ex(a, op, b, _teacher(a, op, b, p.teacher_error, rng), k)
           for k in range(p.teacher_samples) for a, op, b in train_p]
    return Task("arithmetic", {"train": [ex(*t) for t in train_p], "eval": [ex(*t) for t in eval_p], "sft": sft},
                [WeightedVerifier(NumericVerifier())])


def drop_carries(a: int, b: int) -> int:
    """Digit-wise sum without carrying: 47 + 38 -> 75."""
    out, scale = 0, 1
    while a or b:
        out += ((a % 10 + b % 10) % 10) * scale
        a, b, scale = a // 10, b // 10, scale * 10
    return out


def _teacher(a: int, op: str, b: int, error: float, rng: random.Random) -> str:
    right = _OPS[op](a, b)
    if op == "+" and error > 0 and rng.random() < error:
        return str(drop_carries(a, b))
    return str(right)

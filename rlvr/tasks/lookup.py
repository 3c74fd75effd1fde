"""``lookup``: ask a tool for a value, then answer with it; the multi-turn CPU demo's task (with the
``lookup`` environment, :mod:`rlvr.envs.lookup_env`, and ``rlvr train --recipe tool_demo``).

A prompt reads ``"key QX?\\n"``. The right episode is two turns: the call ``get QX``, the environment's
observation ``QX=482``, then the answer ``482``. Keys are ``key_length`` upper-case letters, every one
enumerated once, shuffled with ``data_seed``; the first ``num_eval`` keys are the held-out eval set (one
example each), the rest train, ``values_per_key`` examples each. Each example's value (``value_digits``
random digits, in ``meta["value"]`` and ``answer``) is drawn independently, so one train prompt stands for
many values: the prompt never determines the value, nothing can be memorised, and only the tool tells it.

**Scoring.** The verifier (``lookup``) reads the policy's text the way the environment reads its turns
(:func:`rlvr.envs.lookup_env.parse_turn`, one line per turn): the first line of digits is the answer, and it
is correct when it equals the example's value. The environment stops an episode at that line, so on every
episode the verifier's reward equals the environment's, and held-out evaluation (the task's verifier on the
episodes the evaluation engine runs) measures solved episodes.

**The SFT teacher.** The ``sft`` split holds one target per train example: the whole transcript after the
prompt, the call, the observation as the driver inserts it (``observation_template``, which must match
``rollout.multiturn.observation_template``) and the answer. With probability ``teacher_skip`` the teacher
skips the tool and answers a random guess instead: a model imitating it calls the tool only part of the
time, and RL (whose reward is exact) learns to always call, and to copy what the tool says.
"""

from __future__ import annotations

import itertools
import random
import string

from pydantic import Field, model_validator

from rlvr.core.types import Example, Score
from rlvr.envs.lookup_env import parse_turn
from rlvr.registry import Params
from rlvr.tasks.base import TASKS, Task, WeightedVerifier
from rlvr.verifiers.base import BaseVerifier

__all__ = ["LookupTaskParams", "LookupVerifier", "lookup_task", "transcript"]


class LookupTaskParams(Params):
    key_length: int = Field(2, gt=0, le=4, description="letters per key (26^key_length keys)")
    value_digits: int = Field(3, gt=0, le=18, description="digits per value")
    num_eval: int = Field(200, gt=0, description="held-out keys (one example each)")
    values_per_key: int = Field(8, gt=0, description="train examples per train key, each with its own value")
    data_seed: int = Field(0, description="seed of the keys' split and the values (independent of the run seed)")
    teacher_skip: float = Field(0.5, ge=0.0, le=1.0, description="chance the SFT teacher skips the tool and "
                                                                "answers a random guess")
    observation_template: str = Field("{observation}\n", description="how the driver inserts an observation "
                                      "(must equal rollout.multiturn.observation_template): SFT targets use it")

    @model_validator(mode="after")
    def _check(self) -> "LookupTaskParams":
        if 26 ** self.key_length <= self.num_eval:
            raise ValueError(f"only {26 ** self.key_length} keys exist; num_eval={self.num_eval} leaves none "
                             f"to train on")
        if "{observation}" not in self.observation_template:
            raise ValueError("observation_template must contain {observation}")
        return self


class LookupVerifier(BaseVerifier):
    """The first line of digits is the answer; correct when it equals ``example.answer`` (the value)."""

    name = "lookup"

    def validation_cases(self):
        ex = Example("QX#0", "key QX?\n", "482", meta={"key": "QX", "value": "482"})
        return [(ex, "get QX\n\n482", 1.0), (ex, "482", 1.0), (ex, "get QX\n\n481", 0.0),
                (ex, "get QX\nget QX", 0.0), (ex, "get QX 482", 0.0), (ex, "111\n482", 0.0)]

    def score(self, example: Example, text: str) -> Score:
        for line in text.split("\n"):
            kind, arg = parse_turn(line)
            if kind == "answer":
                ok = float(arg == str(example.answer))
                return Score(ok, {"correct": ok}, {"extracted": arg, "reason": "correct" if ok else "wrong answer"})
        return Score(0.0, {"correct": 0.0}, {"reason": "no answer"})


def transcript(key: str, value: str, template: str = "{observation}\n") -> str:
    """The text after the prompt of a correct episode: call, observation (as inserted), answer."""
    return f"get {key}\n" + template.format(observation=f"{key}={value}") + value


@TASKS.register("lookup", LookupTaskParams)
def lookup_task(p: LookupTaskParams) -> Task:
    """Ask the lookup tool for a key's value, then answer with it (the multi-turn CPU demo task)."""
    keys = ["".join(k) for k in itertools.product(string.ascii_uppercase, repeat=p.key_length)]
    rng = random.Random(p.data_seed)
    rng.shuffle(keys)

    def value() -> str:
        return "".join(rng.choice(string.digits) for _ in range(p.value_digits))

    def ex(key: str, k: int, v: str, target: str | None = None) -> Example:
        return Example(id=f"{key}#{k}", prompt=f"key {key}?\n", answer=v, task="lookup", target=target,
                       meta={"key": key, "value": v})

    eval_ex = [ex(key, 0, value()) for key in keys[: p.num_eval]]
    train = [ex(key, k, value()) for key in keys[p.num_eval:] for k in range(p.values_per_key)]
    teacher = random.Random(f"teacher-{p.data_seed}")
    sft = []
    for e in train:
        skip = teacher.random() < p.teacher_skip
        guess = "".join(teacher.choice(string.digits) for _ in range(p.value_digits))
        target = guess if skip else transcript(e.meta["key"], e.answer, p.observation_template)
        sft.append(ex(e.meta["key"], int(e.id.rpartition("#")[2]), e.answer, target))
    return Task("lookup", {"train": train, "eval": eval_ex, "sft": sft}, [WeightedVerifier(LookupVerifier())])

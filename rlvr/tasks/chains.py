"""``chains``: a testbed whose answers are worked chains of 20 to 150 characters, checked step by step.

Three procedural families, each with a spread of difficulty, every problem with its exact chain:

- ``add``: two numbers of ``d`` digits each (``d`` from ``min_digits`` to ``max_digits``), added column by
  column from the right, the carry written into the next column: ``4738+2965=`` ->
  ``8+5=13;3+6+1=10;7+9+1=17;4+2+1=7;Answer: 7703``;
- ``mul``: a ``d``-digit number times one digit (2-9), column by column: ``4738*7=`` ->
  ``8*7=56;3*7+5=26;7*7+2=51;4*7+5=33;Answer: 33166``;
- ``countdown``: reach a target from ``countdown_numbers`` numbers (1-12, each used once) with ``+ - * /``:
  ``19 from 3 5 8:`` -> ``8*3=24;24-5=19;Answer: 19`` (any valid path counts).

The ``chain`` verifier (:mod:`rlvr.verifiers.chain`) rewards a completion only when every equation is true, the
steps are the problem's (for countdown: a valid path to the target) and the answer is right, in any layout.

The ``sft`` split is written by an imperfect annotator, so supervised training leaves headroom that RL with the
exact verifier can take: in each rendition (``teacher_samples`` per train problem) each step is left out with
probability ``skip_rate`` (the answer still written right: an incomplete chain) and written with a wrong result
with probability ``error_rate`` (the answer then follows the annotator's own digits, or its countdown path goes
on from the wrong number), and followed by a note in words with probability ``note_rate`` (``8+5=13 (write 3,
carry 1)``; for countdown the numbers still in hand, ``8*3=24 (have 24 5)``). A note is right and the verifier
reads past it, so a noted chain is still correct, only longer: the supervised model narrates some steps, its
completions spread in length, and the longest run past a ``max_new_tokens`` that fits every bare chain, which
RL with the exact verifier can learn to avoid. With all three rates 0 the ``sft`` split is the train split's
exact chains.

The train and eval problems are drawn with ``data_seed`` (independent of the run's seed) and never overlap.
"""

from __future__ import annotations

import random
from typing import Literal

from pydantic import Field, model_validator

from rlvr.core.types import Example
from rlvr.registry import Params
from rlvr.tasks.base import TASKS, Task, WeightedVerifier, draw_distinct
from rlvr.verifiers.chain import ChainVerifier, column_steps

__all__ = ["ChainsParams", "chains_task", "problem", "exact_chain", "annotated_chain"]

Family = Literal["add", "mul", "countdown"]


class ChainsParams(Params):
    families: list[Family] = Field(["add", "mul", "countdown"], min_length=1, description="problem families")
    min_digits: int = Field(2, ge=1, le=12, description="add/mul: fewest digits of a number")
    max_digits: int = Field(10, ge=1, le=12, description="add/mul: most digits of a number")
    countdown_numbers: tuple[int, int] = Field((3, 5), description="countdown: fewest and most numbers")
    num_train: int = Field(20000, gt=0, description="train problems")
    num_eval: int = Field(200, gt=0, description="held-out problems")
    data_seed: int = Field(0, description="seed of the problems (independent of the run seed)")
    skip_rate: float = Field(0.05, ge=0.0, le=1.0, description="sft annotator: chance a step is left out")
    error_rate: float = Field(0.05, ge=0.0, le=1.0, description="sft annotator: chance a step's result is wrong")
    note_rate: float = Field(0.0, ge=0.0, le=1.0, description="sft annotator: chance a step is followed by a "
                             "note in words (right, only longer)")
    teacher_samples: int = Field(1, gt=0, description="annotator renditions per train problem in the sft split")

    @model_validator(mode="after")
    def _check(self) -> "ChainsParams":
        if self.max_digits < self.min_digits:
            raise ValueError("max_digits must be >= min_digits")
        lo, hi = self.countdown_numbers
        if not 2 <= lo <= hi <= 6:
            raise ValueError("countdown_numbers must be [fewest, most] with 2 <= fewest <= most <= 6")
        return self


def problem(family: str, rng: random.Random, p: ChainsParams) -> tuple[str, str, dict]:
    """``(prompt, answer, meta)`` of one random problem of ``family``."""
    if family in ("add", "mul"):
        d = rng.randint(p.min_digits, p.max_digits)
        a = rng.randint(10 ** (d - 1), 10 ** d - 1)
        b = rng.randint(10 ** (d - 1), 10 ** d - 1) if family == "add" else rng.randint(2, 9)
        op = "+" if family == "add" else "*"
        return f"{a}{op}{b}=", str(a + b if family == "add" else a * b), {"family": family, "operands": [a, b]}
    while True:  # countdown: a random path over all the numbers, its end the target
        numbers = [rng.randint(1, 12) for _ in range(rng.randint(*p.countdown_numbers))]
        path = _random_path(numbers, rng)
        if path is not None:
            target = path[-1][3]
            if target not in numbers:
                shown = " ".join(map(str, numbers))
                return f"{target} from {shown}:", str(target), {"family": "countdown", "numbers": numbers,
                                                                "target": target, "path": path}


def _random_path(numbers: list[int], rng: random.Random) -> list[tuple[int, str, int, int]] | None:
    order = numbers[:]
    rng.shuffle(order)
    acc, path = order[0], []
    for n in order[1:]:
        options = [("+", acc + n), ("*", acc * n)] + ([("-", acc - n)] if acc - n > 0 else []) + \
            ([("/", acc // n)] if n > 1 and acc % n == 0 else [])
        op, r = rng.choice(options)
        if r > 999:
            return None
        path.append((acc, op, n, r))
        acc = r
    return path


def exact_chain(meta: dict) -> str:
    """The problem's exact chain, ``;``-separated, ending in ``Answer: N``."""
    if meta["family"] == "countdown":
        steps = [f"{a}{op}{b}={r}" for a, op, b, r in meta["path"]]
        return ";".join(steps + [f"Answer: {meta['target']}"])
    steps, answer = column_steps(meta["family"], meta["operands"])
    return ";".join([f"{e}={r}" for e, r in steps] + [f"Answer: {answer}"])


def annotated_chain(meta: dict, skip_rate: float, error_rate: float, rng: random.Random,
                    note_rate: float = 0.0) -> str:
    """The chain as the imperfect annotator writes it (see the module docstring). With ``note_rate`` 0 no draw
    is spent on notes, so the chains are those written before notes existed."""
    def wrong(r: int) -> int:
        return max(0, r + rng.choice([-3, -2, -1, 1, 2, 3]))

    def noted(step: str, note: str) -> str:
        return f"{step} ({note})" if note_rate > 0 and rng.random() < note_rate else step

    if meta["family"] == "countdown":
        out, acc = [], None
        hand = list(meta["numbers"])
        for a, op, b, _ in meta["path"]:
            a = acc if acc is not None else a
            r = {"+": a + b, "-": a - b, "*": a * b, "/": a // b if b else 0}[op]
            if rng.random() < error_rate:
                r = wrong(r)
            acc = r
            for used in (a, b):
                if used in hand:
                    hand.remove(used)
            hand.insert(0, r)
            if rng.random() >= skip_rate:
                out.append(noted(f"{a}{op}{b}={r}", "have " + " ".join(map(str, hand))))
        return ";".join(out + [f"Answer: {acc}"])
    steps, answer = column_steps(meta["family"], meta["operands"])
    written, digits = [], []
    for e, r in steps:
        if rng.random() < error_rate:
            r = wrong(r)
        digits.append(r)
        if rng.random() >= skip_rate:
            written.append(noted(f"{e}={r}", f"write {r % 10}" + (f", carry {r // 10}" if r >= 10 else "")))
    if digits != [r for _, r in steps]:  # the answer from the annotator's own (wrong) column results
        answer = int(str(digits[-1] // 10 or "") + "".join(str(r % 10) for r in reversed(digits)))
    return ";".join(written + [f"Answer: {answer}"])


@TASKS.register("chains", ChainsParams)
def chains_task(p: ChainsParams) -> Task:
    """Worked chains (column addition and multiplication, countdown paths) checked step by step; an imperfect
    annotator's sft split."""
    rng = random.Random(f"chains-{p.data_seed}")
    problems = draw_distinct(lambda k: problem(p.families[k % len(p.families)], rng, p), p.num_eval + p.num_train,
                             key=lambda t: t[0], what="problems", hint="widen the digits or families, or ask for fewer")

    def ex(i: int, prompt: str, answer: str, meta: dict, target: str, k: int | None = None) -> Example:
        return Example(f"chains-{i}" + ("" if k is None else f"#{k}"), prompt, answer, "chains", target, dict(meta))

    evals = [ex(i, *t, exact_chain(t[2])) for i, t in enumerate(problems[: p.num_eval])]
    train_p = list(enumerate(problems[p.num_eval:], start=p.num_eval))
    train = [ex(i, *t, exact_chain(t[2])) for i, t in train_p]
    teacher = random.Random(f"annotator-{p.data_seed}")
    sft = [ex(i, *t, annotated_chain(t[2], p.skip_rate, p.error_rate, teacher, p.note_rate), k)
           for k in range(p.teacher_samples) for i, t in train_p]
    return Task("chains", {"train": train, "eval": evals, "sft": sft}, [WeightedVerifier(ChainVerifier())])

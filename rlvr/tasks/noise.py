"""Controlled noise: a verifier that errs at stated rates, and gold answers that are wrong at a stated share.

For the experiments of the verifier-noise papers (Cai et al. 2025, arXiv:2510.00915: accuracy falls with
noise, the backward correction recovers part of it; "noisy data is destructive to RLVR"), the noise is
injected where a real imperfect verifier would act: on the training scores, after the verifier and before
any reward transform (so ``noise_backward`` / ``noise_forward`` see what they would see). Held-out evaluation
scores with the clean verifier.

**Verifier noise** (``scoring.noise``): a completion judged correct (its ``correct`` component, else reward
>= 1) is scored incorrect with probability ``fn`` (false negative: reward 0, ``correct`` 0); one judged
incorrect is scored correct with probability ``fp`` (false positive: reward 1, ``correct`` 1). Other
components are left as they are; a flipped score says so in ``info["noise"]`` (``"fp"`` or ``"fn"``), and
each step counts them (``noise/fp``, ``noise/fn``). Meant for binary-outcome verifiers: a graded reward is
set to 0 or 1 when flipped. ``per: sample`` draws every completion's flip independently; ``per: example``
draws once per (example, outcome), a verifier that is systematically wrong on some problems, the same at
every step. Draws are keyed by (seed, step, example id, the completion's index among that example's in the
call), not by a stream: a resumed run draws exactly what the uninterrupted one drew.

**Label noise** (``data.label_noise``): a share of the training examples get a wrong gold answer, another
training example's (different) answer, chosen with the seed; their reference completion is replaced with it
where it was the answer itself. The evaluation split is untouched. The corrupted ids are returned.
"""

from __future__ import annotations

import hashlib
import random
from dataclasses import replace
from typing import Literal, Sequence

from pydantic import Field

from rlvr.config.fields import Section
from rlvr.core.types import Example, Score

__all__ = ["NoiseConfig", "LabelNoiseConfig", "add_noise", "corrupt_labels"]


class NoiseConfig(Section):
    """A verifier that errs at stated rates (training scores only; evaluation stays clean)."""

    fp: float = Field(0.0, ge=0.0, lt=1.0, description="P(scored correct | incorrect): false positives")
    fn: float = Field(0.0, ge=0.0, lt=1.0, description="P(scored incorrect | correct): false negatives")
    per: Literal["sample", "example"] = Field("sample", description="sample: each completion drawn alone; "
                                              "example: once per (example, outcome), the same at every step")
    seed: int | None = Field(None, description="the draws' seed (null: the run's seed)")

    @property
    def on(self) -> bool:
        return self.fp > 0 or self.fn > 0


class LabelNoiseConfig(Section):
    """Wrong gold answers for a share of the training examples."""

    fraction: float = Field(0.0, ge=0.0, le=1.0, description="share of training examples with a wrong gold answer")
    seed: int | None = Field(None, description="which examples, and their wrong answers (null: the run's seed)")


def _draw(*key: object) -> float:
    """A uniform number in [0, 1) fixed by ``key`` (stable across processes, unlike ``hash``)."""
    digest = hashlib.blake2b("|".join(map(str, key)).encode(), digest_size=8).digest()
    return int.from_bytes(digest, "big") / 2 ** 64


def _correct(s: Score) -> bool:
    return float(s.components.get("correct", float(s.reward >= 1.0))) >= 0.5


def add_noise(examples: Sequence[Example], scores: Sequence[Score], cfg: NoiseConfig,
              seed: int) -> tuple[list[Score], dict[str, float]]:
    """``scores`` with the configured flips, and the counts ``{"noise/fp": n, "noise/fn": n}``."""
    out, fp, fn, seen = [], 0, 0, {}
    for ex, s in zip(examples, scores):
        k = seen[ex.id] = seen.get(ex.id, -1) + 1
        good = _correct(s)
        u = (_draw(seed, "example", ex.id, good) if cfg.per == "example"
             else _draw(seed, ex.meta.get("step", 0), ex.id, k))
        if good and u < cfg.fn:
            out.append(Score(0.0, {**s.components, "correct": 0.0}, {**s.info, "noise": "fn"}))
            fn += 1
        elif not good and u < cfg.fp:
            out.append(Score(1.0, {**s.components, "correct": 1.0}, {**s.info, "noise": "fp"}))
            fp += 1
        else:
            out.append(s)
    return out, {"noise/fp": float(fp), "noise/fn": float(fn)}


def corrupt_labels(examples: Sequence[Example], fraction: float, seed: int) -> tuple[list[Example], list[str]]:
    """``examples`` with ``round(fraction * n)`` of them given another example's different answer; returns them
    and the corrupted ids. Examples whose answer no other example differs from are left as they are."""
    rng = random.Random(seed)
    n = len(examples)
    picked = sorted(rng.sample(range(n), round(fraction * n))) if n else []
    out, ids = list(examples), []
    for i in picked:
        ex = examples[i]
        others = [j for j in range(n) if str(examples[j].answer) != str(ex.answer)]
        if not others:
            continue
        wrong = examples[rng.choice(others)].answer
        target = wrong if ex.target is not None and str(ex.target) == str(ex.answer) else ex.target
        out[i] = replace(ex, answer=wrong, target=target)  # (no target: the reference completion is the answer)
        ids.append(ex.id)
    return out, ids

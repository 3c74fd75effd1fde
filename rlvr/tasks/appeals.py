"""The appeal mechanism: a second verifier re-checks a sample of the negatives online and estimates the task
verifier's false-negative rate rho1 (Cai et al. 2025, arXiv:2510.00915; the appeal details are RECONSTRUCTED;
docs/methods.md, Appeals).

After a step's rollouts are collected (``rlvr.train.rollouts.collect_rollouts``, the trained batch), with
``scoring.appeal.verifier`` set:

- a completion is **positive** when the task's verifier scored it correct (``Score.correct``: the ``correct``
  component >= 1, or the reward >= 1 where there is none) and **negative** otherwise. Completions whose
  scoring timed out or whose verifier raised are neither: those zeros are not the verifier's judgment;
- at most ``sample`` negatives are drawn uniformly without replacement, seeded by the step's seed (a resumed
  run draws what an uninterrupted one does), and re-scored by the appeal verifier against the example's gold
  answer; a re-checked negative the appeal verifier scores correct is **overturned**;
- with P positives, n negatives, m re-checked and F overturned: ``F_scaled = F * n / m`` and
  ``rho1_step = F_scaled / (P + F_scaled)`` (no update when ``P + F_scaled = 0``: the batch holds no
  evidence); ``rho1 <- (1 - ema) * rho1 + ema * rho1_step``, starting from ``prior``;
- the updated rho1 is written into every row's score components as ``fn_rate`` (the channel
  :data:`PROVIDES` declares; ``noise_forward`` / ``noise_backward`` with ``rho1: appeal`` read it as an [N]
  tensor), and re-checked rows get ``info["appeal"]`` = ``"overturned"`` or ``"upheld"``. Rewards are not
  changed: the estimate enters through the noise correction.

Step metrics: ``appeal/checked`` (m), ``appeal/overturned`` (F), ``appeal/negatives`` (n),
``appeal/positives`` (P), ``appeal/fn_rate`` (the running estimate), ``appeal/fn_rate_step`` (this step's
estimate, when defined) and ``appeal/errors`` (appeal scores that were verifier errors, never overturned).
The running estimate is checkpoint state (``"appeal"`` in ``state.json``; :func:`appeal_state`).
The appeal verifier is called in-line (no scorer pool or deadline): keep ``sample`` small for slow judges.
"""

from __future__ import annotations

import functools
import json
import random
from dataclasses import replace
from typing import Any, Sequence

from pydantic import BaseModel, ConfigDict, Field, ValidationError, model_validator

from rlvr.algorithms.transforms.noise import FN_RATE
from rlvr.core.types import Example, Score
from rlvr.verifiers import VERIFIERS, build_verifier, from_callable
from rlvr.verifiers.base import params_model_of

__all__ = ["AppealConfig", "AppealState", "PROVIDES", "appeal_state", "run_appeal", "step_estimate",
           "ema_update", "is_negative"]

PROVIDES = frozenset({FN_RATE})  # the score components the appeal writes for the reward transforms to read


class AppealConfig(BaseModel):
    """``scoring.appeal``: re-check a sample of each step's negatives with a second verifier (Cai et al. 2025)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    verifier: str | None = Field(None, description="the appeal verifier: a registered verifier name or "
                                 "module:function (a batch reward function); null: no appeals")
    verifier_params: dict[str, Any] = Field(default_factory=dict, description="params of a registered appeal verifier")
    sample: int = Field(16, gt=0, description="negatives re-checked per step at most (a seeded random subset)")
    ema: float = Field(0.1, gt=0.0, le=1.0, description="EMA weight of each step's false-negative estimate")
    prior: float = Field(0.0, ge=0.0, lt=0.5, description="initial false-negative rate estimate")

    @model_validator(mode="after")
    def _known_verifier(self) -> "AppealConfig":
        spec = self.verifier
        if spec is None:
            if self.verifier_params:
                raise ValueError("verifier_params is set but verifier is not")
            return self
        if ":" in spec:
            mod, _, attr = spec.rpartition(":")
            if not mod or not attr:
                raise ValueError(f"verifier {spec!r}: expected 'package.module:function' or 'file.py:function'")
            if self.verifier_params:
                raise ValueError("verifier_params applies to a registered verifier, not to a module:function")
            return self
        if spec not in VERIFIERS:
            raise ValueError(f"unknown verifier {spec!r}; valid names: {', '.join(VERIFIERS.names())} "
                             f"(or module:function)")
        try:
            VERIFIERS.get(spec).params.model_validate(self.verifier_params)
        except ValidationError as e:
            why = "; ".join(f"{'.'.join(map(str, err['loc'])) or '(params)'}: {err['msg']}" for err in e.errors())
            raise ValueError(f"verifier_params of verifier {spec!r}: {why}") from None
        return self

    def local_path_params(self) -> dict[str, Any]:
        """A registered appeal verifier's local paths (a judge's model) resolve like the config's (rlvr.core.paths)."""
        return {"verifier_params": params_model_of(self.verifier)}


class AppealState:
    """The running false-negative estimate (None until the first appeal: then ``prior``)."""

    def __init__(self) -> None:
        self.fn_rate: float | None = None
        self.steps = 0  # appeal steps run

    def state_dict(self) -> dict[str, Any]:
        return {"fn_rate": self.fn_rate, "steps": self.steps}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        rate = state.get("fn_rate")
        self.fn_rate = None if rate is None else float(rate)
        self.steps = int(state.get("steps", 0))


def appeal_state(c: Any) -> AppealState:
    """The appeal state of a run's components ``c`` (its scorer's: saving, resuming and the step all see the
    same object)."""
    return c.scorer.appeal


def step_estimate(positives: int, negatives: int, checked: int, overturned: int) -> float | None:
    """``F_scaled / (P + F_scaled)`` with ``F_scaled = F * n / m``; None when ``P + F_scaled`` is 0."""
    if overturned > checked or checked > negatives:
        raise ValueError(f"overturned {overturned} <= checked {checked} <= negatives {negatives} is required")
    f_scaled = overturned * negatives / checked if checked else 0.0
    denom = positives + f_scaled
    return None if denom == 0 else f_scaled / denom


def ema_update(previous: float, value: float | None, alpha: float) -> float:
    """``(1 - alpha) * previous + alpha * value``; ``previous`` when there is no value."""
    return previous if value is None else (1.0 - alpha) * previous + alpha * value


def _not_judged(s: Score) -> bool:
    """A timeout or a verifier error: a zero that is not the verifier's judgment."""
    return any(k.endswith("error") for k in s.info) or any(
        k.endswith("reason") and str(v).startswith(("timeout", "verifier error")) for k, v in s.info.items())


def is_negative(s: Score) -> bool:
    """The task's verifier rejected the completion (``Score.correct`` is False) and did judge it."""
    return not s.correct and not _not_judged(s)


@functools.lru_cache(maxsize=8)
def _verifier(spec: str, params_json: str):
    return from_callable(spec) if ":" in spec else build_verifier(spec, json.loads(params_json))


def _rescore(verifier, examples: Sequence[Example], texts: Sequence[str]) -> list[Score]:
    if getattr(verifier, "batched", False):
        return list(verifier.score_batch(examples, texts))
    return [verifier(e, t) for e, t in zip(examples, texts)]


def run_appeal(cfg: AppealConfig, state: AppealState, groups: Sequence[Any], seed: int,
               verifier: Any = None) -> dict[str, float]:
    """One step's appeals over ``groups`` (each with ``example``, ``completions`` and ``scores``; the scores
    are replaced in place with ``fn_rate`` added); updates ``state`` and returns the step's metrics.
    ``verifier`` overrides the configured one (tests)."""
    if verifier is None:
        if cfg.verifier is None:
            raise ValueError("scoring.appeal.verifier is not set")
        verifier = _verifier(cfg.verifier, json.dumps(cfg.verifier_params, sort_keys=True))
    rows = [(gi, j) for gi, g in enumerate(groups) for j in range(len(g.scores))]
    negatives = [(gi, j) for gi, j in rows if is_negative(groups[gi].scores[j])]
    positives = sum(groups[gi].scores[j].correct for gi, j in rows)
    rng = random.Random((int(seed) * 1_000_003 + 0xA99EA1) % (2**61 - 1))
    picked = sorted(rng.sample(range(len(negatives)), min(cfg.sample, len(negatives))))
    chosen = [negatives[i] for i in picked]
    verdicts = _rescore(verifier, [groups[gi].example for gi, _ in chosen],
                        [groups[gi].completions[j].text for gi, j in chosen]) if chosen else []
    if len(verdicts) != len(chosen):
        raise ValueError(f"the appeal verifier returned {len(verdicts)} scores for {len(chosen)} completions")
    errors = sum(_not_judged(v) for v in verdicts)
    overturned = [v.correct and not _not_judged(v) for v in verdicts]
    est = step_estimate(positives, len(negatives), len(chosen), sum(overturned))
    state.fn_rate = ema_update(cfg.prior if state.fn_rate is None else state.fn_rate, est, cfg.ema)
    state.steps += 1
    rate = float(state.fn_rate)
    marks = {row: ("overturned" if o else "upheld") for row, o in zip(chosen, overturned)}
    for gi, g in enumerate(groups):
        g.scores = [replace(sc, components={**sc.components, FN_RATE: rate},
                            info={**sc.info, "appeal": marks[(gi, j)]} if (gi, j) in marks else sc.info)
                    for j, sc in enumerate(g.scores)]
    out = {"appeal/checked": float(len(chosen)), "appeal/overturned": float(sum(overturned)),
           "appeal/negatives": float(len(negatives)), "appeal/positives": float(positives),
           "appeal/errors": float(errors), "appeal/fn_rate": rate}
    if est is not None:
        out["appeal/fn_rate_step"] = float(est)
    return out

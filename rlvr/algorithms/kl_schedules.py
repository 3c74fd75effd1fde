"""KL coefficient schedules: ``fn(step, total_steps, base_coef, stats, p) -> coef`` (a float).

Each is a pure function of its arguments; ``base_coef`` is the configured ``algorithm.kl.coef``, ``step``
counts RL steps from 0 and ``stats`` carries last step's measurements. The loop reads the coefficient through ``rlvr.train.kl_control.KLController``.

    constant              beta = base
    linear                beta = base + (final - base) * u,                      u = clip(step / total, 0, 1)
    cosine                beta = final + (base - final) * (1 + cos(pi u)) / 2
    accuracy_conditioned  beta = b_min + (b_max - b_min) * sigmoid(k (acc - a0)),  acc = stats["accuracy"]
    adaptive              beta' = beta * (1 + clip(KL / target - 1, -e_max, e_max) / horizon)

``accuracy_conditioned`` is FG-ExPO's AKL (arXiv:2605.11403), RECONSTRUCTED (docs/methods.md,
`accuracy_conditioned`; the paper's exact function was not seen): a smooth, non-decreasing function of last step's
batch accuracy, loose when the policy is weak and tight when it is strong. ``b_max`` defaults to ``base`` so
``kl.coef`` stays the one scale knob; ``b_min = 0, b_max = 0.04, k = 10, a0 = 0.5`` gives 0.00190 / 0.02 / 0.03810
at acc 0.2 / 0.5 / 0.8.

``adaptive`` is the proportional controller of Ziegler et al. 2019, "Fine-Tuning Language Models from Human
Preferences", arXiv:1909.08593, Sec. 2.2: e = clip(KL / KL_target - 1, -0.2, 0.2), beta' = beta (1 + K e).
It has state: it reads the current coefficient ``stats["coef"]`` (``base_coef`` when absent, i.e. on the
first step) and the measured ``stats["kl"]``, and returns the next coefficient, which the *caller* stores and
passes back as ``stats["coef"]`` (and checkpoints). Deviation: the paper's gain K = 0.1 per update; their
code writes it as n_samples / horizon with horizon in samples. Here ``horizon`` counts calls (RL steps), so
K = 1 / horizon and the default horizon 10 is the paper's K = 0.1; the default target 0.1 is verl's.
Being multiplicative, it stays at 0 from a coefficient of 0.
"""

from __future__ import annotations

import math
from typing import Any, Callable

from pydantic import Field

from rlvr.registry import Params, Registry

__all__ = ["KL_SCHEDULES", "KLSchedule", "AnnealParams", "AccuracyConditionedParams", "AdaptiveParams",
           "constant", "linear", "cosine", "accuracy_conditioned", "adaptive"]

KLSchedule = Callable[[int, int, float, dict[str, Any], Any], float]
KL_SCHEDULES: Registry[KLSchedule] = Registry("KL schedule")


def _progress(step: int, total_steps: int) -> float:
    """u in [0, 1]; a run of 0 steps counts as finished."""
    return min(max(step / total_steps, 0.0), 1.0) if total_steps > 0 else 1.0


def _stat(stats: dict[str, Any], key: str, schedule: str) -> float:
    # a missing measurement is a wiring bug; fail loudly rather than fall back to a silent default
    if key not in stats:
        raise KeyError(f"KL schedule {schedule!r} needs stats[{key!r}] (got keys: {sorted(stats)})")
    return float(stats[key])


@KL_SCHEDULES.register("constant")
def constant(step: int, total_steps: int, base_coef: float, stats: dict[str, Any], p: Params) -> float:
    """The configured coefficient at every step."""
    return float(base_coef)


class AnnealParams(Params):
    final: float = Field(0.0, ge=0.0, description="coefficient reached at the last step")


@KL_SCHEDULES.register("linear", AnnealParams)
def linear(step: int, total_steps: int, base_coef: float, stats: dict[str, Any], p: AnnealParams) -> float:
    """Linear interpolation from the configured coefficient to ``final`` over the run."""
    return base_coef + (p.final - base_coef) * _progress(step, total_steps)


@KL_SCHEDULES.register("cosine", AnnealParams)
def cosine(step: int, total_steps: int, base_coef: float, stats: dict[str, Any], p: AnnealParams) -> float:
    """Half-cosine from the configured coefficient to ``final`` over the run."""
    return p.final + (base_coef - p.final) * 0.5 * (1.0 + math.cos(math.pi * _progress(step, total_steps)))


class AccuracyConditionedParams(Params):
    beta_min: float = Field(0.0, ge=0.0, description="coefficient as batch accuracy -> 0")
    beta_max: float | None = Field(None, ge=0.0, description="coefficient as batch accuracy -> 1 "
                                                             "(null: the configured kl.coef)")
    sharpness: float = Field(10.0, gt=0.0, description="slope k of the sigmoid in accuracy")
    midpoint: float = Field(0.5, ge=0.0, le=1.0, description="accuracy a0 at which beta is halfway")


@KL_SCHEDULES.register("accuracy_conditioned", AccuracyConditionedParams)
def accuracy_conditioned(step: int, total_steps: int, base_coef: float, stats: dict[str, Any],
                         p: AccuracyConditionedParams) -> float:
    """FG-ExPO's AKL: a sigmoid in last step's batch accuracy (RECONSTRUCTED)."""
    acc = _stat(stats, "accuracy", "accuracy_conditioned")
    hi = base_coef if p.beta_max is None else p.beta_max
    z = p.sharpness * (acc - p.midpoint)
    # the two-branch sigmoid never overflows exp for large |z|
    s = 1.0 / (1.0 + math.exp(-z)) if z >= 0 else math.exp(z) / (1.0 + math.exp(z))
    return p.beta_min + (hi - p.beta_min) * s


class AdaptiveParams(Params):
    target: float = Field(0.1, gt=0.0, description="target KL per token (verl's default target_kl)")
    horizon: float = Field(10.0, gt=0.0, description="controller horizon in RL steps; gain K = 1 / horizon "
                                                     "(10: the paper's K = 0.1)")
    max_error: float = Field(0.2, gt=0.0, description="clip of the proportional error KL / target - 1")


@KL_SCHEDULES.register("adaptive", AdaptiveParams)
def adaptive(step: int, total_steps: int, base_coef: float, stats: dict[str, Any], p: AdaptiveParams) -> float:
    """Ziegler et al.'s proportional controller; the caller keeps the coefficient between steps."""
    kl = _stat(stats, "kl", "adaptive")
    coef = float(stats.get("coef", base_coef))  # the state: absent only before the first update
    error = min(max(kl / p.target - 1.0, -p.max_error), p.max_error)
    return coef * (1.0 + error / p.horizon)

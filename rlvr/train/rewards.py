"""Reward transforms, run where the step needs their rewards: before the advantage estimator, and before a group
filter (DAPO's dynamic sampling) decides which groups are informative.

A transform that makes a constant group informative (LENS's and FGRPO's confidence and length terms, CDE's
curiosity bonus, SCOPE's shape) must be seen by the filter, or the filter drops the very groups the transform
would have given a signal. So the filter peeks (``peek=True``): it runs the transforms on a generation round's
rewards with copies of their state (the real call, at the advantage, advances it) and skips those that read a
tensor not computed before the update's passes (old or reference log-probs: CDE, the KL penalty), which the
filter then sees untransformed.
"""

from __future__ import annotations

import copy
from typing import Any

import torch

from rlvr.algorithms.registry import REWARD_TRANSFORMS, TransformInputs, call

__all__ = ["active", "score_components", "transform_rewards"]


def score_components(scores) -> dict[str, torch.Tensor]:
    """Each numeric score component as an ``[N]`` float64 tensor (0 where a completion lacks it)."""
    keys = sorted({k for sc in scores for k, v in sc.components.items() if isinstance(v, (int, float))})
    return {k: torch.tensor([float(sc.components.get(k, 0.0)) for sc in scores], dtype=torch.float64) for k in keys}


def active(registry, comp, step: int) -> bool:
    """Whether the configured component ``comp`` of ``registry`` acts at ``step`` (its ``active`` rule)."""
    entry = registry.get(comp.name)
    return entry.active is None or bool(entry.active(comp.params, step))


def transform_rewards(cfg: Any, features: Any, algo_state: Any, rewards: torch.Tensor, group_index: torch.Tensor,
                      mask: torch.Tensor, comps: dict[str, torch.Tensor], extras: dict[str, torch.Tensor], step: int,
                      kl_coef: float = 0.0, peek: bool = False) -> tuple[torch.Tensor, dict, dict]:
    """``rewards`` through the features' reward transforms, then the configured ones active at ``step``; returns
    the rewards (float64), the transforms' metrics and the metrics features report under names of their own.
    ``peek``: for a group filter (module docstring): states copied, transforms needing absent extras skipped."""
    implied = [(None, f) for f in features.reward_transforms]
    rtf = implied + [(i, comp) for i, comp in enumerate(cfg.algorithm.reward_transforms)
                     if active(REWARD_TRANSFORMS, comp, step)]
    total = max(cfg.train.steps, 1)
    metrics: dict[str, float] = {}
    reported: dict[str, float] = {}
    for i, comp in rtf:
        entry = REWARD_TRANSFORMS.get(comp.name)
        if peek and not entry.needs <= set(extras):
            continue
        state = None if i is None or algo_state is None else algo_state.get(f"algorithm.reward_transforms.{i}")
        if peek and state is not None:
            state = copy.deepcopy(state)
        inp = TransformInputs(rewards, group_index, mask, None, comps, extras, step, total, kl_coef)
        rewards, m = call(entry, inp, comp.params, state)
        rewards = rewards.to(torch.float64)
        report = getattr(comp, "report", {})  # a feature's metrics reported under the step's own names
        reported.update({report[k]: float(v) for k, v in m.items() if k in report})
        metrics.update({f"reward_transform/{comp.name}/{k}": float(v) for k, v in m.items() if k not in report})
    return rewards, metrics, reported

"""The registries of algorithm components and the small input records passed to them.

Components are pure functions over tensors. Each kind receives one input record, so a new method that
needs another tensor (lengths, entropies, hidden states) extends the record instead of every signature.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

import torch

from rlvr.registry import Registry

__all__ = [
    "ADVANTAGES", "OBJECTIVES", "AGGREGATIONS", "KL_ESTIMATORS", "CORRECTIONS", "CorrectionInputs",
    "AdvantageInputs", "ObjectiveInputs", "AggregationInputs", "ObjectiveOutput", "aggregate",
]


@dataclass(frozen=True)
class AdvantageInputs:
    rewards: torch.Tensor  # [N] float64
    group_index: torch.Tensor  # [N] long; groups may differ in size
    lengths: torch.Tensor | None = None  # [N] completion lengths
    mask: torch.Tensor | None = None  # [N, T] completion mask


@dataclass(frozen=True)
class ObjectiveInputs:
    logp: torch.Tensor  # [N, T] current policy log-probs (carries the gradient)
    old_logp: torch.Tensor  # [N, T] log-probs of the policy before this batch's updates (detached)
    advantages: torch.Tensor  # [N, T]
    mask: torch.Tensor  # [N, T]
    behaviour_logp: torch.Tensor | None = None  # [N, T] the rollout engine's log-probs, when it gives them
    entropy: torch.Tensor | None = None  # [N, T] per-token entropy (detached)


ObjectiveOutput = tuple[torch.Tensor, dict[str, torch.Tensor]]  # per-token loss [N, T], per-token metrics


@dataclass(frozen=True)
class AggregationInputs:
    """The whole minibatch's shape information, from which an aggregation derives its coefficients."""

    mask: torch.Tensor  # [N, T] completion mask
    group_index: torch.Tensor  # [N]
    advantages: torch.Tensor | None = None  # [N, T]
    max_new_tokens: int | None = None  # the run's completion limit, the default constant normaliser

    @property
    def lengths(self) -> torch.Tensor:
        return self.mask.sum(-1)

    def constant_len(self, configured: int | None) -> int:
        """A configured constant normaliser, else the run's ``rollout.max_new_tokens``."""
        value = configured if configured is not None else self.max_new_tokens
        if value is None:
            raise ValueError("this aggregation needs max_len (or the run's rollout.max_new_tokens)")
        return value


def aggregate(coef: torch.Tensor, loss: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
    """``sum_{i,t} c M l`` for coefficients ``c`` of shape [N] or [N, T]."""
    if coef.dim() == 1:
        coef = coef[:, None]
    return (coef.to(loss.dtype) * mask * loss).sum()


@dataclass(frozen=True)
class CorrectionInputs:
    """Log-probs for an importance-sampling correction between the rollout engine and the trainer."""

    old_logp: torch.Tensor  # [N, T] trainer's log-probs of the sampling policy (detached)
    behaviour_logp: torch.Tensor  # [N, T] the rollout engine's log-probs of the same tokens
    mask: torch.Tensor  # [N, T]


CorrectionOutput = tuple[torch.Tensor, dict[str, torch.Tensor]]  # weights [N, T] (detached), per-token metrics

ADVANTAGES: Registry[Callable[..., torch.Tensor]] = Registry("advantage estimator")
OBJECTIVES: Registry[Callable[..., ObjectiveOutput]] = Registry("policy objective")
AGGREGATIONS: Registry[Callable[..., torch.Tensor]] = Registry("loss aggregation")
KL_ESTIMATORS: Registry[Callable[..., torch.Tensor]] = Registry("KL estimator")
CORRECTIONS: Registry[Callable[..., CorrectionOutput]] = Registry("importance-sampling correction")

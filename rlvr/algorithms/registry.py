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
    "ADVANTAGES", "OBJECTIVES", "AGGREGATIONS", "KL_ESTIMATORS",
    "AdvantageInputs", "ObjectiveInputs", "LossCounts", "ObjectiveOutput",
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
    old_logp: torch.Tensor  # [N, T] log-probs of the policy that sampled (detached)
    advantages: torch.Tensor  # [N, T]
    mask: torch.Tensor  # [N, T]


ObjectiveOutput = tuple[torch.Tensor, dict[str, torch.Tensor]]  # per-token loss [N, T], per-token metrics


@dataclass(frozen=True)
class LossCounts:
    """Counts over the whole minibatch (all micro-batches, all ranks), fixed before the first micro-batch.

    Aggregations divide by these, never by a micro-batch's own counts, so splitting a minibatch into
    micro-batches or across ranks leaves the gradient unchanged.
    """

    num_tokens: float
    num_seqs: float


ADVANTAGES: Registry[Callable[..., torch.Tensor]] = Registry("advantage estimator")
OBJECTIVES: Registry[Callable[..., ObjectiveOutput]] = Registry("policy objective")
AGGREGATIONS: Registry[Callable[..., torch.Tensor]] = Registry("loss aggregation")
KL_ESTIMATORS: Registry[Callable[..., torch.Tensor]] = Registry("KL estimator")

"""Helpers shared by sequence- and group-level objectives (not a registered component).

Sequences are rows of a padded ``[N, T]`` tensor with a completion mask; groups are identified by
``group_index`` and may differ in size. Everything here keeps the autograd graph and never lets padding
values (which may be anything, even inf) reach a result.
"""

from __future__ import annotations

from rlvr.algorithms.objectives.gspo import masked_seq_mean
from rlvr.algorithms.registry import AggregationInputs, ObjectiveInputs
from rlvr.lazy import torch

__all__ = ["masked_seq_mean", "masked_seq_sum", "groups", "group_total", "group_log_softmax", "binary_labels",
           "whole_minibatch", "row_count", "group_count", "require"]


def masked_seq_sum(x: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
    """Sum of ``x`` [N, T] over each row's valid tokens -> [N] (``where``, not ``x * mask``: 0 * inf is nan)."""
    return torch.where(mask > 0, x, torch.zeros_like(x)).sum(-1)


def groups(group_index: torch.Tensor) -> list[torch.Tensor]:
    """Row indices of each group, in order of group id."""
    return [torch.nonzero(group_index == g).flatten() for g in torch.unique(group_index)]


def group_total(x: torch.Tensor, group_index: torch.Tensor) -> torch.Tensor:
    """[N] sum of ``x`` [N] over each row's group, in ``x``'s dtype, differentiable."""
    _, inv = torch.unique(group_index, return_inverse=True)
    return torch.zeros(int(inv.max()) + 1, dtype=x.dtype, device=x.device).index_add(0, inv, x)[inv]


def group_log_softmax(x: torch.Tensor, group_index: torch.Tensor) -> torch.Tensor:
    """[N] ``x_i - log sum_{j in g(i)} exp(x_j)``, differentiable; ``x`` must be finite."""
    _, inv = torch.unique(group_index, return_inverse=True)
    n_groups = int(inv.max()) + 1
    peak = torch.full((n_groups,), -torch.inf, dtype=x.dtype, device=x.device)
    peak = peak.scatter_reduce(0, inv, x.detach(), "amax")[inv]  # a constant shift: the value is unchanged
    total = torch.zeros(n_groups, dtype=x.dtype, device=x.device).index_add(0, inv, torch.exp(x - peak))[inv]
    return x - peak - torch.log(total)


def binary_labels(rewards: torch.Tensor | None, name: str) -> torch.Tensor:
    """Rewards as classification labels: they must exist and lie in [0, 1]."""
    if rewards is None:
        raise ValueError(f"objective {name!r} needs the rewards (ObjectiveInputs.rewards)")
    if bool(((rewards < 0) | (rewards > 1)).any()):
        raise ValueError(f"objective {name!r} reads rewards as labels in [0, 1]; got values in "
                         f"[{float(rewards.min()):g}, {float(rewards.max()):g}] (a reward transform or "
                         f"penalty moved them out)")
    return rewards


def whole_minibatch(inp: ObjectiveInputs) -> AggregationInputs:
    """The whole minibatch's view; when the objective is called on its own, the inputs are the minibatch."""
    if inp.minibatch is not None:
        return inp.minibatch
    return AggregationInputs(inp.mask, inp.group_index if inp.group_index is not None
                             else torch.arange(inp.mask.shape[0]), inp.advantages)


def row_count(inp: ObjectiveInputs) -> int:
    """Completions in the whole minibatch (this micro-batch's rows when called on its own)."""
    return inp.n_rows or inp.mask.shape[0]


def group_count(inp: ObjectiveInputs) -> int:
    """Groups in the whole minibatch (this micro-batch's groups when called on its own)."""
    if inp.n_groups:
        return inp.n_groups
    return int(torch.unique(inp.group_index).numel()) if inp.group_index is not None else inp.mask.shape[0]


def require(value, what: str, name: str):
    """``value``, or a clear error naming what objective ``name`` is missing."""
    if value is None:
        raise ValueError(f"objective {name!r} needs {what}")
    return value

"""Per-group statistics over ragged groups, computed in float64.

Groups are identified by ``group_index`` and may differ in size; nothing reshapes to ``[B, G]``.
Statistics are float64 and a group whose max equals its min gets exactly zero deviation, so constant
non-binary rewards such as ``[0.7, 0.7, 0.7]`` give advantages of exactly 0 (float32 gives ~1e-2 after
dividing by ``std + eps``).
"""

from __future__ import annotations

from rlvr.lazy import torch

__all__ = ["group_mean", "group_std", "group_sizes", "group_constant", "group_sum", "leave_one_out_mean"]


def _dense(group_index: torch.Tensor) -> tuple[torch.Tensor, int]:
    uniq, inv = torch.unique(group_index, return_inverse=True)
    return inv, int(uniq.numel())


def group_sizes(group_index: torch.Tensor) -> torch.Tensor:
    """[N] size of each row's group."""
    inv, g = _dense(group_index)
    counts = torch.zeros(g, dtype=torch.float64).index_add_(0, inv, torch.ones_like(inv, dtype=torch.float64))
    return counts[inv]


def group_mean(x: torch.Tensor, group_index: torch.Tensor) -> torch.Tensor:
    """[N] mean of each row's group, in float64."""
    inv, g = _dense(group_index)
    x = x.to(torch.float64)
    sums = torch.zeros(g, dtype=torch.float64).index_add_(0, inv, x)
    counts = torch.zeros(g, dtype=torch.float64).index_add_(0, inv, torch.ones_like(x))
    return (sums / counts)[inv]


def group_constant(x: torch.Tensor, group_index: torch.Tensor) -> torch.Tensor:
    """[N] bool: the row's group has max == min (no signal)."""
    inv, g = _dense(group_index)
    x = x.to(torch.float64)
    hi = torch.full((g,), -torch.inf, dtype=torch.float64).scatter_reduce(0, inv, x, "amax")
    lo = torch.full((g,), torch.inf, dtype=torch.float64).scatter_reduce(0, inv, x, "amin")
    return (hi == lo)[inv]


def group_std(x: torch.Tensor, group_index: torch.Tensor, unbiased: bool = True) -> torch.Tensor:
    """[N] std of each row's group in float64 (0 for constant groups; 0 for size-1 groups)."""
    inv, g = _dense(group_index)
    x = x.to(torch.float64)
    dev = x - group_mean(x, group_index)
    dev = torch.where(group_constant(x, group_index), torch.zeros_like(dev), dev)
    ss = torch.zeros(g, dtype=torch.float64).index_add_(0, inv, dev * dev)
    n = torch.zeros(g, dtype=torch.float64).index_add_(0, inv, torch.ones_like(x))
    denom = (n - 1).clamp(min=1) if unbiased else n
    return (ss / denom).sqrt()[inv]


def group_sum(x: torch.Tensor, group_index: torch.Tensor) -> torch.Tensor:
    """[N] sum of each row's group, in float64."""
    inv, g = _dense(group_index)
    return torch.zeros(g, dtype=torch.float64).index_add_(0, inv, x.to(torch.float64))[inv]


def leave_one_out_mean(x: torch.Tensor, group_index: torch.Tensor) -> torch.Tensor:
    """[N] mean of the OTHER rows of each row's group, ``(sum_g - x_i) / (n_g - 1)``, in float64.

    A group of one has no other rows; its entry is 0 (callers decide what a singleton means).
    """
    x = x.to(torch.float64)
    others = group_sizes(group_index) - 1
    return torch.where(others > 0, (group_sum(x, group_index) - x) / others.clamp(min=1), torch.zeros_like(x))

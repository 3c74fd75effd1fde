"""Lite PPO's advantage: group-level mean, batch-level std (Liu et al. 2025, "Part I: Tricks or Traps? A
Deep Dive into RL for LLM Reasoning", arXiv:2508.08221; code: alibaba/ROLL ``reward_norm`` with
``norm_mean_type: group``, ``norm_std_type: batch``).

    A_i = (r_i - mean_{j in g(i)} r_j) / (std_{j in batch} r_j + eps)          [N], broadcast to [N, T]

The numerator is the group-centred reward; the denominator is ONE number for the whole batch: the
unbiased std (divide by N - 1, ``torch.std`` as in ROLL) of the RAW rewards of all N completions of the
step, every group together, not of the centred ones. The paper reports this mix to be more robust than the
group std, which inflates the advantages of near-constant groups.

Statistics are float64. A constant group (max == min) gets exactly 0, and so does a batch whose rewards
are all equal (no spread: 0, not 0/0 when eps = 0). A group of ONE completion is its own group mean, so it
gets 0, as ROLL (which reshapes to [B, G] and takes the mean) and TRL do. We deliberately do not use the
``grpo``/``dr_grpo`` convention (mean := 0, numerator r) here: with every group of size one the batch would
be plain REINFORCE r / std_batch, and an all-equal batch would give r / eps.
"""

from __future__ import annotations

from pydantic import Field

from rlvr.algorithms.grouping import group_constant, group_mean
from rlvr.algorithms.registry import ADVANTAGES, AdvantageInputs
from rlvr.lazy import torch
from rlvr.registry import Params

__all__ = ["BatchStdAdvantageParams", "batch_std_advantage"]


class BatchStdAdvantageParams(Params):
    eps: float = Field(1e-6, ge=0.0, description="added to the batch std before dividing (ROLL: 1e-6)")


@ADVANTAGES.register("batch_std", BatchStdAdvantageParams)
def batch_std_advantage(inp: AdvantageInputs, p: BatchStdAdvantageParams) -> torch.Tensor:
    """Lite PPO: reward minus group mean, over the std of all rewards in the batch."""
    r = inp.rewards.to(torch.float64)
    # a constant group (a group of one included) has no signal: write exactly 0, not float64 r - mean ~1e-16
    num = torch.where(group_constant(r, inp.group_index), torch.zeros_like(r), r - group_mean(r, inp.group_index))
    if bool(r.max() == r.min()):  # no spread at all: every numerator is 0 (also avoids 0/0 with eps = 0)
        return torch.zeros_like(r, dtype=torch.float32)
    return (num / (r.std(unbiased=True) + p.eps)).to(torch.float32)

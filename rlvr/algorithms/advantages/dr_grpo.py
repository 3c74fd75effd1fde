"""Dr. GRPO's advantage (Liu et al. 2025, "Understanding R1-Zero-Like Training: A Critical Perspective",
arXiv:2503.20783).

    A_i = r_i - mean_{j in g(i)} r_j                                          [N], broadcast to [N, T]

Dr. GRPO drops GRPO's division by the group std, which up-weights groups that are almost all right or all
wrong (the paper's "question-level difficulty bias"). The other half of the method, dividing the token sum
by a constant instead of by ``|o_i|``, is a loss aggregation (``seq_mean_token_sum_norm``), not part of
this estimator.

Numerically this is ``grpo`` with ``std: none``; it is registered under its own name so a config says which
method it runs. Statistics are float64; a constant group (max == min) gets exactly 0. A group of one
completion follows the verl/TRL convention used by ``grpo`` (mean = 0, so A = r): the paper does not
discuss it, and keeping ``grpo``'s convention makes ``dr_grpo == grpo(std=none)`` hold everywhere.
"""

from __future__ import annotations

from rlvr.algorithms.grouping import group_constant, group_mean, group_sizes
from rlvr.algorithms.registry import ADVANTAGES, AdvantageInputs
from rlvr.lazy import torch
from rlvr.registry import Params

__all__ = ["DrGRPOAdvantageParams", "dr_grpo_advantage", "centred_rewards"]


class DrGRPOAdvantageParams(Params):
    """Dr. GRPO's advantage has no parameters (no std, so no eps)."""


def centred_rewards(rewards: torch.Tensor, group_index: torch.Tensor) -> torch.Tensor:
    """[N] float64 ``r - group mean``: exactly 0 in constant groups, ``r`` in groups of one (mean := 0)."""
    r = rewards.to(torch.float64)
    singleton = group_sizes(group_index) == 1
    mean = torch.where(singleton, torch.zeros_like(r), group_mean(r, group_index))
    # float64 r - mean is ~1 ulp off for e.g. [0.7]*4; a group with max == min has no signal, so write 0
    return torch.where(group_constant(r, group_index) & ~singleton, torch.zeros_like(r), r - mean)


@ADVANTAGES.register("dr_grpo", DrGRPOAdvantageParams)
def dr_grpo_advantage(inp: AdvantageInputs, p: DrGRPOAdvantageParams) -> torch.Tensor:
    """Dr. GRPO: reward minus group mean, no std division."""
    return centred_rewards(inp.rewards, inp.group_index).to(torch.float32)

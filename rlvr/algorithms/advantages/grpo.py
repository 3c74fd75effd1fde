"""GRPO's group-relative advantage (Shao et al. 2024, DeepSeekMath, arXiv:2402.03300).

    A_i = (r_i - mean_{j in g(i)} r_j) / (std_{j in g(i)} r_j + eps)          [N], broadcast to [N, T]

``std`` selects the unbiased (divide by G-1, TRL/verl's ``torch.std``) or population std, or ``none``
to skip the division (Dr. GRPO's advantage). Statistics are float64; a constant group gets exactly 0.
A group of one completion follows the verl/TRL convention mean = 0, std = 1, so A = r.
"""

from __future__ import annotations

from typing import Literal

from pydantic import Field

from rlvr.algorithms.grouping import group_constant, group_mean, group_sizes, group_std
from rlvr.algorithms.registry import ADVANTAGES, AdvantageInputs
from rlvr.lazy import torch
from rlvr.registry import Params

__all__ = ["GRPOAdvantageParams", "grpo_advantage"]


class GRPOAdvantageParams(Params):
    std: Literal["unbiased", "population", "none"] = Field(
        "unbiased", description="divide by the group's unbiased std, population std, or not at all")
    eps: float = Field(1e-6, ge=0.0, description="added to the std before dividing")


@ADVANTAGES.register("grpo", GRPOAdvantageParams)
def grpo_advantage(inp: AdvantageInputs, p: GRPOAdvantageParams) -> torch.Tensor:
    """Group-relative advantage: reward minus group mean, optionally over the group std."""
    r = inp.rewards.to(torch.float64)
    singleton = group_sizes(inp.group_index) == 1
    mean = torch.where(singleton, torch.zeros_like(r), group_mean(r, inp.group_index))
    adv = torch.where(group_constant(r, inp.group_index) & ~singleton, torch.zeros_like(r), r - mean)
    if p.std != "none":
        std = group_std(r, inp.group_index, unbiased=p.std == "unbiased")
        std = torch.where(singleton, torch.ones_like(std), std)
        adv = adv / (std + p.eps)
    return adv.to(torch.float32)

"""NGRPO's advantage calibration with a virtual maximum-reward sample (Nan et al. 2025, "NGRPO:
Negative-enhanced Group Relative Policy Optimization", arXiv:2509.18851; code ``nangongrui-ngr/NGRPO``,
``compute_ngrpo_outcome_advantage``). EXACT (code).

Each group's statistics include K virtual completions of reward r_max that are not trained on:

    mu'_g    = (sum_{j in g} r_j + K r_max) / (n_g + K)
    sigma'_g = std( r_j for j in g, r_max x K )        (unbiased: / (n_g + K - 1), as torch.std)
    A_i      = (r_i - mu'_g) / (sigma'_g + eps)                        [N], broadcast to [N, T]

So an all-wrong group gets negative advantages (GRPO gives it 0) and an all-correct group (every r = r_max)
still gets exactly 0. The paper pairs it with an asymmetric clip (0.16 / 0.24, see the ``ngrpo`` recipe)
and with filtering of all-correct groups; rlvr's dynamic sampling drops every constant group (it would drop
the all-wrong groups NGRPO learns from), so the recipe leaves it off. Statistics are float64.
"""

from __future__ import annotations

from typing import Literal

from pydantic import Field

from rlvr.algorithms.grouping import group_constant, group_sizes, group_sum
from rlvr.algorithms.registry import ADVANTAGES, AdvantageInputs
from rlvr.lazy import torch
from rlvr.registry import Params

__all__ = ["NGRPOParams", "ngrpo_advantage"]


class NGRPOParams(Params):
    r_max: float = Field(1.0, description="reward of the virtual completions (the task's maximum reward)")
    num_virtual: int = Field(1, ge=1, description="K, virtual max-reward completions added to each group")
    std: Literal["unbiased", "population"] = Field("unbiased", description="std over the n_g + K values")
    eps: float = Field(1e-6, ge=0.0, description="added to the std before dividing")


@ADVANTAGES.register("ngrpo", NGRPOParams)
def ngrpo_advantage(inp: AdvantageInputs, p: NGRPOParams) -> torch.Tensor:
    """NGRPO: group-normalised advantage with K virtual max-reward samples in the statistics."""
    r = inp.rewards.to(torch.float64)
    n = group_sizes(inp.group_index) + p.num_virtual
    mean = (group_sum(r, inp.group_index) + p.num_virtual * p.r_max) / n
    ss = group_sum((r - mean) ** 2, inp.group_index) + p.num_virtual * (p.r_max - mean) ** 2
    std = (ss / (n - 1 if p.std == "unbiased" else n)).sqrt()
    adv = (r - mean) / (std + p.eps)
    # every real reward equal to r_max: the augmented group is constant; write the exact 0 float64 may miss
    at_max = group_constant(r, inp.group_index) & (r == p.r_max)
    return torch.where(at_max, torch.zeros_like(adv), adv).to(torch.float32)

"""DGPO's difficulty-balanced group advantage estimation, DGAE (Dai et al. 2026, "Harder Is Better: Boosting
Mathematical Reasoning via Difficulty-Aware GRPO and Multi-Aspect Question Reformulation" (MathForge),
arXiv:2601.20614; code ``AMAP-ML/MathForge``, ``trl-0.20.0/trl/trainer/grpo_trainer.py``, ``enable_dgpo``).
EXACT (code).

GRPO divides by the group std, which makes a group's total update sum_i |A_i| = 2 G sqrt(p (1 - p)) for
binary rewards: small for hard and for easy prompts. DGAE divides by the mean absolute deviation instead:

    A_i = n_g (r_i - mu_g) / (sum_{j in g} |r_j - mu_g| + eps)          [N], broadcast to [N, T]

so every group whose rewards differ has sum_i |A_i| = n_g (up to eps). A constant group (this includes a
group of one) gets exactly 0. The question weighting half of DGPO is the advantage transform ``dqw``; the
``dgpo`` recipe uses both. Statistics are float64.
"""

from __future__ import annotations

from pydantic import Field

from rlvr.algorithms.grouping import group_constant, group_mean, group_sizes, group_sum
from rlvr.algorithms.registry import ADVANTAGES, AdvantageInputs
from rlvr.lazy import torch
from rlvr.registry import Params

__all__ = ["DGPOParams", "dgpo_advantage"]


class DGPOParams(Params):
    eps: float = Field(1e-4, ge=0.0, description="added to the group's sum of absolute deviations (code: 1e-4)")


@ADVANTAGES.register("dgpo", DGPOParams)
def dgpo_advantage(inp: AdvantageInputs, p: DGPOParams) -> torch.Tensor:
    """DGAE: group-centred reward over the group's mean absolute deviation (sum |A| = group size)."""
    r = inp.rewards.to(torch.float64)
    dev = r - group_mean(r, inp.group_index)
    mad_sum = group_sum(dev.abs(), inp.group_index)
    adv = group_sizes(inp.group_index) * dev / (mad_sum + p.eps)
    return torch.where(group_constant(r, inp.group_index), torch.zeros_like(adv), adv).to(torch.float32)

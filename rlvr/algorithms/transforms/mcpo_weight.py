"""MCPO's weighting of majority-correct prompts (Liao et al. 2026, Mastery-Consolidated Policy Optimization,
arXiv:2604.16972). RECONSTRUCTED: confirmed is that prompts with accuracy in (0.5, 1) are
up-weighted because GRPO's induced query weight, sum_i |A_i| = 2 G sqrt(p (1 - p)) for binary rewards
(population std), shrinks as p -> 1; the weight function is our best guess (it restores the p = 0.5 weight):

    w(p_q) = sqrt(0.25 / (p_q (1 - p_q)))    if 0.5 < p_q < 1      (p_q the group's success rate)
           = 1                               otherwise
    A_i   <- w(p_{q(i)}) A_i                                            [N, T]

MCPO's other half, a hinge-KL regulariser on mastered prompts (p = 1), is a policy objective, not this
transform.
"""

from __future__ import annotations

from pydantic import Field

from rlvr.algorithms.registry import ADVANTAGE_TRANSFORMS, TransformInputs, TransformOutput
from rlvr.algorithms.transforms.difficulty import success_rate
from rlvr.lazy import torch
from rlvr.registry import Params

__all__ = ["MCPOWeightParams", "mcpo_weight_transform", "mcpo_weight"]


class MCPOWeightParams(Params):
    max_weight: float | None = Field(None, gt=0.0, description="clip w at this value (null: no clip)")


def mcpo_weight(rate: torch.Tensor) -> torch.Tensor:
    """[N] float64 w(p) for success rates ``rate``."""
    majority = (rate > 0.5) & (rate < 1)
    return torch.where(majority, (0.25 / (rate * (1.0 - rate)).clamp(min=1e-12)).sqrt(), torch.ones_like(rate))


@ADVANTAGE_TRANSFORMS.register("mcpo_weight", MCPOWeightParams)
def mcpo_weight_transform(inp: TransformInputs, p: MCPOWeightParams) -> TransformOutput:
    """MCPO: up-weight majority-correct prompts by sqrt(0.25 / (p (1 - p))) (reconstructed)."""
    w = mcpo_weight(success_rate(inp.rewards, inp.components, inp.group_index).to(torch.float64))
    if p.max_weight is not None:
        w = w.clamp(max=p.max_weight)
    return inp.advantages * w[:, None].to(inp.advantages.dtype), {"weight_max": float(w.max())}

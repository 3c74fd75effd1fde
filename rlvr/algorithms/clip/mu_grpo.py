"""Mu-GRPO clipping: a relaxed trust region for stale rollouts plus a negative-advantage veto that drops the
suffix of a negative-advantage response from the first token where the policy moved strongly toward it.

Tian, Xie, Wei, "How Off-Policy Can GRPO Be?", arXiv:2605.17570. RECONSTRUCTED from the abstract (docs/methods.md,
`mu_grpo`): the relaxed bounds and the trigger rule are our reading. With the ratio the objective clips (token
ratio for ``ppo_clip``, sequence ratio for ``gspo``):

    bounds   [1 - clip_low, 1 + clip_high]          (null: the objective's own clip_low / clip_high)
    trigger  t*_i = first valid t with A_{i,t} < 0 and ratio_{i,t} > 1 + veto_eps
    keep     M_{i,t} = 0 for t >= t*_i, else 1      (the prefix before the trigger still trains)

Responses with A >= 0 are never vetoed. Vetoed tokens keep their place in the aggregation's token count.
"""

from __future__ import annotations

from pydantic import Field

from rlvr.algorithms.clip.ratio import requires_clipping_objective
from rlvr.algorithms.registry import CLIP_RULES, ClipBounds, ClipInputs
from rlvr.lazy import torch
from rlvr.registry import Params

__all__ = ["MuGRPOParams", "mu_grpo_clip", "veto_mask"]


class MuGRPOParams(Params):
    clip_low: float | None = Field(0.4, ge=0.0, lt=1.0, description="relaxed lower bound 1 - clip_low "
                                   "(null: the objective's own)")
    clip_high: float | None = Field(0.6, ge=0.0, description="relaxed upper bound 1 + clip_high "
                                    "(null: the objective's own)")
    veto: bool = Field(True, description="drop the post-trigger suffix of negative-advantage responses")
    veto_eps: float = Field(1.0, gt=0.0, description="a token triggers the veto when its ratio exceeds 1 + veto_eps")


def veto_mask(ratio: torch.Tensor, advantages: torch.Tensor, mask: torch.Tensor, veto_eps: float) -> torch.Tensor:
    """[N, T] 1 before each negative-advantage response's first trigger token, 0 from it on."""
    trigger = (advantages < 0) & (ratio > 1.0 + veto_eps) & (mask > 0)
    after = torch.cummax(trigger.to(torch.int8), dim=-1).values > 0
    return (~after).to(ratio.dtype)


@CLIP_RULES.register("mu_grpo", MuGRPOParams, check=requires_clipping_objective)
def mu_grpo_clip(inp: ClipInputs, p: MuGRPOParams) -> ClipBounds:
    """Mu-GRPO: relaxed ratio bounds and the negative-advantage suffix veto."""
    low = 1.0 - (inp.eps_low if p.clip_low is None else p.clip_low)
    high = 1.0 + (inp.eps_high if p.clip_high is None else p.clip_high)
    keep = veto_mask(inp.ratio, inp.advantages, inp.mask, p.veto_eps) if p.veto else None
    return ClipBounds(low, high, keep)

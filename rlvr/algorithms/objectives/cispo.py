"""CISPO: REINFORCE on every token, weighted by a clipped, detached importance-sampling weight.

MiniMax et al. 2025, "MiniMax-M1: Scaling Test-Time Compute Efficiently with Lightning Attention"
(arXiv:2506.13585, eqs. 4-5 and the unified form with a token mask); cf. verl ``compute_policy_loss_cispo``.
Per token, [N, T]:

    rho = exp(clamp(logp - old_logp, -20, 20))
    w   = sg[ clip(rho, 1 - clip_low, 1 + clip_high) ]
    loss = -w * A * logp                                   # d loss / d logp = -w A, never 0 unlike PPO's clip
    with ppo_mask:  loss *= m,   m = 0 where (A > 0 and rho > 1 + mask_clip_high)
                                          or (A < 0 and rho < 1 - mask_clip_low),  else 1

Aggregation: meant for ``token_mean`` (the paper normalises by sum_i |o_i|).

Defaults: the paper sets no lower bound ("very large eps_low") and tunes only the upper one without giving a
value; clip_low = 1 (lower bound 0 = none, since rho >= 0) and clip_high = 4 (upper bound 5) follow the
ScaleRL recipe (Khatri et al. 2025, arXiv:2510.13786) as other libraries ship it. The mask is off by default
(plain CISPO); with it on, its bounds are separate from the IS clip so PPO's trust region is a special case.
Metrics: ``clip_frac`` (tokens whose weight the clip changed), ``ratio``, ``mask_frac`` (tokens the mask
dropped; 0 without the mask).
"""

from __future__ import annotations

from pydantic import Field

from rlvr.algorithms.registry import OBJECTIVES, ObjectiveInputs, ObjectiveOutput
from rlvr.lazy import torch
from rlvr.registry import Params

__all__ = ["CISPOParams", "cispo"]


class CISPOParams(Params):
    clip_low: float = Field(1.0, ge=0.0, le=1.0,
                            description="IS weight clipped below at 1 - clip_low (1: no lower bound)")
    clip_high: float = Field(4.0, ge=0.0, description="IS weight clipped above at 1 + clip_high (ScaleRL: 4)")
    ppo_mask: bool = Field(False, description="also drop tokens PPO's clip would (the paper's unified form)")
    mask_clip_low: float = Field(0.2, ge=0.0, lt=1.0, description="with ppo_mask: drop A<0 tokens with "
                                 "rho < 1 - mask_clip_low")
    mask_clip_high: float = Field(0.28, ge=0.0, description="with ppo_mask: drop A>0 tokens with "
                                  "rho > 1 + mask_clip_high")
    log_ratio_clamp: float = Field(20.0, gt=0.0, description="clamp on logp - old_logp before exp")


@OBJECTIVES.register("cispo", CISPOParams)
def cispo(inp: ObjectiveInputs, p: CISPOParams) -> ObjectiveOutput:
    """CISPO: clipped detached IS weight times REINFORCE (use with token_mean)."""
    adv = inp.advantages
    with torch.no_grad():  # the weight is a constant of the update: no gradient flows through rho
        rho = torch.exp((inp.logp - inp.old_logp).clamp(-p.log_ratio_clamp, p.log_ratio_clamp))
        w = rho.clamp(1.0 - p.clip_low, 1.0 + p.clip_high)
        keep = torch.ones_like(rho)
        if p.ppo_mask:
            drop = ((adv > 0) & (rho > 1.0 + p.mask_clip_high)) | ((adv < 0) & (rho < 1.0 - p.mask_clip_low))
            keep = (~drop).to(rho.dtype)
    loss = -(w * keep) * adv * inp.logp
    metrics = {"clip_frac": (w != rho).float(), "ratio": rho, "mask_frac": 1.0 - keep}
    return loss, metrics

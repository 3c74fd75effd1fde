"""``mis``: masked importance sampling (rejection) between the rollout engine and the trainer.

Liu, Li et al. 2025, "When Speed Kills Stability: Demystifying RL Collapse from the Training-Inference
Mismatch" (blog, yingru.notion.site): rather than truncating large engine-vs-trainer ratios (``tis``), drop
the tokens or sequences whose ratio leaves a trust interval. Levels as in verl's rollout correction
(``rollout_is_level`` token / geometric, mode ``mask``); Yao et al. 2025 (fengyao.notion.site/off-policy-rl)
motivate the correction. With M the completion mask [N, T] and d_{i,t} = M_{i,t} (old_logp - behaviour_logp):

    token:     r_{i,t} = exp(d_{i,t})                                          # [N, T]
    sequence:  r_{i,t} = exp( sum_t' d_{i,t'} / L_i )  for every t            # geometric-mean ratio
    w_{i,t}    = 1[lower <= r_{i,t} <= upper]          (keep_ratio: r_{i,t} * 1[...])

The sequence level uses the geometric mean, not the product: a product of many near-1 ratios drifts out of
any fixed interval with length alone, so masking on it would reject long completions; truncating it
(``tis``) only caps the weight. Bounds are compared in log space (no overflow; lower = 0 means no lower bound).

Deviation from verl: verl removes rejected tokens from the response mask, so they leave the loss
denominator; here the weight multiplies the per-token loss after the aggregation's coefficients were fixed
from the minibatch's mask, so a rejected token still counts in the denominator (the step is scaled by the
kept fraction). The weights are detached. Metrics: ``masked_frac`` (weights set to 0), ``ratio`` (r, its log
clamped to [-20, 20]).
"""

from __future__ import annotations

import math
from typing import Literal

from pydantic import Field

from rlvr.algorithms.registry import CORRECTIONS, CorrectionInputs, CorrectionOutput
from rlvr.lazy import torch
from rlvr.registry import Params

__all__ = ["MISParams", "mis"]


class MISParams(Params):
    level: Literal["token", "sequence"] = Field(
        "token", description="token: one ratio per token; sequence: the geometric-mean ratio, broadcast")
    lower: float = Field(0.5, ge=0.0, le=1.0, description="ratios below are masked (0: no lower bound); <= 1 "
                         "so on-policy tokens are kept")
    upper: float = Field(2.0, ge=1.0, description="ratios above are masked; >= 1 so on-policy tokens are kept "
                         "(the sequence level's geometric mean usually wants a far tighter interval)")
    keep_ratio: bool = Field(False, description="weight kept tokens by their ratio instead of 1")


@CORRECTIONS.register("mis", MISParams)
def mis(inp: CorrectionInputs, p: MISParams) -> CorrectionOutput:
    """Masked IS: weight 1 inside [lower, upper] and 0 outside, per token or per sequence (geometric mean)."""
    with torch.no_grad():
        valid = inp.mask > 0
        log_r = torch.where(valid, inp.old_logp - inp.behaviour_logp, torch.zeros_like(inp.old_logp))
        if p.level == "sequence":
            log_r = (log_r.sum(-1, keepdim=True) / valid.sum(-1, keepdim=True).clamp(min=1)).expand_as(log_r)
        log_low = math.log(p.lower) if p.lower > 0 else -math.inf
        inside = (log_r >= log_low) & (log_r <= math.log(p.upper))
        ratio = torch.exp(log_r.clamp(-20.0, 20.0))
        weights = inside.to(ratio.dtype) * (ratio if p.keep_ratio else 1.0)
        metrics = {"masked_frac": (~inside).to(ratio.dtype), "ratio": ratio}
    return weights, metrics

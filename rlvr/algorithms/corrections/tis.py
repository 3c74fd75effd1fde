"""``tis``: truncated importance sampling between the rollout engine and the trainer.

Yao, Liu et al. 2025, "Your Efficient RL Framework Secretly Brings You Off-Policy RL Training" (blog,
fengyao.notion.site/off-policy-rl): the engine samples from pi_engine, the trainer's pi_old differs slightly
(kernels, precision), so each token's loss is weighted by the truncated ratio, C = 2 in the blog. PSN-RLVR
(arXiv:2602.02555; docs/methods.md, `rollout.param_noise`) uses the same weight for its perturbed-parameter
rollouts. The sequence level follows verl's rollout correction (``rollout_is: sequence``, mode ``truncate``).
With M the completion mask [N, T] and d_{i,t} = M_{i,t} (old_logp_{i,t} - behaviour_logp_{i,t}):

    token:     w_{i,t} = min( exp(d_{i,t}), cap )                                  # [N, T]
    sequence:  w_{i,t} = min( exp(sum_t' d_{i,t'}), cap )  for every t             # product of token ratios

``min(exp(x), C) = exp(min(x, log C))``: the cap is applied in log space, which is exact and cannot overflow
however long the sequence. Padding never enters (``where``, not ``* mask``: garbage could be inf); a padding
token gets weight 1 (token level) or its sequence's (sequence level), and the aggregation's mask drops it.
The weights are detached. Metrics: ``trunc_frac`` (weights the cap lowered), ``ratio`` (the untruncated
ratio, its log clamped to [-20, 20] so a long sequence's product stays finite in the logs).
"""

from __future__ import annotations

import math
from typing import Literal

from pydantic import Field

from rlvr.algorithms.registry import CORRECTIONS, CorrectionInputs, CorrectionOutput
from rlvr.lazy import torch
from rlvr.registry import Params

__all__ = ["TISParams", "tis"]


class TISParams(Params):
    level: Literal["token", "sequence"] = Field(
        "token", description="token: one ratio per token; sequence: the product over the completion, broadcast")
    cap: float = Field(2.0, ge=1.0, description="truncation C, w = min(ratio, C); >= 1 so on-policy tokens keep "
                       "weight 1 (Yao et al.: 2 per token; sequence products usually need more)")


@CORRECTIONS.register("tis", TISParams)
def tis(inp: CorrectionInputs, p: TISParams) -> CorrectionOutput:
    """Truncated IS weight min(pi_old / pi_engine, cap), per token or per sequence."""
    with torch.no_grad():
        valid = inp.mask > 0
        log_r = torch.where(valid, inp.old_logp - inp.behaviour_logp, torch.zeros_like(inp.old_logp))
        if p.level == "sequence":
            log_r = log_r.sum(-1, keepdim=True).expand_as(log_r)
        log_cap = math.log(p.cap)
        weights = torch.exp(log_r.clamp(max=log_cap))
        metrics = {"trunc_frac": (log_r > log_cap).to(weights.dtype), "ratio": torch.exp(log_r.clamp(-20.0, 20.0))}
    return weights, metrics

"""GSPO-token: GSPO's sequence ratio carried per token, so the advantage may vary along the sequence.

Zheng et al. 2025, "Group Sequence Policy Optimization" (arXiv:2507.18071, the GSPO-token variant); log-space
form and operation order as in verl's ``compute_policy_loss_gspo``. With s_i the sequence ratio of ``gspo``:

    log s_i       = sum_t M_{i,t} (logp_{i,t} - old_logp_{i,t}) / L_i                    # [N]
    log s_{i,t}   = min( logp_{i,t} - sg[logp_{i,t}] + sg[log s_i] , 10 )                # [N, T]
    s_{i,t}       = exp(log s_{i,t})          # value s_i; d s_{i,t} / d logp_{i,t} = s_i
    loss_{i,t}    = -min( s_{i,t} A_{i,t} , clip(s_{i,t}, 1 - clip_low, 1 + clip_high) A_{i,t} )

``logp - sg[logp]`` is added before ``sg[log s_i]`` because adding a large value first would round away the
zero-valued term's precision (volcengine/verl#2775). Each token's value equals the sequence's, so clip
decisions are per sequence (times the sign of A_{i,t}).

Aggregation: meant for ``seq_mean_token_mean`` (then the value and gradient equal ``gspo``'s whenever A is
constant within each sequence); with ``token_mean`` it is LUSPO (arXiv:2602.05261). Parameters are GSPO's.
Metrics: ``clip_frac`` (tokens whose gradient the clip removed), ``ratio`` (s_i on each token).
"""

from __future__ import annotations

from rlvr.algorithms.objectives.gspo import GSPOParams, masked_seq_mean
from rlvr.algorithms.registry import OBJECTIVES, ObjectiveInputs, ObjectiveOutput
from rlvr.lazy import torch

__all__ = ["gspo_token"]


@OBJECTIVES.register("gspo_token", GSPOParams, traits=("clip_rule",))
def gspo_token(inp: ObjectiveInputs, p: GSPOParams) -> ObjectiveOutput:
    """GSPO-token: sequence ratio with per-token advantages and per-token gradients."""
    log_s = masked_seq_mean(inp.logp - inp.old_logp, inp.mask).detach()  # [N]
    log_ratio = (inp.logp - inp.logp.detach() + log_s[:, None]).clamp(max=p.log_ratio_clamp)
    ratio = torch.exp(log_ratio)
    adv = inp.advantages
    b = inp.ratio_bounds(p.clip_low, p.clip_high, ratio)
    l1 = -adv * ratio
    l2 = -adv * torch.clamp(ratio, b.low, b.high)
    loss = torch.maximum(l1, l2)
    if b.keep is not None:
        loss = loss * b.keep
    return loss, {"clip_frac": (l2 > l1).float().detach(), "ratio": ratio.detach()}

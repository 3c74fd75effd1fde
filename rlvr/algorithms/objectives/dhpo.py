"""DHPO: one clipped surrogate on a mix of GRPO's token ratio and GSPO's sequence ratio, each branch clipped
in its own trust region before mixing.

Min et al., "Dynamic Hybrid Policy Optimization", arXiv:2601.05607 (ACL Findings 2026). RECONSTRUCTED from the
abstract (code not released; docs/methods.md, `dhpo`): the mixing weight, the mixing space and the branch bounds
are our reading, exposed as parameters. Per token, [N, T]:

    r_tok     = exp(clamp(logp - old_logp, +-20))                                    # GRPO's ratio
    log s_i   = sum_t M (logp - old_logp) / L_i                                      # GSPO's ratio, [N]
    s_{i,t}   = exp(min(logp - sg[logp] + sg[log s_i], 10))                          # GSPO-token form
    alpha     = alpha (mixing "averaged")  |  H_{i,t} / max_t' H_{i,t'} (mixing "entropy", detached)
    linear:  r_mix = alpha r_tok + (1-alpha) s_{i,t};  r_clp = alpha clip(r_tok) + (1-alpha) clip(s_{i,t})
    log:     r_mix = r_tok^alpha s^(1-alpha);          r_clp = clip(r_tok)^alpha clip(s)^(1-alpha)
    loss      = -min(r_mix A, r_clp A)

clip(r_tok) uses [1 - clip_low, 1 + clip_high], clip(s) uses [1 - seq_clip_low, 1 + seq_clip_high]; both ask
the run's clip rule (``algorithm.clip``), and tokens either branch's rule drops are dropped. Entropy-guided
mixing leans high-entropy tokens on the token ratio and low-entropy ones on the sequence ratio; H is the
per-token entropy of the policy being updated (detached; a row whose entropies are all 0 uses the sequence
ratio). Structure: alpha = 1 is ``ppo_clip`` exactly, alpha = 0 is ``gspo_token``; at theta = theta_old every
ratio is 1 and the gradient is REINFORCE's, -A grad logp, for any alpha and either space.
Metrics: ``clip_frac``, ``ratio`` (r_mix), ``alpha``.
"""

from __future__ import annotations

from typing import Literal

from pydantic import Field

from rlvr.algorithms.objectives.common import masked_seq_mean, require
from rlvr.algorithms.registry import OBJECTIVES, ObjectiveInputs, ObjectiveOutput
from rlvr.lazy import torch
from rlvr.registry import Params

__all__ = ["DHPOParams", "dhpo"]


class DHPOParams(Params):
    clip_low: float = Field(0.2, ge=0.0, lt=1.0, description="token branch: ratio clipped below at 1 - clip_low")
    clip_high: float = Field(0.28, ge=0.0, description="token branch: ratio clipped above at 1 + clip_high")
    seq_clip_low: float = Field(3e-4, ge=0.0, lt=1.0, description="sequence branch: lower bound 1 - seq_clip_low")
    seq_clip_high: float = Field(4e-4, ge=0.0, description="sequence branch: upper bound 1 + seq_clip_high")
    mixing: Literal["averaged", "entropy"] = Field(
        "averaged", description="token-branch weight: the constant alpha, or the token's entropy over the "
                                "sequence's largest")
    alpha: float = Field(0.5, ge=0.0, le=1.0, description="token-branch weight for mixing 'averaged'")
    space: Literal["linear", "log"] = Field("linear", description="mix the ratios (linear) or their logs (log)")
    log_ratio_clamp: float = Field(20.0, gt=0.0, description="clamp on the token log-ratio before exp")
    seq_log_ratio_clamp: float = Field(10.0, gt=0.0, description="upper clamp on log s before exp (verl: 10)")


def _alpha(inp: ObjectiveInputs, p: DHPOParams) -> torch.Tensor:
    if p.mixing == "averaged":
        return torch.full_like(inp.logp, p.alpha).detach()
    ent = require(inp.entropy, "per-token entropies for mixing 'entropy'", "dhpo").detach().to(inp.logp.dtype)
    ent = torch.where(inp.mask > 0, ent.clamp(min=0.0), torch.zeros_like(ent))
    peak = ent.max(-1, keepdim=True).values
    return torch.where(peak > 0, ent / peak.clamp(min=1e-30), torch.zeros_like(ent))


@OBJECTIVES.register("dhpo", DHPOParams, traits=("clip_rule",))
def dhpo(inp: ObjectiveInputs, p: DHPOParams) -> ObjectiveOutput:
    """DHPO (reconstructed): token and sequence ratios, each clipped, mixed in one surrogate."""
    adv = inp.advantages
    log_tok = (inp.logp - inp.old_logp).clamp(-p.log_ratio_clamp, p.log_ratio_clamp)
    r_tok = torch.exp(log_tok)
    log_s = masked_seq_mean(inp.logp - inp.old_logp, inp.mask).detach()
    log_seq = (inp.logp - inp.logp.detach() + log_s[:, None]).clamp(max=p.seq_log_ratio_clamp)
    s = torch.exp(log_seq)
    b_tok = inp.ratio_bounds(p.clip_low, p.clip_high, r_tok)
    b_seq = inp.ratio_bounds(p.seq_clip_low, p.seq_clip_high, s)
    c_tok = torch.clamp(r_tok, b_tok.low, b_tok.high)
    c_seq = torch.clamp(s, b_seq.low, b_seq.high)
    a = _alpha(inp, p)
    if p.space == "linear":
        r_mix = a * r_tok + (1 - a) * s
        r_clp = a * c_tok + (1 - a) * c_seq
    else:  # ratios are > 0, so their logs are finite
        r_mix = torch.exp(a * log_tok + (1 - a) * log_seq)
        r_clp = torch.exp(a * torch.log(c_tok) + (1 - a) * torch.log(c_seq))
    l1 = -adv * r_mix
    l2 = -adv * r_clp
    loss = torch.maximum(l1, l2)
    for keep in (b_tok.keep, b_seq.keep):
        if keep is not None:
            loss = loss * keep
    return loss, {"clip_frac": (l2 > l1).float().detach(), "ratio": r_mix.detach(), "alpha": a}

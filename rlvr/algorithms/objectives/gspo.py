"""GSPO: PPO's clipped surrogate on a length-normalised *sequence* importance ratio.

Zheng et al. 2025, "Group Sequence Policy Optimization" (Qwen, arXiv:2507.18071); clamp and defaults as in
verl's ``compute_policy_loss_gspo``. With M the completion mask [N, T], L_i = sum_t M_{i,t}:

    log s_i = min( sum_t M_{i,t} (logp_{i,t} - old_logp_{i,t}) / L_i , 10 )       # [N]; verl clamps at 10
    s_i     = exp(log s_i)                 = (pi_theta(o_i|q) / pi_old(o_i|q)) ** (1 / |o_i|)
    A_i     = sum_t M_{i,t} A_{i,t} / L_i                                            # [N]
    l_i     = -min( s_i A_i , clip(s_i, 1 - clip_low, 1 + clip_high) A_i )           # [N]
    loss_{i,t} = l_i  for every t (padding included; the aggregation's mask drops it)   # [N, T]

Aggregation: meant for ``seq_mean_token_mean``, whose coefficient 1 / (B L_i) summed over the L_i copies of
l_i gives exactly the paper's J = (1/G) sum_i l_i. Under ``token_mean`` the same output is LUSPO
(arXiv:2602.05261, each l_i weighted by |o_i| / sum_j |o_j|); the combination is allowed on purpose.

Decisions: the paper's A_i is one number per sequence; when an estimator gives per-token advantages we use
their masked mean over the sequence (equal to A_i for GRPO-style advantages; the first valid token would
silently ignore the rest). Use ``gspo_token`` to keep per-token advantages. Only the upper side of log s is
clamped, as in verl: exp of a very negative value underflows to 0 harmlessly.

At theta = theta_old, s_i = 1 and grad l_i = -A_i (1/|o_i|) sum_t grad logp_{i,t}. Metrics (per token, the
sequence's value broadcast): ``clip_frac`` (sequences whose gradient the clip removed), ``ratio`` (s_i).
"""

from __future__ import annotations

from pydantic import Field

from rlvr.algorithms.registry import OBJECTIVES, ObjectiveInputs, ObjectiveOutput
from rlvr.lazy import torch
from rlvr.registry import Params

__all__ = ["GSPOParams", "gspo", "masked_seq_mean"]


class GSPOParams(Params):
    clip_low: float = Field(3e-4, ge=0.0, lt=1.0,
                            description="sequence ratio clipped below at 1 - clip_low (GSPO: 3e-4)")
    clip_high: float = Field(4e-4, ge=0.0, description="sequence ratio clipped above at 1 + clip_high (GSPO: 4e-4)")
    log_ratio_clamp: float = Field(10.0, gt=0.0, description="upper clamp on log s before exp (verl: 10)")


def masked_seq_mean(x: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
    """Mean of ``x`` [N, T] over each row's valid tokens -> [N]; padding values never enter, even inf/nan.

    ``where`` rather than ``x * mask`` because 0 * inf is nan. An all-padding row gives 0 (a ratio of 1).
    """
    valid = mask > 0
    total = torch.where(valid, x, torch.zeros_like(x)).sum(-1)
    return total / valid.sum(-1).clamp(min=1).to(x.dtype)


@OBJECTIVES.register("gspo", GSPOParams, traits=("clip_rule",))
def gspo(inp: ObjectiveInputs, p: GSPOParams) -> ObjectiveOutput:
    """GSPO sequence-ratio clipped surrogate (use with seq_mean_token_mean)."""
    log_s = masked_seq_mean(inp.logp - inp.old_logp, inp.mask).clamp(max=p.log_ratio_clamp)
    s = torch.exp(log_s)  # [N]
    adv = masked_seq_mean(inp.advantages.to(s.dtype), inp.mask)  # [N]
    shape = inp.logp.shape
    b = inp.ratio_bounds(p.clip_low, p.clip_high, s[:, None].expand(shape))
    low, high = (x[:, 0] if isinstance(x, torch.Tensor) else x for x in (b.low, b.high))  # one per sequence
    l1 = -adv * s
    l2 = -adv * torch.clamp(s, low, high)
    seq_loss = torch.maximum(l1, l2)  # [N]
    loss = seq_loss[:, None].expand(shape)  # each token carries its sequence's loss; see the docstring
    if b.keep is not None:
        loss = loss * b.keep
    metrics = {"clip_frac": (l2 > l1).float()[:, None].expand(shape).detach(),
               "ratio": s.detach()[:, None].expand(shape)}
    return loss, metrics

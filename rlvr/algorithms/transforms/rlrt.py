"""RLRT: RLVR with a Reversed Teacher (advantage transform ``rlrt``). RECONSTRUCTED.

Kim, Jeon, Li, Yang, "Rebellious Student: Reversing Teacher Signals ...", arXiv:2605.10781. Confirmed from the
abstract: the teacher is the same model given privileged information (the correct answer); the token
asymmetry is D_t = log P_T(o_t) - log P_S(o_t); on *correct* rollouts the tokens the teacher would not have
predicted (self-driven tokens) are up-weighted; GRPO otherwise. Reconstruction (docs/methods.md, `rlrt`) — the
RLSD/CEPO weight (cepo.py) with the sign reversed, on positive rows only:

    D_t     = sg[ teacher_logp_t - old_logp_t ]                                         [N, T]
    A_{i,t} <- A_{i,t} * [ (1 - lam) + lam * clip( exp(-D_t), 1 - eps_w, 1 + eps_w ) ]   if A_i > 0
    A_{i,t} <- A_{i,t}                                                                  if A_i <= 0

with A_i's sign taken from the row sum as in cepo.py. ``rlrt_decision`` adds the optional restriction to
decision points: the weight applies only where the position-level asymmetry
D̄_t = KL(P_S^t || P_T^t) (the extra ``teacher_kl``: full next-token distributions without and with the gold
answer in context) is at least ``threshold``; elsewhere A_{i,t} is kept. The threshold is a placeholder.
``lam`` and ``eps_w`` are placeholders (0.5, 0.2: CEPO's values). Cost: one teacher forward (prompt + gold
answer + completion) and the old log-probs; ``rlrt_decision`` two more forwards with full distributions.
"""

from __future__ import annotations

from pydantic import Field

from rlvr.algorithms.registry import ADVANTAGE_TRANSFORMS, TransformInputs, TransformOutput
from rlvr.lazy import torch
from rlvr.registry import Params

__all__ = ["RLRTParams", "RLRTDecisionParams", "rlrt", "rlrt_decision"]


class RLRTParams(Params):
    lam: float = Field(0.5, ge=0.0, le=1.0, description="mixing weight of the reversed-teacher token weight")
    eps_w: float = Field(0.2, ge=0.0, lt=1.0, description="the weight is clipped to [1 - eps_w, 1 + eps_w]")


@ADVANTAGE_TRANSFORMS.register("rlrt", RLRTParams, needs=("teacher_logp", "old_logp"))
def rlrt(inp: TransformInputs, p: RLRTParams) -> TransformOutput:
    """RLRT (reconstructed): up-weight tokens the answer-aware teacher disfavours, on correct rollouts."""
    mask = inp.mask
    adv = inp.advantages.to(torch.float64)
    d = (inp.extras["teacher_logp"] - inp.extras["old_logp"]).to(torch.float64)
    w = (1.0 - p.lam) + p.lam * torch.exp(-d).clamp(1.0 - p.eps_w, 1.0 + p.eps_w)
    positive = ((adv * mask).sum(-1, keepdim=True) > 0).expand_as(adv)
    weight = torch.where(positive, w, torch.ones_like(w))
    on = positive & mask.bool()
    return (adv * weight * mask).to(inp.advantages.dtype), {
        "weight_mean_positive": float(weight[on].mean()) if on.any() else 1.0,
        "asymmetry_mean": float((d * mask).sum() / mask.sum().clamp(min=1)),
    }


class RLRTDecisionParams(RLRTParams):
    threshold: float = Field(0.1, ge=0.0, description="decision points: positions with KL(P_S || P_T) >= this "
                                                       "(nats; a placeholder)")


@ADVANTAGE_TRANSFORMS.register("rlrt_decision", RLRTDecisionParams, needs=("teacher_logp", "old_logp", "teacher_kl"))
def rlrt_decision(inp: TransformInputs, p: RLRTDecisionParams) -> TransformOutput:
    """RLRT restricted to decision points: the reversed-teacher weight only where KL(P_S || P_T) >= threshold."""
    weighted, metrics = rlrt(inp, p)
    decision = (inp.extras["teacher_kl"] >= p.threshold) & inp.mask.bool()
    adv = torch.where(decision, weighted, (inp.advantages * inp.mask).to(weighted.dtype))
    return adv, {**metrics, "decision_frac": float(decision.sum() / inp.mask.sum().clamp(min=1))}

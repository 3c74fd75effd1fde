"""f-GRPO: a variational f-divergence estimate between the above-average (aligned) and below-average
(unaligned) completions of a group, with the policy-vs-reference log-ratio as the critic.

Haldar et al., "f-GRPO and Beyond: Divergence-Based RL Algorithms for General LLM Alignment", arXiv:2602.05946.
RECONSTRUCTED from the abstract (docs/methods.md, `f_grpo`): the critic link (identity), the sequence log-ratio and
beta are our reading. Per group, with Ā_i the row's mean advantage, P = {Ā > 0}, Q = {Ā < 0}:

    T_i  = beta sum_t M (logp - ref_logp)                        (critic: scaled sequence log-ratio to pi_ref)
    L_g  = -[ sum_{i in P} |Ā_i| T_i / sum_P |Ā|  -  sum_{i in Q} |Ā_i| f*(T_i) / sum_Q |Ā| ]   (an empty side: 0)
    f*(t) = exp(t - 1)   (divergence "kl")   |   t + t^2 / 4   (divergence "pearson", chi^2)
    loss = alpha * sum_g L_g / #groups of the minibatch

``alpha`` (default 1) is f-HAL's weight of this on-policy part, beside the ``f_preference`` loss term on
off-policy preference pairs at weight 1 - alpha (recipe ``f_hal``); the term shares :data:`CONJUGATES` and
:func:`sequence_critic` with this objective.

Needs reference log-probs (a reference model is loaded even with kl.coef 0). Returns the micro-batch's 0-dim
share of the minibatch loss. Metrics: ``critic`` (T).
"""

from __future__ import annotations

from typing import Literal

from pydantic import Field

from rlvr.algorithms.objectives.common import group_count, groups, masked_seq_mean, masked_seq_sum, require
from rlvr.algorithms.registry import OBJECTIVES, ObjectiveInputs, ObjectiveOutput
from rlvr.lazy import torch
from rlvr.registry import Params

__all__ = ["FGRPOParams", "f_grpo", "CONJUGATES", "Divergence", "sequence_critic"]

CONJUGATES = {
    "kl": lambda t: torch.exp(t - 1.0),
    "pearson": lambda t: t + t * t / 4.0,
}
Divergence = Literal["kl", "pearson"]  # the keys of CONJUGATES


def sequence_critic(logp: torch.Tensor, ref_logp: torch.Tensor, mask: torch.Tensor, beta: float) -> torch.Tensor:
    """``[N]`` critic ``T = beta * sum_t M (logp - ref_logp)``: the scaled sequence log-ratio to the reference."""
    return beta * masked_seq_sum(logp - ref_logp, mask)


class FGRPOParams(Params):
    divergence: Divergence = Field("kl", description="f-divergence: its convex conjugate f* is used on the "
                                                     "below-average side")
    beta: float = Field(0.1, gt=0.0, description="scale of the critic T = beta x sequence log-ratio to the reference")
    alpha: float = Field(1.0, ge=0.0, le=1.0, description="weight of this loss (f-HAL's alpha; the f_preference "
                                                          "term on preference pairs then has weight 1 - alpha)")


@OBJECTIVES.register("f_grpo", FGRPOParams, needs=("ref_logp",), traits=("whole_groups", "reduced_loss"))
def f_grpo(inp: ObjectiveInputs, p: FGRPOParams) -> ObjectiveOutput:
    """f-GRPO (reconstructed): variational f-divergence between above- and below-average completions."""
    gi = require(inp.group_index, "group ids (ObjectiveInputs.group_index)", "f_grpo")
    ref = require(inp.ref_logp, "reference log-probs (the 'ref_logp' extra)", "f_grpo")
    crit = sequence_critic(inp.logp, ref, inp.mask, p.beta)
    adv = masked_seq_mean(inp.advantages.to(crit.dtype), inp.mask)
    conj = CONJUGATES[p.divergence]
    total = crit.sum() * 0.0
    for rows in groups(gi):
        a, t = adv[rows], crit[rows]
        pos, neg = a > 0, a < 0
        if pos.any():
            total = total - (a[pos] * t[pos]).sum() / a[pos].sum()
        if neg.any():
            total = total + (a[neg].abs() * conj(t[neg])).sum() / a[neg].abs().sum()
    loss = p.alpha * total / group_count(inp)
    return loss, {"critic": crit.detach()[:, None].expand(inp.logp.shape)}

"""TPO: build a closed-form target distribution over the sampled group, then fit the policy to it by
cross-entropy; no ratios, no clipping, and the gradient p - q vanishes at the target.

Kaddour, "Target Policy Optimization", arXiv:2604.06159; code JeanKaddour/tpo, ``src/tpo/algorithms.py``
(``tpo_target``, ``anchored_tpo_cross_entropy_loss``). EXACT (paper + code). Per group g of K completions:

    ell_i   = sum_t M logp_{i,t}                         (sequence log-prob, with gradient)
    p_i     = softmax_{i in g}(ell)                      (the policy renormalised over the candidates)
    u_i     = (r_i - mean_g r) / std_g r   (population std; r_i - mean_g r when std <= std_floor)
    q_i     = softmax_{i in g}(ell_old_i + u_i / eta)    (anchor on; off: softmax(u / eta)); frozen
    loss    = -sum_g sum_{i in g} q_i log p_i / #groups of the minibatch;   d loss / d ell_i = (p_i - q_i) / #groups

ell_old sums the rollout engine's log-probs when it gives them (the code's rollout-time p_old), else the
trainer's old log-probs; either is fixed for the step, so q stays frozen over epochs and minibatches. The
advantage estimator is not used. All-equal rewards give q = p_old: zero gradient at theta_old.
Returns the micro-batch's 0-dim share of the minibatch loss. Metrics: ``target`` (q), ``policy`` (p).
"""

from __future__ import annotations

from pydantic import Field

from rlvr.algorithms.grouping import group_mean, group_std
from rlvr.algorithms.objectives.common import group_count, group_log_softmax, masked_seq_sum, require
from rlvr.algorithms.registry import OBJECTIVES, ObjectiveInputs, ObjectiveOutput
from rlvr.lazy import torch
from rlvr.registry import Params

__all__ = ["TPOParams", "tpo", "tpo_target"]


class TPOParams(Params):
    eta: float = Field(1.0, gt=0.0, description="temperature of the reward tilt u / eta (paper: 1)")
    anchor: bool = Field(True, description="tilt the old policy (q ~ p_old e^(u/eta)); off: q = softmax(u/eta)")
    std_floor: float = Field(1e-6, ge=0.0, description="below this group std, u = r - mean (no scaling)")


def tpo_target(rewards: torch.Tensor, old_seq_logp: torch.Tensor | None, group_index: torch.Tensor,
               p: TPOParams) -> torch.Tensor:
    """[N] log q, float64, detached."""
    r = rewards.to(torch.float64)
    std = group_std(r, group_index, unbiased=False)
    dev = r - group_mean(r, group_index)
    u = torch.where(std > p.std_floor, dev / std.clamp(min=1e-300), dev)
    logits = u / p.eta
    if p.anchor:
        logits = logits + old_seq_logp.detach().to(torch.float64)
    return group_log_softmax(logits, group_index).detach()


@OBJECTIVES.register("tpo", TPOParams, traits=("whole_groups", "reduced_loss"))
def tpo(inp: ObjectiveInputs, p: TPOParams) -> ObjectiveOutput:
    """TPO: cross-entropy to a reward-tilted target over each group."""
    gi = require(inp.group_index, "group ids (ObjectiveInputs.group_index)", "tpo")
    rewards = require(inp.rewards, "the rewards (ObjectiveInputs.rewards)", "tpo")
    old = inp.behaviour_logp if inp.behaviour_logp is not None else inp.old_logp
    log_q = tpo_target(rewards, masked_seq_sum(old, inp.mask), gi, p).to(inp.logp.dtype)
    log_p = group_log_softmax(masked_seq_sum(inp.logp, inp.mask), gi)
    loss = -(log_q.exp() * log_p).sum() / group_count(inp)
    shape = inp.logp.shape
    return loss, {"target": log_q.exp()[:, None].expand(shape), "policy": log_p.detach().exp()[:, None].expand(shape)}

"""ConSPO: a group-wise InfoNCE loss contrasting each verified positive's length-normalised log-likelihood
against the negatives of its group, with a margin that grows over training.

"Revisiting RLVR from a Contrastive Perspective" (ConSPO), arXiv:2605.12969. RECONSTRUCTED from the abstract (code
not released; docs/methods.md, `conspo`): the margin schedule, tau and the defaults are our reading. Per group with
positives P (reward > label_threshold) and negatives N:

    s_i  = (1/L_i) sum_t M logp_{i,t}                                  (current policy, with gradient)
    m    = margin_max * step / total_steps  (schedule "linear")  |  margin_max  ("constant")
    L_g  = -(1/|P|) sum_{i in P} log[ e^{(s_i - m)/tau} / (e^{(s_i - m)/tau} + sum_{j in N} e^{s_j/tau}) ]
    loss = sum_g L_g / #groups of the minibatch                  (a group without P or without N adds 0)

Positives get gradient weight (1 - p_i)/tau, negatives their softmax share: poorly separated positives and
high-scoring negatives are pushed hardest. The advantage estimator is not used.
Returns the micro-batch's 0-dim share of the minibatch loss. Metrics: ``score`` (s), ``margin``.
"""

from __future__ import annotations

from typing import Literal

from pydantic import Field

from rlvr.algorithms.objectives.common import group_count, groups, masked_seq_mean, require
from rlvr.algorithms.registry import OBJECTIVES, ObjectiveInputs, ObjectiveOutput
from rlvr.lazy import torch
from rlvr.registry import Params

__all__ = ["ConSPOParams", "conspo", "conspo_margin"]


class ConSPOParams(Params):
    tau: float = Field(1.0, gt=0.0, description="InfoNCE temperature")
    margin_max: float = Field(0.1, ge=0.0, description="largest margin subtracted from positive scores")
    margin_schedule: Literal["linear", "constant"] = Field(
        "linear", description="margin from 0 to margin_max over train.steps, or margin_max throughout")
    label_threshold: float = Field(0.5, description="a completion is positive when its reward exceeds this")


def conspo_margin(p: ConSPOParams, step: int, total_steps: int) -> float:
    if p.margin_schedule == "constant":
        return p.margin_max
    return p.margin_max * min(step / max(total_steps, 1), 1.0)


@OBJECTIVES.register("conspo", ConSPOParams, traits=("whole_groups", "reduced_loss"))
def conspo(inp: ObjectiveInputs, p: ConSPOParams) -> ObjectiveOutput:
    """ConSPO (reconstructed): InfoNCE of positives against the group's negatives, scheduled margin."""
    gi = require(inp.group_index, "group ids (ObjectiveInputs.group_index)", "conspo")
    rewards = require(inp.rewards, "the rewards (ObjectiveInputs.rewards)", "conspo")
    s = masked_seq_mean(inp.logp, inp.mask)
    m = conspo_margin(p, inp.step, inp.total_steps)
    total = s.sum() * 0.0  # keeps the graph when no group has both classes
    for rows in groups(gi):
        pos = rows[rewards[rows] > p.label_threshold]
        neg = rows[rewards[rows] <= p.label_threshold]
        if len(pos) == 0 or len(neg) == 0:
            continue
        x = (s[pos] - m) / p.tau  # [P]
        negs = (s[neg] / p.tau)[None, :].expand(len(pos), -1)  # [P, N]
        log_den = torch.logsumexp(torch.cat([x[:, None], negs], dim=1), dim=1)
        total = total + (log_den - x).mean()
    loss = total / group_count(inp)
    shape = inp.logp.shape
    return loss, {"score": s.detach()[:, None].expand(shape), "margin": torch.full(shape, m, dtype=s.dtype)}

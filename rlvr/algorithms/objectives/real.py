"""REAL: rewards as class labels; the policy's length-normalised log-ratio is the logit, giving monotone,
bounded gradient weights per completion.

"Rewards as Labels: Revisiting RLVR from a Classification Perspective" (REAL), arXiv:2602.05630. RECONSTRUCTED from
the abstract (docs/methods.md, `real`): the anchor form (one anchor logit fixed at 0) is our reading. Per
completion, z_i = (1/L_i) sum_t M (logp - old_logp):

    variant "bce":     loss = sum_i BCEWithLogits(z_i, r_i) / B                  (rewards in [0, 1] as labels)
    variant "anchor":  L_g  = log(1 + sum_{j in N} e^{z_j}) + log(1 + sum_{i in P} e^{-z_i})
                       loss = sum_g L_g / #groups of the minibatch
                       (P: reward > label_threshold, N: the rest of the group)

In the anchor form a positive's gradient is minus its share against the anchor and the other positives, a
negative's its share against the anchor and the other negatives: both in (0, 1), monotone in z. At
theta = theta_old (z = 0): BCE = ln 2 with d/dz = 1/2 - r; one positive and one negative give L = 2 ln 2 and
d/dz = -1/2, +1/2. Unlike GRPO, a group with no positive still pushes its negatives down (and one with
no negative its positives up). The advantage estimator is not used. Returns the micro-batch's 0-dim share
of the minibatch loss. Metrics: ``score`` (z).
"""

from __future__ import annotations

from typing import Literal

from pydantic import Field

from rlvr.algorithms.objectives.common import (binary_labels, group_count, groups, masked_seq_mean, require,
                                               row_count)
from rlvr.algorithms.registry import OBJECTIVES, ObjectiveInputs, ObjectiveOutput
from rlvr.lazy import F, torch
from rlvr.registry import Params

__all__ = ["REALParams", "real"]


class REALParams(Params):
    variant: Literal["anchor", "bce"] = Field("anchor", description="anchor-logit classification loss, or vanilla "
                                                                    "BCE on each completion")
    label_threshold: float = Field(0.5, description="anchor: a completion is positive when its reward exceeds this")


def _log1p_sum_exp(x: torch.Tensor) -> torch.Tensor:
    """log(1 + sum_j e^{x_j}) (the anchor logit 0 joins the sum); 0 for an empty ``x``."""
    return torch.logsumexp(torch.cat([x.new_zeros(1), x]), dim=0)


@OBJECTIVES.register("real", REALParams, traits=("whole_groups", "reduced_loss"))
def real(inp: ObjectiveInputs, p: REALParams) -> ObjectiveOutput:
    """REAL (reconstructed): classification of completions by reward on the sequence log-ratio."""
    rewards = require(inp.rewards, "the rewards (ObjectiveInputs.rewards)", "real")
    z = masked_seq_mean(inp.logp - inp.old_logp, inp.mask)
    if p.variant == "bce":
        labels = binary_labels(rewards, "real").to(z.dtype)
        loss = F.binary_cross_entropy_with_logits(z, labels, reduction="sum") / row_count(inp)
    else:
        gi = require(inp.group_index, "group ids (ObjectiveInputs.group_index)", "real")
        total = z.sum() * 0.0
        for rows in groups(gi):
            pos = rewards[rows] > p.label_threshold
            total = total + _log1p_sum_exp(z[rows[~pos]]) + _log1p_sum_exp(-z[rows[pos]])
        loss = total / group_count(inp)
    return loss, {"score": z.detach()[:, None].expand(inp.logp.shape)}

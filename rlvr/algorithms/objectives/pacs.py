"""PACS: the reward as a binary label, the (group-centred) policy log-ratio as the classifier's logit, and a
class-balanced cross-entropy; its gradient is a policy gradient with an implicit critic.

PACS, "imPlicit Actor-Critic coupling via Supervised learning" (arXiv id not known; docs/methods.md, `pacs`); code
ritzz-ai/PACS, ``src/pacs/pacs_core_algos.py::compute_pacs_loss``. EXACT (code). Per completion i, [N]:

    psi_i  = beta sum_t (logp - old_logp)          (score "log_ratio_sum", the code's reward_method "1")
           | beta mean_t logp                      (score "mean_logp", reward_method "2")
    psi^_i = psi_i - mean_{j != i in g} psi_j      (centring "rloo"; a group of one keeps psi)
           | (psi_i - mean_g psi) / (std_g psi + 1e-6), unbiased std   (centring "grpo")  |  psi_i ("none")
    w_i    = G / (K count_g(r_i))   when the group's K distinct rewards are > 1 (sklearn "balanced"), else 1
    loss   = sum_i w_i BCEWithLogits(psi^_i, r_i) / B        (B = completions in the minibatch)

Rewards are the labels and must lie in [0, 1]. At theta = theta_old psi = 0, the loss is mean(w) ln 2 and
d loss / d psi^_i = w_i (1/2 - r_i) / B. Returns the micro-batch's 0-dim share of the minibatch loss.
Metrics: ``score`` (psi^), ``weight`` (w).
"""

from __future__ import annotations

from typing import Literal

from pydantic import Field

from rlvr.algorithms.objectives.common import (binary_labels, group_total, masked_seq_mean, masked_seq_sum,
                                               require, row_count)
from rlvr.algorithms.registry import OBJECTIVES, ObjectiveInputs, ObjectiveOutput
from rlvr.lazy import F, torch
from rlvr.registry import Params

__all__ = ["PACSParams", "pacs", "balanced_weights"]


class PACSParams(Params):
    beta: float = Field(1.0, gt=0.0, description="scale of the score psi (paper: 1.0; 2.0 also run)")
    score: Literal["log_ratio_sum", "mean_logp"] = Field(
        "log_ratio_sum", description="psi = beta sum_t (logp - old_logp), or beta mean_t logp")
    centring: Literal["rloo", "grpo", "none"] = Field("rloo", description="how psi is centred within its group")
    class_weights: bool = Field(True, description="class-balanced weights within each group")


def balanced_weights(labels: torch.Tensor, group_index: torch.Tensor) -> torch.Tensor:
    """[N] sklearn-"balanced" class weights within each group: G / (K count(label)); 1 for a one-class group."""
    same_group = group_index[:, None] == group_index[None, :]
    count = (same_group & (labels[:, None] == labels[None, :])).sum(-1).to(torch.float64)
    classes = (same_group.to(torch.float64) / count[None, :]).sum(-1)  # sum of 1/count over the group = K
    size = same_group.sum(-1).to(torch.float64)
    return torch.where(classes > 1.5, size / (classes.round() * count), torch.ones_like(count))


@OBJECTIVES.register("pacs", PACSParams, traits=("whole_groups", "reduced_loss"))
def pacs(inp: ObjectiveInputs, p: PACSParams) -> ObjectiveOutput:
    """PACS: class-balanced BCE on the group-centred log-ratio score."""
    gi = require(inp.group_index, "group ids (ObjectiveInputs.group_index)", "pacs")
    labels = binary_labels(inp.rewards, "pacs")
    if p.score == "log_ratio_sum":
        psi = p.beta * masked_seq_sum(inp.logp - inp.old_logp, inp.mask)
    else:
        psi = p.beta * masked_seq_mean(inp.logp, inp.mask)
    size = group_total(torch.ones_like(psi), gi)
    if p.centring == "rloo":
        others = (group_total(psi, gi) - psi) / (size - 1).clamp(min=1)
        psi_hat = psi - torch.where(size > 1, others, torch.zeros_like(others))
    elif p.centring == "grpo":
        dev = psi - group_total(psi, gi) / size
        var = group_total(dev * dev, gi) / (size - 1).clamp(min=1)
        psi_hat = dev / (var.clamp(min=1e-24).sqrt() + 1e-6)  # clamp: sqrt's gradient at 0 is inf
    else:
        psi_hat = psi
    w = balanced_weights(labels, gi) if p.class_weights else torch.ones_like(labels)
    w = w.to(psi.dtype)
    bce = F.binary_cross_entropy_with_logits(psi_hat, labels.to(psi.dtype), reduction="none")
    loss = (w * bce).sum() / row_count(inp)
    shape = inp.logp.shape
    return loss, {"score": psi_hat.detach()[:, None].expand(shape), "weight": w[:, None].expand(shape)}

"""Trajectory balance with the partition function as an accuracy estimate: PACED-RL's objective (``tb``).

Kim, Kim, Kim, Lee, Rhee, Jung 2026, "Beyond Normalization: Rethinking the Partition Function as a Difficulty
Scheduler for RLVR", arXiv:2602.12642 (no code). METHODS H9, RECONSTRUCTED (with derivation). The target is
pi*(y|x) proportional to pi_b(y|x) exp(beta r(x, y)); per completion y_i of prompt x:

    delta_i = log Z(x) + log pi_theta(y_i|x) - beta r_i - log pi_b(y_i|x)       (sums over y_i's tokens;
                                                                                 means with ``length_norm``)
    L       = (1 / #rows) sum_i delta_i^2                                        (over the whole minibatch)

``pi_b`` is the frozen reference (``base: ref``, extra ``ref_logp``; the reference is loaded either way) or
the policy that sampled the batch (``base: old``). log Z(x) is each group's least-squares optimum, log Z = mean_{i in group}(beta r_i +
log pi_b(y_i) - log pi_theta(y_i)), detached: the variance form of trajectory balance (the paper learns
log Z_phi; at the optimum the two agree). With binary rewards Z(x) = E_{pi_b}[e^{beta r}] = 1 + p(x)(e^beta
- 1), so the metric ``accuracy_estimate`` is p_hat = (Z - 1)/(e^beta - 1), clipped to [0, 1], the
accuracy PACED-RL schedules prompts by (here reported per step; the ``paced`` sampler still reads the run's
decayed pass rates). Groups are kept whole (log Z is per group). Metrics: ``delta`` (|delta_i|),
``log_z``, ``accuracy_estimate`` (per row, its group's).
"""

from __future__ import annotations

import math
from typing import Literal

from pydantic import Field

from rlvr.algorithms.objectives.common import groups, masked_seq_sum, require, row_count
from rlvr.algorithms.registry import OBJECTIVES, ObjectiveInputs, ObjectiveOutput
from rlvr.lazy import torch
from rlvr.registry import Params

__all__ = ["TBParams", "tb", "accuracy_from_log_z"]


class TBParams(Params):
    beta: float = Field(1.0, gt=0.0, description="reward temperature of the target pi_b exp(beta r)")
    base: Literal["ref", "old"] = Field("ref", description="pi_b: the frozen reference or the sampling policy")
    length_norm: bool = Field(False, description="mean instead of sum of token log-probs in delta (FlowRL's form)")


def accuracy_from_log_z(log_z: torch.Tensor, beta: float) -> torch.Tensor:
    """p_hat = (e^{log Z} - 1) / (e^beta - 1), clipped to [0, 1]."""
    return ((log_z.exp() - 1.0) / math.expm1(beta)).clamp(0.0, 1.0)


@OBJECTIVES.register("tb", TBParams, needs=("ref_logp",), traits=("whole_groups", "reduced_loss"))
def tb(inp: ObjectiveInputs, p: TBParams) -> ObjectiveOutput:
    """Trajectory balance toward pi_b exp(beta r), log Z per group at its least-squares optimum."""
    gi = require(inp.group_index, "group ids (ObjectiveInputs.group_index)", "tb")
    r = require(inp.rewards, "the rewards (ObjectiveInputs.rewards)", "tb").to(inp.logp.dtype)
    base = inp.old_logp if p.base == "old" else require(inp.ref_logp, "reference log-probs", "tb")
    n_tok = inp.mask.sum(-1).clamp(min=1.0)
    lp = masked_seq_sum(inp.logp, inp.mask)
    lb = masked_seq_sum(base.detach(), inp.mask)
    if p.length_norm:
        lp, lb = lp / n_tok, lb / n_tok
    resid = p.beta * r + lb - lp  # delta_i = log Z - resid_i
    log_z = torch.zeros_like(lp)
    for rows in groups(gi):
        log_z[rows] = resid[rows].detach().mean()
    delta = log_z - resid
    loss = (delta ** 2).sum() / row_count(inp)
    shape = inp.logp.shape
    acc = accuracy_from_log_z(log_z.detach(), p.beta)
    return loss, {"delta": delta.detach().abs()[:, None].expand(shape), "log_z": log_z.detach()[:, None].expand(shape),
                  "accuracy_estimate": acc[:, None].expand(shape)}

"""Trajectory balance with the partition function as an accuracy estimate: PACED-RL's objective (``tb``).

Kim, Kim, Kim, Lee, Rhee, Jung 2026, "Beyond Normalization: Rethinking the Partition Function as a Difficulty
Scheduler for RLVR", arXiv:2602.12642 (no code; docs/methods.md, `tb`). RECONSTRUCTED (with derivation). The target
is pi*(y|x) proportional to pi_b(y|x) exp(beta r(x, y)); per completion y_i of prompt x:

    delta_i = log Z(x) + log pi_theta(y_i|x) - beta r_i - log pi_b(y_i|x)       (sums over y_i's tokens;
                                                                                 means with ``length_norm``)
    L       = (1 / #rows) sum_i delta_i^2                                        (over the whole minibatch)

``pi_b`` is the frozen reference (``base: ref``, extra ``ref_logp``; the reference is loaded either way) or
the policy that sampled the batch (``base: old``). log Z(x) (detached in L) is, by ``log_z``:

- ``optimum`` (default): each group's least-squares optimum, log Z = mean_{i in group}(beta r_i + log pi_b(y_i)
  - log pi_theta(y_i)): the variance form of trajectory balance (at the optimum it equals the learned one);
- ``learned``: the paper's learned log Z_phi(x), a per-prompt table keyed by the example id (extra
  ``prompt_key``) trained by plain gradient descent on the same squared residuals with its own step size
  ``z_lr`` (:mod:`rlvr.algorithms.objectives.log_z_table`: log Z(x) <- log Z(x) - z_lr * 2 sum_{i in x} delta_i
  / n, n = the prompt's rows (``z_loss: prompt``) or the minibatch's (``batch``: the gradient of L itself)),
  started at ``z_init`` (a value, or the prompt's first least-squares optimum). The table is the objective's
  state: saved in checkpoints, and read by the ``paced`` sampler and the ``paced_replay`` budget. One process
  only (a data-parallel run would step each rank's micro-batches on its own copy).

With binary rewards Z(x) = E_{pi_b}[e^{beta r}] = 1 + p(x)(e^beta - 1), so the metric ``accuracy_estimate``
is p_hat = (Z - 1)/(e^beta - 1), clipped to [0, 1], the accuracy PACED-RL schedules prompts by. Groups are
kept whole (log Z is per prompt). Metrics: ``delta`` (|delta_i|), ``log_z``, ``accuracy_estimate`` (per row,
its prompt's, before this call's step).
"""

from __future__ import annotations

import math
from typing import Literal, Union

from pydantic import Field

from rlvr.algorithms.extra_producers import ExtraContext, produces
from rlvr.algorithms.objectives.common import groups, masked_seq_sum, require, row_count
from rlvr.algorithms.objectives.log_z_table import LogZTable
from rlvr.algorithms.registry import OBJECTIVES, ObjectiveInputs, ObjectiveOutput
from rlvr.core.prompt_keys import prompt_keys
from rlvr.lazy import torch
from rlvr.registry import Params

__all__ = ["TBParams", "tb", "accuracy_from_log_z", "new_table"]


class TBParams(Params):
    beta: float = Field(1.0, gt=0.0, description="reward temperature of the target pi_b exp(beta r)")
    base: Literal["ref", "old"] = Field("ref", description="pi_b: the frozen reference or the sampling policy")
    length_norm: bool = Field(False, description="mean instead of sum of token log-probs in delta (FlowRL's form)")
    log_z: Literal["optimum", "learned"] = Field("optimum", description="each group's least-squares log Z, or a "
                                                                        "learned per-prompt table (the paper's)")
    z_lr: float = Field(0.25, gt=0.0, description="gradient step size of the learned log Z table (RECONSTRUCTED)")
    z_init: Union[Literal["optimum"], float] = Field("optimum", description="a new prompt's log Z: a value, or its "
                                                                            "first least-squares optimum")
    z_loss: Literal["prompt", "batch"] = Field("prompt", description="the learned table descends each prompt's "
                                                                     "mean squared residual, or the minibatch loss")


def new_table(p: TBParams) -> LogZTable | None:
    """The learned log Z table (``log_z: learned``); no state otherwise."""
    return LogZTable(p.beta, p.z_lr, p.z_init, p.z_loss) if p.log_z == "learned" else None


def accuracy_from_log_z(log_z: torch.Tensor, beta: float) -> torch.Tensor:
    """p_hat = (e^{log Z} - 1) / (e^beta - 1), clipped to [0, 1]."""
    return ((log_z.exp() - 1.0) / math.expm1(beta)).clamp(0.0, 1.0)


def _learned_log_z(inp: ObjectiveInputs, resid: torch.Tensor, table: LogZTable | None) -> torch.Tensor:
    """Each row's prompt's log Z from the table (before this call's gradient step, which it then takes)."""
    if table is None:
        raise ValueError("tb with log_z: learned needs its state (the log Z table): call it through "
                         "rlvr.algorithms.registry.call with the state from new_table(params)")
    dist = torch.distributed
    if dist.is_available() and dist.is_initialized() and dist.get_world_size() > 1:
        raise ValueError("tb with log_z: learned keeps its table in one process; data-parallel runs are not "
                         "supported (use log_z: optimum)")
    keys = require(inp.extras.get("prompt_key"), "the extra prompt_key", "tb").cpu()
    uniq, inv = torch.unique(keys, return_inverse=True)
    rho = resid.detach().to(torch.float64).cpu()
    n = torch.bincount(inv, minlength=len(uniq)).to(torch.float64)
    rho_sum = torch.zeros(len(uniq), dtype=torch.float64).index_add(0, inv, rho)
    before = table.step(uniq.tolist(), rho_sum.numpy(), n.numpy(), row_count(inp))
    return torch.as_tensor(before, dtype=torch.float64)[inv].to(resid.device, resid.dtype)


@OBJECTIVES.register("tb", TBParams, state=new_table, needs=("ref_logp", "prompt_key"),
                     traits=("whole_groups", "reduced_loss"))
def tb(inp: ObjectiveInputs, p: TBParams, state: LogZTable | None = None) -> ObjectiveOutput:
    """Trajectory balance toward pi_b exp(beta r); log Z per group at its least-squares optimum or learned per prompt."""
    gi = require(inp.group_index, "group ids (ObjectiveInputs.group_index)", "tb")
    r = require(inp.rewards, "the rewards (ObjectiveInputs.rewards)", "tb").to(inp.logp.dtype)
    base = inp.old_logp if p.base == "old" else require(inp.ref_logp, "reference log-probs", "tb")
    n_tok = inp.mask.sum(-1).clamp(min=1.0)
    lp = masked_seq_sum(inp.logp, inp.mask)
    lb = masked_seq_sum(base.detach(), inp.mask)
    if p.length_norm:
        lp, lb = lp / n_tok, lb / n_tok
    resid = p.beta * r + lb - lp  # delta_i = log Z - resid_i
    if p.log_z == "learned":
        log_z = _learned_log_z(inp, resid, state)
    else:
        log_z = torch.zeros_like(lp)
        for rows in groups(gi):
            log_z[rows] = resid[rows].detach().mean()
    delta = log_z - resid
    loss = (delta ** 2).sum() / row_count(inp)
    shape = inp.logp.shape
    acc = accuracy_from_log_z(log_z.detach(), p.beta)
    return loss, {"delta": delta.detach().abs()[:, None].expand(shape), "log_z": log_z.detach()[:, None].expand(shape),
                  "accuracy_estimate": acc[:, None].expand(shape)}


@produces("prompt_key")
def _prompt_key(ctx: ExtraContext, keys: frozenset[str]) -> dict:
    """Each row's example id as an int64 key, for the learned log Z table (no model pass)."""
    return {"prompt_key": torch.tensor(prompt_keys(ex.id for ex in ctx.examples), dtype=torch.int64)}

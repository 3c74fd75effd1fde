"""A-GRAE, asymmetric group relative advantage estimation (Yu et al. 2026, "Unveiling Implicit Advantage
Symmetry", arXiv:2602.05548; code ``Yu7-code/A-GRAE``, ``compute_grpo_outcome_advantage``, the
``grpo_weight == 2.0`` branch). EXACT (code), always on; see the caveat below.

With A0 the GRPO advantage (``std: none`` gives the Dr. GRPO variant), mu_q the group's success rate and
pbar the batch accuracy (the mean of mu_q over the step's groups, each group counted once):

    A_hard = 0.5 A0 / (sqrt(mu_q) + eps)          (large on hard prompts)
    A_easy = 0.5 A0 / (1 - sqrt(mu_q) + eps)      (large on easy prompts)
    A      = (1 - pbar) A_easy + pbar A_hard      (easy focus while the batch accuracy is low, hard later)
    A      = A min(1, pbar / alpha)   where A > 0 (positive advantages damped while the model is weak)
                                                                         [N], broadcast to [N, T]

mu_q and pbar come from correctness (the ``correct`` score component, else binary rewards), A0 from the
training rewards. Stateless: pbar is the current batch's. A group whose success rate is 0 or 1 gets 0: one
of the rescalings divides by eps there, and A0 is 0 anyway unless the rewards vary beyond correctness or the
group has one row.

CAVEAT (released code): the trainer schedules ``grpo_weight`` linearly from 2.0 to 1.0 over training and the
A-GRAE branch runs only when it equals 2.0 exactly; the step counter is 1 at the first update, so the
scheduled value is 2 - 1/T there and the branch never fires as released. This implements the paper's formula
on every step; reproducing the released runs' numbers would mean using plain ``grpo``.
"""

from __future__ import annotations

from typing import Literal

from pydantic import Field

from rlvr.algorithms.advantages.grpo import GRPOAdvantageParams, grpo_advantage
from rlvr.algorithms.registry import ADVANTAGES, AdvantageInputs
from rlvr.algorithms.transforms.difficulty import group_ids, success_rate
from rlvr.lazy import torch
from rlvr.registry import Params

__all__ = ["AGRAEParams", "a_grae_advantage"]


class AGRAEParams(Params):
    alpha: float = Field(1.0, gt=0.0, description="positive advantages are scaled by min(1, pbar / alpha) "
                                                  "(1 for math, 0.5 for geo3k / medical)")
    std: Literal["unbiased", "population", "none"] = Field("unbiased", description="A0's std (none: Dr. GRPO)")
    eps: float = Field(1e-6, ge=0.0, description="added to the std and to both rescaling denominators")


@ADVANTAGES.register("a_grae", AGRAEParams)
def a_grae_advantage(inp: AdvantageInputs, p: AGRAEParams) -> torch.Tensor:
    """A-GRAE: GRPO advantage blended between easy and hard focus by batch accuracy, positives damped."""
    a0 = grpo_advantage(inp, GRPOAdvantageParams(std=p.std, eps=p.eps)).to(torch.float64)
    mu = success_rate(inp.rewards, inp.components, inp.group_index)
    inv, g = group_ids(inp.group_index)
    per_group = torch.zeros(g, dtype=torch.float64).index_copy_(0, inv, mu)
    pbar = float(per_group.mean())
    root = mu.sqrt()
    hard = 0.5 * a0 / (root + p.eps)
    easy = 0.5 * a0 / (1.0 - root + p.eps)
    adv = (1.0 - pbar) * easy + pbar * hard
    adv = torch.where(adv > 0, adv * min(1.0, pbar / p.alpha), adv)
    # mu_q in {0, 1}: a rescaling divides by eps (A0 is non-zero only for a group of one or non-binary rewards)
    return torch.where((mu == 0) | (mu == 1), torch.zeros_like(adv), adv).to(torch.float32)

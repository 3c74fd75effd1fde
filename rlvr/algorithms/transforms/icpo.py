"""ICPO's annealed expert bonus and expert-region rejection (reward transform ``icpo_bonus``, advantage
transform ``reject_guided``).

Huang, Tang, Liu, Bai, Yang, Wu 2025, "Think Outside the Policy: In-Context Steered Policy Optimization",
arXiv:2510.26519; code ``Celine-hxy/ICPO`` (``utils/reward_score.py::compute_score_icpo_bonus``, ``decay_by_step``;
docs/methods.md, `icpo_bonus`). The guided rows (extra ``guided``) are the off-policy rollouts sampled under
in-context demonstrations (``rollout.guidance.demos``).

``icpo_bonus`` (EXACT from code; ``correct`` is the score component, else reward >= 1):

    r_i <- r_i + beta d(t)   for a guided row that is correct,   r_i otherwise                          [N]
    d(t) = max(0, 1 - t / T)   (linear, the official setting; T = 400 there, default train.steps here)
         = (1 + cos(pi min(t, T) / T)) / 2   (cosine)   or   exp(-t / alpha)   (exp)

so correct expert-steered rollouts outrank correct on-policy ones early in training and the same later.

``reject_guided`` (RECONSTRUCTED: the paper's "expert region reject sampling" filters unreliable off-policy
trajectories; the released code has no separate filter): after the advantages are formed over the whole
mixed group, a guided row that is not correct gets advantage 0 (it never pushes the policy toward or away
from the demonstrations' region); with ``min_mean_logp`` set, so does a correct guided row whose mean token
log-probability under the plain prompt (extra ``old_logp``) is below it (too unlikely for the policy).
"""

from __future__ import annotations

import math
from typing import Literal

from pydantic import Field

from rlvr.algorithms.registry import ADVANTAGE_TRANSFORMS, REWARD_TRANSFORMS, TransformInputs, TransformOutput
from rlvr.lazy import torch
from rlvr.registry import Params

__all__ = ["ICPOBonusParams", "RejectGuidedParams", "bonus_decay", "icpo_bonus", "reject_guided", "guided_flags"]


class ICPOBonusParams(Params):
    beta: float = Field(1.0, ge=0.0, description="bonus of a correct guided row at step 0")
    schedule: Literal["linear", "cosine", "exp"] = Field("linear", description="how the bonus decays")
    anneal_steps: int | None = Field(None, gt=0, description="T: steps to reach 0 (None: train.steps; the "
                                                             "official script: 400)")
    alpha: float = Field(12.0, gt=0.0, description="exp schedule: d = exp(-t / alpha)")


class RejectGuidedParams(Params):
    min_mean_logp: float | None = Field(None, description="also reject correct guided rows whose mean log-prob "
                                                          "under the plain prompt is below this (None: off)")


def bonus_decay(step: int, p: ICPOBonusParams, total_steps: int) -> float:
    """d(t) of the module docstring."""
    big_t = p.anneal_steps or total_steps
    if p.schedule == "linear":
        return max(0.0, 1.0 - step / big_t)
    if p.schedule == "cosine":
        return 0.5 * (1.0 + math.cos(math.pi * min(step, big_t) / big_t))
    return math.exp(-step / p.alpha)


def guided_flags(inp: TransformInputs) -> tuple[torch.Tensor, torch.Tensor]:
    """``(guided [N] bool, correct [N] bool)`` of the batch."""
    g = inp.extras["guided"]
    guided = (g.max(-1).values if g.dim() == 2 and g.shape[-1] else g.reshape(-1)[: len(inp.rewards)]) > 0
    return guided.to(inp.rewards.device), inp.correct


@REWARD_TRANSFORMS.register("icpo_bonus", ICPOBonusParams, needs=("guided",))
def icpo_bonus(inp: TransformInputs, p: ICPOBonusParams) -> TransformOutput:
    """ICPO: + beta d(t) for correct rollouts steered by demonstrations, annealed to 0."""
    guided, correct = guided_flags(inp)
    d = bonus_decay(inp.step, p, inp.total_steps)
    hit = guided & correct
    r = inp.rewards.to(torch.float64) + p.beta * d * hit.to(torch.float64)
    return r, {"bonus": p.beta * d, "bonus_rows": float(hit.double().sum())}


@ADVANTAGE_TRANSFORMS.register("reject_guided", RejectGuidedParams, needs=("guided", "old_logp"))
def reject_guided(inp: TransformInputs, p: RejectGuidedParams) -> TransformOutput:
    """ICPO's expert-region rejection: guided rows that are wrong (or too unlikely) get advantage 0."""
    guided, correct = guided_flags(inp)
    reject = guided & ~correct
    if p.min_mean_logp is not None:
        lp = inp.extras["old_logp"].to(torch.float64) * inp.mask
        mean = lp.sum(-1) / inp.mask.sum(-1).clamp(min=1)
        reject = reject | (guided & correct & (mean.to(guided.device) < p.min_mean_logp))
    out = inp.advantages * (~reject).to(inp.advantages.dtype)[:, None]
    n_guided = float(guided.double().sum())
    return out, {"rejected_frac": float(reject.double().sum()) / n_guided if n_guided else 0.0}

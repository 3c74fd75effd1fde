"""CDE's actor curiosity bonus (Dai et al. 2025, Curiosity-Driven Exploration, arXiv:2509.09675).
RECONSTRUCTED: confirmed are the actor bonus = perplexity of the generated response, added to the reward
with a calibrated clip; the exact form (log-perplexity, a min-clip) and the constants are our best guess.

With old_logp [N, T] the sampling policy's token log-probs (detached):

    B_i  = -sum_t M_{i,t} old_logp_{i,t} / |o_i|         (log-perplexity of completion i; 0 if empty)
    r_i <- r_i + omega min(B_i, kappa)                                  [N]

Among wrong answers the confident (low-perplexity) ones get the smallest bonus, hence the most negative
group-relative advantage: the bonus penalises overconfident errors and spreads mass among correct answers.

The critic bonus (the spread of value estimates across the heads of a bootstrapped multi-head critic) is the
``gae`` advantage's ``std_bonus`` with ``algorithm.critic.heads >= 2`` (:mod:`rlvr.learners.critic`).
"""

from __future__ import annotations

from pydantic import Field

from rlvr.algorithms.registry import REWARD_TRANSFORMS, TransformInputs, TransformOutput
from rlvr.algorithms.transforms.difficulty import seq_mean_logp
from rlvr.lazy import torch
from rlvr.registry import Params

__all__ = ["CDEParams", "cde_transform"]


class CDEParams(Params):
    omega: float = Field(0.5, ge=0.0, description="bonus scale (placeholder: the paper's value was not read)")
    kappa: float = Field(1.0, gt=0.0, description="clip on the log-perplexity before scaling (placeholder)")


@REWARD_TRANSFORMS.register("cde", CDEParams, needs=("old_logp",))
def cde_transform(inp: TransformInputs, p: CDEParams) -> TransformOutput:
    """CDE actor bonus: reward plus omega times the clipped log-perplexity of the completion."""
    bonus = p.omega * (-seq_mean_logp(inp.extras["old_logp"], inp.mask)).clamp(max=p.kappa)
    return inp.rewards.to(torch.float64) + bonus, {"bonus_mean": float(bonus.mean())}

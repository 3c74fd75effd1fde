"""LENS, confidence-weighted rewards for incorrect completions (Feng et al. 2025, "Don't Waste Mistakes:
Leveraging Negative RL-Groups via Confidence Reweighting", arXiv:2510.08696). RECONSTRUCTED: confirmed is a
penalty on incorrect responses that grows with the model's confidence in them, derived from an MLE
reward-modelling objective, which makes all-wrong groups informative; the exact normaliser and lambda are
unverified.

With c_i the policy's length-normalised probability of its own completion (detached, from old_logp [N, T]):

    c_i  = exp( sum_t M_{i,t} old_logp_{i,t} / |o_i| )
    r_i <- r_i - lambda min( c_i / (1 - c_i), max_penalty )   if completion i is incorrect
    r_i <- r_i                                                if it is correct               [N]

c/(1-c) is the gradient weight of log(1 - sum of wrong-answer probabilities) with respect to one wrong
answer's log-probability. For binary rewards an incorrect completion's reward becomes -lambda c/(1-c)
exactly; other reward terms (format, length) are kept. Correctness is the ``correct`` score component, else
binary rewards. ``max_penalty`` keeps the reward finite as c -> 1 (not in the paper's summary).
"""

from __future__ import annotations

from pydantic import Field

from rlvr.algorithms.registry import REWARD_TRANSFORMS, TransformInputs, TransformOutput
from rlvr.algorithms.transforms.difficulty import seq_mean_logp, success
from rlvr.lazy import torch
from rlvr.registry import Params

__all__ = ["LENSParams", "lens_transform", "lens_penalty"]


class LENSParams(Params):
    lam: float = Field(1.0, ge=0.0, description="lambda, the scale of the confidence penalty")
    max_penalty: float = Field(10.0, gt=0.0, description="cap on c / (1 - c) (keeps rewards finite as c -> 1)")


def lens_penalty(old_logp: torch.Tensor, mask: torch.Tensor, max_penalty: float) -> torch.Tensor:
    """[N] float64 min(c / (1 - c), max_penalty) with c the length-normalised sequence probability."""
    c = seq_mean_logp(old_logp, mask).exp()
    odds = c / (1.0 - c).clamp(min=1e-12)
    return odds.clamp(max=max_penalty)


@REWARD_TRANSFORMS.register("lens", LENSParams, needs=("old_logp",))
def lens_transform(inp: TransformInputs, p: LENSParams) -> TransformOutput:
    """LENS: incorrect completions lose lambda c/(1-c), c the model's confidence in them (reconstructed)."""
    wrong = success(inp.rewards, inp.components) == 0
    pen = p.lam * lens_penalty(inp.extras["old_logp"], inp.mask, p.max_penalty)
    r = inp.rewards.to(torch.float64) - torch.where(wrong, pen, torch.zeros_like(pen))
    return r, {"penalty_mean": float(pen[wrong].mean()) if bool(wrong.any()) else 0.0}

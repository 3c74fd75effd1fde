"""REINFORCE++ advantage: global batch normalisation, optionally after a group-mean baseline
(Hu et al. 2025, "REINFORCE++: An Efficient RLHF Algorithm with Robustness to Both Prompt and Reward
Models", arXiv:2501.03262; code: verl ``compute_reinforce_plus_plus_baseline_outcome_advantage`` and
OpenRLHF ``advantage_estimator: reinforce_baseline``).

    x_i = r_i - mean_{j in g(i)} r_j      (subtract_group_mean: the "REINFORCE++-baseline" variant)
    x_i = r_i                             (otherwise: plain REINFORCE++ with outcome reward, gamma = 1)
    A_i = (x_i - mu) / sqrt(var + eps)                                         [N], broadcast to [N, T]

``mu`` and ``var`` are ONE mean and variance over the whole batch (every group of the step together), with
weights w_i:

    mu  = sum_i w_i x_i / W,    var = sum_i w_i (x_i - mu)^2 / (W - 1)   (unbiased; / W if not),  W = sum_i w_i

``weighting: token`` (default) makes w_i = |o_i|, the completion's token count: each TOKEN is one sample,
exactly verl's ``masked_whiten(scores, response_mask)`` on the reward broadcast to tokens (token-weighted
mean, Bessel correction with the token count, ``rsqrt(var + 1e-8)``). ``weighting: sequence`` makes
w_i = 1 (``torch.std`` over completions). OpenRLHF, the authors' framework, is token-weighted with the
population variance (``unbiased: false``) and ``rsqrt(max(var, 1e-8))`` (vs our ``var + eps``: at most
1e-8 apart in the variance). With an outcome reward and no KL in the reward, every token of a completion
has the same value, so the [N] result broadcast to tokens equals the references' [N, T] one.

Note what the batch-mean shift does with ``weighting: token``: the centred rewards sum to 0 per group but
their TOKEN-weighted mean is not 0 (e.g. wrong answers are longer), so a constant group in a mixed batch
gets A = -mu / std, not 0. This is the references' behaviour and part of the method (normalise by the
batch's statistics); with ``weighting: sequence`` and no group of one, mu is 0 up to rounding. A batch
whose x are all equal (e.g. every group constant with subtract_group_mean) gives exactly 0. Groups of one
follow verl: mean := 0, so x = r. Statistics are float64.
"""

from __future__ import annotations

from typing import Literal

from pydantic import Field

from rlvr.algorithms.advantages.dr_grpo import centred_rewards
from rlvr.algorithms.registry import ADVANTAGES, AdvantageInputs
from rlvr.lazy import torch
from rlvr.registry import Params

__all__ = ["ReinforcePPAdvantageParams", "reinforce_pp_advantage"]


class ReinforcePPAdvantageParams(Params):
    subtract_group_mean: bool = Field(
        True, description="subtract the group mean before normalising (REINFORCE++-baseline)")
    weighting: Literal["token", "sequence"] = Field(
        "token", description="batch mean/std over tokens (verl, OpenRLHF) or over completions")
    unbiased: bool = Field(True, description="batch variance divides by W - 1 (verl) or by W (OpenRLHF)")
    eps: float = Field(1e-8, ge=0.0, description="added to the batch variance before the square root (verl: 1e-8)")


def _weights(inp: AdvantageInputs, p: ReinforcePPAdvantageParams) -> torch.Tensor:
    if p.weighting == "sequence":
        return torch.ones_like(inp.rewards, dtype=torch.float64)
    if inp.mask is not None:
        return inp.mask.to(torch.float64).sum(-1)
    if inp.lengths is not None:
        return inp.lengths.to(torch.float64)
    raise ValueError("reinforce_pp with weighting 'token' needs the completion mask or lengths")


@ADVANTAGES.register("reinforce_pp", ReinforcePPAdvantageParams)
def reinforce_pp_advantage(inp: AdvantageInputs, p: ReinforcePPAdvantageParams) -> torch.Tensor:
    """REINFORCE++(-baseline): (group-centred) reward whitened with the whole batch's mean and std."""
    r = inp.rewards.to(torch.float64)
    x = centred_rewards(r, inp.group_index) if p.subtract_group_mean else r
    w = _weights(inp, p)
    live = w > 0  # completions with no tokens carry no sample in the token statistics
    if not bool(live.any()) or bool(x[live].max() == x[live].min()):
        # no spread: the numerator is 0 everywhere (the float64 mean of [0.7]*N is ~1 ulp off 0.7)
        return torch.zeros_like(x, dtype=torch.float32)
    total = w.sum()
    mu = (w * x).sum() / total
    denom = (total - 1).clamp(min=1) if p.unbiased else total
    var = (w * (x - mu) ** 2).sum() / denom
    return ((x - mu) / torch.sqrt(var + p.eps)).to(torch.float32)

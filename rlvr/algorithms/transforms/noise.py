"""Verifier-noise corrections (Cai et al. 2025, "Reinforcement Learning with Verifiable yet Noisy Rewards
under Imperfect Verifiers", arXiv:2510.00915). EXACT for the two formulas; how they enter a GRPO-style
update is RECONSTRUCTED (the caveat below).

The verifier is a noisy channel on the true binary reward R*: rho0 = P(R~ = 1 | R* = 0) (false positives),
rho1 = P(R~ = 0 | R* = 1) (false negatives), both in [0, 0.5). On the scored rewards R~ [N]:

    noise_backward:  R_hat = (R~ - rho0) / (1 - rho0 - rho1)       E[R_hat | R*] = R*   (unbiased surrogate)
    noise_forward:   w     = R~ - (1 - rho1)      i.e. w = rho1 if R~ = 1, rho1 - 1 if R~ = 0
                     E[w | R*] = (1 - rho0 - rho1)(R* - 1): a score-function weight proportional to R*
                     up to a constant (needs only rho1)

CAVEAT. Both are affine in R~, so an advantage that subtracts a mean of the corrected rewards and divides
by their spread (``grpo``, ``batch_std``, ``reinforce_pp``, ``dgpo``, ``a_grae`` with a std) returns
exactly the advantages of the uncorrected rewards, and a mean-only baseline (``dr_grpo``, ``rloo``,
``lampo``, ``grpo``/``a_grae`` with ``std: none``) cancels the forward shift and turns the backward correction
into a constant rescale by 1 / (1 - rho0 - rho1). The corrections act with a baseline that is not computed
from the corrected rewards: ``fixed_baseline`` (REINFORCE with a constant baseline, the setting the paper's
unbiasedness argument is about). The config check refuses the exact no-ops and warns on the rescale.
"""

from __future__ import annotations

import warnings

import torch
from pydantic import Field

from rlvr.algorithms.registry import REWARD_TRANSFORMS, TransformInputs, TransformOutput
from rlvr.registry import Params

__all__ = ["NoiseParams", "noise_backward", "noise_forward", "noise_check", "cancellation"]

_AFFINE_INVARIANT = {"batch_std", "reinforce_pp", "dgpo"}  # subtract a mean and divide by a spread
_SHIFT_INVARIANT = {"dr_grpo", "rloo", "lampo"}  # subtract a (pairwise) mean only
_STD_OPTIONAL = {"grpo", "a_grae"}  # either, by their ``std`` param


class NoiseParams(Params):
    rho0: float = Field(0.0, ge=0.0, lt=0.5, description="false-positive rate P(R~=1 | R*=0) of the verifier")
    rho1: float = Field(0.0, ge=0.0, lt=0.5, description="false-negative rate P(R~=0 | R*=1) of the verifier")


def cancellation(advantage) -> str | None:
    """``"affine"`` if the run's advantage removes any affine map of the rewards, ``"shift"`` if it removes a
    constant shift only, else None (config component ``algorithm.advantage``)."""
    name = advantage.name
    if name in _STD_OPTIONAL:
        return "shift" if advantage.params.std == "none" else "affine"
    if name in _AFFINE_INVARIANT:
        return "affine"
    return "shift" if name in _SHIFT_INVARIANT else None


def noise_check(which: str):
    def check(run_cfg, p: NoiseParams) -> list[str]:
        adv = run_cfg.algorithm.advantage
        kind = cancellation(adv)
        if kind == "affine" or (kind == "shift" and which == "forward"):
            what = "mean and divides by a spread" if kind == "affine" else "mean"
            return [f"is an affine map of the reward, and advantage {adv.name!r} (which subtracts a {what}) "
                    f"cancels it exactly: the run would train as if it were absent. Use advantage "
                    f"'fixed_baseline' (REINFORCE with a constant baseline), for which the correction is "
                    f"unbiased, or drop the transform"]
        if kind == "shift":
            warnings.warn(f"noise_{which} under advantage {adv.name!r} only rescales the advantages by "
                          f"1/(1 - rho0 - rho1) (an effective learning-rate change); use 'fixed_baseline' for "
                          f"the unbiased correction", stacklevel=2)
        return []

    return check


@REWARD_TRANSFORMS.register("noise_backward", NoiseParams, check=noise_check("backward"))
def noise_backward(inp: TransformInputs, p: NoiseParams) -> TransformOutput:
    """Backward verifier-noise correction: (R - rho0) / (1 - rho0 - rho1), unbiased for the true reward."""
    r = (inp.rewards.to(torch.float64) - p.rho0) / (1.0 - p.rho0 - p.rho1)
    return r, {"mean": float(r.mean())}


@REWARD_TRANSFORMS.register("noise_forward", NoiseParams, check=noise_check("forward"))
def noise_forward(inp: TransformInputs, p: NoiseParams) -> TransformOutput:
    """Forward verifier-noise correction: weights rho1 (R = 1) and rho1 - 1 (R = 0)."""
    r = inp.rewards.to(torch.float64) - (1.0 - p.rho1)
    return r, {"mean": float(r.mean())}

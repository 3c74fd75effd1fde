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

UNDER ADAM. Even there, with constant rates, R_hat - b = (R~ - rho0 - (1 - rho0 - rho1) b) / (1 - rho0 - rho1):
the uncorrected advantage with the baseline rho0 + (1 - rho0 - rho1) b, scaled. AdamW's update does not see a
constant scale of the gradient (its eps aside, and while ``optim.max_grad_norm`` does not clip), so with AdamW the
backward correction is that baseline shift and nothing more, and a pure rescale (a mean-only baseline) is close
to nothing, not a larger learning rate (tests/methods/test_transforms_rewards.py measures it on real steps; what
it does to accuracy: benchmarks/README.md, ``noise.py``). Per-row rates (``rho1: appeal``) are not a constant
scale, so they change the update beyond a shift.

``rho1: appeal`` reads rho1 per row from the ``fn_rate`` score component (:data:`FN_RATE`), the running
false-negative estimate that the appeal mechanism (``scoring.appeal``, :mod:`rlvr.tasks.appeals`, which
declares it in its ``PROVIDES``) writes after each step's scoring; the config check refuses it without an
appeal verifier.
"""

from __future__ import annotations

import warnings
from typing import Annotated, Literal

from pydantic import Field

from rlvr.algorithms.registry import REWARD_TRANSFORMS, TransformInputs, TransformOutput
from rlvr.lazy import torch
from rlvr.registry import Params

__all__ = ["NoiseParams", "noise_backward", "noise_forward", "noise_check", "cancellation", "FN_RATE", "APPEAL"]

FN_RATE = "fn_rate"  # the score component holding the appeal's false-negative estimate (rho1), [N]
APPEAL = "appeal"  # rho1: appeal reads it

_AFFINE_INVARIANT = {"batch_std", "reinforce_pp", "dgpo"}  # subtract a mean and divide by a spread
_SHIFT_INVARIANT = {"dr_grpo", "rloo", "lampo"}  # subtract a (pairwise) mean only
_STD_OPTIONAL = {"grpo", "a_grae"}  # either, by their ``std`` param


class NoiseParams(Params):
    rho0: float = Field(0.0, ge=0.0, lt=0.5, description="false-positive rate P(R~=1 | R*=0) of the verifier")
    rho1: Annotated[float, Field(ge=0.0, lt=0.5)] | Literal["appeal"] = Field(
        0.0, description="false-negative rate P(R~=0 | R*=1) of the verifier, or 'appeal': the running estimate "
                         "of scoring.appeal (the fn_rate score component)")


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
        if p.rho1 == APPEAL and run_cfg.scoring.appeal.verifier is None:
            return [f"rho1: appeal reads the {FN_RATE!r} score component that the appeal mechanism writes, but "
                    f"scoring.appeal.verifier is not set: name a second verifier (a registered name or "
                    f"module:function) to re-check negatives, or give rho1 a number"]
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
                          f"1/(1 - rho0 - rho1) (a learning-rate change under SGD, close to none under Adam); use "
                          f"'fixed_baseline' for the unbiased correction", stacklevel=2)
        return []

    return check


def _rho1(inp: TransformInputs, p: NoiseParams) -> float | torch.Tensor:
    """The configured rho1, or (``rho1: appeal``) the ``fn_rate`` score component as an [N] tensor."""
    if p.rho1 != APPEAL:
        return p.rho1
    if FN_RATE not in inp.components:
        raise ValueError(f"rho1: appeal needs the {FN_RATE!r} score component, written by the appeal mechanism "
                         f"(scoring.appeal.verifier); this batch has {sorted(inp.components)}")
    return inp.components[FN_RATE].to(device=inp.rewards.device, dtype=torch.float64)


def _metrics(r: torch.Tensor, rho1: float | torch.Tensor) -> dict[str, float]:
    out = {"mean": float(r.mean())}
    if isinstance(rho1, torch.Tensor):
        out["rho1"] = float(rho1.mean())
    return out


@REWARD_TRANSFORMS.register("noise_backward", NoiseParams, check=noise_check("backward"))
def noise_backward(inp: TransformInputs, p: NoiseParams) -> TransformOutput:
    """Backward verifier-noise correction: (R - rho0) / (1 - rho0 - rho1), unbiased for the true reward."""
    rho1 = _rho1(inp, p)
    denom = 1.0 - p.rho0 - rho1
    if isinstance(denom, torch.Tensor) and bool((denom <= 0).any()):
        raise ValueError(f"noise_backward: rho0 + rho1 >= 1 (rho0 {p.rho0}, appeal fn_rate up to "
                         f"{float(rho1.max()):.4g}): the verifier carries no signal and the correction is undefined")
    r = (inp.rewards.to(torch.float64) - p.rho0) / denom
    return r, _metrics(r, rho1)


@REWARD_TRANSFORMS.register("noise_forward", NoiseParams, check=noise_check("forward"))
def noise_forward(inp: TransformInputs, p: NoiseParams) -> TransformOutput:
    """Forward verifier-noise correction: weights rho1 (R = 1) and rho1 - 1 (R = 0)."""
    rho1 = _rho1(inp, p)
    r = inp.rewards.to(torch.float64) - (1.0 - rho1)
    return r, _metrics(r, rho1)

"""MASPO: a soft, differentiable Gaussian gate on the ratio instead of a hard clip, wider for rare tokens and
asymmetric in the advantage.

MASPO paper (arXiv id not known; docs/methods.md, `maspo`); code VenomRose-Juri/MASPO-RL,
``verl/trainer/ppo/core_algos.py`` (``ratio_mode == "maspo"``), defaults from its README. EXACT (code).
Per token, [N, T]:

    rho        = exp(clamp(logp - old_logp, +-20));   p_old = exp(old_logp)
    sigma_mass = clamp(sigma_base / p_old^alpha, sigma_base, sigma_high)              # wider for rare tokens
    sigma_pos  = sigma_mass * clamp(1 + beta_pos A, a_low, a_high)                      # A > 0
    sigma_neg  = sigma_mass * clamp(1 / (1 - beta_neg A), a_low, a_high)                # A < 0: narrower
    g          = exp(-(sg[rho] - 1)^2 / (2 sigma^2))                                    # detached gate
    rho_eff    = g rho   if (A > 0 and rho > 1) or (A < 0 and rho < 1),   else rho      # no hard clip, no dual clip
    loss       = -A rho_eff                          # d loss / d rho = -g A: never exactly 0, unlike PPO's clip

Metrics: ``gate`` (g where it applies, else 1), ``gated_frac``, ``ratio``.
"""

from __future__ import annotations

from pydantic import Field

from rlvr.algorithms.registry import OBJECTIVES, ObjectiveInputs, ObjectiveOutput
from rlvr.lazy import torch
from rlvr.registry import Params

__all__ = ["MASPOParams", "maspo"]


class MASPOParams(Params):
    sigma_base: float = Field(1.0, gt=0.0, description="gate width for a token of probability 1")
    alpha: float = Field(0.3, ge=0.0, description="mass exponent: width sigma_base / p_old^alpha (0.5 for 1.5B)")
    sigma_high: float = Field(10.0, gt=0.0, description="largest mass-adapted width")
    beta_pos: float = Field(0.03, ge=0.0, description="width grows by 1 + beta_pos A for A > 0")
    beta_neg: float = Field(0.03, ge=0.0, description="width shrinks by 1 / (1 - beta_neg A) for A < 0")
    a_low: float = Field(0.1, gt=0.0, description="lower clamp of the advantage factor")
    a_high: float = Field(10.0, gt=0.0, description="upper clamp of the advantage factor")
    log_ratio_clamp: float = Field(20.0, gt=0.0, description="clamp on logp - old_logp before exp")


@OBJECTIVES.register("maspo", MASPOParams)
def maspo(inp: ObjectiveInputs, p: MASPOParams) -> ObjectiveOutput:
    """MASPO soft trust region: Gaussian gate on the ratio, mass- and advantage-adaptive width."""
    adv = inp.advantages
    rho = torch.exp((inp.logp - inp.old_logp).clamp(-p.log_ratio_clamp, p.log_ratio_clamp))
    with torch.no_grad():
        p_old = torch.exp(inp.old_logp.clamp(max=0.0))
        sigma_mass = (p.sigma_base / p_old.pow(p.alpha)).clamp(p.sigma_base, p.sigma_high)
        f_pos = (1 + p.beta_pos * adv).clamp(p.a_low, p.a_high)
        f_neg = (1 / (1 - p.beta_neg * adv.clamp(max=0.0))).clamp(p.a_low, p.a_high)
        sigma = sigma_mass * torch.where(adv > 0, f_pos, f_neg)
        gate = torch.exp(-(rho.detach() - 1) ** 2 / (2 * sigma ** 2))
        gated = ((adv > 0) & (rho > 1)) | ((adv < 0) & (rho < 1))
        weight = torch.where(gated, gate, torch.ones_like(gate))
    loss = -adv * (weight * rho)
    return loss, {"gate": weight, "gated_frac": gated.float(), "ratio": rho.detach()}

"""UCAS: UnCertainty-aware Advantage Shaping (advantage transform ``ucas``).

Xie et al., "Unlocking Exploration in RLVR: Uncertainty-aware Advantage Shaping", arXiv:2510.10649; code
``xvolcano02/UCAS``, ``verl/trainer/ppo/core_algos.py::compute_ucas_advantage`` (EXACT, code). Runs on the
group-relative advantage A [N, T] of the configured estimator (their runs: GRPO, unbiased std):

    sc_t  = logsumexp(z_t / tau) - mean_v(z_t / tau)     self-certainty per token   (extra ``self_certainty``)
    ell_t = z_t[o_t]                                      raw chosen logit            (extra ``chosen_logit``)
    C_i   = sum_t M sc_t ;  c_i = (C_i - mean_g C) / (std_g C + 1e-6)     unbiased std; a group of one: C_i itself
    stage 1:  A'_{i,t} = A_{i,t} exp(-beta_pos c_i)  if A_{i,t} > 0,  else A_{i,t} exp(+beta_neg c_i)
    stage 2:  n_t = (ell_t - min ell) / (max ell - min ell + 1e-6)    over every valid token of the batch
              (n_t = 0.5 everywhere when max and min are close: torch.isclose)
              A_{i,t} = A'_{i,t} - kappa n_t ;  if A'_{i,t} > 0: A_{i,t} = max(A_{i,t}, 0)

Stage 1 amplifies correct answers the model was unsure of and punishes confident wrong ones harder;
stage 2 takes a little credit from tokens with large logits, never flipping a positive token negative.
As in the reference code, tokens with A' = 0 (groups without signal) also get the stage-2 penalty -kappa n_t.
The reference hard-codes beta_pos = 0.25, beta_neg = 0.35, kappa = 0.05; here they are params with those
defaults. ``scale_certainty: false`` centres C without dividing by its std (their Dr. GRPO variant).
"""

from __future__ import annotations

from pydantic import Field

from rlvr.algorithms.grouping import group_mean, group_sizes, group_std
from rlvr.algorithms.registry import ADVANTAGE_TRANSFORMS, TransformInputs, TransformOutput
from rlvr.lazy import torch
from rlvr.registry import Params

__all__ = ["UCASParams", "ucas", "certainty_zscore", "minmax_logits"]


class UCASParams(Params):
    beta_pos: float = Field(0.25, ge=0.0, description="stage 1 exponent for positive advantages")
    beta_neg: float = Field(0.35, ge=0.0, description="stage 1 exponent for non-positive advantages")
    kappa: float = Field(0.05, ge=0.0, description="stage 2 penalty on the min-max normalised chosen logit")
    scale_certainty: bool = Field(True, description="divide the centred certainty by its group std (Dr. GRPO: false)")
    eps: float = Field(1e-6, gt=0.0, description="added to the std and to the logit range")


def certainty_zscore(certainty: torch.Tensor, group_index: torch.Tensor, scale: bool = True,
                     eps: float = 1e-6) -> torch.Tensor:
    """[N] group z-score of the per-response certainty (float64); a group of one keeps its raw value."""
    c = certainty.to(torch.float64)
    single = group_sizes(group_index) == 1
    out = c - torch.where(single, torch.zeros_like(c), group_mean(c, group_index))
    if scale:
        std = torch.where(single, torch.ones_like(c), group_std(c, group_index, unbiased=True))
        out = out / (std + eps)
    return out


def minmax_logits(logits: torch.Tensor, mask: torch.Tensor, eps: float = 1e-6) -> torch.Tensor:
    """[N, T] min-max normalisation over the batch's valid tokens (0.5 when all are close), 0 on padding."""
    valid = mask.bool()
    if not valid.any():
        return torch.zeros_like(logits)
    lo, hi = logits[valid].min(), logits[valid].max()
    if torch.isclose(hi, lo):
        return torch.full_like(logits, 0.5) * mask
    return (logits - lo) / (hi - lo + eps) * mask


@ADVANTAGE_TRANSFORMS.register("ucas", UCASParams, needs=("self_certainty", "chosen_logit"))
def ucas(inp: TransformInputs, p: UCASParams) -> TransformOutput:
    """UCAS: certainty-scaled advantages minus a clamped chosen-logit penalty."""
    mask = inp.mask
    adv = inp.advantages.to(torch.float64)
    total = (inp.extras["self_certainty"].to(torch.float64) * mask).sum(-1)
    c = certainty_zscore(total, inp.group_index, p.scale_certainty, p.eps)[:, None]
    shaped = torch.where(adv > 0, adv * torch.exp(-p.beta_pos * c), adv * torch.exp(p.beta_neg * c))
    n = minmax_logits(inp.extras["chosen_logit"].to(torch.float64), mask, p.eps)
    raw = shaped - p.kappa * n
    out = torch.where(shaped > 0, raw.clamp(min=0.0), raw) * mask
    valid = mask.bool()
    clamped = ((shaped > 0) & (raw < 0) & valid).sum()
    return out.to(inp.advantages.dtype), {
        "certainty_weight_mean": float((torch.where(adv > 0, torch.exp(-p.beta_pos * c), torch.exp(p.beta_neg * c))
                                        * mask).sum() / mask.sum().clamp(min=1)),
        "clamped_frac": float(clamped / valid.sum().clamp(min=1)),
    }

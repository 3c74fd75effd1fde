"""GRPO-SG: Sharpness-Guided GRPO via probability shaping (advantage transform ``grpo_sg``). RECONSTRUCTED.

Le, Ngo Van, Le, Sharpness-Guided GRPO (GRPO-SG) "via Probability Shaping", arXiv:2511.00066.
Confirmed from the abstract: the generalisation loss is bounded by the empirical loss plus a
gradient-norm sharpness term, and GRPO-SG down-weights the tokens likely to cause overly large gradients.
For a softmax LM the per-token gradient of log pi(o_t) with respect to the logits has norm
``|| e_{o_t} - pi_t ||_2`` (:func:`logit_grad_norm`), largest for low-probability tokens. Reconstruction
(docs/methods.md, `grpo_sg`):

    w_t = sg[ pi_old(o_t)^alpha ] / mean_{valid tokens of the batch}( sg[ pi_old(o_t)^alpha ] ),  alpha in (0, 1]
    A_{i,t} <- w_t * A_{i,t}        (a positive token weight on A equals it on the clipped per-token loss)

so the mean weight over the step's tokens is 1 and the overall step size is kept. ``alpha`` is a placeholder
(0.5). Needs the old log-probs (one policy forward, shared with the ratio).
"""

from __future__ import annotations

from pydantic import Field

from rlvr.algorithms.registry import ADVANTAGE_TRANSFORMS, TransformInputs, TransformOutput
from rlvr.lazy import torch
from rlvr.registry import Params

__all__ = ["GRPOSGParams", "grpo_sg", "sharpness_weights", "logit_grad_norm"]


class GRPOSGParams(Params):
    alpha: float = Field(0.5, gt=0.0, le=1.0, description="exponent of the old token probability")


def logit_grad_norm(logits: torch.Tensor, tokens: torch.Tensor) -> torch.Tensor:
    """``|| d log softmax(z)[o] / dz ||_2 = || e_o - softmax(z) ||_2`` for logits ``[..., V]``, tokens ``[...]``."""
    probs = torch.softmax(logits, -1)
    onehot = torch.nn.functional.one_hot(tokens, logits.shape[-1]).to(probs.dtype)
    return (onehot - probs).norm(dim=-1)


def sharpness_weights(old_logp: torch.Tensor, mask: torch.Tensor, alpha: float) -> torch.Tensor:
    """[N, T] ``pi_old^alpha`` over its mean on valid tokens (0 on padding)."""
    raw = torch.exp(alpha * old_logp.to(torch.float64)) * mask
    mean = raw.sum() / mask.sum().clamp(min=1)
    return raw / mean.clamp(min=torch.finfo(torch.float64).tiny)


@ADVANTAGE_TRANSFORMS.register("grpo_sg", GRPOSGParams, needs=("old_logp",))
def grpo_sg(inp: TransformInputs, p: GRPOSGParams) -> TransformOutput:
    """GRPO-SG (reconstructed): weight tokens by pi_old^alpha, normalised to mean 1 over the batch."""
    mask = inp.mask
    w = sharpness_weights(inp.extras["old_logp"], mask, p.alpha)
    valid = mask.bool()
    return (inp.advantages.to(torch.float64) * w).to(inp.advantages.dtype), {
        "weight_min": float(w[valid].min()) if valid.any() else 1.0,
        "weight_max": float(w[valid].max()) if valid.any() else 1.0,
    }

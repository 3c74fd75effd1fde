"""PEPO: perception-prior and entropy-gated token weights on the advantages.

"Perception-Exploration Policy Optimization" (PEPO; code ``xzxxntxdy/PEPO``,
``src/pepo/train/grpo_trainer.py::_get_pepo_per_token_outputs_single`` and ``_compute_loss_and_metrics``;
EXACT, from the code). Per completion, over its tokens t (M = completion mask, n = sum_t M):

    s_t   = vision_similarity        (extra: mean cosine of token t's hidden states with the image tokens')
    H_t   = entropy                  (extra: at the training temperature)
    v_t   = minmax_row(s)_t,  h_t = minmax_row(H)_t          (x - min) / max(max - min, 1e-6), per row
    m_t   = v_t + h_t - mean_row(v + h)
    g_t   = 1 + alpha * tanh(m_t)                             the smooth gate
    w_t   = n * softmax_row(s_t * g_t / tau)                  mean 1 over the row's tokens
    A_t  <- A_t * ((1 - p) + p * w_t),   p = min(1, step / total_steps)

The weight is annealed in: uniform at the start of RL, the perception weights at the end (the reference's
``progress = global_step / max_steps``). Defaults are the paper's Qwen2.5-VL-3B script
(``train_pepo_geometry3k_qwen25vl_3b.sh``: ``gate_alpha 0.05``, ``gate_temperature 1.8``; the code's default
temperature is 1.0).

One deviation, stated: the reference multiplies its per-token *loss* by the weight computed in the same
forward, without detaching it, so gradient also flows through the weights into the hidden states. Here the
weight scales the advantage and is computed from detached extras (the paper describes "token-level
advantages"); the policy gradient is the same, without the extra path through the weights.
"""

from __future__ import annotations

from pydantic import Field

from rlvr.algorithms.registry import ADVANTAGE_TRANSFORMS, TransformInputs, TransformOutput
from rlvr.lazy import torch
from rlvr.registry import Params

__all__ = ["PEPOParams", "pepo", "pepo_weights"]


class PEPOParams(Params):
    alpha: float = Field(0.05, ge=0.0, description="gate strength: g = 1 + alpha * tanh(centred v + h)")
    tau: float = Field(1.8, gt=0.0, description="softmax temperature of the gated perception score")
    anneal: bool = Field(True, description="mix in the weights linearly over RL (the reference); false: full weights")


def _minmax(x: torch.Tensor, mask: torch.Tensor, eps: float = 1e-6) -> torch.Tensor:
    lo = x.masked_fill(~mask, float("inf")).min(-1, keepdim=True).values
    hi = x.masked_fill(~mask, float("-inf")).max(-1, keepdim=True).values
    out = (x - lo) / (hi - lo).clamp(min=eps)
    return torch.where(mask, out, torch.zeros_like(out))


def pepo_weights(score: torch.Tensor, entropy: torch.Tensor, mask: torch.Tensor, alpha: float,
                 tau: float) -> torch.Tensor:
    """``[N, T]`` PEPO's token weights (mean 1 over each row's tokens; 0 on padding; rows without tokens 0)."""
    m = mask.bool()
    n = m.sum(-1, keepdim=True)
    mixed = _minmax(score, m) + _minmax(entropy, m)
    centred = mixed - (mixed * m).sum(-1, keepdim=True) / n.clamp(min=1)
    gate = 1.0 + alpha * torch.tanh(centred)
    logits = torch.where(m, score * gate / tau, torch.full_like(score, float("-inf")))
    w = torch.softmax(logits, -1) * n
    return torch.where(m, w, torch.zeros_like(w)).nan_to_num(0.0)  # an empty row's softmax is NaN


@ADVANTAGE_TRANSFORMS.register("pepo", PEPOParams, needs=("vision_similarity", "entropy"))
def pepo(inp: TransformInputs, p: PEPOParams) -> TransformOutput:
    """PEPO: perception-weighted, entropy-gated token advantages (vision-language models)."""
    mask = inp.mask > 0
    score = inp.extras["vision_similarity"].to(torch.float64)
    w = pepo_weights(score, inp.extras["entropy"].to(torch.float64), mask, p.alpha, p.tau)
    progress = min(1.0, inp.step / max(1, inp.total_steps)) if p.anneal else 1.0
    factor = (1.0 - progress) + progress * w
    adv = inp.advantages.to(torch.float64) * factor * mask
    n = mask.sum().clamp(min=1)
    return adv.to(inp.advantages.dtype), {"progress": progress, "weight_max": float(w.max()) if w.numel() else 0.0,
                                          "weight_mean": float((w * mask).sum() / n)}

"""Delta L Normalization (He et al. 2025, "Delta L Normalization: Rethink Loss Aggregation in RLVR",
arXiv:2509.07558; v2 calls it "VL Norm"). EXACT from the authors' code (``zerolllin/Delta-L-Normalization``,
``use_grpopp`` + ``masked_mean_allavg``), up to the deviations listed below.

The per-response gradient's variance grows about linearly with its length L_i, so the unbiased (weights sum
to a constant), minimum-variance combination weights response i by L_i^(-alpha). With B completions in the
minibatch, L_i = sum_t M_{i,t} and the constant normaliser ``max_len``:

    x_i = L_i^(-alpha) / sum_j L_j^(-alpha)                     [N], sum_i x_i = 1
    c_i = x_i / max_len                                         [N]
    loss = sum_{i,t} c_i M_{i,t} l_{i,t}                        (a token *sum* per response, weighted by x_i)

alpha = 1 is the minimum-variance choice (CountDown); the paper uses 0.75 on Math. With equal lengths
x_i = 1 / B and this is exactly Dr. GRPO's ``seq_mean_token_sum_norm`` with the same ``max_len``.

How this matches the code: the code scales the advantage by w_i = L_i^(-alpha) / mean_j L_j^(-alpha) = B x_i
and takes a plain mean over the padded [B, T_pad] loss tensor, i.e. ``sum_i x_i sum_t l_{i,t} / T_pad``.
A positive advantage scale never changes a PPO clip decision, so scaling the loss instead is the same.

Deviations, said plainly:
  * The code divides by the padded width T_pad of the tensor. rlvr trims micro-batches to their own longest
    row, so that width would vary between micro-batches and drift the effective learning rate; the constant is
    the explicit param ``max_len`` (by default the run's ``rollout.max_new_tokens``, the code's padded width).
  * The code normalises w over the whole rollout batch; rlvr normalises x over the minibatch the aggregation
    sees, so the weights of every optimizer step sum to exactly 1. Identical when ``algorithm.minibatches=1``.
  * A completion with no tokens (L_i = 0) gets weight 0 and is left out of the normaliser (the code would
    divide by zero); it contributes no loss either way.
"""

from __future__ import annotations

from pydantic import Field

from rlvr.algorithms.registry import AGGREGATIONS, AggregationInputs
from rlvr.lazy import torch
from rlvr.registry import Params

__all__ = ["DeltaLParams", "delta_l", "delta_l_weights"]


class DeltaLParams(Params):
    alpha: float = Field(1.0, ge=0.0, description="length exponent: weight ~ L^-alpha (1: minimum variance; "
                                                 "the paper uses 0.75 on Math)")
    max_len: int | None = Field(None, gt=0, description="constant normaliser replacing the code's padded "
                                                        "length (null: rollout.max_new_tokens)")


def delta_l_weights(lengths: torch.Tensor, alpha: float) -> torch.Tensor:
    """x_i = L_i^-alpha / sum_j L_j^-alpha over the rows with L_j > 0 (float64, [N]); empty rows get 0."""
    lengths = lengths.to(torch.float64)
    live = lengths > 0
    # clamp only so the power is finite on empty rows; their weight is zeroed right after
    raw = torch.where(live, lengths.clamp(min=1.0) ** -alpha, torch.zeros_like(lengths))
    return raw / raw.sum().clamp(min=torch.finfo(torch.float64).tiny)


@AGGREGATIONS.register("delta_l", DeltaLParams)
def delta_l(inp: AggregationInputs, p: DeltaLParams) -> torch.Tensor:
    """Token sums weighted by normalised inverse length powers L^-alpha, over a constant (Delta L Norm)."""
    return (delta_l_weights(inp.lengths, p.alpha) / inp.constant_len(p.max_len)).to(torch.float32)

"""The four standard loss aggregations (verl's ``loss_agg_mode`` names, with ``_``).

Every aggregation is linear in the per-token losses: ``loss = sum_{i,t} c_{i,t} M_{i,t} l_{i,t}``. A
registered aggregation returns the coefficients ``c`` ([N], one per completion) computed once from the *whole
minibatch*; each micro-batch then contributes its rows' share, so the minibatch gradient is the same however
it is split into micro-batches or across ranks. With L_i = sum_t M_{i,t} and B the number of completions
of the minibatch with at least one token (L_i > 0):

    token_mean               c_i = 1 / sum_j L_j                      (DAPO; rlvr's default)
    seq_mean_token_mean      c_i = 1 / (B L_i)                        (original GRPO, GSPO)
    seq_mean_token_sum       c_i = 1 / B
    seq_mean_token_sum_norm  c_i = 1 / (B L_const)                    (Dr. GRPO; L_const is a config constant)

Empty rows (an all-zero mask, e.g. a truncated completion after the overlong filter) are left out of B, as
in verl, and the ``seq_mean_*`` modes give them c_i = 0: rows of lengths [2, 0, 1] with loss 1 per token give
1 under ``seq_mean_token_mean`` (not 2/3) and 3/2 under ``seq_mean_token_sum`` (not 1). They never change
``token_mean``, whose denominator counts tokens. A minibatch of empty rows only gives zero coefficients.

Dr. GRPO's constant must be the same in every micro-batch, so it is config (``max_len``, by default the
run's ``rollout.max_new_tokens``, the paper's generation budget), never the padded width of a tensor. Some peer snapshots dropped the 1/B; rlvr keeps it, as the paper does.
"""

from __future__ import annotations

from pydantic import Field

from rlvr.algorithms.registry import AGGREGATIONS, AggregationInputs
from rlvr.lazy import torch
from rlvr.registry import Params

__all__ = ["token_mean", "seq_mean_token_mean", "seq_mean_token_sum", "seq_mean_token_sum_norm",
           "TokenSumNormParams"]


@AGGREGATIONS.register("token_mean")
def token_mean(inp: AggregationInputs, p: Params) -> torch.Tensor:
    """Mean over all completion tokens of the minibatch (DAPO's token-level loss)."""
    n = inp.mask.shape[0]
    return torch.full((n,), 1.0 / max(float(inp.mask.sum()), 1.0))


def _per_live_row(inp: AggregationInputs) -> torch.Tensor:
    """[N]: 1 / B on the rows with at least one token (B of them), 0 on empty rows."""
    live = (inp.lengths > 0).to(torch.float32)
    return live / max(float(live.sum()), 1.0)


@AGGREGATIONS.register("seq_mean_token_mean")
def seq_mean_token_mean(inp: AggregationInputs, p: Params) -> torch.Tensor:
    """Mean over tokens inside each completion, then over the non-empty completions (original GRPO)."""
    return _per_live_row(inp) / inp.lengths.clamp(min=1.0)


@AGGREGATIONS.register("seq_mean_token_sum")
def seq_mean_token_sum(inp: AggregationInputs, p: Params) -> torch.Tensor:
    """Sum over tokens inside each completion, mean over the non-empty completions."""
    return _per_live_row(inp)


class TokenSumNormParams(Params):
    max_len: int | None = Field(None, gt=0, description="the constant normaliser L (null: rollout.max_new_tokens)")


@AGGREGATIONS.register("seq_mean_token_sum_norm", TokenSumNormParams)
def seq_mean_token_sum_norm(inp: AggregationInputs, p: TokenSumNormParams) -> torch.Tensor:
    """Token sum over a constant length and the number of non-empty completions (Dr. GRPO)."""
    return _per_live_row(inp) / inp.constant_len(p.max_len)

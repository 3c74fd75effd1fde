"""Loss aggregation: per-token losses [N, T] and mask -> one scalar for the minibatch.

Each mode divides by counts of the *whole minibatch* (:class:`LossCounts`), so the sum of the values
returned for its micro-batches equals the value for the minibatch in one piece; the gradient does not
depend on how the batch is split across micro-batches or data-parallel ranks.

    token_mean               sum_{i,t} M l / sum_{i,t} M                   (DAPO; the default)
    seq_mean_token_mean      (1/B) sum_i [sum_t M l / sum_t M]             (original GRPO, GSPO)
    seq_mean_token_sum       (1/B) sum_{i,t} M l
    seq_mean_token_sum_norm  (1/B) sum_{i,t} M l / L                       (Dr. GRPO, L a constant)

with B the number of completions in the minibatch (verl's ``loss_agg_mode`` names, with ``_``).
"""

from __future__ import annotations

import torch
from pydantic import Field

from rlvr.algorithms.registry import AGGREGATIONS, LossCounts
from rlvr.registry import Params

__all__ = ["token_mean", "seq_mean_token_mean", "seq_mean_token_sum", "seq_mean_token_sum_norm"]


@AGGREGATIONS.register("token_mean")
def token_mean(loss: torch.Tensor, mask: torch.Tensor, counts: LossCounts, p: Params) -> torch.Tensor:
    """Mean over all completion tokens of the minibatch (DAPO's token-level loss)."""
    return (loss * mask).sum() / max(counts.num_tokens, 1.0)


@AGGREGATIONS.register("seq_mean_token_mean")
def seq_mean_token_mean(loss: torch.Tensor, mask: torch.Tensor, counts: LossCounts, p: Params) -> torch.Tensor:
    """Mean over tokens inside each completion, then over completions (original GRPO)."""
    per_seq = (loss * mask).sum(-1) / mask.sum(-1).clamp(min=1.0)
    return per_seq.sum() / max(counts.num_seqs, 1.0)


@AGGREGATIONS.register("seq_mean_token_sum")
def seq_mean_token_sum(loss: torch.Tensor, mask: torch.Tensor, counts: LossCounts, p: Params) -> torch.Tensor:
    """Sum over tokens inside each completion, mean over completions."""
    return (loss * mask).sum() / max(counts.num_seqs, 1.0)


class TokenSumNormParams(Params):
    max_len: int = Field(..., gt=0, description="the constant normaliser L (usually max_new_tokens)")


@AGGREGATIONS.register("seq_mean_token_sum_norm", TokenSumNormParams)
def seq_mean_token_sum_norm(loss: torch.Tensor, mask: torch.Tensor, counts: LossCounts,
                            p: TokenSumNormParams) -> torch.Tensor:
    """Token sum over a constant length and the number of completions (Dr. GRPO)."""
    return (loss * mask).sum() / (max(counts.num_seqs, 1.0) * p.max_len)

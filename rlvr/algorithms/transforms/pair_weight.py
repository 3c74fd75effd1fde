"""Pair-level prompt weights of weighted GRPO with positive-negative pairing ("Beyond Variance:
Prompt-Efficient RLVR via Rare-Event Amplification and Bidirectional Pairing", arXiv:2602.03452).
RECONSTRUCTED: confirmed are the pairing of a hard-but-solvable prompt q+ (low success rate > 0) with an
easy-but-brittle one q- (high success rate < 1), success rates from several rollouts, outcomes re-weighted
"at the pair level" and group-normalised advantages. The weight function below is our best guess.

Per-group standardisation undoes any rescale of one prompt's rewards, so the weight multiplies the
prompt's advantages (equivalently its loss). With p_q the group's success rate:

    raw_q    = 1 / (p_q (1 - p_q))                 for 0 < p_q < 1   (1 otherwise; such groups have A = 0)
    lambda_q = raw_q / mean_{q' : 0 < p_q' < 1} raw_q'     (normalise: the weights average 1 over the
                                                            step's mixed groups, i.e. over the pair when
                                                            the step holds one pair)
    A_i     <- lambda_{q(i)} A_i                                        [N, T]

So the rarer outcome of a pair (a rare success, a rare failure) gets the larger weight. Choosing the pair
is the prompt sampler's job; this transform only weighs the groups it is given.
"""

from __future__ import annotations

from pydantic import Field

from rlvr.algorithms.registry import ADVANTAGE_TRANSFORMS, TransformInputs, TransformOutput
from rlvr.algorithms.transforms.difficulty import group_ids, success_rate
from rlvr.lazy import torch
from rlvr.registry import Params

__all__ = ["PairWeightParams", "pair_weight_transform", "pair_weights"]


class PairWeightParams(Params):
    normalise: bool = Field(True, description="scale the weights to average 1 over the step's mixed groups")
    max_weight: float | None = Field(None, gt=0.0, description="clip lambda at this value (null: no clip)")


def pair_weights(rate: torch.Tensor, group_index: torch.Tensor, p: PairWeightParams) -> torch.Tensor:
    """[N] float64 lambda of each row's group, from the [N] group success rates."""
    mixed = (rate > 0) & (rate < 1)
    raw = torch.where(mixed, 1.0 / (rate * (1.0 - rate)).clamp(min=1e-12), torch.ones_like(rate))
    if p.normalise and bool(mixed.any()):
        inv, g = group_ids(group_index)
        per_group = torch.zeros(g, dtype=torch.float64).index_copy_(0, inv, raw)
        is_mixed = torch.zeros(g, dtype=torch.bool).index_copy_(0, inv, mixed)
        raw = torch.where(mixed, raw / per_group[is_mixed].mean(), raw)
    return raw.clamp(max=p.max_weight) if p.max_weight is not None else raw


@ADVANTAGE_TRANSFORMS.register("pair_weight", PairWeightParams)
def pair_weight_transform(inp: TransformInputs, p: PairWeightParams) -> TransformOutput:
    """Weighted GRPO pairing: per-prompt weights 1/(p(1-p)) normalised over the step (reconstructed)."""
    w = pair_weights(success_rate(inp.rewards, inp.components, inp.group_index), inp.group_index, p)
    return inp.advantages * w[:, None].to(inp.advantages.dtype), {"weight_max": float(w.max())}

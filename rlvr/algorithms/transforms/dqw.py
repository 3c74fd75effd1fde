"""DGPO's difficulty-aware question weighting, DQW (Dai et al. 2026, MathForge, arXiv:2601.20614; code
``AMAP-ML/MathForge``, ``grpo_trainer.py``, ``enable_dgpo_dqw``, ``dgpo_dqw_temp``). EXACT (code).

Over the B_valid groups of the step whose rewards are not all equal (the only ones with a non-zero
group-relative advantage), with p_q the group's mean reward:

    lambda_q = B_valid * softmax_q(-p_q / T)          (the weights average 1 over the valid groups)
    A_i     <- lambda_{q(i)} A_i                                        [N, T]

so harder questions (lower p_q) weigh more. Groups with constant rewards keep weight 1 (the code sets
their p to 1 before the softmax and leaves them out; their advantage is 0 for group-relative estimators).

The code's loss also divides the token mean by the tokens of valid groups only (``zero_mask_ratio``).
``token_rescale: true`` folds that into the weight: every row is multiplied by
(tokens in the step) / (tokens in valid groups), which equals the code's normaliser exactly when the step is
one minibatch under ``token_mean`` aggregation (with several minibatches it is the step-level ratio).
"""

from __future__ import annotations

from pydantic import Field

from rlvr.algorithms.grouping import group_constant
from rlvr.algorithms.registry import ADVANTAGE_TRANSFORMS, TransformInputs, TransformOutput
from rlvr.algorithms.transforms.difficulty import group_ids
from rlvr.lazy import torch
from rlvr.registry import Params

__all__ = ["DQWParams", "dqw_transform", "dqw_weights"]


class DQWParams(Params):
    temperature: float = Field(2.0, gt=0.0, description="T of the softmax over -p_q / T (code: 2.0)")
    token_rescale: bool = Field(False, description="also scale by step tokens / tokens in valid groups "
                                                   "(the code's zero_mask_ratio)")


def dqw_weights(rewards: torch.Tensor, group_index: torch.Tensor, temperature: float) -> torch.Tensor:
    """[N] float64 lambda of each row's group (1 for groups with constant rewards)."""
    r = rewards.to(torch.float64)
    inv, g = group_ids(group_index)
    sums = torch.zeros(g, dtype=torch.float64).index_add_(0, inv, r)
    counts = torch.zeros(g, dtype=torch.float64).index_add_(0, inv, torch.ones_like(r))
    p = sums / counts
    valid = torch.zeros(g, dtype=torch.bool).index_fill_(0, inv[~group_constant(r, group_index)], True)
    lam = torch.ones(g, dtype=torch.float64)
    if bool(valid.any()):
        lam[valid] = int(valid.sum()) * torch.softmax(-p[valid] / temperature, 0)
    return lam[inv]


@ADVANTAGE_TRANSFORMS.register("dqw", DQWParams)
def dqw_transform(inp: TransformInputs, p: DQWParams) -> TransformOutput:
    """DQW: softmax(-accuracy / T) question weights over the step's informative groups."""
    w = dqw_weights(inp.rewards, inp.group_index, p.temperature)
    valid = ~group_constant(inp.rewards.to(torch.float64), inp.group_index)
    if p.token_rescale and bool(valid.any()):
        tokens = inp.lengths.to(torch.float64)
        w = w * tokens.sum() / tokens[valid].sum().clamp(min=1.0)
    metrics = {"weight_max": float(w[valid].max()) if bool(valid.any()) else 1.0,
               "valid_row_frac": float(valid.to(torch.float64).mean())}
    return inp.advantages * w[:, None].to(inp.advantages.dtype), metrics

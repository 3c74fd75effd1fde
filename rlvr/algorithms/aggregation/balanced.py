"""Balanced Aggregation (Zeng et al. 2026, "Balanced Aggregation: Understanding and Fixing Aggregation Bias
in GRPO", arXiv:2605.04077). RECONSTRUCTED: the structure is confirmed by the abstract and two summaries,
the exact normalisation was not seen and no code was found (docs/methods.md, `balanced`).

Token-mean couples sign and length (long negative responses dominate); sequence-mean down-weights long
responses. BA takes the token mean *within* the positive-advantage responses and *within* the negative ones
separately, and mixes the two by their numbers of sequences. Within one scope s (a group, or the minibatch):

    P_s = {i in s : A_i > 0},   N_s = {i in s : A_i < 0},   L_i = sum_t M_{i,t}
    L_P = sum_{i in P_s} sum_t M l / sum_{i in P_s} L_i        (L_N likewise)
    L_s = (|P_s| L_P + |N_s| L_N) / (|P_s| + |N_s|)
    loss = mean over scopes s with |P_s| + |N_s| > 0 of L_s

so the coefficient of i in P_s is  c_i = |P_s| / ((|P_s| + |N_s|) sum_{j in P_s} L_j) / S   [N] (N_s likewise),
with S the number of scopes counted. ``scope="group"`` (default, our recommended reading) forms P and N per prompt
group; ``scope="batch"`` forms them once over the minibatch.

Reconstruction choices, said plainly:
  * A sequence's sign is the sign of its masked-mean advantage (``inp.advantages`` [N, T]), so token-level
    advantages work too. The advantages are required: calling this without them raises.
  * Responses with A_i = 0 are excluded (coefficient 0), and so are groups with no signed response: they are
    not counted in S, so uninformative groups do not dilute the loss. A per-token term added to the loss for
    such rows (e.g. the KL penalty) therefore gets no gradient from them under this aggregation.
  * Groups are the groups present in the minibatch: a shuffled minibatch split may hold part of a group.
"""

from __future__ import annotations

from typing import Literal

from pydantic import Field

from rlvr.algorithms.registry import AGGREGATIONS, AggregationInputs
from rlvr.lazy import torch
from rlvr.registry import Params

__all__ = ["BalancedParams", "balanced"]


class BalancedParams(Params):
    scope: Literal["group", "batch"] = Field(
        "group", description="form the positive/negative subsets per prompt group (then average over groups) "
                             "or once over the whole minibatch")


def _sum_by(values: torch.Tensor, index: torch.Tensor, n: int) -> torch.Tensor:
    return torch.zeros(n, dtype=torch.float64).index_add_(0, index, values)


@AGGREGATIONS.register("balanced", BalancedParams)
def balanced(inp: AggregationInputs, p: BalancedParams) -> torch.Tensor:
    """Token mean within positive and within negative responses, mixed by sequence counts (BA)."""
    if inp.advantages is None:
        raise ValueError("the 'balanced' aggregation needs the advantages to split responses by sign")
    mask = inp.mask.to(torch.float64)
    lengths = mask.sum(-1)
    adv = inp.advantages.to(torch.float64)
    adv = adv[:, None].expand_as(mask) if adv.dim() == 1 else adv
    # the sign of the masked sum equals the sign of the masked mean, and needs no division by L_i
    sign = torch.sign((adv * mask).sum(-1))
    if p.scope == "group":
        _, scope = torch.unique(inp.group_index, return_inverse=True)
    else:
        scope = torch.zeros_like(inp.group_index)
    s = int(scope.max()) + 1 if scope.numel() else 0
    pos, neg = (sign > 0).to(torch.float64), (sign < 0).to(torch.float64)
    # per (scope, sign): number of sequences and number of tokens
    n_pos, n_neg = _sum_by(pos, scope, s), _sum_by(neg, scope, s)
    tok_pos, tok_neg = _sum_by(pos * lengths, scope, s), _sum_by(neg * lengths, scope, s)
    n_signed = n_pos + n_neg
    counted = float((n_signed > 0).sum())
    if counted == 0:  # no response carries a signal: nothing to learn, and no division by zero
        return torch.zeros(mask.shape[0], dtype=torch.float32)
    # clamping the denominators only changes empty subsets (count 0, or no tokens to weight)
    c_pos = n_pos / (n_signed.clamp(min=1.0) * tok_pos.clamp(min=1.0)) / counted
    c_neg = n_neg / (n_signed.clamp(min=1.0) * tok_neg.clamp(min=1.0)) / counted
    coef = pos * c_pos[scope] + neg * c_neg[scope]
    return coef.to(torch.float32)

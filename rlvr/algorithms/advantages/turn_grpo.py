"""Turn-level group-relative advantages for multi-turn episodes (``algorithm.advantage: turn_grpo``).

After MT-GRPO (Zeng et al. 2025, "Reinforcing Multi-Turn Reasoning in LLM Agents via Turn-Level Credit Assignment",
arXiv:2505.11821), which adds a turn-level advantage to GRPO's outcome advantage so that a turn's tokens are
credited for what that turn earned. RECONSTRUCTED for any number of turns: the paper's two-turn form, generalised
as below; not one of the papers rlvr set out to implement, offered as the multi-turn option beside the
episode-level advantage (any other estimator).

For episode i of group g, with training reward R_i (the episode's reward as ``rollout.multiturn.reward``
defines it) and environment turn rewards r_{i,k} for its turns k = 1..K_i:

    A^out_i    = (R_i - mean_{j in g} R_j) / (std_{j in g} R_j + eps)                     (GRPO)
    A^turn_i,k = (r_{i,k} - mean_{j in g, K_j >= k} r_{j,k}) / (std_{j in g, K_j >= k} r_{j,k} + eps)
                 (0 when fewer than two of the group's episodes reached turn k, or they all tie)
    A_{i,t}    = A^out_i + lambda * A^turn_{i, k(t)}                                      [N, T]

where k(t) is the turn token t belongs to (extras ``turn_index`` and ``turn_reward``); observation tokens
are masked out of the loss anyway. ``lambda = 0`` is GRPO exactly; single-turn completions (one turn, turn
reward 0) get GRPO's advantage. ``std`` as in GRPO (unbiased, population or none).
"""

from __future__ import annotations

from typing import Literal

from pydantic import Field

from rlvr.algorithms.advantages.grpo import GRPOAdvantageParams, grpo_advantage
from rlvr.algorithms.grouping import group_constant, group_mean, group_sizes, group_std
from rlvr.algorithms.registry import ADVANTAGES, AdvantageInputs
from rlvr.lazy import torch
from rlvr.registry import Params

__all__ = ["TurnGRPOParams", "turn_grpo_advantage", "turn_advantages"]


class TurnGRPOParams(Params):
    turn_weight: float = Field(1.0, ge=0.0, description="lambda: weight of the turn-level advantage (0: GRPO)")
    std: Literal["unbiased", "population", "none"] = Field(
        "unbiased", description="divide by the std (unbiased or population) of the group, or not at all")
    eps: float = Field(1e-6, ge=0.0, description="added to the std before dividing")


def turn_advantages(turn_index: torch.Tensor, turn_reward: torch.Tensor, group_index: torch.Tensor,
                    std: str = "unbiased", eps: float = 1e-6) -> torch.Tensor:
    """``[N, T]``: each token's A^turn for its turn (0 where no turn or no comparison)."""
    out = torch.zeros(turn_index.shape, dtype=torch.float64, device=turn_index.device)
    k_max = int(turn_index.max().item()) if turn_index.numel() else 0
    for k in range(1, k_max + 1):
        at_k = turn_index == k
        present = at_k.any(-1)
        if int(present.sum()) < 2:
            continue
        r = (turn_reward.double() * at_k).sum(-1) / at_k.sum(-1).clamp(min=1)  # the turn's reward per row
        rows = present.nonzero().squeeze(-1)
        gi, rk = group_index[rows], r[rows]
        single = group_sizes(gi) < 2
        adv = torch.where(group_constant(rk, gi) | single, torch.zeros_like(rk), rk - group_mean(rk, gi))
        if std != "none":
            s = torch.where(single, torch.ones_like(rk), group_std(rk, gi, unbiased=std == "unbiased"))
            adv = adv / (s + eps)
        per_row = torch.zeros(len(r), dtype=torch.float64, device=r.device).index_copy(0, rows, adv)
        out += per_row[:, None] * at_k
    return out


@ADVANTAGES.register("turn_grpo", TurnGRPOParams, needs=("turn_index", "turn_reward"), traits=("token_level",))
def turn_grpo_advantage(inp: AdvantageInputs, p: TurnGRPOParams) -> torch.Tensor:
    """GRPO's outcome advantage plus lambda x a turn-level group-relative advantage per token (multi-turn)."""
    outcome = grpo_advantage(inp, GRPOAdvantageParams(std=p.std, eps=p.eps)).double()
    ti, tr = inp.extras["turn_index"], inp.extras["turn_reward"]
    adv = outcome[:, None] + p.turn_weight * turn_advantages(ti, tr, inp.group_index, p.std, p.eps)
    return (adv * inp.mask).to(torch.float32) if inp.mask is not None else adv.to(torch.float32)

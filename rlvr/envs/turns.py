"""Per-token turn tensors of multi-turn completions, for turn-level advantages (``turn_index``,
``turn_reward`` in :data:`rlvr.algorithms.registry.EXTRAS`).

An episode's sampled segments are its policy turns, in order: the tokens of the ``k``-th sampled segment
(1-based) get ``turn_index = k`` and ``turn_reward`` = the environment's reward for that turn
(``EpisodeCompletion.turn_rewards[k - 1]``); inserted tokens (observations) get 0 in both. A completion
that is not an episode is one turn with reward 0 (a continued prefix belongs to the turn it opens).
"""

from __future__ import annotations

from typing import Sequence

import torch

from rlvr.algorithms.extra_producers import ExtraContext, produces
from rlvr.core.types import Completion

__all__ = ["turn_tensors"]


def turn_tensors(completions: Sequence[Completion], mask: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """``(turn_index, turn_reward)``, both ``[N, T]`` float32 like ``mask``, 0 beyond each completion."""
    n, t = mask.shape
    index, reward = torch.zeros(n, t), torch.zeros(n, t)
    for i, c in enumerate(completions):
        rewards = list(getattr(c, "turn_rewards", None) or [])
        segments = c.segments or []
        if not any(s.source == "inserted" for s in segments) and not rewards:
            index[i, : len(c.completion_ids)] = 1.0
            continue
        k = 0
        prev_inserted = True
        for s in segments:
            if s.source == "inserted":
                prev_inserted = True
                continue
            if prev_inserted:  # a policy span after an observation (or at the start) opens the next turn
                k += 1
            prev_inserted = False
            end = min(s.end, t)
            index[i, s.start: end] = float(k)
            reward[i, s.start: end] = float(rewards[k - 1]) if k - 1 < len(rewards) else 0.0
    return index.to(mask.device), reward.to(mask.device)


@produces("turn_index", "turn_reward")
def _turns(ctx: ExtraContext, keys: frozenset[str]) -> dict[str, torch.Tensor]:
    """Each token's policy turn and its turn's reward, from the episodes' segments (no model pass)."""
    index, reward = (x.cpu() for x in turn_tensors(ctx.completions, ctx.batch.completion_mask))
    return {"turn_index": index, "turn_reward": reward}

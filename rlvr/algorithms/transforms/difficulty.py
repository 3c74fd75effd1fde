"""Per-row quantities shared by the difficulty-aware advantage estimators and transforms.

- :func:`success` — whether each completion is correct ([N] float64 in {0, 1}): the ``correct`` score
  component when the task reports one (every built-in task does), else the training rewards, which must
  then be binary. Methods that weigh prompts by their success rate (F-GRPO, A-GRAE, HA-DW, MCPO, pairing)
  read correctness, not the training reward, so a format bonus or a reward transform upstream does not
  shift their difficulty estimate.
- :func:`success_rate` — the group mean of :func:`success` for each row ([N]).
- :func:`seq_mean_logp` — the masked mean of per-token log-probs per row ([N]), 0 for an empty completion.
"""

from __future__ import annotations

from typing import Mapping

from rlvr.algorithms.grouping import group_mean
from rlvr.lazy import torch

__all__ = ["success", "success_rate", "seq_mean_logp", "group_ids"]


def success(rewards: torch.Tensor, components: Mapping[str, torch.Tensor]) -> torch.Tensor:
    """[N] float64 correctness: ``components["correct"]`` if present, else the (binary) rewards."""
    if "correct" in components:
        return components["correct"].to(torch.float64)
    r = rewards.to(torch.float64)
    if not bool(((r == 0) | (r == 1)).all()):
        raise ValueError("this method reads correctness: it needs a 'correct' score component or binary "
                         f"0/1 rewards, got rewards such as {sorted(set(r.tolist()))[:4]}")
    return r


def success_rate(rewards: torch.Tensor, components: Mapping[str, torch.Tensor],
                 group_index: torch.Tensor) -> torch.Tensor:
    """[N] float64 fraction of correct completions in each row's group."""
    return group_mean(success(rewards, components), group_index)


def seq_mean_logp(logp: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
    """[N] float64 ``sum_t M logp / max(|o|, 1)``."""
    m = mask.to(torch.float64)
    return (logp.to(torch.float64) * m).sum(-1) / m.sum(-1).clamp(min=1.0)


def group_ids(group_index: torch.Tensor) -> tuple[torch.Tensor, int]:
    """``(inverse [N] in 0..G-1, G)``: dense group numbers for per-group tensors."""
    uniq, inv = torch.unique(group_index, return_inverse=True)
    return inv, int(uniq.numel())

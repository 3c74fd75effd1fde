"""Length-based reward shaping: DAPO's soft overlong punishment (Yu et al. 2025, arXiv:2503.14476, §3.4).

With L_max the completion limit (``rollout.max_new_tokens``) and L_cache the soft buffer, for a
completion of |y| tokens ([N] lengths -> [N] penalties, added to the reward before advantages)::

    R_len(y) = 0                                      |y| <= L_max - L_cache
             = ((L_max - L_cache) - |y|) / L_cache     L_max - L_cache < |y| <= L_max
             = -1                                     |y| > L_max
    R = R_task + factor * R_len

Generations are hard-capped at L_max, so truncated completions get exactly ``-factor`` (verl's form
``min(-(|y| - (L_max - L_cache)) / L_cache * factor, 0)``).
"""

from __future__ import annotations

import torch

__all__ = ["overlong_penalty"]


def overlong_penalty(lengths: torch.Tensor, max_len: int, buffer: int, factor: float = 1.0) -> torch.Tensor:
    """Soft overlong penalty per completion, float64 [N] (0 or negative)."""
    if not 0 < buffer <= max_len:
        raise ValueError(f"overlong buffer must be in (0, max_len={max_len}], got {buffer}")
    exceed = lengths.to(torch.float64) - (max_len - buffer)
    return (-exceed / buffer).clamp(min=-1.0, max=0.0) * factor

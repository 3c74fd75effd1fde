"""Length-based reward shaping: DAPO's soft overlong punishment (Yu et al. 2025, arXiv:2503.14476, §3.4).

With L_max the completion limit (``rollout.max_new_tokens``) and L_cache the soft buffer, for a
completion of |y| tokens ([N] lengths -> [N] penalties, added to the reward before advantages)::

    R_len(y) = 0                                      |y| <= L_max - L_cache
             = ((L_max - L_cache) - |y|) / L_cache     L_max - L_cache < |y| <= L_max
             = -1                                     |y| > L_max
    R = R_task + factor * R_len

Generations are hard-capped at L_max, so truncated completions get exactly ``-factor`` (verl's form
``min(-(|y| - (L_max - L_cache)) / L_cache * factor, 0)``).

Registered as the reward shaper ``soft_overlong`` (``algorithm.overlong.soft_penalty`` turns it on), added
to each completion's reward when it is scored, so dynamic sampling and prompt statistics see it too.
"""

from __future__ import annotations

from pydantic import Field

from rlvr.algorithms.registry import REWARD_SHAPERS, ShapingInputs
from rlvr.lazy import torch
from rlvr.registry import Params

__all__ = ["overlong_penalty", "SoftOverlongParams"]


def overlong_penalty(lengths: torch.Tensor, max_len: int, buffer: int, factor: float = 1.0) -> torch.Tensor:
    """Soft overlong penalty per completion, float64 [N] (0 or negative)."""
    if not 0 < buffer <= max_len:
        raise ValueError(f"overlong buffer must be in (0, max_len={max_len}], got {buffer}")
    exceed = lengths.to(torch.float64) - (max_len - buffer)
    return (-exceed / buffer).clamp(min=-1.0, max=0.0) * factor


class SoftOverlongParams(Params):
    buffer_frac: float = Field(0.2, gt=0.0, le=1.0, description="L_cache as a fraction of the completion limit")
    factor: float = Field(1.0, ge=0.0, description="penalty at the limit (-factor)")


@REWARD_SHAPERS.register("soft_overlong", SoftOverlongParams)
def soft_overlong(inp: ShapingInputs, p: SoftOverlongParams) -> torch.Tensor:
    """DAPO's soft overlong punishment, [N] float64 added to the reward."""
    buffer = max(1, round(p.buffer_frac * inp.max_new_tokens))
    return overlong_penalty(inp.lengths, inp.max_new_tokens, buffer, p.factor)

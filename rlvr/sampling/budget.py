"""Rollout budget allocation: how many completions each sampled prompt gets (the default: a fixed number).

Allocators follow :class:`rlvr.sampling.base.Allocator`: ``allocate`` gives the first round's counts,
``extend`` asks for more completions of chosen groups stage by stage, and ``finalize`` may drop completions
or add reused ones. Adaptive allocators live one per file beside this one.
"""

from __future__ import annotations

from pydantic import Field

from rlvr.registry import Params
from rlvr.sampling.base import ALLOCATORS, Allocator, AllocatorContext

__all__ = ["FixedBudget", "FixedParams"]


class FixedBudget(Allocator):
    """Every prompt gets ``group_size`` completions (GRPO's default)."""


class FixedParams(Params):
    group_size: int | None = Field(None, gt=0, description="completions per prompt (default: rollout.group_size)")


@ALLOCATORS.register("fixed", FixedParams)
def fixed(ctx: AllocatorContext, p: FixedParams) -> FixedBudget:
    """Every prompt gets the same number of completions, in one round (GRPO)."""
    return FixedBudget(p.group_size or ctx.group_size)

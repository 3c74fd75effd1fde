"""DARS / DARS-B, Difficulty Adaptive Rollout Sampling (Yang et al. 2025, "Depth-Breadth Synergy in RLVR:
Unlocking LLM Reasoning Gains with Adaptive Exploration", arXiv:2508.13755; code ``yangzhch6/DARS``,
``ray_dars_trainer.py``: ``schedule_ET``, ``schedule_HW``).

After a first stage of N completions per prompt, prompts with pass rate below 0.5 get extra completions so
their cumulative absolute advantage reaches what a 50%-accuracy prompt gets::

    S(p) = 2 p (1 - p), peak P = N / 2          (unnormalised advantages, the default)
    S(p) = 2 sqrt(p (1 - p)), peak P = N        (std-normalised advantages)
    p <- 0.5 / N if p <= 1e-6                   (an all-wrong prompt counts as half a success)
    ET (equal treatment):     dN = ceil((P - N S(p)) / S(p))
    HW (hardness weighted):   dN = ceil((2 (1 - p) P - N S(p)) / S(p))
    dN = 0 for p >= 0.5;  dN = min(dN, N_max - N)

The extra completions join their group (one second generation stage, same temperature); then every group
whose merged accuracy is 0 or >= ``upper_threshold`` is dropped (the code's built-in filter). DARS-B is the
breadth half: a very large prompt batch with one full-batch update per epoch (the ``dars_b`` recipe).
"""

from __future__ import annotations

import math
from typing import Literal, Sequence

from pydantic import Field

from rlvr.registry import Params
from rlvr.sampling.base import ALLOCATORS, Allocator, AllocatorContext, Group

__all__ = ["DARSParams", "DARSAllocator", "dars_extra"]


class DARSParams(Params):
    schedule: Literal["et", "hw"] = Field("et", description="equal treatment or hardness weighted")
    n: int | None = Field(None, gt=0, description="first-stage completions per prompt (default: rollout.group_size)")
    n_max: int = Field(32, gt=0, description="completions per prompt at most (code: 32 for ET, 64 for HW)")
    std_normalised: bool = Field(False, description="the advantages divide by the group std (code: grpo_use_std)")
    upper_threshold: float = Field(1.0, gt=0.0, le=1.0, description="drop groups with merged accuracy >= this")
    drop_zero_accuracy: bool = Field(True, description="drop groups whose merged accuracy is 0 (no signal)")


def dars_extra(p: float, n: int, n_max: int, schedule: str = "et", std_normalised: bool = False) -> int:
    """Extra completions for a prompt with first-stage pass rate ``p`` out of ``n``."""
    if p >= 0.5:
        return 0
    if p <= 1e-6:
        p = 0.5 / n
    s, peak = (2 * math.sqrt(p * (1 - p)), float(n)) if std_normalised else (2 * p * (1 - p), 0.5 * n)
    target = peak if schedule == "et" else 2 * (1 - p) * peak
    extra = math.ceil((target - n * s) / s - 1e-9)
    return max(0, min(extra, n_max - n))


class DARSAllocator(Allocator):
    def __init__(self, p: DARSParams, group_size: int):
        super().__init__(p.n or group_size)
        self.p = p
        self._last = {"extra": 0.0, "dropped_groups": 0.0}

    def extend(self, groups: Sequence[Group], stage: int) -> list[int]:
        if stage != 1:
            return [0] * len(groups)
        extra = [dars_extra(g.pass_rate, g.n, self.p.n_max, self.p.schedule, self.p.std_normalised) if g.n else 0
                 for g in groups]
        self._last["extra"] = float(sum(extra))
        return extra

    def finalize(self, groups: list[Group], step: int) -> list[Group]:
        def keep(g: Group) -> bool:
            acc = g.pass_rate
            return not ((self.p.drop_zero_accuracy and acc == 0) or acc >= self.p.upper_threshold)

        kept = [g for g in groups if keep(g)]
        self._last["dropped_groups"] = float(len(groups) - len(kept))
        return kept

    def metrics(self) -> dict[str, float]:
        return dict(self._last)


def _check(run_cfg, p: DARSParams) -> list[str]:
    n = p.n or run_cfg.rollout.group_size
    return [f"n_max={p.n_max} must be >= the first stage's {n} completions"] if p.n_max < n else []


@ALLOCATORS.register("dars", DARSParams, check=_check)
def dars(ctx: AllocatorContext, p: DARSParams) -> DARSAllocator:
    """DARS: extra completions for prompts below 50% accuracy, ET or HW schedule, then drop constant groups."""
    return DARSAllocator(p, ctx.group_size)

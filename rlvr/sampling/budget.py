"""Rollout budget allocation: how many completions each sampled prompt gets."""

from __future__ import annotations

from typing import Any, Sequence

from rlvr.core.types import Example, GenerationRequest

__all__ = ["FixedBudget"]


class FixedBudget:
    """Every prompt gets ``group_size`` completions (GRPO's default)."""

    def __init__(self, group_size: int):
        self.group_size = group_size

    def allocate(self, examples: Sequence[Example], stats: Any = None) -> list[GenerationRequest]:
        return [GenerationRequest(ex, self.group_size) for ex in examples]

    def state_dict(self) -> dict[str, Any]:
        return {}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        return None

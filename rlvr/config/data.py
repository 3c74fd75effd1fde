"""The ``data`` section: which prompts each step trains on, how many completions each gets, and the
per-prompt statistics."""

from __future__ import annotations

from typing import Literal

from pydantic import Field

from rlvr.config.fields import Section, component
from rlvr.sampling import ALLOCATORS, SAMPLERS
from rlvr.tasks.noise import LabelNoiseConfig

__all__ = ["DataConfig"]


class DataConfig(Section):
    """Which prompts each step trains on, how many completions each gets, and the per-prompt statistics."""

    sampler: component(SAMPLERS, "uniform") = Field({"name": "uniform"}, validate_default=True,
                                                     description="prompt sampler (which prompts go into a step)")
    budget: component(ALLOCATORS, "fixed") = Field({"name": "fixed"}, validate_default=True,
                                                    description="rollout budget allocator (completions per prompt)")
    stats_decay: float = Field(0.5, ge=0.0, lt=1.0, description="decay of the per-prompt pass-rate and reward-"
                                                                "variance estimates (ema = d ema + (1-d) new)")
    max_prompt_tokens: int | None = Field(None, gt=0, description="longest prompt in tokens (null: what the "
                                          "model's context leaves after rollout.max_new_tokens)")
    prompt_overflow: Literal["error", "drop", "truncate_left"] = Field(
        "error", description="a prompt over the limit: stop with the counts, drop it (counted), or keep its end")
    label_noise: LabelNoiseConfig = Field(default_factory=LabelNoiseConfig, description="wrong gold answers for a "
                                          "share of the training examples (rlvr.tasks.noise)")

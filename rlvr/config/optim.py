"""The ``optim`` section: the optimizer by name and its learning-rate schedule."""

from __future__ import annotations

from typing import Literal

from pydantic import Field

from rlvr.config.fields import Section, component
from rlvr.optim import OPTIMIZERS

__all__ = ["OptimConfig"]


class OptimConfig(Section):
    optimizer: component(OPTIMIZERS, "adamw") = Field({"name": "adamw"}, validate_default=True,
                                                       description="optimizer")
    lr: float = Field(1e-6, gt=0.0, description="peak learning rate")
    weight_decay: float = Field(0.0, ge=0.0, description="AdamW weight decay")
    betas: tuple[float, float] = Field((0.9, 0.999), description="AdamW betas")
    warmup_steps: int = Field(0, ge=0, description="linear warm-up optimizer steps")
    schedule: Literal["constant", "linear", "cosine"] = Field("constant", description="decay after warm-up")
    max_grad_norm: float | None = Field(1.0, gt=0.0, description="gradient clipping norm (null: off)")

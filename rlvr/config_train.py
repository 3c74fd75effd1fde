"""The ``train`` section of the run config: steps, micro-batches, precision, threads, distributed training.

Kept apart from :mod:`rlvr.config` (which validates components against every registry) because it names
no component.
"""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

__all__ = ["TrainConfig", "DistributedConfig"]


class _Section(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class DistributedConfig(_Section):
    """Data-parallel training under torchrun (``rlvr train --nproc N``); ignored in a one-process run."""

    strategy: Literal["ddp", "fsdp"] = Field("ddp", description="ddp: every rank holds the whole model; fsdp: "
                                             "FSDP2 shards weights, gradients and optimizer state over the ranks")
    backend: Literal["auto", "gloo", "nccl"] = Field("auto", description="auto: nccl on CUDA, gloo on CPU")
    timeout_s: float = Field(1800.0, gt=0, description="seconds a rank waits in a collective before failing")


class TrainConfig(_Section):
    steps: int = Field(1000, ge=0, description="RL steps (each: rollout, score, update)")
    micro_batch_size: int = Field(64, gt=0, description="completions per forward/backward")
    eval_every: int = Field(100, ge=0, description="held-out eval every K steps (0: only before and after)")
    checkpoint_every: int = Field(250, ge=0, description="checkpoint every K steps (0: only at the end)")
    keep_checkpoints: int = Field(2, gt=0, description="most recent checkpoints kept")
    threads: int | None = Field(None, gt=0, description="torch CPU threads (null: auto, see docs/cpu-threads.md)")
    micro_batch_tokens: int | None = Field(None, gt=0, description="padded tokens per micro-batch at most, "
                                           "beside micro_batch_size (null: rows only)")
    autocast: Literal["bfloat16", "float16"] | None = Field(None, description="forwards under torch.autocast; "
                                                             "weights and optimizer stay in model.dtype")
    activation_checkpointing: bool = Field(False, description="recompute decoder layers in backward")
    distributed: DistributedConfig = Field(default_factory=DistributedConfig)

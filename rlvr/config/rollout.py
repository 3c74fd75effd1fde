"""The ``rollout`` section: the engine, how many completions a step samples and how, and what shapes them
around the engine (wrappers and strategies: each sub-section is defined beside its code)."""

from __future__ import annotations

from pydantic import Field

from rlvr.config.fields import Section, component, named
from rlvr.distributed.ray_engine import RayConfig
from rlvr.engines.base import ENGINES
from rlvr.engines.native_config import NativeConfig
from rlvr.engines.vllm_config import VLLMConfig
from rlvr.rollout.contexts import ContextsConfig
from rlvr.rollout.guidance import GuidanceConfig
from rlvr.rollout.multiturn import MultiTurnConfig  # (also registers the multiturn engine wrapper)
from rlvr.rollout.param_noise import ParamNoiseConfig
from rlvr.rollout.scaffold import ScaffoldConfig
from rlvr.rollout.strategies.base import ROLLOUT_STRATEGIES

__all__ = ["RolloutConfig"]


class RolloutConfig(Section):
    engine: named(ENGINES) = Field("hf", description="rollout engine")
    prompts_per_step: int = Field(32, gt=0, description="prompts (groups) sampled per training step")
    group_size: int = Field(8, gt=0, description="completions sampled per prompt")
    temperature: float = Field(1.0, gt=0.0, description="sampling temperature")
    top_p: float = Field(1.0, gt=0.0, le=1.0, description="nucleus sampling mass")
    max_new_tokens: int = Field(256, gt=0, description="completion length limit (tokens)")
    batch_size: int = Field(256, gt=0, description="sequences per generate call")
    param_noise: ParamNoiseConfig = Field(default_factory=ParamNoiseConfig)
    guidance: GuidanceConfig = Field(default_factory=GuidanceConfig)
    contexts: ContextsConfig = Field(default_factory=ContextsConfig)
    scaffold: ScaffoldConfig = Field(default_factory=ScaffoldConfig)
    multiturn: MultiTurnConfig = Field(default_factory=MultiTurnConfig)
    strategy: component(ROLLOUT_STRATEGIES, "plain") = Field({"name": "plain"}, validate_default=True,
                                                              description="how rollouts are produced around the "
                                                              "engine (rlvr.rollout.strategies.base)")
    vllm: VLLMConfig = Field(default_factory=VLLMConfig)
    native: NativeConfig = Field(default_factory=NativeConfig)
    ray: RayConfig = Field(default_factory=RayConfig, description="rollout.engine=ray: Ray rollout workers")
    max_staleness: int = Field(0, ge=0, description="asynchronous rollouts: generate up to K optimizer steps "
                                                    "ahead of the update (0: synchronous; rlvr.distributed.async_rollouts)")
    stages: int = Field(0, ge=0, description="Mu-GRPO: S generation stages over the run, each generated at once "
                                             "with its first step's policy (0: off; rlvr.distributed.async_rollouts)")
    producer_threads: int | None = Field(None, gt=0, description="torch threads of the asynchronous producer "
                                         "(null: train.threads, the trainer's count)")

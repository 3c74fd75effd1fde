"""Rollout engines."""

from rlvr.rollout import guidance, hf, native, param_noise, vllm_engine  # noqa: F401  (registration: engines, engine wrappers)
from rlvr.rollout.base import ENGINES, RolloutEngine, encode_prompt
from rlvr.rollout.hf import HFEngine
from rlvr.rollout.native import NativeEngine
from rlvr.rollout.wrappers import ENGINE_WRAPPERS, EngineWrapper

__all__ = ["ENGINES", "ENGINE_WRAPPERS", "EngineWrapper", "HFEngine", "NativeEngine", "RolloutEngine",
           "encode_prompt"]

"""Rollout engines."""

# registration: engines, engine wrappers, rollout strategies
from rlvr.rollout import guidance, hf, latr, native, param_noise, ray_engine, spec_rl, strategies, vllm_engine  # noqa: F401
from rlvr.rollout.base import ENGINES, RolloutEngine, encode_prompt
from rlvr.rollout.hf import HFEngine
from rlvr.rollout.native import NativeEngine
from rlvr.rollout.strategies import ROLLOUT_STRATEGIES
from rlvr.rollout.wrappers import ENGINE_WRAPPERS, EngineWrapper

__all__ = ["ENGINES", "ENGINE_WRAPPERS", "ROLLOUT_STRATEGIES", "EngineWrapper", "HFEngine", "NativeEngine",
           "RolloutEngine", "encode_prompt"]

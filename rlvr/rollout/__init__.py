"""Rollout engines.

The engine wrappers register on import (below: every run composes them); each engine and rollout
strategy loads when its name is first looked up (:mod:`rlvr.registry_index`).
"""

from rlvr.lazy import lazy_exports
from rlvr.rollout import contexts, guidance, param_noise, strategies  # noqa: F401  (registration: engine wrappers)
from rlvr.rollout.base import ENGINES, RolloutEngine, encode_prompt
from rlvr.rollout.strategies import ROLLOUT_STRATEGIES
from rlvr.rollout.wrappers import ENGINE_WRAPPERS, EngineWrapper

__all__ = ["ENGINES", "ENGINE_WRAPPERS", "ROLLOUT_STRATEGIES", "EngineWrapper", "HFEngine", "NativeEngine",
           "RolloutEngine", "encode_prompt"]

__getattr__ = lazy_exports(__name__, {"HFEngine": "hf", "NativeEngine": "native"})

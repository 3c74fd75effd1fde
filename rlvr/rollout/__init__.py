"""What shapes a step's rollouts around an engine: the engine wrappers (``ENGINE_WRAPPERS``: multi-turn
episodes, rollout strategies, guidance, parameter noise, strategy contexts) and the rollout strategies
(:mod:`rlvr.rollout.strategies`).

The engine wrappers register on import (below: every run composes them); each rollout strategy loads when
its name is first looked up (:mod:`rlvr.registry_index`). The engines themselves are in :mod:`rlvr.engines`.
"""

from rlvr.rollout import contexts, guidance, param_noise  # noqa: F401  (registration: engine wrappers)
from rlvr.rollout.strategies import base as _strategies  # noqa: F401  (registration: the strategy wrapper)
from rlvr.rollout.strategies.base import ROLLOUT_STRATEGIES
from rlvr.rollout.wrappers import ENGINE_WRAPPERS, EngineWrapper

__all__ = ["ENGINE_WRAPPERS", "ROLLOUT_STRATEGIES", "EngineWrapper"]

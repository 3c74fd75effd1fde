"""Rollout engines."""

from rlvr.rollout import hf  # noqa: F401  (registration)
from rlvr.rollout.base import ENGINES, RolloutEngine, encode_prompt
from rlvr.rollout.hf import HFEngine

__all__ = ["ENGINES", "HFEngine", "RolloutEngine", "encode_prompt"]

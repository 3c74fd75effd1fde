"""Data types that flow between rlvr's components."""

from rlvr.core.types import Completion, Example, SamplingParams, Score, GenerationRequest
from rlvr.core.batch import RolloutBatch, build_batch

__all__ = [
    "Completion",
    "Example",
    "GenerationRequest",
    "RolloutBatch",
    "SamplingParams",
    "Score",
    "build_batch",
]

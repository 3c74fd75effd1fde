"""Data types that flow between rlvr's components."""

from rlvr.core.types import Completion, Example, SamplingParams, Score, GenerationRequest
from rlvr.core.state import DictState

__all__ = [
    "Completion",
    "DictState",
    "Example",
    "GenerationRequest",
    "RolloutBatch",
    "SamplingParams",
    "Score",
    "build_batch",
]


def __getattr__(name: str):
    # rlvr.core.batch needs torch; importing it only on use keeps torch out of code that needs only the
    # plain types (rlvr.cli.verify, the tasks and verifiers), so `rlvr verify` can start fast.
    if name in ("RolloutBatch", "build_batch"):
        from rlvr.core import batch

        return getattr(batch, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")

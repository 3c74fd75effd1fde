"""The rollout-engine contract.

An engine turns requests ``(example, n)`` into completions that carry the behaviour policy's per-token
log-probs. ``hf`` (transformers, CPU-friendly) is built in; GPU engines (vLLM) and rollout strategies
(trees, speculative reuse, multi-turn) implement or wrap the same protocol.
"""

from __future__ import annotations

import contextlib
from typing import Iterator, Protocol, Sequence, runtime_checkable

from rlvr.core.types import Completion, GenerationRequest, SamplingParams
from rlvr.lazy import torch
from rlvr.registry import Registry

__all__ = ["RolloutEngine", "ENGINES", "seeded_sampling"]


@runtime_checkable
class RolloutEngine(Protocol):
    def generate(self, requests: Sequence[GenerationRequest], sampling: SamplingParams) -> list[Completion]:
        """``sum(r.n)`` completions; completion ``k`` of request ``i`` has ``group == i``."""
        ...

    def sync_weights(self) -> None:
        """Make the next ``generate`` use the trainer's current weights (a no-op when they share them)."""
        ...


ENGINES: Registry = Registry("rollout engine")


@contextlib.contextmanager
def seeded_sampling(device, seed: int | None) -> Iterator[None]:
    """The block samples on ``device`` from ``seed`` (when not None); the random state is restored after.

    Seeds the generator that sampling on ``device`` draws from, as ``torch.manual_seed`` does for it, and no
    other: ``torch.manual_seed`` also seeds every CUDA, XPU and MTIA generator, lazily, recording a stack
    trace each, which costs about a millisecond per call even on a CPU-only machine."""
    device = torch.device(device)
    with torch.random.fork_rng(devices=[device] if device.type == "cuda" else []):
        if seed is not None:
            if device.type == "cuda":
                index = device.index if device.index is not None else torch.cuda.current_device()
                torch.cuda.default_generators[index].manual_seed(seed)
            torch.default_generator.manual_seed(seed)
        yield

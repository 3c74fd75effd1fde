"""The rollout-engine contract.

An engine turns requests ``(example, n)`` into completions that carry the behaviour policy's per-token
log-probs. ``hf`` (transformers, CPU-friendly) is built in; GPU engines (vLLM) and rollout strategies
(trees, speculative reuse, multi-turn) implement or wrap the same protocol.
"""

from __future__ import annotations

import contextlib
from dataclasses import dataclass
from typing import Any, Callable, Iterator, Protocol, Sequence, runtime_checkable

from rlvr.core.types import Completion, GenerationRequest, SamplingParams
from rlvr.lazy import torch
from rlvr.registry import Registry

__all__ = ["RolloutEngine", "ENGINES", "seeded_sampling", "EngineMemory", "ENGINE_MEMORY", "memory_rule",
           "engine_memory", "local_cache_memory"]


@runtime_checkable
class RolloutEngine(Protocol):
    def generate(self, requests: Sequence[GenerationRequest], sampling: SamplingParams) -> list[Completion]:
        """``sum(r.n)`` completions; completion ``k`` of request ``i`` has ``group == i``."""
        ...

    def sync_weights(self) -> None:
        """Make the next ``generate`` use the trainer's current weights (a no-op when they share them)."""
        ...


ENGINES: Registry = Registry("rollout engine")


@dataclass(frozen=True)
class EngineMemory:
    """What an engine holds on each trainer device, in bytes: during the update and while generating."""

    update: float
    generation: float
    note: str
    trainer_weights: bool = True  # generates with the trainer's own model (FSDP gathers it whole meanwhile)


@dataclass(frozen=True)
class MemoryQuery:
    """What an engine's memory rule is asked about: the policy's shape (:class:`rlvr.models.shape.Shape`), the
    run's ``rollout`` section, the device ("cpu" or "cuda"), the rows one device generates, the longest
    sequence (prompt + completion), the bytes of a weight and the card's bytes (for engines that take a share of
    it)."""

    shape: Any
    device: str
    rollout: Any
    rows: int
    sequence: int
    bytes_per_value: int
    card_bytes: float
    sharded: bool = False  # FSDP: the trainer holds shards


MemoryRule = Callable[[MemoryQuery], EngineMemory]
ENGINE_MEMORY: dict[str, MemoryRule] = {}  # engine name -> its rule, registered beside the engine


def memory_rule(name: str) -> Callable[[MemoryRule], MemoryRule]:
    """Register ``rule`` as the memory of the engine called ``name`` (read by ``rlvr plan``)."""

    def deco(rule: MemoryRule) -> MemoryRule:
        ENGINE_MEMORY[name] = rule
        return rule

    return deco


def engine_memory(name: str, query: MemoryQuery) -> EngineMemory:
    """The memory of engine ``name`` (its module loads on the lookup); an engine without a rule counts nothing,
    and says so."""
    ENGINES.get(name)
    rule = ENGINE_MEMORY.get(name)
    if rule is None:
        return EngineMemory(0.0, 0.0, f"engine {name!r} states no memory rule: not counted")
    return rule(query)


def local_cache_memory(q: MemoryQuery) -> EngineMemory:
    """An engine that decodes with the trainer's own weights (``hf``, ``native``): the KV cache of the rows it
    generates at once, ``2 L kv_heads head_dim`` values per token, and two rows of float32 logits per row
    (the last position's and its softmax)."""
    s = q.shape
    rows = min(q.rollout.batch_size, q.rows)
    kv = rows * s.layers * 2 * s.kv_heads * s.head_dim * q.sequence * q.bytes_per_value
    logits = rows * s.vocab * 4 * 2
    return EngineMemory(0.0, kv + logits, f"KV cache of {rows} rows + their logits")


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

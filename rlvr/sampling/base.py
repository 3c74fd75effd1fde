"""The contracts of prompt samplers and rollout budget allocators, and their registries.

A step's rollouts are collected in rounds (``rlvr.train.rollouts``)::

    examples = sampler.next(k, step)                      which prompts
    requests = allocator.allocate(examples, stats)        how many completions each gets first
    loop: extra = allocator.extend(groups, stage)         more completions for chosen groups (multi-stage
          (stop when every entry is 0)                    allocators: DARS, AR3PO, AERO); each stage is one
                                                          generate-and-score call
    sampler.observe(groups, step); stats.update(...)      every generated completion is recorded
    groups = allocator.finalize(groups, step)             drop or add completions (rejection, response reuse)

Samplers and allocators are built from config by registered factories ``fn(ctx, params) -> object``; their
whole state is a JSON-able dict (``state_dict`` / ``load_state_dict``) saved in every checkpoint, and any
randomness they use is seeded by ``(run seed, step, ...)`` so a resumed run draws what an uninterrupted
one draws. Groups may differ in size; nothing downstream reshapes to ``[B, G]``. Both contexts carry the
run's algorithm state (``rlvr.train.algo_state.AlgorithmState``, or None when built without one), the channel
through which a sampler reads a quantity an algorithm component learns per prompt (``tb``'s log Z table).
"""

from __future__ import annotations

import zlib
from dataclasses import dataclass, field
from typing import Any, Callable, Sequence

from rlvr.core.types import Completion, Example, GenerationRequest, Score
from rlvr.lazy import np
from rlvr.registry import Registry

__all__ = ["SAMPLERS", "ALLOCATORS", "Group", "SamplerContext", "AllocatorContext", "Allocator", "ExampleRows",
           "gumbel_top_k", "rng_for", "stable_hash"]

SAMPLERS: Registry[Callable[..., Any]] = Registry("prompt sampler")
ALLOCATORS: Registry[Callable[..., Any]] = Registry("rollout budget allocator")


@dataclass
class Group:
    """The completions of one prompt in one step, with their scores and training rewards."""

    example: Example
    completions: list[Completion] = field(default_factory=list)
    scores: list[Score] = field(default_factory=list)
    rewards: list[float] = field(default_factory=list)  # training rewards (task reward + shaping)
    reused: int = 0  # completions added from a buffer instead of generated this step

    @property
    def n(self) -> int:
        return len(self.completions)

    @property
    def correct(self) -> list[float]:
        return [s.components.get("correct", 0.0) for s in self.scores]

    @property
    def pass_rate(self) -> float:
        c = self.correct
        return sum(c) / len(c) if c else 0.0


@dataclass(frozen=True)
class SamplerContext:
    """What a sampler factory may use: the train examples, the shared statistics and the run's sizes."""

    examples: Sequence[Example]
    stats: Any  # PromptStats
    seed: int = 0
    prompts_per_step: int = 1
    group_size: int = 1
    domain_weights: dict[str, float] | None = None  # a task mixture's weights, keyed by Example.task
    algorithm_state: Any = None  # the run's AlgorithmState (states by config path), for learned per-prompt tables


@dataclass(frozen=True)
class AllocatorContext:
    stats: Any  # PromptStats
    seed: int = 0
    prompts_per_step: int = 1
    group_size: int = 1
    examples: Sequence[Example] = ()  # the train examples (an allocator that re-creates stored groups)
    algorithm_state: Any = None  # as SamplerContext.algorithm_state


class Allocator:
    """Base class: one round of ``group_size`` completions per prompt and nothing else (GRPO)."""

    def __init__(self, group_size: int):
        self.group_size = group_size

    def allocate(self, examples: Sequence[Example], stats: Any = None) -> list[GenerationRequest]:
        return [GenerationRequest(ex, self.group_size) for ex in examples]

    def extend(self, groups: Sequence[Group], stage: int) -> list[int]:
        """Extra completions per group for generation stage ``stage`` (1, 2, ...); all zero ends the round."""
        return [0] * len(groups)

    def finalize(self, groups: list[Group], step: int) -> list[Group]:
        return groups

    def state_dict(self) -> dict[str, Any]:
        return {}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        return None


def stable_hash(text: str) -> int:
    """A process-independent hash of a string (Python's ``hash`` of str is salted per process)."""
    return zlib.crc32(text.encode("utf-8"))


def rng_for(*keys: int | str) -> np.random.Generator:
    """A numpy generator seeded by ``keys`` (ints, or strings hashed stably)."""
    return np.random.default_rng([(k if isinstance(k, int) else stable_hash(k)) % 2**64 for k in keys])


class ExampleRows:
    """The statistics rows of a fixed list of examples, looked up once and refreshed after a stats reload."""

    def __init__(self, examples: Sequence[Example], stats: Any):
        self.examples, self.stats = list(examples), stats
        self._rows: np.ndarray | None = None
        self._generation = -1

    def rows(self) -> np.ndarray:
        if self._rows is None or self._generation != self.stats.generation:
            self._rows = self.stats.rows_for([e.id for e in self.examples], create=True)
            self._generation = self.stats.generation
        return self._rows

    def estimate(self, prior: float, column: str = "ema_pass") -> np.ndarray:
        """Each example's pass-rate estimate (``column``), ``prior`` for examples never seen."""
        rows = self.rows()
        seen = self.stats.column("visits")[rows] > 0
        return np.where(seen, self.stats.column(column)[rows], prior)


def gumbel_top_k(weights: np.ndarray, k: int, rng: np.random.Generator,
                 exclude: np.ndarray | None = None) -> np.ndarray:
    """``k`` distinct indices drawn without replacement with probability proportional to ``weights``
    (successive sampling, via the Gumbel-top-k trick), in draw order."""
    keys = np.log(np.maximum(weights, 1e-300)) + rng.gumbel(size=len(weights))
    keys[weights <= 0] = -np.inf
    if exclude is not None and len(exclude):
        keys[exclude] = -np.inf
    k = min(k, int(np.isfinite(keys).sum()))
    if k <= 0:
        return np.zeros(0, dtype=np.int64)
    top = np.argpartition(-keys, k - 1)[:k]
    return top[np.argsort(-keys[top], kind="stable")]

"""Prompt samplers. The default draws uniformly without replacement, epoch by epoch.

A sampler's whole state is a small JSON-able dict saved in every checkpoint, so a resumed run draws
exactly the prompts the uninterrupted run would have drawn.

With a task mixture (``domain_weights``), each slot of a batch first draws its domain with probability
proportional to the domain's weight, then the next prompt of that domain's own uniform stream; the draws
are seeded by ``(seed, number of calls so far)``.
"""

from __future__ import annotations

import random
from typing import Any, Sequence

from rlvr.core.types import Example
from rlvr.lazy import np
from rlvr.registry import Params
from rlvr.sampling.base import SAMPLERS, Group, SamplerContext, rng_for

__all__ = ["UniformSampler", "MixtureSampler", "uniform_stream"]


class UniformSampler:
    """Each epoch is a fresh permutation seeded by ``(seed, epoch)``; batches may span epochs."""

    def __init__(self, examples: Sequence[Example], seed: int = 0):
        if not examples:
            raise ValueError("cannot sample prompts from an empty split")
        self.examples, self.seed = list(examples), seed
        self.epoch, self.pos = 0, 0
        self._order = self._permutation(0)

    def _permutation(self, epoch: int) -> list[int]:
        order = list(range(len(self.examples)))
        random.Random(f"{self.seed}-{epoch}").shuffle(order)
        return order

    def next(self, k: int, step: int = 0) -> list[Example]:
        out = []
        while len(out) < k:
            if self.pos == len(self._order):
                self.epoch, self.pos = self.epoch + 1, 0
                self._order = self._permutation(self.epoch)
            out.append(self.examples[self._order[self.pos]])
            self.pos += 1
        return out

    def observe(self, groups: Sequence[Group], step: int) -> None:
        return None

    def state_dict(self) -> dict[str, Any]:
        return {"epoch": self.epoch, "pos": self.pos, "seed": self.seed, "num_examples": len(self.examples)}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        if state["num_examples"] != len(self.examples):
            raise ValueError(f"sampler state is for {state['num_examples']} examples, the task has "
                             f"{len(self.examples)}: the data changed since the checkpoint")
        self.seed, self.epoch, self.pos = state["seed"], state["epoch"], state["pos"]
        self._order = self._permutation(self.epoch)


class MixtureSampler:
    """Uniform without replacement inside each domain; the domain of each slot drawn by weight."""

    def __init__(self, examples: Sequence[Example], weights: dict[str, float], seed: int = 0):
        by_domain: dict[str, list[Example]] = {}
        for ex in examples:
            by_domain.setdefault(ex.task, []).append(ex)
        missing = [d for d, w in weights.items() if w > 0 and d not in by_domain]
        if missing:
            raise ValueError(f"mixture weights name domains with no train examples: {missing}")
        self.domains = [d for d in by_domain if weights.get(d, 0.0) > 0]
        self.weights = np.asarray([weights[d] for d in self.domains], dtype=np.float64)
        self.streams = {d: UniformSampler(by_domain[d], seed=f"{seed}-{d}") for d in self.domains}
        self.seed, self.calls = seed, 0

    def draw_domains(self, k: int, probs: np.ndarray) -> list[str]:
        rng = rng_for(int(self.seed), "mixture", self.calls)
        self.calls += 1
        return [self.domains[i] for i in rng.choice(len(self.domains), size=k, p=probs / probs.sum())]

    def next(self, k: int, step: int = 0, probs: np.ndarray | None = None) -> list[Example]:
        doms = self.draw_domains(k, self.weights if probs is None else probs)
        return [self.streams[d].next(1)[0] for d in doms]

    def observe(self, groups: Sequence[Group], step: int) -> None:
        return None

    def state_dict(self) -> dict[str, Any]:
        return {"calls": self.calls, "streams": {d: s.state_dict() for d, s in self.streams.items()}}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        if set(state["streams"]) != set(self.streams):
            raise ValueError(f"sampler state is for domains {sorted(state['streams'])}, the mixture has "
                             f"{sorted(self.streams)}")
        self.calls = int(state["calls"])
        for d, s in state["streams"].items():
            self.streams[d].load_state_dict(s)


def uniform_stream(ctx: SamplerContext) -> UniformSampler | MixtureSampler:
    """The fresh-prompt stream every sampler starts from: uniform, or weighted by domain for a mixture."""
    if ctx.domain_weights:
        return MixtureSampler(ctx.examples, ctx.domain_weights, ctx.seed)
    return UniformSampler(ctx.examples, ctx.seed)


@SAMPLERS.register("uniform", Params)
def uniform(ctx: SamplerContext, p: Params) -> UniformSampler | MixtureSampler:
    """Uniform without replacement, epoch by epoch (a mixture: per domain, domains drawn by weight)."""
    return uniform_stream(ctx)

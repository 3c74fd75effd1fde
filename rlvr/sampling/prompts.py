"""Prompt samplers. The default draws uniformly without replacement, epoch by epoch.

A sampler's whole state is a small JSON-able dict saved in every checkpoint, so a resumed run draws
exactly the prompts the uninterrupted run would have drawn.
"""

from __future__ import annotations

import random
from typing import Any, Sequence

from rlvr.core.types import Example

__all__ = ["UniformSampler"]


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

    def next(self, k: int) -> list[Example]:
        out = []
        while len(out) < k:
            if self.pos == len(self._order):
                self.epoch, self.pos = self.epoch + 1, 0
                self._order = self._permutation(self.epoch)
            out.append(self.examples[self._order[self.pos]])
            self.pos += 1
        return out

    def state_dict(self) -> dict[str, Any]:
        return {"epoch": self.epoch, "pos": self.pos, "seed": self.seed, "num_examples": len(self.examples)}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        if state["num_examples"] != len(self.examples):
            raise ValueError(f"sampler state is for {state['num_examples']} examples, the task has "
                             f"{len(self.examples)}: the data changed since the checkpoint")
        self.seed, self.epoch, self.pos = state["seed"], state["epoch"], state["pos"]
        self._order = self._permutation(self.epoch)

"""The task contract: examples in splits, and named, weighted verifiers that score completions."""

from __future__ import annotations

import traceback
from dataclasses import dataclass
from typing import Callable, Hashable, Sequence, TypeVar

from rlvr.core.types import Example, Score
from rlvr.registry import Registry
from rlvr.verifiers.base import Verifier

__all__ = ["Task", "WeightedVerifier", "TASKS", "draw_distinct"]

T = TypeVar("T")


def _safe(verifier: Verifier, example: Example, text: str) -> Score:
    try:
        return verifier(example, text)
    except Exception as e:  # verifier bugs on odd output score 0 and are reported by the scorer, never raised
        return Score(0.0, {"correct": 0.0}, {"error": f"{type(e).__name__}: {e}", "traceback": traceback.format_exc()})

TASKS: Registry = Registry("task")


@dataclass(frozen=True)
class WeightedVerifier:
    verifier: Verifier
    weight: float = 1.0


class Task:
    """Train and eval examples plus the verifiers that score them.

    ``score`` returns the weighted sum of the verifiers' rewards, each verifier's reward as a named
    component, and ``correct`` from the first verifier. It never raises on model output.

    Training also calls ``score_group`` once per prompt with the scores of all its completions, for
    rewards that depend on the whole group (POW3R's policy-aware rubric weights); evaluation uses
    ``score`` alone. A task that keeps state across steps returns it from ``state_dict`` (JSON-able),
    which checkpoints save and ``load_state_dict`` restores.
    """

    def __init__(self, name: str, splits: dict[str, Sequence[Example]], verifiers: Sequence[WeightedVerifier]):
        if not verifiers:
            raise ValueError(f"task {name!r} has no verifier")
        for split, exs in splits.items():
            ids = [e.id for e in exs]
            if len(set(ids)) != len(ids):
                raise ValueError(f"task {name!r}: duplicate example ids in split {split!r}")
        self.name, self._splits, self.verifiers = name, {k: list(v) for k, v in splits.items()}, list(verifiers)

    @property
    def splits(self) -> list[str]:
        return list(self._splits)

    def examples(self, split: str) -> list[Example]:
        try:
            return self._splits[split]
        except KeyError:
            raise KeyError(f"task {self.name!r} has no split {split!r}; it has {self.splits}") from None

    def replace_split(self, split: str, examples: Sequence[Example]) -> None:
        """Put ``examples`` in place of ``split``'s (the same ids in the same order: e.g. with corrupted labels)."""
        if [e.id for e in examples] != [e.id for e in self.examples(split)]:
            raise ValueError(f"task {self.name!r}: replace_split({split!r}) must keep the examples' ids and order")
        self._splits[split] = list(examples)

    @property
    def batched(self) -> bool:
        """Whether :meth:`score_batch` scores a whole step at once: true when a verifier scores batches (a
        TRL-style reward function) and the task keeps the default per-completion combination."""
        return type(self).score is Task.score and any(getattr(wv.verifier, "batched", False) for wv in self.verifiers)

    def score(self, example: Example, text: str) -> Score:
        return self.score_batch([example], [text])[0]

    def score_batch(self, examples: Sequence[Example], texts: Sequence[str]) -> list[Score]:
        """``score`` for many completions; a verifier with ``score_batch`` is called once for all of them."""
        if type(self).score is not Task.score:  # a task that scores its own way, one completion at a time
            return [self.score(e, t) for e, t in zip(examples, texts)]
        per_verifier = []
        for wv in self.verifiers:
            batch = getattr(wv.verifier, "score_batch", None)
            if batch is not None:
                per_verifier.append(list(batch(examples, texts)))
            else:
                per_verifier.append([_safe(wv.verifier, e, t) for e, t in zip(examples, texts)])
        return [self._combine([pv[i] for pv in per_verifier]) for i in range(len(texts))]

    def _combine(self, scores: Sequence[Score]) -> Score:
        total, comps, info = 0.0, {}, {}
        for i, (wv, s) in enumerate(zip(self.verifiers, scores)):
            total += wv.weight * s.reward
            comps[wv.verifier.name] = s.reward
            if i == 0:
                comps["correct"] = s.components.get("correct", float(s.reward >= 1.0))
            info.update({f"{wv.verifier.name}.{k}": v for k, v in s.info.items()})
        return Score(total, comps, info)

    def score_group(self, example: Example, texts: Sequence[str], scores: Sequence[Score]) -> list[Score]:
        """Training scores of one prompt's completions, given their ``score`` results (default: unchanged)."""
        return list(scores)

    def state_dict(self) -> dict:
        """State kept across training steps, saved in checkpoints (default: none)."""
        return {}

    def load_state_dict(self, state: dict) -> None:
        """Restore what ``state_dict`` returned."""


def draw_distinct(draw: Callable[[int], T | None], n: int, key: Callable[[T], Hashable], what: str,
                  hint: str, patience: int = 50) -> list[T]:
    """``n`` draws with distinct ``key``, in the order drawn: ``draw(k)`` (``k``: how many are kept so far) gives
    a candidate or None (none this time). Raises ValueError after ``patience * n`` draws, naming how many distinct
    ``what`` were found and ``hint`` (how to allow more)."""
    seen: set[Hashable] = set()
    out: list[T] = []
    tries = 0
    while len(out) < n:
        tries += 1
        if tries > patience * n:
            raise ValueError(f"only {len(out)} distinct {what} found for {n}: {hint}")
        item = draw(len(out))
        if item is not None and (k := key(item)) not in seen:
            seen.add(k)
            out.append(item)
    return out

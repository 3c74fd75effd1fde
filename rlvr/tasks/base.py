"""The task contract: examples in splits, and named, weighted verifiers that score completions."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Sequence

from rlvr.core.types import Example, Score
from rlvr.registry import Registry
from rlvr.verifiers.base import Verifier

__all__ = ["Task", "WeightedVerifier", "TASKS"]

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

    def score(self, example: Example, text: str) -> Score:
        total, comps, info = 0.0, {}, {}
        for i, wv in enumerate(self.verifiers):
            try:
                s = wv.verifier(example, text)
            except Exception as e:  # verifier bugs on odd output score 0 and are reported, never raised
                s = Score(0.0, {"correct": 0.0}, {"error": f"{type(e).__name__}: {e}"})
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

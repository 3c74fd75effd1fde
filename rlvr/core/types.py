"""Plain data types: what a task gives, what an engine returns, what a verifier says."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Literal

__all__ = ["Example", "Completion", "Score", "SamplingParams", "GenerationRequest"]


@dataclass(frozen=True)
class Example:
    """One prompt with its reference answer.

    ``id`` is stable across shuffles and resumes: prompt statistics, replay buffers and checkpoints key on it.
    ``target`` is the reference completion text used for supervised warm-up (defaults to the answer).
    """

    id: str
    prompt: str | list[dict[str, str]]
    answer: str
    task: str = ""
    target: str | None = None
    meta: dict[str, Any] = field(default_factory=dict)

    @property
    def sft_target(self) -> str:
        return self.answer if self.target is None else self.target


@dataclass(frozen=True)
class SamplingParams:
    temperature: float = 1.0
    top_p: float = 1.0
    max_new_tokens: int = 16
    seed: int | None = None

    @property
    def greedy(self) -> bool:
        return self.temperature == 0.0


@dataclass(frozen=True)
class GenerationRequest:
    """Sample ``n`` completions of one example (groups may differ in size)."""

    example: Example
    n: int


@dataclass
class Completion:
    """One sampled completion; ``logprobs`` are the behaviour policy's per-token log-probs."""

    example_id: str
    prompt_ids: list[int]
    completion_ids: list[int]
    logprobs: list[float] | None
    finish_reason: Literal["stop", "length"]
    text: str
    group: int = 0  # index of the request this completion answers

    def __len__(self) -> int:
        return len(self.completion_ids)


@dataclass(frozen=True)
class Score:
    """A verifier's verdict. Scoring never raises on model output: bad output scores 0 with a reason."""

    reward: float
    components: dict[str, float] = field(default_factory=dict)
    info: dict[str, Any] = field(default_factory=dict)

    @property
    def correct(self) -> bool:
        return bool(self.components.get("correct", self.reward) >= 1.0)

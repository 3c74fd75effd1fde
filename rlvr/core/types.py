"""Plain data types: what a task gives, what an engine returns, what a verifier says."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Literal

__all__ = ["Example", "Completion", "Score", "SamplingParams", "GenerationRequest", "Segment"]


@dataclass(frozen=True)
class Example:
    """One prompt with its reference answer.

    ``id`` is stable across shuffles and resumes: prompt statistics, replay buffers and checkpoints key on it.
    ``target`` is the reference completion text used for supervised warm-up (defaults to the answer).
    ``images`` are the prompt's images for a vision-language model: PIL images or paths to image files. A
    text prompt marks where each goes with ``<image>`` (else they open the prompt); a chat prompt with
    ``{"type": "image"}`` content parts.
    """

    id: str
    prompt: str | list[dict[str, str]]
    answer: str
    task: str = ""
    target: str | None = None
    meta: dict[str, Any] = field(default_factory=dict)
    images: tuple[Any, ...] = ()

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
    """Sample ``n`` completions of one example (groups may differ in size).

    A request may carry a ``prefix_ids`` to continue: tokens the completion starts with (a reused earlier
    completion, the turns of an episode so far), with their behaviour log-probs ``prefix_logprobs`` when the
    policy sampled them (needed for importance corrections; without them the completion has no behaviour
    log-probs) and ``prefix_source`` saying where they came from (``"prefix"``: tokens the policy sampled
    earlier, trained on; ``"inserted"``: environment or tool output, masked out of the loss). It may set its
    own ``max_new_tokens`` (new tokens after the prefix; default the sampling params'), ``stop`` strings and
    ``stop_token_ids`` (beside EOS); a completion ends with the first one it produces, which is kept.
    """

    example: Example
    n: int
    prefix_ids: tuple[int, ...] = ()
    prefix_logprobs: tuple[float, ...] | None = None
    prefix_source: Literal["prefix", "inserted"] = "prefix"
    max_new_tokens: int | None = None
    stop: tuple[str, ...] = ()
    stop_token_ids: tuple[int, ...] = ()

    def __post_init__(self):
        if self.n < 0:
            raise ValueError(f"a request needs n >= 0, got {self.n}")
        if self.prefix_logprobs is not None and len(self.prefix_logprobs) != len(self.prefix_ids):
            raise ValueError(f"prefix_logprobs has {len(self.prefix_logprobs)} entries for "
                             f"{len(self.prefix_ids)} prefix tokens")
        if self.max_new_tokens is not None and self.max_new_tokens < 0:
            raise ValueError(f"max_new_tokens must be >= 0, got {self.max_new_tokens}")


@dataclass(frozen=True)
class Segment:
    """A span ``[start, end)`` of a completion's tokens and where it came from: ``"sampled"`` by the policy
    in this call, a continued ``"prefix"`` (sampled earlier, e.g. reused), or ``"inserted"`` (environment or
    tool output, never sampled: masked out of the loss)."""

    start: int
    end: int
    source: Literal["sampled", "prefix", "inserted"] = "sampled"


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
    loss_mask: list[float] | None = None  # per completion token (None: every token is trained)
    segments: list[Segment] | None = None  # where each span came from (None: all sampled in this call)
    policy_version: int | None = None  # RL steps the sampling policy had taken (asynchronous rollouts)
    vision: Any = None  # the prompt's images (rlvr.core.vision.VisionInputs), shared by a group's completions

    def __len__(self) -> int:
        return len(self.completion_ids)

    def mask(self) -> list[float]:
        """The per-token loss mask: ``loss_mask``, else 0 on inserted segments and 1 elsewhere."""
        if self.loss_mask is not None:
            if len(self.loss_mask) != len(self.completion_ids):
                raise ValueError(f"completion of {self.example_id!r}: loss_mask has {len(self.loss_mask)} entries "
                                 f"for {len(self.completion_ids)} tokens")
            return list(self.loss_mask)
        out = [1.0] * len(self.completion_ids)
        for seg in self.segments or ():
            if seg.source == "inserted":
                out[seg.start: seg.end] = [0.0] * (seg.end - seg.start)
        return out


@dataclass(frozen=True)
class Score:
    """A verifier's verdict. Scoring never raises on model output: bad output scores 0 with a reason."""

    reward: float
    components: dict[str, float] = field(default_factory=dict)
    info: dict[str, Any] = field(default_factory=dict)

    @property
    def correct(self) -> bool:
        return bool(self.components.get("correct", self.reward) >= 1.0)

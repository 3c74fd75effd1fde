"""The verifier contract.

A verifier maps ``(example, completion text) -> Score``. It never raises on model output: unparsable
output scores 0 with a reason in ``info["reason"]``. ``validate()`` is a self-check every verifier passes:
on its own cases, each gold answer scores 1 and each known wrong answer scores 0.

Write a verifier by subclassing :class:`BaseVerifier`: set ``name``, implement ``score`` (which may raise
on bad input: ``__call__`` turns any exception into a 0 with the reason), and list ``validation_cases``.
Register a factory ``(params) -> verifier`` with ``@VERIFIERS.register("name", ParamsModel)`` so configs can
name it. Plain reward callables ``(prompts, completions, **kw) -> list[float]`` are adapted with
:func:`from_callable`.
"""

from __future__ import annotations

import importlib
from typing import Any, Callable, Protocol, Sequence, runtime_checkable

from rlvr.core.types import Example, Score
from rlvr.registry import Registry

__all__ = ["Verifier", "BaseVerifier", "VERIFIERS", "from_callable", "load_callable", "validate_verifier",
           "build_verifier"]


@runtime_checkable
class Verifier(Protocol):
    name: str

    def __call__(self, example: Example, text: str) -> Score: ...


class BaseVerifier:
    """Base class: ``__call__`` never raises; ``validate`` checks the verifier's own gold/wrong cases."""

    name = "verifier"

    def score(self, example: Example, text: str) -> Score:
        raise NotImplementedError

    def __call__(self, example: Example, text: str) -> Score:
        try:
            return self.score(example, text)
        except Exception as e:  # model output must never crash training
            return Score(0.0, {"correct": 0.0}, {"reason": f"verifier error: {type(e).__name__}: {e}"})

    def validation_cases(self) -> list[tuple[Example, str, float]]:
        """``(example, completion, expected reward)``: at least one gold (1.0) and one wrong (0.0) case."""
        return []

    def validate(self) -> None:
        """Raise ``AssertionError`` unless every validation case scores as expected."""
        cases = self.validation_cases()
        if not any(r == 1.0 for _, _, r in cases) or not any(r == 0.0 for _, _, r in cases):
            raise AssertionError(f"verifier {self.name!r} needs at least one gold and one wrong validation case")
        for ex, text, want in cases:
            got = self(ex, text)
            if got.reward != want:
                raise AssertionError(f"verifier {self.name!r} scored {got.reward} (want {want}) on {ex.id!r} "
                                     f"with completion {text[:80]!r}: {got.info}")


VERIFIERS: Registry = Registry("verifier")


def build_verifier(name: str, params: dict[str, Any] | None = None) -> Verifier:
    """A registered verifier by name, its params validated by its params model."""
    entry = VERIFIERS.get(name)
    return entry.fn(entry.params.model_validate(params or {}))


def validate_verifier(verifier: Verifier, example: Example, wrong: str) -> None:
    """Raise unless the gold answer scores 1 and ``wrong`` scores 0."""
    gold = verifier(example, example.answer).reward
    bad = verifier(example, wrong).reward
    if gold != 1.0 or bad != 0.0:
        raise AssertionError(f"verifier {verifier.name!r} failed its self-check on {example.id!r}: "
                             f"gold answer scored {gold}, wrong answer {wrong!r} scored {bad}")


def load_callable(spec: str) -> Callable[..., Any]:
    """``"package.module:function"`` -> the function."""
    mod, sep, attr = spec.partition(":")
    if not sep or not mod or not attr:
        raise ValueError(f"expected 'package.module:function', got {spec!r}")
    try:
        return getattr(importlib.import_module(mod), attr)
    except (ImportError, AttributeError) as e:
        raise ValueError(f"cannot load reward function {spec!r}: {e}") from e


class _CallableVerifier:
    def __init__(self, fn: Callable[..., Sequence[float]], name: str):
        self.fn, self.name = fn, name

    def __call__(self, example: Example, text: str) -> Score:
        try:
            value = float(self.fn([example.prompt], [text], answers=[example.answer], examples=[example])[0])
        except Exception as e:  # a user's function failing on odd output must not stop training
            return Score(0.0, {"correct": 0.0}, {"error": f"{type(e).__name__}: {e}"})
        return Score(value, {"correct": float(value >= 1.0)})


def from_callable(fn: Callable[..., Sequence[float]] | str, name: str | None = None) -> Verifier:
    """Adapt a batch reward function ``(prompts, completions, **kw) -> list[float]`` to a verifier."""
    if isinstance(fn, str):
        name, fn = name or fn, load_callable(fn)
    return _CallableVerifier(fn, name or getattr(fn, "__name__", "reward_fn"))

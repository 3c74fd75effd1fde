"""The verifier contract.

A verifier maps ``(example, completion text) -> Score``. It never raises on model output: unparsable
output scores 0 with a reason in ``info``. ``validate`` is a self-check every verifier passes: the gold
answer scores 1 and a known wrong answer scores 0. Plain reward callables
``(prompts, completions, **kw) -> list[float]`` are adapted with :func:`from_callable`.
"""

from __future__ import annotations

import importlib
from typing import Any, Callable, Protocol, Sequence, runtime_checkable

from rlvr.core.types import Example, Score
from rlvr.registry import Registry

__all__ = ["Verifier", "VERIFIERS", "from_callable", "load_callable", "validate_verifier"]


@runtime_checkable
class Verifier(Protocol):
    name: str

    def __call__(self, example: Example, text: str) -> Score: ...


VERIFIERS: Registry = Registry("verifier")


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

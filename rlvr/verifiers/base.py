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
import importlib.util
import inspect
import sys
import traceback
import zlib
from pathlib import Path
from typing import Any, Callable, Protocol, Sequence, runtime_checkable

from rlvr.core.types import Example, Score
from rlvr.registry import Registry

__all__ = ["Verifier", "BaseVerifier", "VERIFIERS", "from_callable", "load_callable", "validate_verifier",
           "build_verifier", "params_model_of"]


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
        except Exception as e:  # model output must never crash training; the scorer counts and reports it
            return Score(0.0, {"correct": 0.0}, {"reason": f"verifier error: {type(e).__name__}: {e}",
                                                 "traceback": traceback.format_exc()})

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


def params_model_of(spec: str | None) -> Any:
    """The params model of registered verifier ``spec``; None for a user's ``module:function``, no verifier or an
    unknown name (what a config's plain params mapping for that verifier holds; rlvr.core.paths)."""
    return VERIFIERS.get(spec).params if spec and ":" not in spec and spec in VERIFIERS else None


def validate_verifier(verifier: Verifier, example: Example, wrong: str) -> None:
    """Raise unless the gold answer scores 1 and ``wrong`` scores 0."""
    gold = verifier(example, example.answer).reward
    bad = verifier(example, wrong).reward
    if gold != 1.0 or bad != 0.0:
        raise AssertionError(f"verifier {verifier.name!r} failed its self-check on {example.id!r}: "
                             f"gold answer scored {gold}, wrong answer {wrong!r} scored {bad}")


def _module_from_file(path: Path, name: str):
    """Import ``path`` under a name unique to the file (two ``reward.py`` in different folders don't clash)."""
    unique = f"rlvr_user_{name.replace('.', '_')}_{zlib.crc32(str(path).encode()):08x}"
    if unique in sys.modules:
        return sys.modules[unique]
    spec = importlib.util.spec_from_file_location(unique, path)
    if spec is None or spec.loader is None:
        raise ImportError(f"cannot import {path}")
    module = importlib.util.module_from_spec(spec)
    sys.modules[unique] = module  # before exec, as the import system does (dataclasses and pickling need it)
    try:
        spec.loader.exec_module(module)
    except BaseException:
        del sys.modules[unique]
        raise
    return module


def load_callable(spec: str, search_dirs: Sequence[str | Path] = ()) -> Callable[..., Any]:
    """``"package.module:function"`` or ``"path/to/file.py:function"`` -> the function.

    A module name is imported normally first; if no such module is importable, ``module.py`` (dots as
    folders) is looked up in ``search_dirs`` (the config file's folder, when the config came from a file)
    and then in the working directory, so a reward function beside the config needs no ``PYTHONPATH``.
    A file path is taken relative to the same folders.
    """
    mod, sep, attr = spec.rpartition(":")
    if not sep or not mod or not attr:
        raise ValueError(f"expected 'package.module:function' or 'file.py:function', got {spec!r}")
    dirs = [Path(d) for d in search_dirs] + [Path.cwd()]
    try:
        if mod.endswith(".py"):
            candidates = [Path(mod)] if Path(mod).is_absolute() else [d / mod for d in dirs]
            found = next((c for c in candidates if c.is_file()), None)
            if found is None:
                raise ImportError(f"no file {mod} in {', '.join(str(d) for d in dirs)}")
            module = _module_from_file(found.resolve(), found.stem)
        else:
            try:
                module = importlib.import_module(mod)
            except ModuleNotFoundError as e:
                if e.name is None or not mod.startswith(e.name):
                    raise  # the module exists but imports something missing: report that
                rel = Path(*mod.split(".")).with_suffix(".py")
                found = next((d / rel for d in dirs if (d / rel).is_file()), None)
                if found is None:
                    raise ImportError(f"no module named {mod!r} (looked for {rel} in "
                                      f"{', '.join(str(d) for d in dirs)})") from None
                module = _module_from_file(found.resolve(), mod)
        fn = getattr(module, attr)
    except Exception as e:  # a missing module or name, or the user's module failing at import
        raise ValueError(f"cannot load reward function {spec!r}: {type(e).__name__}: {e}") from e
    if not callable(fn):
        raise ValueError(f"cannot load reward function {spec!r}: {attr} is a {type(fn).__name__}, not a function")
    return fn


_RLVR_KWARGS = ("answers", "examples")


def _accepted(fn: Callable[..., Any]) -> Callable[[str], bool]:
    """Which keyword arguments ``fn`` takes: all of them with ``**kwargs``, else its named parameters."""
    try:
        params = inspect.signature(fn).parameters.values()
    except (TypeError, ValueError):
        return lambda name: True
    if any(p.kind is p.VAR_KEYWORD for p in params):
        return lambda name: True
    names = {p.name for p in params if p.kind in (p.KEYWORD_ONLY, p.POSITIONAL_OR_KEYWORD)}
    return names.__contains__


class _CallableVerifier:
    """A batch reward function called once per batch, as TRL calls its reward functions.

    ``fn(prompts, completions, **fields)``: the prompts and completions as lists (a completion is its text; for
    a conversational prompt, a list of messages, ``[{"role": "assistant", "content": text}]``, as TRL gives it),
    then every field of the examples as a keyword list (``answer``, each ``meta`` field, None where an example
    lacks it), in training ``completion_ids`` (each completion's token ids) and ``step`` (the training step,
    one number), and rlvr's ``answers`` and ``examples``; a function without ``**kwargs`` gets only the
    keywords it names.
    It returns one float per completion; None means "not applicable" and scores 0 without an error. A
    function that raises, or returns the wrong number of values, fails the whole batch: each completion
    scores 0 with the error and its traceback, which the scorer reports (see :mod:`rlvr.tasks.scoring`).
    """

    batched = True

    def __init__(self, fn: Callable[..., Sequence[float]], name: str):
        self.fn, self.name = fn, name
        self._takes = _accepted(fn)

    def _kwargs(self, examples: Sequence[Example]) -> dict[str, Any]:
        fields: dict[str, Any] = {"answer": [e.answer for e in examples]}
        for key in dict.fromkeys(k for e in examples for k in e.meta):
            if key not in ("prompts", "completions", "step", *_RLVR_KWARGS):
                fields.setdefault(key, [e.meta.get(key) for e in examples])
        steps = {e.meta["step"] for e in examples if "step" in e.meta}
        if len(steps) == 1:  # the training step (0-based), one number for the call, as TRL's trainer_state gives
            fields["step"] = steps.pop()
        fields.update(answers=[e.answer for e in examples], examples=list(examples))
        return {k: v for k, v in fields.items() if self._takes(k)}

    @staticmethod
    def _completions(examples: Sequence[Example], texts: Sequence[str]) -> list[Any]:
        """The texts; for a conversational prompt (a list of messages), the completion as TRL gives it: a list
        holding the assistant's message."""
        return [[{"role": "assistant", "content": t}] if isinstance(e.prompt, list) else t
                for e, t in zip(examples, texts)]

    def score_batch(self, examples: Sequence[Example], texts: Sequence[str]) -> list[Score]:
        try:
            values = list(self.fn([e.prompt for e in examples], self._completions(examples, texts),
                                  **self._kwargs(examples)))
            if len(values) != len(texts):
                raise ValueError(f"returned {len(values)} rewards for {len(texts)} completions")
            out = []
            for v in values:
                if v is None:
                    out.append(Score(0.0, {"correct": 0.0}, {"reason": "not applicable (the function returned None)"}))
                else:
                    out.append(Score(float(v), {"correct": float(float(v) >= 1.0)}))
            return out
        except Exception as e:  # reported and counted by the scorer; the error policy decides whether to stop
            err = {"error": f"{self.name}: {type(e).__name__}: {e}", "traceback": traceback.format_exc()}
            return [Score(0.0, {"correct": 0.0}, dict(err)) for _ in texts]

    def __call__(self, example: Example, text: str) -> Score:
        return self.score_batch([example], [text])[0]


def from_callable(fn: Callable[..., Sequence[float]] | str, name: str | None = None,
                  search_dirs: Sequence[str | Path] = ()) -> Verifier:
    """Adapt a batch reward function ``(prompts, completions, **kw) -> list[float]`` to a verifier."""
    if isinstance(fn, str):
        name, fn = name or fn, load_callable(fn, search_dirs)
    if not callable(fn):
        raise TypeError(f"a reward function must be callable, got {type(fn).__name__}")
    return _CallableVerifier(fn, name or getattr(fn, "__name__", "reward_fn"))

"""Rollout-engine wrappers: a registry of them, and their state and metrics.

Training rollouts may go through wrappers around the engine: guided prompts for a fraction of each group
(``rollout.guidance``, :mod:`rlvr.rollout.guidance`) and parameter-space noise (``rollout.param_noise``,
:mod:`rlvr.rollout.param_noise`). Each wrapper registers a builder in :data:`ENGINE_WRAPPERS` with an
``order``; :func:`wrap_engine` calls the builders from the lowest order up, each on the engine built so far,
so a lower order wraps closer to the engine (guidance inside, parameter noise outside). A builder,
``build(engine, model, tokenizer, rollout_cfg, chat_template)``, decides from its own section of the rollout
config whether it applies and returns the wrapper, or ``None`` to leave the engine as it is.

A wrapper is anything with ``inner`` (the engine it wraps) and ``name`` (its registered name)
(:class:`EngineWrapper`). Optionally it has ``state_dict`` / ``load_state_dict`` (saved with the run's
checkpoints under ``engine``, keyed by ``name``), ``metrics()`` (reported as ``engine/<key>``) and
``bind_stats(stats)`` (the run's per-prompt statistics, given once they exist: :func:`bind_stats`) and
``observe(completions, scores)`` (the scores of the completions it returned, after each scoring:
:func:`observe_scores`).
Evaluation uses the unwrapped engine (:func:`base_engine`) inside fresh instances of the wrappers registered
with ``in_eval=True`` only (multi-turn episodes: a multi-turn task is evaluated as it is trained; guidance,
parameter noise and rollout strategies are training-time only), so evaluation never adds to a training
wrapper's state or metrics.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Any, Callable, Protocol, Sequence, runtime_checkable

__all__ = ["ENGINE_WRAPPERS", "EngineWrapper", "WrapperEntry", "WrapperRegistry", "wrap_engine", "wrapper_chain",
           "without_image_support", "base_engine", "engine_state", "load_engine_state", "engine_metrics", "generate_parts", "as_subclass",
           "bind_stats", "bind_task", "observe_scores", "collect_sft_rows",
           "save_engine_files", "load_engine_files", "reads_trainer_weights"]

# (engine, model, tokenizer, rollout config, chat_template) -> the wrapped engine, or None when it does not apply
Build = Callable[[Any, Any, Any, Any, bool], Any]


@runtime_checkable
class EngineWrapper(Protocol):
    """What makes an engine a wrapper: the engine it wraps and its registered name."""

    inner: Any
    name: str


@dataclass(frozen=True)
class WrapperEntry:
    name: str
    order: int
    build: Build
    summary: str
    in_eval: bool = False  # evaluation goes through it too


class WrapperRegistry:
    """Engine wrappers by name, applied in ``order`` (lowest first, so innermost)."""

    def __init__(self) -> None:
        self._entries: dict[str, WrapperEntry] = {}

    def register(self, name: str, order: int, in_eval: bool = False) -> Callable[[Build], Build]:
        """Decorator registering ``build`` as the builder of wrapper ``name``; a second registration of a
        name or of an order fails (the order of two wrappers must never depend on registration order).
        ``in_eval``: evaluation uses the wrapper too (built afresh around the unwrapped engine)."""

        def deco(build: Build) -> Build:
            if name in self._entries:
                raise ValueError(f"engine wrapper {name!r} is already registered")
            same = [e.name for e in self._entries.values() if e.order == order]
            if same:
                raise ValueError(f"engine wrapper {name!r}: order {order} is taken by {same[0]!r}")
            doc = (build.__doc__ or "").strip().splitlines()
            self._entries[name] = WrapperEntry(name, order, build, doc[0] if doc else "", in_eval)
            return build

        return deco

    def unregister(self, name: str) -> None:
        """Remove wrapper ``name`` (a plugin replacing it, or a test that registered one)."""
        del self._entries[name]

    def in_order(self) -> list[WrapperEntry]:
        return sorted(self._entries.values(), key=lambda e: e.order)

    def names(self) -> list[str]:
        return [e.name for e in self.in_order()]

    def __contains__(self, name: object) -> bool:
        return name in self._entries

    def __len__(self) -> int:
        return len(self._entries)


ENGINE_WRAPPERS = WrapperRegistry()


def wrap_engine(engine: Any, model, tokenizer, rollout_cfg, chat_template: bool = False,
                eval_only: bool = False) -> Any:
    """``engine`` inside every registered wrapper whose builder applies to ``rollout_cfg`` (with
    ``eval_only``, only those registered ``in_eval``), or as is."""
    for entry in ENGINE_WRAPPERS.in_order():
        if eval_only and not entry.in_eval:
            continue
        wrapped = entry.build(engine, model, tokenizer, rollout_cfg, chat_template)
        if wrapped is None:
            continue
        if not isinstance(wrapped, EngineWrapper) or wrapped.inner is not engine or wrapped.name != entry.name:
            raise TypeError(f"engine wrapper {entry.name!r} must return an object with inner (the engine it was "
                            f"given) and name {entry.name!r}, or None; got {type(wrapped).__name__}")
        engine = wrapped
    return engine


def wrapper_chain(engine: Any) -> list[Any]:
    """The wrappers around the engine, outermost first."""
    out = []
    while isinstance(engine, EngineWrapper):
        out.append(engine)
        engine = engine.inner
    return out


def without_image_support(engine: Any) -> list[str]:
    """What in ``engine`` (its wrappers, outermost first, then the engine) cannot take image prompts: each
    declares ``supports_images = True`` once it carries a prompt's images through (the ``hf`` engine does)."""
    names = [f"engine wrapper {w.name!r}" for w in wrapper_chain(engine) if not getattr(w, "supports_images", False)]
    base = base_engine(engine)
    if not getattr(base, "supports_images", False):
        names.append(f"engine {type(base).__name__}")
    return names


def reads_trainer_weights(engine: Any) -> bool:
    """Whether generating with ``engine`` runs forwards of the trainer's own model: then an FSDP run gathers the
    whole model on every rank while it generates. An engine or wrapper that never does (vLLM holds weights of
    its own; a wrapper that only rewrites requests) declares ``forwards_trainer_model = False``; one that says
    nothing is taken to read them."""
    return any(getattr(x, "forwards_trainer_model", True) for x in [*wrapper_chain(engine), base_engine(engine)])


def base_engine(engine: Any) -> Any:
    """The engine under every wrapper (what evaluation uses)."""
    while isinstance(engine, EngineWrapper):
        engine = engine.inner
    return engine


def engine_state(engine: Any) -> dict[str, Any]:
    """``{wrapper name: its state}`` for every wrapper that keeps state."""
    return {w.name: w.state_dict() for w in wrapper_chain(engine) if hasattr(w, "state_dict")}


def load_engine_state(engine: Any, state: dict[str, Any]) -> None:
    for w in wrapper_chain(engine):
        if hasattr(w, "load_state_dict"):
            w.load_state_dict(state.get(w.name, {}))


def engine_metrics(engine: Any) -> dict[str, float]:
    out: dict[str, float] = {}
    for w in wrapper_chain(engine):
        if hasattr(w, "metrics"):
            out.update({f"engine/{k}": float(v) for k, v in w.metrics().items()})
    return out


def bind_stats(engine: Any, stats: Any) -> Any:
    """Give the run's per-prompt statistics to every wrapper that follows them (``bind_stats``); returns
    ``engine``."""
    for w in wrapper_chain(engine):
        if hasattr(w, "bind_stats"):
            w.bind_stats(stats)
    return engine


def bind_task(engine: Any, task: Any) -> Any:
    """Give the run's task to every wrapper that scores its own rollouts while growing them (``bind_task``: PROPA's
    simulations); returns ``engine``."""
    for w in wrapper_chain(engine):
        if hasattr(w, "bind_task"):
            w.bind_task(task)
    return engine


def collect_sft_rows(engine: Any) -> list[Any]:
    """The supervised rows (completions to imitate) every wrapper that produces them (``sft_rows``) has
    gathered since the last call (PROPA's correct and corrected paths), cleared as they are read."""
    rows: list[Any] = []
    for w in wrapper_chain(engine):
        if hasattr(w, "sft_rows"):
            rows += w.sft_rows()
    return rows


def save_engine_files(engine: Any, folder: Any) -> None:
    """Every wrapper that keeps files (``save_files``: PROPA's process reward model) writes them into a
    checkpoint folder."""
    for w in wrapper_chain(engine):
        if hasattr(w, "save_files"):
            w.save_files(folder)


def load_engine_files(engine: Any, folder: Any) -> None:
    for w in wrapper_chain(engine):
        if hasattr(w, "load_files"):
            w.load_files(folder)


def observe_scores(engine: Any, completions: Sequence[Any], scores: Sequence[Any]) -> None:
    """Show every wrapper that learns from outcomes (``observe``) the scores of the completions it returned."""
    for w in wrapper_chain(engine):
        if hasattr(w, "observe"):
            w.observe(completions, scores)


def generate_parts(inner: Any, parts: Sequence[tuple[int, Any, Any]], sampling: Any) -> list[tuple[Any, Any]]:
    """For wrappers that split requests: ``parts`` holds ``(request index, tag, sub-request)``; all of them
    are generated in one call to ``inner``, and each completion comes back with ``group`` set to its
    original request's index, beside its part's tag."""
    out = []
    for comp in inner.generate([req for _, _, req in parts], sampling):
        i, tag, _ = parts[comp.group]
        out.append((replace(comp, group=i), tag))
    return out


def as_subclass(comp: Any, cls: type, **fields: Any) -> Any:
    """``comp`` (a completion) as an instance of its subclass ``cls``, with ``fields`` set (a shallow copy).
    Fields of ``comp``'s own subclass that ``cls`` lacks stay on the copy as attributes (a tree completion
    that a guidance wrapper marks keeps its tree fields)."""
    own = {k: getattr(comp, k) for k in comp.__dataclass_fields__}
    own.update(fields)
    out = cls(**{k: v for k, v in own.items() if k in cls.__dataclass_fields__})
    for k, v in own.items():
        if k not in cls.__dataclass_fields__:
            setattr(out, k, v)
    return out

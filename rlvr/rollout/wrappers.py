"""Rollout-engine wrappers chosen by the config, and their state and metrics.

Training rollouts may go through wrappers around the engine: guided prompts for a fraction of each group
(``rollout.guidance``, :mod:`rlvr.rollout.guidance`) and parameter-space noise (``rollout.param_noise``,
:mod:`rlvr.rollout.param_noise`). Evaluation always uses the unwrapped engine (:func:`base_engine`). A
wrapper has ``inner`` (the engine it wraps), ``name``, ``state_dict`` / ``load_state_dict`` (saved with
the run's checkpoints under ``engine``) and ``metrics()`` (reported as ``engine/<key>``).
"""

from __future__ import annotations

from typing import Any

from rlvr.rollout.guidance import GuidedEngine
from rlvr.rollout.param_noise import ParamNoiseEngine

__all__ = ["wrap_engine", "base_engine", "engine_state", "load_engine_state", "engine_metrics"]


def wrap_engine(engine: Any, model, tokenizer, rollout_cfg, chat_template: bool = False) -> Any:
    """``engine`` wrapped as ``rollout_cfg`` asks (guidance inside, parameter noise outside), or as is."""
    g = rollout_cfg.guidance
    if g.fraction > 0:
        engine = GuidedEngine(engine, tokenizer, g.fraction, g.hint, chat_template)
    pn = rollout_cfg.param_noise
    if pn.sigma > 0:
        if getattr(base_engine(engine), "model", None) is not model:
            raise ValueError("rollout.param_noise perturbs the trainer's module in place, so it needs an engine "
                             f"that generates with it (hf); {rollout_cfg.engine!r} does not")
        engine = ParamNoiseEngine(engine, model, pn)
    return engine


_WRAPPERS = (GuidedEngine, ParamNoiseEngine)


def _chain(engine: Any) -> list[Any]:
    out = []
    while isinstance(engine, _WRAPPERS):
        out.append(engine)
        engine = engine.inner
    return out


def base_engine(engine: Any) -> Any:
    """The engine under every wrapper (what evaluation uses)."""
    while isinstance(engine, _WRAPPERS):
        engine = engine.inner
    return engine


def engine_state(engine: Any) -> dict[str, Any]:
    return {w.name: w.state_dict() for w in _chain(engine)}


def load_engine_state(engine: Any, state: dict[str, Any]) -> None:
    for w in _chain(engine):
        w.load_state_dict(state.get(w.name, {}))


def engine_metrics(engine: Any) -> dict[str, float]:
    out: dict[str, float] = {}
    for w in _chain(engine):
        out.update({f"engine/{k}": float(v) for k, v in w.metrics().items()})
    return out

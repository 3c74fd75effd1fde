"""Rollout strategies: how a step's rollouts are produced around an engine (``rollout.strategy``).

Plain sampling asks the engine for ``n`` independent completions per prompt. A strategy produces them
another way (reusing earlier completions as speculative prefixes, growing trees, pruning partial rollouts)
by sending the engine requests of its own: prefixes to continue, per-request lengths and stops
(:class:`~rlvr.core.types.GenerationRequest`). It returns ordinary completions, whose ``segments`` and
``loss_mask`` say which tokens were sampled and which were reused or inserted, so advantages, objectives and
aggregations need no change.

A strategy is registered in :data:`ROLLOUT_STRATEGIES` with a params model; its function,
``fn(engine, model, tokenizer, params, rollout_cfg, chat_template)``, returns an engine wrapper named
``"strategy"`` (:class:`~rlvr.rollout.wrappers.EngineWrapper`: ``inner``, ``name``, ``generate``,
``sync_weights``, optionally ``state_dict`` / ``load_state_dict`` / ``metrics``), or ``None`` for the engine
as it is. The wrapper sits outside multi-turn episodes and inside guidance and parameter noise
(:data:`~rlvr.rollout.wrappers.ENGINE_WRAPPERS` order 75). ``plain``, the default, is no strategy.
"""

from __future__ import annotations

from typing import Any

from rlvr.algorithms.extra_producers import ExtraContext, produces
from rlvr.lazy import torch
from rlvr.registry import Registry
from rlvr.rollout.wrappers import ENGINE_WRAPPERS

__all__ = ["ROLLOUT_STRATEGIES", "build_strategy", "single_turn_problems", "require_single_turn", "tree_problems"]

ROLLOUT_STRATEGIES: Registry = Registry("rollout strategy")


def _single_turn_message(name: str, does: str) -> str:
    return (f"rollout.strategy {name} {does} single-turn completions; it cannot wrap multi-turn episodes "
            f"(rollout.multiturn.env is set)")


def single_turn_problems(cfg, name: str, does: str) -> list[str]:
    """The config problem of strategy ``name``, which ``does`` (grows, reuses, ...) single-turn completions,
    under multi-turn episodes (for its ``check``)."""
    return [_single_turn_message(name, does)] if cfg.rollout.multiturn.env is not None else []


def tree_problems(cfg, name: str) -> list[str]:
    """The config problems of strategy ``name``, which grows each request as one tree: multi-turn episodes, and
    rollout.guidance or rollout.contexts (they split a request into parts, one tree each)."""
    problems = single_turn_problems(cfg, name, "grows")
    if cfg.rollout.guidance.fraction or cfg.rollout.contexts.num_contexts:
        problems.append(f"rollout.strategy {name} grows each request as one tree; rollout.guidance and "
                        "rollout.contexts split requests into parts (one tree each), so they cannot be combined "
                        "with it")
    return problems


def require_single_turn(rollout_cfg, name: str, does: str) -> None:
    """Refuse multi-turn episodes when a single-turn strategy is built directly (the Python API)."""
    if rollout_cfg.multiturn.env is not None:
        raise ValueError(_single_turn_message(name, does))


@ROLLOUT_STRATEGIES.register("plain")
def _plain(engine: Any, model, tokenizer, params, rollout_cfg, chat_template: bool = False) -> None:
    """Independent samples from the engine (no strategy)."""
    return None


@ENGINE_WRAPPERS.register("strategy", order=75)
def build_strategy(engine: Any, model, tokenizer, rollout_cfg, chat_template: bool = False) -> Any:
    """The configured ``rollout.strategy`` around the engine (outside multi-turn, inside guidance)."""
    comp = rollout_cfg.strategy
    return ROLLOUT_STRATEGIES.get(comp.name).fn(engine, model, tokenizer, comp.params, rollout_cfg, chat_template)


@produces("process_value")
def _process_value(ctx: ExtraContext, keys: frozenset[str]) -> dict:
    """The label a tree strategy gave each row (PROPA's Q value, MURPHY's credit; -1 elsewhere; no model pass)."""
    return {"process_value": torch.tensor([float(getattr(comp, "process_value", -1.0)) for comp in ctx.completions])}

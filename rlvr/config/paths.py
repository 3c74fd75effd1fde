"""Reward-function paths in a config file resolve beside that file.

``task.verifier: reward:score`` (or ``my_rewards.py:score``) in ``/exp/config.yaml`` names
``/exp/reward.py`` when that file exists: :func:`resolve_reward_specs` rewrites the spec to the absolute
file form (``/exp/reward.py:score``) while the config is loaded, so the resolved ``config.yaml`` a run
writes still finds the function wherever the run is resumed from. Specs that name no file beside the
config are left for :func:`rlvr.verifiers.base.load_callable`, which imports them as modules and then looks
in the working directory. No ``PYTHONPATH`` is needed either way.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

__all__ = ["resolve_reward_specs"]

_KEYS = ("verifier", "fn")  # task.verifier, each task.rewards entry


def _resolve(spec: str, base: Path) -> str:
    mod, sep, attr = spec.rpartition(":")
    if not sep or not mod or not attr or "/" in attr:
        return spec
    rel = Path(mod) if mod.endswith(".py") else Path(*mod.split(".")).with_suffix(".py")
    if rel.is_absolute():
        return spec
    candidate = base / rel
    return f"{candidate.resolve()}:{attr}" if candidate.is_file() else spec


def resolve_reward_specs(raw: Any, base: str | Path) -> Any:
    """``raw`` (a loaded YAML tree) with every ``verifier: module:function`` naming a file in ``base``
    rewritten to that file's absolute path."""
    base = Path(base)
    if isinstance(raw, dict):
        return {k: (_resolve(v, base) if k in _KEYS and isinstance(v, str) and ":" in v
                    else resolve_reward_specs(v, base)) for k, v in raw.items()}
    if isinstance(raw, list):
        return [resolve_reward_specs(v, base) for v in raw]
    return raw

"""Dotted ``--set`` overrides and the deep merge of recipe, config file and overrides."""

from __future__ import annotations

from typing import Any

from rlvr.config.errors import ConfigError
from rlvr.core import yaml_io

__all__ = ["apply_overrides", "merge_configs"]


def _parse_value(text: str) -> Any:
    """YAML scalar parsing, plus floats such as ``1e-4`` that YAML 1.1 reads as strings."""
    value = yaml_io.load(text)
    if isinstance(value, str):
        try:
            return float(value)
        except ValueError:
            return value
    return value


def _list_index(item: str, node: list, part: str) -> int:
    if not part.isdigit() or int(part) >= len(node):
        raise ConfigError([f"--set {item!r}: {part!r} is not an index of a list of {len(node)} items"])
    return int(part)


def apply_overrides(raw: dict[str, Any], overrides: list[str]) -> dict[str, Any]:
    """Apply ``a.b.c=value`` overrides (values parsed as YAML) to a raw config mapping. A number after a list
    (``algorithm.loss_terms.0.weight=0.3``) is an index into the list already there. Setting a component's
    ``name`` to another name drops the old component's parameters (``--set task.name=chains`` over a recipe's
    arithmetic task), as a ``{name: ...}`` mapping in a config file replaces the recipe's whole mapping."""
    raw = yaml_io.load(yaml_io.dump(raw)) or {}
    for item in overrides:
        key, sep, value = item.partition("=")
        if not sep or not key.strip():
            raise ConfigError([f"--set {item!r}: expected KEY=VALUE, e.g. algorithm.objective.clip_high=0.28"])
        parts = key.strip().split(".")
        node = raw
        for part in parts[:-1]:
            at = _list_index(item, node, part) if isinstance(node, list) else part
            nxt = node[at] if isinstance(node, list) else node.get(part)
            if isinstance(nxt, str):  # a component given by name only: {name: nxt}
                nxt = {"name": nxt}
            node[at] = nxt if isinstance(nxt, (dict, list)) else {}
            node = node[at]
        last = _list_index(item, node, parts[-1]) if isinstance(node, list) else parts[-1]
        new = _parse_value(value)
        if last == "name" and isinstance(node, dict) and node.get("name", new) != new:
            node.clear()  # another component: its own defaults, not the parameters of the one it replaces
        node[last] = new
    return raw


def merge_configs(base: dict[str, Any], top: dict[str, Any]) -> dict[str, Any]:
    """Deep-merge ``top`` over ``base`` (mappings merge, anything else replaces)."""
    out = dict(base)
    for k, v in top.items():
        if isinstance(v, dict) and isinstance(out.get(k), dict) and "name" not in v:
            out[k] = merge_configs(out[k], v)
        else:
            out[k] = v
    return out

"""Recipes: one YAML file per published method, naming its composition of components and its paper's
defaults. ``rlvr recipes`` lists them; ``rlvr train --recipe NAME`` starts from one (a config file and
``--set`` overrides still apply on top). Recipes set the algorithm; the model, task and learning rate
stay the user's (each recipe's comments give the paper's values for those)."""

from __future__ import annotations

from importlib import resources
from typing import Any

from rlvr.config.errors import ConfigError
from rlvr.core import yaml_io

__all__ = ["recipe_names", "load_recipe", "list_recipes"]


def _dir():
    return resources.files("rlvr") / "recipes"


def recipe_names() -> list[str]:
    return sorted(p.name[:-5] for p in _dir().iterdir() if p.name.endswith(".yaml"))


def load_recipe(name: str) -> dict[str, Any]:
    """The recipe's raw config mapping (``recipe: {name, description, citation}`` included)."""
    if name not in recipe_names():
        raise ConfigError([f"unknown recipe {name!r}; valid names: {', '.join(recipe_names())}"])
    raw = yaml_io.load((_dir() / f"{name}.yaml").read_text()) or {}
    raw.setdefault("recipe", {})["name"] = name
    return raw


def list_recipes() -> list[tuple[str, str, str]]:
    """``(name, description, citation)`` for every recipe."""
    out = []
    for name in recipe_names():
        info = load_recipe(name)["recipe"]
        out.append((name, info.get("description", ""), info.get("citation", "")))
    return out

"""Two sets of defaults: the demo's, for a model built from scratch, and current practice for a pretrained one.

A tiny model built in-process (``model.path`` unset) must learn the task's format before RL can reward
anything, so its runs start from the demo's settings (``rlvr/config/demo.yaml``: a 600-step supervised
warm-up at lr 3e-3, RL at lr 2e-4, 8 completion tokens). A pretrained model (a local directory, or a model
object given to the Python API) starts from the schema's own defaults, which follow current practice (TRL,
verl): no warm-up unless asked, lr 1e-6, 256 completion tokens, a checkpoint every 50 steps and every 10
minutes. The field ``defaults`` records which applied (``auto`` chooses by the rule above); the recipe, the
config file and ``--set`` overrides sit on top of either, and the start of a run prints the settings that
matter (:mod:`rlvr.run.settings`).
"""

from __future__ import annotations

from importlib import resources
from typing import Any

from rlvr.core import yaml_io

__all__ = ["demo_settings", "apply_defaults", "DEFAULTS"]

DEFAULTS = ("auto", "demo", "pretrained")


def demo_settings() -> dict[str, Any]:
    """The demo's settings (``rlvr/config/demo.yaml``) as a raw config mapping."""
    return yaml_io.load((resources.files("rlvr") / "config" / "demo.yaml").read_text()) or {}


def apply_defaults(raw: dict[str, Any], model_given: bool = False) -> dict[str, Any]:
    """``raw`` with ``defaults`` resolved (``demo`` when the model is built from scratch: no ``model.path`` and
    no ``model_given``, else ``pretrained``) and, for ``demo``, the demo's settings under it."""
    from rlvr.config.overrides import merge_configs

    choice = raw.get("defaults", "auto")
    if choice not in DEFAULTS:
        return raw  # validation names the allowed values
    if choice == "auto":
        model = raw.get("model") if isinstance(raw.get("model"), dict) else {}
        choice = "pretrained" if model_given or model.get("path") else "demo"
    raw = {**raw, "defaults": choice}
    return merge_configs(demo_settings(), raw) if choice == "demo" else raw

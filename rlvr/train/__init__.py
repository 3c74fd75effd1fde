"""Training: the loop, the update step, SFT, checkpoints, logging and run orchestration."""

from importlib import import_module

__all__ = ["Components", "NonFiniteError", "rl_step", "train_loop", "update_policy"]

# Imported on first use, so that importing a light submodule (rlvr.train.logging, used by `rlvr verify`)
# does not load torch through the loop.
_HOME = {"Components": "loop", "rl_step": "loop", "train_loop": "loop", "NonFiniteError": "update",
         "update_policy": "update"}


def __getattr__(name: str):
    if name in _HOME:
        return getattr(import_module(f"rlvr.train.{_HOME[name]}"), name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")

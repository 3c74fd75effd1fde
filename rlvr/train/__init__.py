"""The RL step: collect a step's rollouts, build its batch, compute what its components need, update the policy.

Read :mod:`rlvr.train.reference` first: one GRPO step in one file. The general step is that plus registries,
strategies and distribution: :mod:`rlvr.train.loop` (the step and the loop over steps), :mod:`rlvr.train.rollouts`
(generation rounds, scoring, group filters), :mod:`rlvr.train.update` (epochs x minibatches x micro-batches).
"""

from importlib import import_module

__all__ = ["Components", "NonFiniteError", "rl_step", "train_loop", "update_policy"]

# Imported on first use: importing the package does not load torch through the loop.
_HOME = {"Components": "loop", "rl_step": "loop", "train_loop": "loop", "NonFiniteError": "update",
         "update_policy": "update"}


def __getattr__(name: str):
    if name in _HOME:
        return getattr(import_module(f"rlvr.train.{_HOME[name]}"), name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")

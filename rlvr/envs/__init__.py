"""Environments: the emulated tool APIs that tool-calling rollouts act on, the episode contract
(:mod:`rlvr.envs.base`, registry ``ENVIRONMENTS``) and the multi-turn rollout driver
(:mod:`rlvr.envs.multiturn`, the ``multiturn`` engine wrapper in :mod:`rlvr.envs.wrapper`).

The tool environments and the contract load eagerly (the tool-call verifier and ``rlvr verify`` use them
without a model library); the driver and its config, which need the rollout engines (and so torch and
transformers), load on first use. :mod:`rlvr.config` imports :mod:`rlvr.envs.wrapper`, which registers
the ``multiturn`` engine wrapper.
"""

from rlvr.envs import tool_env  # noqa: F401  (registration: environments)
from rlvr.envs import code_env, dafny_env, python_env  # noqa: F401  (registration; sandbox imported on use)
from rlvr.envs import lookup_env  # noqa: F401  (registration: the tool-use demo's environment)
from rlvr.envs.atlassian import ISSUE_TYPES, TOOL_SCHEMAS, WORKFLOW, IssueTrackerEnv
from rlvr.envs.base import ENVIRONMENTS, Environment, Step, env_factory, episode_seed
from rlvr.envs.schema import schema_errors, type_ok
from rlvr.envs.tool_env import ToolCallEnv

__all__ = ["IssueTrackerEnv", "TOOL_SCHEMAS", "WORKFLOW", "ISSUE_TYPES", "schema_errors", "type_ok",
           "ENVIRONMENTS", "Environment", "Step", "env_factory", "episode_seed", "EpisodeCompletion",
           "MultiTurnEngine", "MultiTurnConfig", "env_scores", "ToolCallEnv"]

_LAZY = {"EpisodeCompletion": "multiturn", "MultiTurnEngine": "multiturn", "env_scores": "multiturn",
         "MultiTurnConfig": "wrapper"}


def __getattr__(name: str):
    if name in _LAZY:
        from importlib import import_module

        return getattr(import_module(f"rlvr.envs.{_LAZY[name]}"), name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")

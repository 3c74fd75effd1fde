"""Environments: the emulated tool APIs that tool-calling rollouts act on, the episode contract
(:mod:`rlvr.envs.base`, registry ``ENVIRONMENTS``) and the multi-turn rollout driver
(:mod:`rlvr.envs.multiturn`; its config section and its registration as the ``multiturn`` engine wrapper are
in :mod:`rlvr.rollout.multiturn`).

Each environment's module loads when its name is first looked up in ``ENVIRONMENTS``
(:mod:`rlvr.registry_index`); the names below load on first use, the driver among them.
"""

from rlvr.envs.base import ENVIRONMENTS, Environment, Step, env_factory, episode_seed
from rlvr.envs.schema import schema_errors, type_ok
from rlvr.lazy import lazy_exports

__all__ = ["IssueTrackerEnv", "TOOL_SCHEMAS", "WORKFLOW", "ISSUE_TYPES", "schema_errors", "type_ok",
           "ENVIRONMENTS", "Environment", "Step", "env_factory", "episode_seed", "EpisodeCompletion",
           "MultiTurnWrapper", "env_scores", "ToolCallEnv"]

_LAZY = {"EpisodeCompletion": "multiturn", "MultiTurnWrapper": "multiturn", "env_scores": "multiturn",
         "ToolCallEnv": "tool_env", "IssueTrackerEnv": "atlassian",
         "ISSUE_TYPES": "atlassian", "TOOL_SCHEMAS": "atlassian", "WORKFLOW": "atlassian"}
__getattr__ = lazy_exports(__name__, _LAZY)

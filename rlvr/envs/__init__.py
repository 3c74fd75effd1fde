"""Environments: the emulated tool APIs that tool-calling rollouts act on, the episode contract
(:mod:`rlvr.envs.base`, registry ``ENVIRONMENTS``) and the multi-turn rollout driver
(:mod:`rlvr.envs.multiturn`, the ``multiturn`` engine wrapper in :mod:`rlvr.envs.wrapper`)."""

from rlvr.envs import tool_env, wrapper  # noqa: F401  (registration: environments, the multiturn engine wrapper)
from rlvr.envs.atlassian import ISSUE_TYPES, TOOL_SCHEMAS, WORKFLOW, IssueTrackerEnv
from rlvr.envs.base import ENVIRONMENTS, Environment, Step, env_factory, episode_seed
from rlvr.envs.multiturn import EpisodeCompletion, MultiTurnEngine, env_scores
from rlvr.envs.schema import schema_errors, type_ok
from rlvr.envs.tool_env import ToolCallEnv
from rlvr.envs.wrapper import MultiTurnConfig

__all__ = ["IssueTrackerEnv", "TOOL_SCHEMAS", "WORKFLOW", "ISSUE_TYPES", "schema_errors", "type_ok",
           "ENVIRONMENTS", "Environment", "Step", "env_factory", "episode_seed", "EpisodeCompletion",
           "MultiTurnEngine", "MultiTurnConfig", "env_scores", "ToolCallEnv"]

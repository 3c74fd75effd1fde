"""Deterministic, in-memory environments that tool-calling rollouts act on."""

from rlvr.envs.atlassian import ISSUE_TYPES, TOOL_SCHEMAS, WORKFLOW, IssueTrackerEnv
from rlvr.envs.schema import schema_errors, type_ok

__all__ = ["IssueTrackerEnv", "TOOL_SCHEMAS", "WORKFLOW", "ISSUE_TYPES", "schema_errors", "type_ok"]

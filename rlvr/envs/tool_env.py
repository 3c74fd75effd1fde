"""The issue tracker / wiki as a multi-turn environment (``issue_tracker``): one tool call per turn, its
result as the next observation, a final answer ends the episode.

Each policy turn is parsed with the tool-call verifiers' parser (:mod:`rlvr.envs.toolparse`: Hermes-style
``<tool_call>{"name": ..., "arguments": {...}}</tool_call>`` blocks, or one JSON call / list of calls).
A turn with calls executes them, in order, on the episode's :class:`IssueTrackerEnv` (seeded from
``meta["initial_state"]``) and the observation is the JSON list of results, one
``{"ok": true, "result": ...}`` or ``{"ok": false, "error": ...}`` each (the API's 4xx-like answers). A
malformed call is an observation too (``{"ok": false, "error": "malformed tool call ..."}``), never a
crash: the policy can see its mistake and try again. A turn with no call at all is the final answer and
ends the episode; its reward is the fraction of ``meta["checks"]`` the final state passes, less
``lambda_side_effect`` (0.5) per record the episode changed or created that the task did not ask to change
(:func:`rlvr.envs.checks.side_effects`, against the gold trace's final state when ``meta["gold_calls"]`` is
given), clipped to [0, 1]: the rule of the ``toolcall_env`` verifier. 0 without checks, and every earlier
turn's reward is 0.
A turn stops at ``</tool_call>`` (``stop``), so the policy sees each result before its next call.

The environment is deterministic (no randomness, so the seed is unused) and the state lives in the
instance: one per episode. ``info`` counts calls, failed calls and malformed calls so far.
"""

from __future__ import annotations

import json

from pydantic import Field

from rlvr.core.types import Example
from rlvr.envs.atlassian import IssueTrackerEnv
from rlvr.envs.base import ENVIRONMENTS, Step
from rlvr.envs.checks import check_state, side_effects
from rlvr.envs.toolparse import normalise_call, parse_tool_calls
from rlvr.registry import Params

__all__ = ["ToolCallEnv", "ToolCallEnvParams"]


class ToolCallEnv:
    """One episode on the emulated issue tracker / wiki."""

    def __init__(self, max_calls_per_turn: int = 4, one_call_per_turn: bool = True, lambda_side_effect: float = 0.5):
        self.max_calls = max_calls_per_turn
        self.stop = ("</tool_call>",) if one_call_per_turn else ()
        self.lambda_side_effect = lambda_side_effect
        self.api: IssueTrackerEnv | None = None
        self.checks: list[dict] = []
        self.initial: dict = {}
        self.gold: dict | None = None
        self.counts = {"calls": 0, "failed": 0, "malformed": 0}

    def reset(self, example: Example, seed: int) -> str:
        self.api = IssueTrackerEnv(example.meta.get("initial_state"))
        self.initial = self.api.state_dict()
        self.checks = list(example.meta.get("checks") or [])
        self.gold = None
        if example.meta.get("gold_calls") is not None:
            gold = IssueTrackerEnv(example.meta.get("initial_state"))
            gold.run([c for c in (normalise_call(x) for x in example.meta["gold_calls"]) if c is not None])
            self.gold = gold.state_dict()
        self.counts = {"calls": 0, "failed": 0, "malformed": 0}
        return ""  # the prompt states the task

    def step(self, action: str) -> Step:
        if self.api is None:
            raise RuntimeError("step() before reset()")
        calls, malformed = parse_tool_calls(action, self.max_calls)
        if not calls and not malformed and "<tool_call>" in action:
            malformed = 1  # an opened, never closed call (e.g. cut at the turn's token limit)
        if not calls and not malformed:
            final = self.api.state_dict()
            passed = check_state(final, self.checks) if self.checks else []
            effects = side_effects(self.initial, final, self.checks, self.gold) if self.checks else []
            reward = sum(passed) / len(passed) if passed else 0.0
            reward = min(1.0, max(0.0, reward - self.lambda_side_effect * len(effects)))
            return Step("", reward, True, {**self.counts, "checks": passed, "side_effects": effects[:20]})
        results = self.api.run(calls)
        results += [{"ok": False, "error": "malformed tool call: expected one JSON object with a name and "
                                           "arguments inside tool_call tags"}] * malformed
        self.counts["calls"] += len(calls)
        self.counts["failed"] += sum(not r["ok"] for r in results[: len(calls)])
        self.counts["malformed"] += malformed
        return Step(json.dumps(results, sort_keys=True), 0.0, False,
                    {**self.counts, "tool_error": any(not r["ok"] for r in results)})

    def state_dict(self) -> dict:
        """The API's state (for inspection and tests; episodes are never checkpointed)."""
        return self.api.state_dict() if self.api is not None else {}


class ToolCallEnvParams(Params):
    max_calls_per_turn: int = Field(4, gt=0, description="calls beyond this in one turn count as malformed")
    one_call_per_turn: bool = Field(True, description="end a policy turn at </tool_call>, so each call's result "
                                                      "is seen before the next")
    lambda_side_effect: float = Field(0.5, ge=0.0, description="final reward penalty per record changed or created "
                                                               "that the task did not ask to change")


@ENVIRONMENTS.register("issue_tracker", ToolCallEnvParams)
def _issue_tracker(p: ToolCallEnvParams) -> ToolCallEnv:
    """Emulated Jira/Confluence: tool calls run one turn at a time; a final answer ends the episode."""
    return ToolCallEnv(p.max_calls_per_turn, p.one_call_per_turn, p.lambda_side_effect)

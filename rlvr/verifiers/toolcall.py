"""Tool-call traces checked against JSON-schema tools, and executed against an emulated API.

After Vissa et al. 2026, "Beyond Next-Token Prediction: An RLVR Proof of Concept for Tool-Use Agents on Atlassian
Workflows" (arXiv:2607.01465). RECONSTRUCTED: the paper's checker is not public; confirmed are a scalar in [0, 1]
from the whole trace, three additive groups with per-argument correctness first, and penalties for duplicate calls
and missing parameters. Guessed, and parameterised: the weights ``w_select / w_args / w_sequence
= 0.3 / 0.5 / 0.2``, the penalty sizes ``lambda = 0.1``, and the matching rules below. The extra-call and
schema-violation penalties are this module's additions (default 0).

Trace format (parsed by :mod:`rlvr.envs.toolparse`, shared with the multi-turn tool environment):
``<tool_call>{"name": ..., "arguments": {...}}</tool_call>`` blocks (Hermes / Qwen), else one JSON value
in the ``<answer>`` block, the last fenced ```` ```json ```` block, or the whole completion: a call, a list
of calls, or ``{"tool_calls": [...]}``. OpenAI's ``{"function": {"name", "arguments": "<json>"}}``
wrapping is accepted. JSON is parsed strictly (no repair); a block that fails to parse is a malformed call.

``toolcall`` (gold calls ``meta["gold_calls"]`` = ``[{"name", "arguments"}]``, default ``answer`` parsed as
a trace; tools ``meta["tools"]``, default :data:`rlvr.envs.TOOL_SCHEMAS`; ``meta["ordered"]``, default True)::

    match each gold call, in order, to an unused predicted call of the same tool with the most matching
    leaf arguments (gold arguments flattened to JSON paths such as fields.project.key; lists are leaves)
    S_select   = matched gold calls / gold calls                                        (tool-name match)
    S_args     = gold leaves present with an equal value in the matched call / gold leaves (values match)
    S_sequence = 1 iff every gold call is matched and (if ordered) in gold order
    R = (w_select S_select + w_args S_args + w_sequence S_sequence) / (w_select + w_args + w_sequence)
        - lambda_dup * #duplicate identical calls (beyond the gold's own repeats)
        - lambda_unknown * (#calls to tools not in the schema list + #malformed calls)
        - lambda_extra * #other unmatched calls - lambda_invalid * #calls violating their tool's schema
    reward = clip(R, 0, 1)

Values compare strictly: no string/number coercion, ``True`` is not ``1``; ``casefold_strings`` relaxes
case and surrounding whitespace. ``arg_name`` (the fraction of gold leaves present at all) is reported.

``toolcall_env``: the trace runs against :class:`rlvr.envs.IssueTrackerEnv` seeded with
``meta["initial_state"]``, then the final state is checked with ``meta["checks"]``: each check is
``{"collection": "issues" | "pages", "where": {path: value, ...}, "count": n (default 1)}`` and passes when
exactly ``n`` records satisfy every condition (a value ``{"$contains": x}`` tests substring / list
membership / a sub-dict of a list element). So creating an issue twice fails a ``count: 1`` check.
``R = checks passed / checks - lambda_unknown * (#unknown + #malformed) - lambda_error * #failed calls``,
clipped to [0, 1]. Both checkers are pure functions of the completion and the example.
"""

from __future__ import annotations

import json
from collections import Counter
from typing import Any

from pydantic import Field

from rlvr.core.types import Example, Score
from rlvr.envs import TOOL_SCHEMAS, IssueTrackerEnv, schema_errors
from rlvr.envs.checks import check_state, values_equal
from rlvr.envs.checks import lookup_path as _lookup
from rlvr.envs.toolparse import normalise_call as _normalise_call
from rlvr.envs.toolparse import parse_tool_calls
from rlvr.registry import Params
from rlvr.verifiers.base import VERIFIERS, BaseVerifier

__all__ = ["ToolCallVerifier", "ToolEnvVerifier", "ToolCallParams", "ToolEnvParams", "parse_tool_calls",
           "flatten_arguments", "values_equal", "score_trace", "check_state"]


def flatten_arguments(args: Any, prefix: str = "") -> dict[str, Any]:
    """Leaves of nested dicts keyed by dotted path (``fields.project.key``); lists and scalars are leaves."""
    if not isinstance(args, dict) or (not args and prefix):
        return {prefix: args}
    out: dict[str, Any] = {}
    for k, v in args.items():
        out.update(flatten_arguments(v, f"{prefix}.{k}" if prefix else str(k)))
    return out


def _key(call: dict) -> str:
    return call["name"] + json.dumps(call["arguments"], sort_keys=True)


def _leaf_hits(gold_args: dict, pred_args: dict, casefold: bool) -> tuple[int, int, int]:
    """(gold leaves, leaves present in pred, leaves present with an equal value)."""
    leaves = flatten_arguments(gold_args) if gold_args else {}
    present = equal = 0
    for path, want in leaves.items():
        found, got = _lookup(pred_args, path)
        present += found
        equal += found and values_equal(got, want, casefold)
    return len(leaves), present, equal


def _match(pred: list[dict], gold: list[dict], casefold: bool) -> tuple[list[int | None], list[tuple[int, int, int]]]:
    """For each gold call the index of its predicted call (or None), and its leaf counts."""
    used: set[int] = set()
    assigned, counts = [], []
    for g in gold:
        best, best_counts = None, (len(flatten_arguments(g["arguments"])) if g["arguments"] else 0, 0, 0)
        for i, p in enumerate(pred):
            if i in used or p["name"] != g["name"]:
                continue
            c = _leaf_hits(g["arguments"], p["arguments"], casefold)
            if best is None or (c[2], c[1]) > (best_counts[2], best_counts[1]):
                best, best_counts = i, c
        if best is not None:
            used.add(best)
        assigned.append(best)
        counts.append(best_counts)
    return assigned, counts


def _penalty_counts(pred: list[dict], gold: list[dict], assigned: list[int | None], schemas: dict[str, dict]
                    ) -> dict[str, int]:
    known = [i for i, p in enumerate(pred) if p["name"] in schemas]
    pred_keys, gold_keys = Counter(_key(pred[i]) for i in known), Counter(_key(g) for g in gold)
    dup = sum(max(0, n - max(1, gold_keys[k])) for k, n in pred_keys.items())
    matched = {i for i in assigned if i is not None}
    invalid = sum(bool(schema_errors(pred[i]["arguments"], schemas[pred[i]["name"]])) for i in known)
    return {"n_unknown": len(pred) - len(known), "n_duplicate": dup, "n_schema_invalid": invalid,
            "n_extra": max(0, len(known) - len(matched) - dup)}


def score_trace(pred: list[dict], gold: list[dict], schemas: dict[str, dict], malformed: int = 0,
                ordered: bool = True, weights: tuple[float, float, float] = (0.3, 0.5, 0.2),
                lambdas: dict[str, float] | None = None, casefold: bool = False) -> tuple[float, dict[str, float]]:
    """``(reward, components)`` for a predicted trace against gold calls (see the module docstring)."""
    lam = {"dup": 0.1, "unknown": 0.1, "extra": 0.0, "invalid": 0.0, **(lambdas or {})}
    assigned, counts = _match(pred, gold, casefold)
    n_leaves = sum(c[0] for c in counts)
    s_select = sum(a is not None for a in assigned) / len(gold) if gold else float(not pred and not malformed)
    s_args = sum(c[2] for c in counts) / n_leaves if n_leaves else s_select
    idx = [a for a in assigned if a is not None]
    s_seq = float(len(idx) == len(gold) and (not ordered or idx == sorted(idx)))
    n = _penalty_counts(pred, gold, assigned, schemas)
    base = (weights[0] * s_select + weights[1] * s_args + weights[2] * s_seq) / sum(weights)
    penalty = (lam["dup"] * n["n_duplicate"] + lam["unknown"] * (n["n_unknown"] + malformed)
               + lam["extra"] * n["n_extra"] + lam["invalid"] * n["n_schema_invalid"])
    reward = min(1.0, max(0.0, base - penalty))
    comps = {"tool_name": s_select, "arg_name": sum(c[1] for c in counts) / n_leaves if n_leaves else s_select,
             "arg_value": s_args, "sequence": s_seq, "n_malformed": float(malformed),
             **{k: float(v) for k, v in n.items()}, "correct": float(reward >= 1.0)}
    return reward, comps


def _gold_trace(example: Example) -> list[dict]:
    if "gold_calls" in example.meta:
        return [c for c in (_normalise_call(x) for x in example.meta["gold_calls"]) if c is not None]
    calls, malformed = parse_tool_calls(example.answer, max_calls=10_000)
    if malformed:
        raise ValueError("gold trace in `answer` is malformed")
    return calls


def _gold_example() -> Example:
    call = {"name": "jira_create_issue", "arguments": {"fields": {"project": {"key": "ENG"}, "summary": "Login fails",
                                                                  "issuetype": {"name": "Bug"}}}}
    return Example("toolcall-1", "File a bug in ENG: Login fails", json.dumps([call]), meta={"gold_calls": [call]})


class ToolCallVerifier(BaseVerifier):
    """Trace reward after Vissa et al. 2026: tool-name, argument and order matches minus hallucination/duplicate
    penalties."""

    name = "toolcall"

    def __init__(self, weights=(0.3, 0.5, 0.2), lambdas: dict[str, float] | None = None, casefold: bool = False,
                 max_calls: int = 32, max_chars: int = 50_000):
        self.weights, self.lambdas, self.casefold = tuple(weights), dict(lambdas or {}), casefold
        self.max_calls, self.max_chars = max_calls, max_chars

    def score(self, example: Example, text: str) -> Score:
        if len(text) > self.max_chars:
            return Score(0.0, {"correct": 0.0}, {"reason": f"completion longer than {self.max_chars} characters"})
        tools = example.meta.get("tools", TOOL_SCHEMAS)
        schemas = {t["name"]: t.get("parameters", {}) for t in tools}
        pred, malformed = parse_tool_calls(text, self.max_calls)
        reward, comps = score_trace(pred, _gold_trace(example), schemas, malformed, example.meta.get("ordered", True),
                                    self.weights, self.lambdas, self.casefold)
        info = {"calls": [c["name"] for c in pred]}
        if reward < 1.0:
            info["reason"] = "trace differs from the gold calls" if pred or malformed else "no tool calls"
        return Score(reward, comps, info)

    def validation_cases(self):
        ex = _gold_example()
        call = ex.meta["gold_calls"][0]
        wrong = {"name": "jira_create_ticket", "arguments": call["arguments"]}
        return [(ex, f"<tool_call>{json.dumps(call)}</tool_call>", 1.0), (ex, ex.answer, 1.0),
                (ex, f"<tool_call>{json.dumps(wrong)}</tool_call>", 0.0), (ex, "I filed it.", 0.0),
                (ex, "<tool_call>{not json</tool_call>", 0.0)]


class ToolCallParams(Params):
    w_select: float = Field(0.3, ge=0.0, description="weight of the tool-name match S_select (RECONSTRUCTED)")
    w_args: float = Field(0.5, ge=0.0, description="weight of the argument-value match S_args (RECONSTRUCTED)")
    w_sequence: float = Field(0.2, ge=0.0, description="weight of the complete, in-order S_sequence "
                                                       "(RECONSTRUCTED)")
    lambda_dup: float = Field(0.1, ge=0.0, description="penalty per duplicate identical call")
    lambda_unknown: float = Field(0.1, ge=0.0, description="penalty per call to an unknown tool or malformed call")
    lambda_extra: float = Field(0.0, ge=0.0, description="penalty per other unmatched call (0: reads are free)")
    lambda_invalid: float = Field(0.0, ge=0.0, description="penalty per call violating its tool's JSON schema")
    casefold_strings: bool = Field(False, description="compare string values case- and whitespace-insensitively")
    max_calls: int = Field(32, gt=0, description="calls beyond this count as malformed")


@VERIFIERS.register("toolcall", ToolCallParams)
def _toolcall(p: ToolCallParams) -> ToolCallVerifier:
    """Tool-call trace: clip(0.3 name + 0.5 args + 0.2 order - 0.1 per duplicate/unknown call, 0, 1)."""
    if p.w_select + p.w_args + p.w_sequence <= 0:
        raise ValueError("toolcall weights must not all be 0")
    return ToolCallVerifier((p.w_select, p.w_args, p.w_sequence), {"dup": p.lambda_dup, "unknown": p.lambda_unknown,
                            "extra": p.lambda_extra, "invalid": p.lambda_invalid}, p.casefold_strings, p.max_calls)


class ToolEnvVerifier(BaseVerifier):
    """Executes the trace on the emulated issue tracker / wiki and checks the final state."""

    name = "toolcall_env"

    def __init__(self, lambda_unknown: float = 0.1, lambda_error: float = 0.0, max_calls: int = 32,
                 max_chars: int = 50_000):
        self.lambda_unknown, self.lambda_error, self.max_calls, self.max_chars = (
            lambda_unknown, lambda_error, max_calls, max_chars)

    def score(self, example: Example, text: str) -> Score:
        checks = example.meta.get("checks")
        if not checks:
            return Score(0.0, {"correct": 0.0}, {"error": "example has no meta['checks']"})
        if len(text) > self.max_chars:
            return Score(0.0, {"correct": 0.0}, {"reason": f"completion longer than {self.max_chars} characters"})
        env = IssueTrackerEnv(example.meta.get("initial_state"))
        calls, malformed = parse_tool_calls(text, self.max_calls)
        obs = env.run(calls)
        passed = check_state(env.state_dict(), checks)
        names = env.tool_names
        unknown = sum(c["name"] not in names for c in calls)
        failed = sum(not o["ok"] for o in obs) - unknown
        frac = sum(passed) / len(passed)
        reward = min(1.0, max(0.0, frac - self.lambda_unknown * (unknown + malformed) - self.lambda_error * failed))
        comps = {"checks": frac, "n_unknown": float(unknown), "n_malformed": float(malformed),
                 "n_failed": float(failed), "correct": float(reward >= 1.0)}
        info = {"passed": passed, "errors": [o["error"] for o in obs if not o["ok"]][:10]}
        return Score(reward, comps, info if reward >= 1.0 else {**info, "reason": "final state checks failed"})

    def validation_cases(self):
        seed = {"projects": ["ENG"], "issues": [{"project": "ENG", "summary": "Login fails", "issuetype": "Bug"}]}
        checks = [{"collection": "issues", "where": {"key": "ENG-1", "fields.status.name": "Done"}},
                  {"collection": "issues", "where": {"key": "ENG-1",
                                                     "fields.comment.comments": {"$contains": {"body": "fixed"}}}}]
        gold = [{"name": "jira_transition_issue", "arguments": {"issue_key": "ENG-1", "transition": {"name": n}}}
                for n in ("Start Progress", "Resolve")]
        gold.append({"name": "jira_add_comment", "arguments": {"issue_key": "ENG-1", "body": "fixed"}})
        ex = Example("toolcall-env-1", "Resolve ENG-1 and comment 'fixed'", json.dumps(gold),
                     meta={"initial_state": seed, "checks": checks})
        skip = json.dumps([gold[1], gold[2]])  # Resolve from "To Do" fails: only the comment check passes
        return [(ex, ex.answer, 1.0), (ex, json.dumps(gold[:1]), 0.0),
                (ex, '[{"name": "jira_close_everything", "arguments": {}}]', 0.0), (ex, skip, 0.5)]


class ToolEnvParams(Params):
    lambda_unknown: float = Field(0.1, ge=0.0, description="penalty per call to an unknown tool or malformed call")
    lambda_error: float = Field(0.0, ge=0.0, description="penalty per call the API rejected (bad arguments, "
                                                         "missing object, illegal transition)")
    max_calls: int = Field(32, gt=0, description="calls beyond this are not executed and count as malformed")


@VERIFIERS.register("toolcall_env", ToolEnvParams)
def _toolcall_env(p: ToolEnvParams) -> ToolEnvVerifier:
    """Emulated Jira/Confluence: fraction of final-state checks passed minus 0.1 per unknown/malformed call."""
    return ToolEnvVerifier(p.lambda_unknown, p.lambda_error, p.max_calls)

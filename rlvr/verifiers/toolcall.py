"""Tool-call traces checked against JSON-schema tools, and executed against an emulated API.

After Vissa et al. 2026, "Beyond Next-Token Prediction: An RLVR Proof of Concept for Tool-Use Agents on Atlassian
Workflows" (arXiv:2607.01465). RECONSTRUCTED: the paper's checker is not public; confirmed are a scalar in [0, 1]
from the whole trace, three additive groups with per-argument correctness first, and penalties for duplicate calls
and missing parameters. Guessed, and parameterised: the weights ``w_select / w_args / w_sequence
= 0.3 / 0.5 / 0.2``, the penalty sizes ``lambda = 0.1``, and the matching rules below. The precision factor,
the schema-violation penalty and the extra-call penalty are this module's additions (docs/verifiers.md, Tool
calls: sprays, schemas and side effects).

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
    recall     = (w_select S_select + w_args S_args + w_sequence S_sequence) / (w_select + w_args + w_sequence)
    wrong      = distinct unmatched calls (copies are duplicates, below) that change state, or that call a
                 tool the gold calls; a tool changes state unless its schema says ``annotations.readOnlyHint``
                 (else: unless its name's verb is get / list / search / read / find / ...)
    precision  = matched / (matched + wrong)       ("ratio", default; "exact": 1 iff wrong = 0; "off": 1)
    R = recall * precision
        - lambda_dup * #duplicate identical calls (beyond the gold's own repeats)
        - lambda_unknown * (#calls to tools not in the schema list + #malformed calls)
        - lambda_invalid * #calls with an unknown key or a wrong type for their tool's JSON schema (default 1:
          the API would reject the call; a missing required key costs its gold leaves in S_args instead)
        - lambda_extra * #other unmatched calls (default 0: a read of a tool the gold does not use is free)
    reward = clip(R, 0, 1)

So spraying wrong ``create_issue`` calls around the right one scores ~1/(n+1) instead of 1.0, a second
``get_issue`` of another key halves the reward, and a correct call with an extra key scores 0.

Values compare strictly: no string/number coercion, ``True`` is not ``1``; ``casefold_strings`` relaxes
case and surrounding whitespace. ``arg_name`` (the fraction of gold leaves present at all) is reported.

``toolcall_env``: the trace runs against :class:`rlvr.envs.IssueTrackerEnv` seeded with
``meta["initial_state"]``, then the final state is checked with ``meta["checks"]``: each check is
``{"collection": "issues" | "pages", "where": {path: value, ...}, "count": n (default 1)}`` and passes when
exactly ``n`` records satisfy every condition (a value ``{"$contains": x}`` tests substring / list
membership / a sub-dict of a list element). So creating an issue twice fails a ``count: 1`` check.
``R = checks passed / checks - lambda_unknown * (#unknown + #malformed) - lambda_error * #failed calls
- lambda_side_effect * #side effects``, clipped to [0, 1]. Side effects (default lambda 0.5) are records the
trace modified or created that the task did not ask to change: not modified by the gold trace
(``meta["gold_calls"]``, else ``answer`` when it is a trace) and not targeted by a check, and creations beyond
what the gold or the checks account for (:func:`rlvr.envs.checks.side_effects`). Checks alone say nothing
about the rest of the tracker, so closing another issue or a spray of wrong issues passed them.
Both checkers are pure functions of the completion and the example.
"""

from __future__ import annotations

import json
from collections import Counter
from typing import Any, Literal

from pydantic import Field

from rlvr.core.types import Example, Score
from rlvr.envs import TOOL_SCHEMAS, IssueTrackerEnv, schema_errors
from rlvr.envs.checks import check_state, side_effects, values_equal
from rlvr.envs.checks import lookup_path as _lookup
from rlvr.envs.toolparse import normalise_call as _normalise_call
from rlvr.envs.toolparse import parse_tool_calls
from rlvr.registry import Params
from rlvr.verifiers.base import VERIFIERS, BaseVerifier

__all__ = ["ToolCallVerifier", "ToolEnvVerifier", "ToolCallParams", "ToolEnvParams", "parse_tool_calls",
           "flatten_arguments", "values_equal", "score_trace", "check_state", "side_effects", "is_read_only"]


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


_READ_VERBS = ("get", "list", "search", "read", "find", "fetch", "query", "lookup", "describe", "show", "view",
               "count")


def is_read_only(tool: dict) -> bool:
    """Whether a tool only reads: MCP's ``annotations.readOnlyHint`` when the schema states it, else a name
    whose verb (the part after an optional ``service_`` prefix) is get, list, search, read, find, ..."""
    hint = (tool.get("annotations") or {}).get("readOnlyHint")
    if isinstance(hint, bool):
        return hint
    parts = str(tool.get("name", "")).replace(".", "_").replace("-", "_").lower().split("_")
    return any(p in _READ_VERBS for p in parts[:2])


def _violations(args: Any, schema: dict) -> tuple[int, int]:
    """(schema violations other than missing required properties, missing required properties) of one call.
    A missing property already costs its gold leaves in S_args; an unknown key or a wrong type makes a call
    the API rejects, whatever its other arguments."""
    errors = schema_errors(args, schema)
    missing = sum("missing required property" in e for e in errors)
    return len(errors) - missing, missing


def _penalty_counts(pred: list[dict], gold: list[dict], assigned: list[int | None], schemas: dict[str, dict],
                    read_only: dict[str, bool]) -> dict[str, int]:
    known = [i for i, p in enumerate(pred) if p["name"] in schemas]
    pred_keys, gold_keys = Counter(_key(pred[i]) for i in known), Counter(_key(g) for g in gold)
    dup = sum(max(0, n - max(1, gold_keys[k])) for k, n in pred_keys.items())
    matched = {i for i in assigned if i is not None}
    violations = [_violations(pred[i]["arguments"], schemas[pred[i]["name"]]) for i in known]
    # the precision denominator: distinct unmatched calls (copies are duplicates, priced above) that change
    # state, or that call a tool the gold calls (a spray of get_issue around the right one)
    gold_names, matched_keys = {g["name"] for g in gold}, {_key(pred[i]) for i in matched}
    wrong = {_key(pred[i]) for i in known if i not in matched and _key(pred[i]) not in matched_keys
             and (not read_only.get(pred[i]["name"], False) or pred[i]["name"] in gold_names)}
    return {"n_unknown": len(pred) - len(known), "n_duplicate": dup,
            "n_schema_invalid": sum(v[0] > 0 for v in violations),
            "n_missing_required": sum(v[1] > 0 for v in violations),
            "n_extra": max(0, len(known) - len(matched) - dup), "n_wrong": len(wrong)}


def score_trace(pred: list[dict], gold: list[dict], schemas: dict[str, dict], malformed: int = 0,
                ordered: bool = True, weights: tuple[float, float, float] = (0.3, 0.5, 0.2),
                lambdas: dict[str, float] | None = None, casefold: bool = False,
                read_only: dict[str, bool] | None = None, precision: str = "ratio") -> tuple[float, dict[str, float]]:
    """``(reward, components)`` for a predicted trace against gold calls (see the module docstring).

    ``read_only`` maps tool names to whether they only read (default: :func:`is_read_only` of the name);
    ``precision`` is "ratio" (the base times matched / (matched + wrong)), "exact" (0 unless no wrong call)
    or "off" (the reconstruction without the factor)."""
    lam = {"dup": 0.1, "unknown": 0.1, "extra": 0.0, "invalid": 1.0, **(lambdas or {})}
    if read_only is None:
        read_only = {name: is_read_only({"name": name}) for name in schemas}
    assigned, counts = _match(pred, gold, casefold)
    n_leaves = sum(c[0] for c in counts)
    s_select = sum(a is not None for a in assigned) / len(gold) if gold else float(not pred and not malformed)
    s_args = sum(c[2] for c in counts) / n_leaves if n_leaves else s_select
    idx = [a for a in assigned if a is not None]
    s_seq = float(len(idx) == len(gold) and (not ordered or idx == sorted(idx)))
    n = _penalty_counts(pred, gold, assigned, schemas, read_only)
    n_matched = len(idx)
    if precision == "off" or n_matched + n["n_wrong"] == 0:
        p = 1.0
    elif precision == "exact":
        p = float(n["n_wrong"] == 0)
    else:
        p = n_matched / (n_matched + n["n_wrong"])
    base = (weights[0] * s_select + weights[1] * s_args + weights[2] * s_seq) / sum(weights)
    penalty = (lam["dup"] * n["n_duplicate"] + lam["unknown"] * (n["n_unknown"] + malformed)
               + lam["extra"] * n["n_extra"] + lam["invalid"] * n["n_schema_invalid"])
    reward = min(1.0, max(0.0, base * p - penalty))
    comps = {"tool_name": s_select, "arg_name": sum(c[1] for c in counts) / n_leaves if n_leaves else s_select,
             "arg_value": s_args, "sequence": s_seq, "precision": p, "recall": base, "n_malformed": float(malformed),
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
                 max_calls: int = 32, max_chars: int = 50_000, precision: str = "ratio"):
        if precision not in ("ratio", "exact", "off"):
            raise ValueError(f"precision must be 'ratio', 'exact' or 'off', got {precision!r}")
        self.weights, self.lambdas, self.casefold = tuple(weights), dict(lambdas or {}), casefold
        self.max_calls, self.max_chars, self.precision = max_calls, max_chars, precision

    def score(self, example: Example, text: str) -> Score:
        if len(text) > self.max_chars:
            return Score(0.0, {"correct": 0.0}, {"reason": f"completion longer than {self.max_chars} characters"})
        tools = example.meta.get("tools", TOOL_SCHEMAS)
        schemas = {t["name"]: t.get("parameters", {}) for t in tools}
        read_only = {t["name"]: is_read_only(t) for t in tools}
        pred, malformed = parse_tool_calls(text, self.max_calls)
        reward, comps = score_trace(pred, _gold_trace(example), schemas, malformed, example.meta.get("ordered", True),
                                    self.weights, self.lambdas, self.casefold, read_only, self.precision)
        info = {"calls": [c["name"] for c in pred]}
        if reward < 1.0:
            info["reason"] = "trace differs from the gold calls" if pred or malformed else "no tool calls"
            if comps["n_wrong"]:
                info["reason"] += (f"; {int(comps['n_wrong'])} wrong or extra call(s): state changes, or repeats "
                                   "of a gold tool")
            if comps["n_schema_invalid"]:
                info["reason"] += f"; {int(comps['n_schema_invalid'])} call(s) violate their tool's schema"
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
    lambda_extra: float = Field(0.0, ge=0.0, description="penalty per other unmatched call (0: reads of tools the "
                                                         "gold does not call are free)")
    lambda_invalid: float = Field(1.0, ge=0.0, description="penalty per call with an unknown key or a wrong type "
                                                           "for its tool's JSON schema (the API would reject it)")
    precision: Literal["ratio", "exact", "off"] = Field(
        "ratio", description="wrong calls that change state or repeat a gold tool: 'ratio' multiplies by "
                             "matched/(matched + wrong), 'exact' scores 0 with any, 'off' ignores them")
    casefold_strings: bool = Field(False, description="compare string values case- and whitespace-insensitively")
    max_calls: int = Field(32, gt=0, description="calls beyond this count as malformed")


@VERIFIERS.register("toolcall", ToolCallParams)
def _toolcall(p: ToolCallParams) -> ToolCallVerifier:
    """Tool-call trace: clip((0.3 name + 0.5 args + 0.2 order) x precision - penalties, 0, 1)."""
    if p.w_select + p.w_args + p.w_sequence <= 0:
        raise ValueError("toolcall weights must not all be 0")
    return ToolCallVerifier((p.w_select, p.w_args, p.w_sequence), {"dup": p.lambda_dup, "unknown": p.lambda_unknown,
                            "extra": p.lambda_extra, "invalid": p.lambda_invalid}, p.casefold_strings, p.max_calls,
                            precision=p.precision)


class ToolEnvVerifier(BaseVerifier):
    """Executes the trace on the emulated issue tracker / wiki and checks the final state."""

    name = "toolcall_env"

    def __init__(self, lambda_unknown: float = 0.1, lambda_error: float = 0.0, max_calls: int = 32,
                 max_chars: int = 50_000, lambda_side_effect: float = 0.5):
        self.lambda_unknown, self.lambda_error, self.max_calls, self.max_chars = (
            lambda_unknown, lambda_error, max_calls, max_chars)
        self.lambda_side_effect = lambda_side_effect

    def score(self, example: Example, text: str) -> Score:
        checks = example.meta.get("checks")
        if not checks:
            return Score(0.0, {"correct": 0.0}, {"error": "example has no meta['checks']"})
        if len(text) > self.max_chars:
            return Score(0.0, {"correct": 0.0}, {"reason": f"completion longer than {self.max_chars} characters"})
        env = IssueTrackerEnv(example.meta.get("initial_state"))
        initial = env.state_dict()
        calls, malformed = parse_tool_calls(text, self.max_calls)
        obs = env.run(calls)
        final = env.state_dict()
        passed = check_state(final, checks)
        effects = side_effects(initial, final, checks, gold_final_state(example))
        names = env.tool_names
        unknown = sum(c["name"] not in names for c in calls)
        failed = sum(not o["ok"] for o in obs) - unknown
        frac = sum(passed) / len(passed)
        reward = min(1.0, max(0.0, frac - self.lambda_unknown * (unknown + malformed) - self.lambda_error * failed
                              - self.lambda_side_effect * len(effects)))
        comps = {"checks": frac, "n_unknown": float(unknown), "n_malformed": float(malformed),
                 "n_failed": float(failed), "n_side_effects": float(len(effects)), "correct": float(reward >= 1.0)}
        info = {"passed": passed, "errors": [o["error"] for o in obs if not o["ok"]][:10]}
        if effects:
            info["side_effects"] = effects[:20]
        if reward >= 1.0:
            return Score(reward, comps, info)
        reason = "final state checks failed" if frac < 1.0 else "penalised calls"
        if effects:
            reason += f"; changed {len(effects)} record(s) the task did not ask to change"
        return Score(reward, comps, {**info, "reason": reason})

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
    lambda_side_effect: float = Field(0.5, ge=0.0, description="penalty per record changed or created that the "
                                                               "task did not ask for (rlvr.envs.checks.side_effects)")
    max_calls: int = Field(32, gt=0, description="calls beyond this are not executed and count as malformed")


def gold_final_state(example: Example) -> dict | None:
    """The final state of the example's gold trace (``meta["gold_calls"]``, else ``answer`` when it parses as
    a non-empty trace) run from ``meta["initial_state"]``; None without one."""
    gold = example.meta.get("gold_calls")
    if gold is not None:
        calls = [c for c in (_normalise_call(x) for x in gold) if c is not None]
    else:
        calls, malformed = parse_tool_calls(example.answer or "", max_calls=10_000)
        if malformed or not calls:
            return None
    env = IssueTrackerEnv(example.meta.get("initial_state"))
    env.run(calls)
    return env.state_dict()


@VERIFIERS.register("toolcall_env", ToolEnvParams)
def _toolcall_env(p: ToolEnvParams) -> ToolEnvVerifier:
    """Emulated Jira/Confluence: fraction of final-state checks passed minus 0.1 per unknown/malformed call and
    0.5 per record changed that the task did not ask to change."""
    return ToolEnvVerifier(p.lambda_unknown, p.lambda_error, p.max_calls, lambda_side_effect=p.lambda_side_effect)

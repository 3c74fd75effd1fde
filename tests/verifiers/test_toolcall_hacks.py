"""Tool-call traces: sprays of wrong calls around the right one, arguments outside the tool's schema, and
calls that change records the task did not ask about never keep full reward (docs/verifiers.md, Tool
calls: sprays, schemas and side effects). Each family is generated over several gold calls and sizes."""

import copy
import itertools
import json
import random

import pytest

from rlvr.core.types import Example
from rlvr.envs import TOOL_SCHEMAS, IssueTrackerEnv
from rlvr.envs.checks import side_effects
from rlvr.envs.tool_env import ToolCallEnv
from rlvr.verifiers import build_verifier
from rlvr.verifiers.toolcall import ToolCallVerifier, ToolEnvVerifier, is_read_only

SEED = {"projects": ["ENG", "OPS"], "spaces": ["DOC"],
        "issues": [{"project": "ENG", "summary": f"Bug {i}", "issuetype": "Bug"} for i in range(1, 6)],
        "pages": [{"space_key": "DOC", "title": "Runbook", "body": "restart"}]}


def create(summary="Login fails", project="ENG", kind="Bug", **extra):
    fields = {"project": {"key": project}, "summary": summary, "issuetype": {"name": kind}, **extra}
    return {"name": "jira_create_issue", "arguments": {"fields": fields}}


def get(key="ENG-1"):
    return {"name": "jira_get_issue", "arguments": {"issue_key": key}}


def transition(key, name):
    return {"name": "jira_transition_issue", "arguments": {"issue_key": key, "transition": {"name": name}}}


def comment(key, body):
    return {"name": "jira_add_comment", "arguments": {"issue_key": key, "body": body}}


def tc(*calls):
    return "".join(f"<tool_call>{json.dumps(c)}</tool_call>" for c in calls)


def ex(*gold, **meta):
    return Example("tc", "q", json.dumps(list(gold)), meta={"gold_calls": list(gold), **meta})


GOLDS = [[create()], [get("ENG-2")], [get("ENG-1"), create("Crash on save", "OPS", "Task")],
         [transition("ENG-3", "Start Progress"), comment("ENG-3", "on it")]]


def sprays(gold, n, rng):
    """n wrong calls of the gold's own tools (other summaries, keys, bodies), mixed around the gold calls."""
    wrong = []
    for i in range(n):
        g = copy.deepcopy(gold[i % len(gold)])
        a = g["arguments"]
        if "fields" in a:
            a["fields"]["summary"] = f"guess {i}"
        if "issue_key" in a:
            a["issue_key"] = f"ENG-{10 + i}"
        if "body" in a:
            a["body"] = f"guess {i}"
        wrong.append(g)
    calls = list(gold) + wrong
    rng.shuffle(calls)
    order = [c for c in calls if c in gold]
    return calls if order == gold else list(gold) + wrong  # keep the gold order, so only the spray is wrong


@pytest.mark.parametrize("gi", range(len(GOLDS)))
def test_sprays_around_the_right_calls_do_not_pay(gi):
    gold, rng = GOLDS[gi], random.Random(gi)
    v = ToolCallVerifier()
    assert v(ex(*gold), tc(*gold)).reward == 1.0
    prev = 1.0
    for n in (1, 3, 7, 15, 32 - len(gold)):  # at most 32 calls are read
        calls = sprays(gold, n, rng)
        s = v(ex(*gold), tc(*calls))
        assert s.components["n_wrong"] == n and s.reward == pytest.approx(len(gold) / (len(gold) + n)), (n, s)
        assert s.reward < prev and s.reward <= 0.75
        prev = s.reward
        exact = build_verifier("toolcall", {"precision": "exact"})(ex(*gold), tc(*calls))
        assert exact.reward == 0.0
    # the old reconstruction, kept as an option, is what paid the spray
    off = build_verifier("toolcall", {"precision": "off"})
    assert off(ex(*gold), tc(*sprays(gold, 32 - len(gold), rng))).reward == 1.0


def test_thirty_one_wrong_creates_around_the_right_one():
    gold = create()
    calls = [create(f"guess {i}") for i in range(15)] + [gold] + [create(f"guess {i}") for i in range(15, 31)]
    s = ToolCallVerifier()(ex(gold), tc(*calls))
    assert s.reward == pytest.approx(1 / 32) and "wrong or extra" in s.info["reason"]
    # the same spray in the environment: 31 issues nobody asked for
    checks = [{"collection": "issues", "where": {"fields.summary": "Login fails"}}]
    e = Example("env", "q", json.dumps([gold]), meta={"initial_state": {"projects": ["ENG"]}, "checks": checks})
    s = ToolEnvVerifier()(e, tc(*calls))
    assert s.components["checks"] == 1.0 and s.components["n_side_effects"] == 31 and s.reward == 0.0


def test_reads_of_other_tools_stay_free_but_state_changes_do_not():
    gold = [create()]
    v = ToolCallVerifier()
    reads = [{"name": "jira_search_issues", "arguments": {"project": "ENG"}}, get("ENG-1"),
             {"name": "confluence_search_pages", "arguments": {"text": "x"}}]
    assert v(ex(*gold), tc(*reads, *gold)).reward == 1.0
    writes = [comment("ENG-1", "hi"), transition("ENG-1", "Start Progress"),
              {"name": "jira_update_issue", "arguments": {"issue_key": "ENG-1", "fields": {"summary": "x"}}}]
    for k in range(1, 4):
        s = v(ex(*gold), tc(*gold, *writes[:k]))
        assert s.reward == pytest.approx(1 / (1 + k)) and s.components["n_wrong"] == k


def test_read_only_comes_from_the_schema_else_the_name():
    assert {t["name"]: is_read_only(t) for t in TOOL_SCHEMAS} == {
        t["name"]: t["name"].split("_", 1)[1].startswith(("get", "search")) for t in TOOL_SCHEMAS}
    assert is_read_only({"name": "crm.list_accounts"}) and not is_read_only({"name": "crm_delete_account"})
    assert not is_read_only({"name": "get_weather", "annotations": {"readOnlyHint": False}})
    tools = [{"name": "lookup_city", "parameters": {"type": "object"}},
             {"name": "book_flight", "parameters": {"type": "object"}}]
    book = {"name": "book_flight", "arguments": {"to": "PAR"}}
    e = ex(book, tools=tools)
    assert ToolCallVerifier()(e, tc({"name": "lookup_city", "arguments": {"q": "x"}}, book)).reward == 1.0
    assert ToolCallVerifier()(e, tc({"name": "book_flight", "arguments": {"to": "LON"}}, book)).reward == 0.5


def _schema_breaks(call):
    """The call with an unknown key, or a wrong type, at each level of its arguments."""
    a = call["arguments"]
    yield {**call, "arguments": {**a, "verbose": True}}
    for key, value in a.items():
        if isinstance(value, dict):
            yield {**call, "arguments": {**a, key: {**value, "extra": 1}}}
        for bad in (1, 1.5, True, None, ["x"], {"x": 1}):
            if type(bad) is not type(value):
                yield {**call, "arguments": {**a, key: bad}}
    if "fields" in a:
        f = a["fields"]
        yield {**call, "arguments": {"fields": {**f, "priority": "High"}}}  # an object expected
        yield {**call, "arguments": {"fields": {**f, "labels": "p1"}}}  # an array expected
        yield {**call, "arguments": {"fields": {**f, "project": {"key": "ENG", "id": 3}}}}


@pytest.mark.parametrize("gold", [create(), get("ENG-2"), transition("ENG-3", "Resolve"), comment("ENG-1", "x")])
def test_calls_outside_the_schema_score_zero(gold):
    v = ToolCallVerifier()
    n = 0
    for bad in _schema_breaks(gold):
        s = v(ex(gold), tc(bad))
        assert s.reward == 0.0 and s.components["n_schema_invalid"] == 1, (bad, s)
        assert not IssueTrackerEnv(SEED).call(bad["name"], bad["arguments"])["ok"]  # the API agrees
        n += 1
    assert n >= 5
    # a missing required key is not a type error: it costs its leaves (partial credit, as before)
    for key in gold["arguments"]:
        partial = {**gold, "arguments": {k: v_ for k, v_ in gold["arguments"].items() if k != key}}
        s = v(ex(gold), tc(partial))
        assert s.components["n_missing_required"] == 1 and s.components["n_schema_invalid"] == 0
        assert 0.0 <= s.reward < 1.0


# ---- the environment: side effects ---------------------------------------------------------------


def env_example(gold, checks, with_gold=True):
    meta = {"initial_state": SEED, "checks": checks}
    if with_gold:
        meta["gold_calls"] = gold
    return Example("env", "q", json.dumps(gold) if with_gold else "", meta=meta)


TASKS = [
    ([transition("ENG-2", "Start Progress"), comment("ENG-2", "started")],
     [{"collection": "issues", "where": {"key": "ENG-2", "fields.status.name": "In Progress"}},
      {"collection": "issues",
       "where": {"key": "ENG-2", "fields.comment.comments": {"$contains": {"body": "started"}}}}]),
    ([create("Crash on save", "OPS", "Task")],
     [{"collection": "issues", "where": {"fields.summary": "Crash on save", "fields.project.key": "OPS"}}]),
    ([{"name": "confluence_create_page", "arguments": {"space_key": "DOC", "title": "Post-mortem",
                                                       "body": {"storage": {"value": "what happened"}}}}],
     [{"collection": "pages", "where": {"title": "Post-mortem"}}]),
]

COLLATERAL = [transition("ENG-4", "Start Progress"), comment("ENG-5", "spam"),
              {"name": "jira_update_issue", "arguments": {"issue_key": "ENG-1", "fields": {"summary": "renamed"}}},
              create("Unrelated"), {"name": "confluence_update_page",
                                    "arguments": {"page_id": "10006", "title": "Runbook",
                                                  "body": {"storage": {"value": "gone"}}, "version": {"number": 2}}},
              {"name": "confluence_create_page", "arguments": {"space_key": "DOC", "title": "Spam",
                                                               "body": {"storage": {"value": "x"}}}}]


@pytest.mark.parametrize("ti,with_gold", list(itertools.product(range(len(TASKS)), [True, False])))
def test_collateral_changes_cost_in_the_verifier_and_the_environment(ti, with_gold):
    gold, checks = TASKS[ti]
    e = env_example(gold, checks, with_gold)
    v = ToolEnvVerifier()
    assert v(e, tc(*gold)).reward == 1.0
    for k in (1, 2, 3):
        for extra in itertools.combinations(COLLATERAL, k):
            for calls in (list(gold) + list(extra), list(extra) + list(gold)):
                s = v(e, tc(*calls))
                assert s.components["checks"] == 1.0 and s.components["n_side_effects"] == k, (calls, s)
                assert s.reward == max(0.0, 1.0 - 0.5 * k)
                # the multi-turn environment gives the episode the same reward
                env = ToolCallEnv(max_calls_per_turn=8, one_call_per_turn=False)
                env.reset(e, 0)
                env.step(tc(*calls))
                assert env.step("done").reward == s.reward


def test_side_effects_helper():
    api = IssueTrackerEnv(SEED)
    initial = api.state_dict()
    api.run([transition("ENG-1", "Start Progress"), create("a"), create("b")])
    final = api.state_dict()
    checks = [{"collection": "issues", "where": {"fields.summary": "a"}}]
    assert side_effects(initial, final, checks) == ["issues/ENG-1", "issues/ENG-7 (created)"]
    assert side_effects(initial, final, checks + [{"collection": "issues", "where": {"key": "ENG-1"}}]) == [
        "issues/ENG-7 (created)"]
    assert side_effects(initial, initial, checks) == []
    # a count-0 check ("no issue like this") targets nothing
    assert side_effects(initial, final, [{"collection": "issues", "where": {"key": "ENG-1"}, "count": 0}])[0] == \
        "issues/ENG-1"


def test_more_changes_to_the_gold_records_than_the_gold_made():
    gold, checks = TASKS[0]  # start ENG-2 and comment "started"
    e = env_example(gold, checks)
    v = ToolEnvVerifier()
    update = {"name": "jira_update_issue", "arguments": {"issue_key": "ENG-2", "fields": {"summary": "renamed"}}}
    labels = {"name": "jira_update_issue", "arguments": {"issue_key": "ENG-2", "fields": {"labels": ["x"]}}}
    for extra in ([comment("ENG-2", "started")], [comment("ENG-2", "again")], [update], [labels],
                  list(gold)):  # the whole trace twice: the second transition fails, the comment doubles
        s = v(e, tc(*gold, *extra))
        assert s.components["n_side_effects"] == 1 and s.reward == 0.5, (extra, s.info)
    # the gold's own changes in another order, or with a creation between them, cost nothing (ids differ)
    both = [create("Crash", "OPS", "Task"), comment("ENG-2", "x")]
    e2 = env_example(both, [{"collection": "issues", "where": {"fields.summary": "Crash"}},
                            {"collection": "issues", "where": {"key": "ENG-2"}}])
    assert v(e2, tc(*both[::-1])).reward == 1.0 and v(e2, tc(*both)).reward == 1.0

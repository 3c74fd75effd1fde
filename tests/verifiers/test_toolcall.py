import copy
import json
import time

import pytest

import rlvr.verifiers.toolcall  # noqa: F401  (registers "toolcall" and "toolcall_env")
from rlvr.core.types import Example
from rlvr.envs import TOOL_SCHEMAS, IssueTrackerEnv, schema_errors
from rlvr.verifiers import build_verifier
from rlvr.verifiers.toolcall import (ToolCallVerifier, ToolEnvVerifier, check_state, flatten_arguments,
                                     parse_tool_calls, values_equal)

CREATE = {"name": "jira_create_issue",
          "arguments": {"fields": {"project": {"key": "ENG"}, "summary": "Login fails", "issuetype": {"name": "Bug"}}}}
GET = {"name": "jira_get_issue", "arguments": {"issue_key": "ENG-1"}}


def tc(*calls):
    return "".join(f"<tool_call>{json.dumps(c)}</tool_call>" for c in calls)


def ex(*gold, **meta):
    return Example("tc", "q", json.dumps(list(gold)), meta={"gold_calls": list(gold), **meta})


@pytest.mark.parametrize("name,cls", [("toolcall", ToolCallVerifier), ("toolcall_env", ToolEnvVerifier)])
def test_registered_and_validates(name, cls):
    v = build_verifier(name)
    assert isinstance(v, cls) and v.name == name
    v.validate()


def test_f2_oracles():
    """A hand-worked oracle for a create_issue scenario (after Vissa et al. 2026, arXiv:2607.01465)."""
    v, e = ToolCallVerifier(), ex(CREATE)
    assert v(e, tc(CREATE)).reward == 1.0
    twice = v(e, tc(CREATE, CREATE))
    assert twice.reward < 1.0 and twice.reward == pytest.approx(0.9) and twice.components["n_duplicate"] == 1
    missing = copy.deepcopy(CREATE)
    del missing["arguments"]["fields"]["issuetype"]
    s = v(e, tc(missing))
    assert s.components["arg_value"] == pytest.approx(2 / 3)
    assert s.reward == pytest.approx(0.3 + 0.5 * 2 / 3 + 0.2)
    wrong_name = {"name": "jira_create_ticket", "arguments": CREATE["arguments"]}
    s = v(e, tc(wrong_name))
    assert s.components["n_unknown"] == 1 and s.reward == 0.0
    s = v(e, tc(wrong_name, CREATE))
    assert s.reward == pytest.approx(0.9) and s.components["n_unknown"] == 1
    assert v(e, tc(wrong_name, CREATE)).reward == s.reward  # a pure function of the trace


def test_weights_are_parameters():
    v = build_verifier("toolcall", {"w_select": 1, "w_args": 0, "w_sequence": 0, "lambda_dup": 0.5})
    e = ex(CREATE)
    missing = copy.deepcopy(CREATE)
    del missing["arguments"]["fields"]["summary"]
    assert v(e, tc(missing)).reward == 1.0
    assert v(e, tc(CREATE, CREATE)).reward == 0.5


def test_order_extra_calls_and_schema_penalties():
    e = ex(GET, CREATE)
    v = ToolCallVerifier()
    assert v(e, tc(GET, CREATE)).reward == 1.0
    s = v(e, tc(CREATE, GET))
    assert s.components["sequence"] == 0.0 and s.reward == pytest.approx(0.8)
    assert v(ex(GET, CREATE, ordered=False), tc(CREATE, GET)).reward == 1.0
    search = {"name": "jira_search_issues", "arguments": {"project": "ENG"}}
    assert v(e, tc(search, GET, CREATE)).reward == 1.0  # extra reads are free by default
    strict = build_verifier("toolcall", {"lambda_extra": 0.1, "lambda_invalid": 0.2})
    assert strict(e, tc(search, GET, CREATE)).reward == pytest.approx(0.9)
    bad_schema = {"name": "jira_get_issue", "arguments": {"issue_key": "ENG-1", "verbose": True}}
    s = strict(ex(GET), tc(bad_schema))
    assert s.components["n_schema_invalid"] == 1 and s.reward == pytest.approx(0.8)


def test_values_are_strict_unless_casefolded():
    lower = copy.deepcopy(CREATE)
    lower["arguments"]["fields"]["project"]["key"] = "eng"
    assert ToolCallVerifier()(ex(CREATE), tc(lower)).components["arg_value"] == pytest.approx(2 / 3)
    assert build_verifier("toolcall", {"casefold_strings": True})(ex(CREATE), tc(lower)).reward == 1.0
    assert not values_equal("1", 1) and not values_equal(True, 1) and values_equal(1, 1.0)
    assert values_equal(["a", {"b": 2}], ["a", {"b": 2.0}]) and not values_equal(["a", "b"], ["b", "a"])
    assert flatten_arguments(CREATE["arguments"]) == {"fields.project.key": "ENG", "fields.summary": "Login fails",
                                                      "fields.issuetype.name": "Bug"}


def test_trace_formats():
    openai = {"tool_calls": [{"type": "function", "function": {"name": CREATE["name"],
                                                               "arguments": json.dumps(CREATE["arguments"])}}]}
    for text in (json.dumps(openai), json.dumps([CREATE]), f"<answer>{json.dumps(CREATE)}</answer>",
                 f"Plan.\n```json\n{json.dumps([CREATE])}\n```", tc(CREATE)):
        assert ToolCallVerifier()(ex(CREATE), text).reward == 1.0, text
    calls, malformed = parse_tool_calls("<tool_call>{'name': 'x'}</tool_call>" + tc(CREATE))
    assert calls == [CREATE] and malformed == 1  # no lenient JSON repair
    calls, malformed = parse_tool_calls(tc(*[GET] * 40), max_calls=32)
    assert len(calls) == 32 and malformed == 8
    assert parse_tool_calls("I will not call any tool.") == ([], 0)


@pytest.mark.parametrize("text", [
    "<tool_call>" + "[" * 100_000 + "</tool_call>",
    "[" * 40_000,
    "x" * 10_000_000,
    "<tool_call>" * 5000,
    bytes(range(256)).decode("latin-1"),
    '<tool_call>{"name": "jira_get_issue", "arguments": "not json"}</tool_call>',
    '<tool_call>{"name": ["jira_get_issue"], "arguments": {}}</tool_call>',
    '<tool_call>{"name": "jira_get_issue", "arguments": {"issue_key": "' + "A" * 40_000 + '"}}</tool_call>',
])
def test_adversarial_inputs_are_fast_zeros(text):
    for v in (ToolCallVerifier(), ToolEnvVerifier()):
        e = ex(CREATE, checks=[{"collection": "issues", "where": {"fields.summary": "Login fails"}}],
               initial_state={"projects": ["ENG"]})
        t0 = time.perf_counter()
        s = v(e, text)
        assert time.perf_counter() - t0 < 2.0
        assert s.reward == 0.0 and "verifier error" not in s.info.get("reason", ""), (v.name, s)


# ---- the emulated issue tracker / wiki ------------------------------------------------------------


SEED = {"projects": ["ENG", "OPS"], "spaces": ["DOC"],
        "issues": [{"project": "ENG", "summary": "Login fails", "issuetype": "Bug", "labels": ["auth"]}],
        "pages": [{"space_key": "DOC", "title": "Runbook", "body": "restart the service"}]}


def test_schemas_are_valid_and_enforced():
    env = IssueTrackerEnv(SEED)
    assert {t["name"] for t in env.tools} == {t["name"] for t in TOOL_SCHEMAS} and len(env.tools) == 11
    for t in TOOL_SCHEMAS:
        assert t["parameters"]["type"] == "object" and t["description"]
    assert not env.call("jira_create_issue", {"fields": {"project": {"key": "ENG"}, "summary": "x"}})["ok"]
    assert "expected" in env.call("jira_get_issue", {"issue_key": 1})["error"]
    assert not env.call("jira_get_issue", {"issue_key": "ENG-1", "extra": 1})["ok"]
    assert not env.call("jira_get_issue", {"issue_key": "eng one"})["ok"]
    assert env.call("jira_delete_everything", {})["error"].startswith("unknown tool")
    assert not env.call("jira_get_issue", "ENG-1")["ok"]
    assert schema_errors({"a": "1"}, {"type": "object", "properties": {"a": {"type": "integer"}}}) != []
    assert schema_errors(True, {"type": "number"}) != [] and schema_errors(2, {"type": "number"}) == []


def test_jira_workflow_and_parent_constraints():
    env = IssueTrackerEnv(SEED)
    assert env.call(**CREATE)["result"]["key"] == "ENG-2"
    sub = {"fields": {"project": {"key": "ENG"}, "summary": "s", "issuetype": {"name": "Sub-task"}}}
    assert "parent" in env.call("jira_create_issue", sub)["error"]
    sub["fields"]["parent"] = {"key": "ENG-1"}
    assert env.call("jira_create_issue", sub)["result"]["key"] == "ENG-3"
    sub["fields"]["project"] = {"key": "OPS"}
    assert not env.call("jira_create_issue", sub)["ok"]  # parent in another project
    resolve = {"issue_key": "ENG-1", "transition": {"name": "Resolve"}}
    assert "not available" in env.call("jira_transition_issue", resolve)["error"]
    got = env.call("jira_get_transitions", {"issue_key": "ENG-1"})["result"]["transitions"]
    assert [t["name"] for t in got] == ["Start Progress"]
    env.call("jira_transition_issue", {"issue_key": "ENG-1", "transition": {"name": "Start Progress"}})
    assert env.call("jira_transition_issue", resolve)["result"]["status"] == "Done"
    env.call("jira_add_comment", {"issue_key": "ENG-1", "body": "fixed"})
    env.call("jira_update_issue", {"issue_key": "ENG-1", "fields": {"labels": ["auth", "p1"]}})
    issue = env.call("jira_get_issue", {"issue_key": "ENG-1"})["result"]
    assert issue["fields"]["status"]["name"] == "Done" and issue["fields"]["comment"]["total"] == 1
    assert issue["fields"]["labels"] == ["auth", "p1"]
    assert env.call("jira_search_issues", {"project": "ENG", "label": "p1"})["result"]["total"] == 1
    assert env.call("jira_search_issues", {"text": "LOGIN"})["result"]["total"] == 2


def test_confluence_pages_versions_and_titles():
    env = IssueTrackerEnv(SEED)
    body = {"storage": {"value": "v2"}}
    pid = env.call("confluence_search_pages", {"title": "Runbook"})["result"]["results"][0]["id"]
    dup = env.call("confluence_create_page", {"space_key": "DOC", "title": "Runbook", "body": body})
    assert "already exists" in dup["error"]
    child = env.call("confluence_create_page", {"space_key": "DOC", "title": "Child", "body": body, "parent_id": pid})
    assert child["ok"]
    stale = {"page_id": pid, "title": "Runbook", "body": body, "version": {"number": 1}}
    assert "version conflict" in env.call("confluence_update_page", stale)["error"]
    stale["version"]["number"] = 2
    assert env.call("confluence_update_page", stale)["result"]["version"] == 2
    assert env.call("confluence_get_page", {"page_id": pid})["result"]["body"]["storage"]["value"] == "v2"
    assert env.call("confluence_search_pages", {"text": "V2"})["result"]["total"] == 2
    assert not env.call("confluence_create_page", {"space_key": "NOPE", "title": "x", "body": body})["ok"]


def test_environment_is_deterministic_and_checkpointable():
    trace = [CREATE, GET, {"name": "jira_add_comment", "arguments": {"issue_key": "ENG-2", "body": "hi"}}]
    a, b = IssueTrackerEnv(SEED), IssueTrackerEnv(SEED)
    assert a.run(trace) == b.run(trace) and a.state_dict() == b.state_dict()
    saved = a.state_dict()
    a.call(**CREATE)
    assert a.state_dict() != saved
    a.load_state_dict(saved)
    assert a.state_dict() == saved and a.call(**CREATE)["result"]["key"] == "ENG-3"
    obs, done = b.step([GET])
    assert json.loads(obs)[0]["ok"] and not done and b.step([])[1]
    b.reset()
    assert b.state_dict()["issues"] == {}


def test_env_verifier_checks_final_state():
    checks = [{"collection": "issues", "where": {"fields.summary": "Login fails", "fields.issuetype.name": "Bug",
                                                 "fields.project.key": "ENG"}}]
    e = Example("env", "q", json.dumps([CREATE]), meta={"initial_state": {"projects": ["ENG"]}, "checks": checks})
    v = ToolEnvVerifier()
    assert v(e, tc(CREATE)).reward == 1.0
    assert v(e, tc(CREATE, CREATE)).reward == 0.0  # two matching issues: the count-1 check fails
    assert v(e, tc(GET)).reward == 0.0
    unknown = {"name": "jira_nuke", "arguments": {}}
    assert v(e, tc(CREATE, unknown)).reward == pytest.approx(0.9)
    s = build_verifier("toolcall_env", {"lambda_error": 0.25})(e, tc(GET, CREATE))
    assert s.components["n_failed"] == 1 and s.reward == 0.75  # the read of a missing issue failed
    assert check_state({"issues": {"A": {"l": ["x", "y"]}}}, [{"collection": "issues",
                                                               "where": {"l": {"$contains": "y"}}}]) == [True]
    assert ToolEnvVerifier()(Example("x", "q", "[]"), "[]").reward == 0.0  # no checks: error, not a pass

"""``rlvr data annotate`` (rlvr.datapipe.annotate): NudgeRL's hints and SCOPE-RL's scaffolds written by a model into
a dataset; replies parsed from the shapes models write, leaks of the answer dropped, failures kept and counted,
a crashed run resumed from its cache without asking again; the annotated file feeds the hints and scaffolds the
methods read."""

from __future__ import annotations

import json
import re

import pytest
from typer.testing import CliRunner

from rlvr.cli import app
from rlvr.datapipe.annotate import annotate, parse_hints, parse_scaffold
from tests.judge_server import FakeJudgeServer

runner = CliRunner()


@pytest.mark.parametrize("reply,n,answer,want", [
    ("1. Work backwards.\n2. Try small cases.\n3. Draw it.", 2, "7", ["Work backwards.", "Try small cases."]),
    ("Sure! Here are hints:\n- Factor the expression\n* Look for symmetry", 2, "", ["Factor the expression",
                                                                                  "Look for symmetry"]),
    ("1) Note the answer is 42.\n2) Add the tens first.", 2, "42", ["Add the tens first."]),  # a leak is dropped
    ("1. Use 420 as a bound.\n2. Check 42.5", 2, "42", ["Use 420 as a bound.", "Check 42.5"]),  # not the answer
    ("Think about parity.\nThen divide by two.", 2, "", ["Think about parity.", "Then divide by two."]),
])
def test_hints_are_read_from_lists_and_leaks_dropped(reply, n, answer, want):
    assert parse_hints(reply, n, answer) == want


@pytest.mark.parametrize("reply", ["", "1. The answer is 42.", "   \n"])
def test_a_reply_without_a_usable_hint_fails(reply):
    with pytest.raises(ValueError):
        parse_hints(reply, 2, "42")


def test_scaffolds_are_read_from_the_last_json_list():
    reply = ('Plan [draft]: [{"question": "old", "answer": "x"}]\nFinal:\n'
             '[{"question": "What is 6*7?", "answer": 42}, {"question": " ", "answer": "1"}, "junk", '
             '{"question": "Add 3", "answer": "45"}, {"question": "No answer"}]')
    assert parse_scaffold(reply) == [{"question": "What is 6*7?", "answer": "42"},
                                     {"question": "Add 3", "answer": "45"}]
    for bad in ("no json", "[1, 2]", '[{"question": "", "answer": ""}]', '{"question": "a", "answer": "b"}'):
        with pytest.raises(ValueError):
            parse_scaffold(bad)


def _hint_grade(text: str) -> str:
    problem = re.search(r"Problem:\n(.*)\n\nReply", text, re.S).group(1)
    if "leaky" in problem:
        return "1. The answer is 9.\n2. It is 9."
    return f"1. Start from {problem[:6]}.\n2. Check each step.\n3. A third one."


def _rows(tmp_path, rows):
    f = tmp_path / "in.jsonl"
    f.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return f


def test_the_cli_writes_hints_counts_failures_and_resumes_from_its_cache(tmp_path):
    rows = [{"prompt": f"{a}+{a}=", "answer": str(2 * a), "id": a} for a in range(1, 6)]
    rows += [{"prompt": "leaky one", "answer": "9"}, {"prompt": "has hints", "answer": "1", "hints": ["mine"]}]
    src, out = _rows(tmp_path, rows), tmp_path / "out.jsonl"
    s = FakeJudgeServer(grade=_hint_grade)
    try:
        r = runner.invoke(app, ["data", "annotate", str(src), "-o", str(out), "--base-url", s.url, "--model", "m",
                                "--chunk", "3", "--param", "temperature=0.7"])
        assert r.exit_code == 0, r.output
        asked = len(s.bodies)
    finally:
        s.close()
    got = [json.loads(x) for x in out.read_text().splitlines()]
    assert [g["id"] for g in got[:5]] == list(range(1, 6))  # rows kept in order, fields kept
    assert got[0]["hints"] == ["Start from 1+1=.", "Check each step."]
    assert "hints" not in got[5] and got[6]["hints"] == ["mine"]  # a leak-only reply fails; a filled row is kept
    report = json.loads((tmp_path / "out.jsonl.report.json").read_text())
    assert (report["rows"], report["annotated"], report["kept"], report["failed"]) == (7, 5, 1, 1)
    assert report["reasons"] == {"every hint states the answer": 1} and report["examples"][0]["row"] == 6
    assert asked == 6 and all(b["temperature"] == 0.7 for b in s.bodies)
    assert "5 of 7 rows annotated" in " ".join(r.output.split())
    # the server is gone: a rerun answers every row from the cache, asking nothing
    again = runner.invoke(app, ["data", "annotate", str(src), "-o", str(tmp_path / "again.jsonl"), "--base-url",
                                s.url, "--model", "m", "--param", "temperature=0.7", "--param", "retries=0",
                                "--cache", str(tmp_path / "out.jsonl.cache.jsonl")])
    assert again.exit_code == 0, again.output
    assert (tmp_path / "again.jsonl").read_text() == out.read_text()


def test_a_server_that_is_down_leaves_rows_unannotated_and_says_why(tmp_path):
    import socket

    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    done, report = annotate([{"prompt": "p", "answer": "1"}], "hints",
                            {"base_url": f"http://127.0.0.1:{port}/v1", "model": "m", "retries": 0})
    assert done == [{"prompt": "p", "answer": "1"}] and report.failed and "cannot reach" in report.examples[0]["reason"]


@pytest.mark.parametrize("args,message", [
    (["--model", "m"], "give the model"),
    (["--base-url", "http://x/v1", "--path", "/m"], "give the model"),
    (["--base-url", "http://x/v1"], "model"),
    (["--base-url", "http://x/v1", "--model", "m", "--kind", "nope"], "unknown annotation"),
    (["--base-url", "http://x/v1", "--model", "m", "--param", "oops"], "KEY=VALUE"),
    (["--base-url", "http://x/v1", "--model", "m", "--param", "temprature=1"], "temprature"),
])
def test_bad_input_is_one_message(tmp_path, args, message):
    src = _rows(tmp_path, [{"prompt": "p"}])
    r = runner.invoke(app, ["data", "annotate", str(src), "-o", str(tmp_path / "o.jsonl"), *args])
    assert r.exit_code == 2, r.output
    assert message in " ".join(r.output.split()) and "Traceback" not in r.output


def test_bad_files_and_templates_are_refused(tmp_path):
    bad = tmp_path / "bad.jsonl"
    bad.write_text('{"prompt": "a"}\n{oops\n')
    r = runner.invoke(app, ["data", "annotate", str(bad), "-o", str(tmp_path / "o.jsonl"), "--base-url",
                            "http://127.0.0.1:9/v1", "--model", "m"])
    assert r.exit_code == 2 and "bad.jsonl:2" in " ".join(r.output.split())
    with pytest.raises(ValueError, match="must use"):
        annotate([{"prompt": "p"}], "hints", {"base_url": "http://x/v1", "model": "m"}, template="Hints for {x}")
    with pytest.raises(ValueError, match="no 'question' field"):
        annotate([{"prompt": "p"}], "hints", {"base_url": "http://x/v1", "model": "m"}, prompt_field="question")


def test_scaffolds_written_by_a_model_reach_scope_rl(tmp_path):
    """The annotated file's scaffold is what SCOPE-RL's wrapper reads (rlvr.rollout.scaffold.scaffold_of)."""
    from rlvr.rollout.scaffold import scaffold_of
    from rlvr.tasks.dataset import JsonlParams, read_examples

    def grade(text):
        prompt = re.search(r"Problem:\n(.*)\n\nFinal", text, re.S).group(1)
        a, b = prompt.rstrip("=").split("+")
        return json.dumps([{"question": f"What is {a} tens?", "answer": int(a) * 10}, {"question": f"Add {b}",
                                                                                      "answer": str(10 * int(a) + int(b))}])

    s = FakeJudgeServer(grade=grade)
    try:
        done, report = annotate([{"prompt": "3+4=", "answer": "34"}], "scaffold", {"base_url": s.url, "model": "m"})
    finally:
        s.close()
    assert report.annotated == 1 and "Final answer" in s.bodies[0]["messages"][0]["content"]
    f = _rows(tmp_path, done)
    ex = read_examples(f, JsonlParams(train_path=str(f)))[0]
    assert scaffold_of(ex, "scaffold") == [("What is 3 tens?", "30"), ("Add 4", "34")]


# ---- written during a run: rollout.contexts.model, rollout.scaffold.model -------------------------------------

def test_nudge_hints_are_written_by_a_model_once_per_example_and_kept_across_a_resume():
    from rlvr.core.types import Example, GenerationRequest, SamplingParams
    from rlvr.models import char_tokenizer
    from rlvr.rollout.contexts import ContextCompletion, ContextsConfig, ContextsWrapper
    from tests.methods.test_nudge import Recording

    tok = char_tokenizer()
    s = FakeJudgeServer(grade=_hint_grade)
    try:
        cfg = ContextsConfig(num_contexts=2, per_context=4, p_dropout=0.0, fallback=["guess"],
                             template="{prompt}|{context}", model={"base_url": s.url, "model": "m"})
        inner = Recording(tok)
        eng = ContextsWrapper(inner, tok, cfg)
        reqs = [GenerationRequest(Example("a", "3+4=", "7"), 8), GenerationRequest(Example("b", "leaky", "9"), 8),
                GenerationRequest(Example("c", "own", "1", meta={"hints": ["mine", "yours"]}), 8)]
        out = eng.generate(reqs, SamplingParams(seed=0))
        assert len(s.bodies) == 2  # a and b; c has its own hints
        prompts = {r.example.prompt for r in inner.requests[0]}
        assert prompts == {"3+4=|Start from 3+4=.", "3+4=|Check each step.", "leaky|guess", "leaky", "own|mine",
                           "own|yours"}  # (one fallback hint: the second context's draws are plain)
        assert {c.context for c in out if isinstance(c, ContextCompletion) and c.example_id == "b"} == {1}
        eng.generate(reqs, SamplingParams(seed=1))
        assert len(s.bodies) == 2  # asked once per example, a failure included
        assert eng.metrics()["hints/written"] == 1.0 and eng.metrics()["hints/failed"] == 1.0
        state = eng.state_dict()
    finally:
        s.close()
    resumed = ContextsWrapper(Recording(tok), tok, cfg)  # the server is gone: the checkpoint holds the hints
    resumed.load_state_dict(json.loads(json.dumps(state)))
    resumed.generate(reqs[:1], SamplingParams(seed=0))
    assert {r.example.prompt for r in resumed.inner.requests[0]} == {"3+4=|Start from 3+4=.", "3+4=|Check each step."}


def test_scope_scaffolds_are_written_for_failed_problems_only():
    from rlvr.core.types import Example, GenerationRequest, SamplingParams
    from rlvr.models import char_tokenizer
    from rlvr.rollout.scaffold import ScaffoldCompletion, ScaffoldConfig, ScaffoldWrapper
    from tests.methods.test_nudge import Recording
    from tests.methods.test_scope import _Stats

    def grade(text):
        return json.dumps([{"question": "What is 3 times 4?", "answer": 12}, {"question": "Then?", "answer": "17"}])

    tok = char_tokenizer()
    s = FakeJudgeServer(grade=grade)
    try:
        eng = ScaffoldWrapper(Recording(tok), ScaffoldConfig(enabled=True, model={"base_url": s.url, "model": "m"}))
        stats = _Stats()
        eng.bind_stats(stats)
        failed, solved = Example("f", "Compute 3*4+5.", "17"), Example("s", "2+2?", "4")
        reqs = [GenerationRequest(failed, 2), GenerationRequest(solved, 2)]
        sp = SamplingParams(seed=0)
        eng.generate(reqs, sp)
        assert s.bodies == []  # nothing observed yet: nothing to scaffold, nothing asked
        stats.obs.update({"f": (0, 0.0), "s": (0, 1.0)})
        out = eng.generate(reqs, sp)
        assert len(s.bodies) == 1 and "Compute 3*4+5." in s.bodies[0]["messages"][0]["content"]
        scaffolded = [c for c in out if isinstance(c, ScaffoldCompletion)]
        assert {c.example_id for c in scaffolded} == {"f"} and scaffolded[0].sub_answers == ("12", "17")
        assert "1. What is 3 times 4?" in eng.inner.requests[-1][0].example.prompt
        assert "written" in eng.state_dict() and eng.state_dict()["written"]["written"]["f"][0]["answer"] == "12"
    finally:
        s.close()


def test_a_bad_model_config_is_refused_at_load():
    from rlvr.config.run import ConfigError, load_config

    with pytest.raises(ConfigError, match="base_url"):
        load_config(overrides=["recipe=nudge_rl", "rollout.contexts.model={model: m}"])
    with pytest.raises(ConfigError, match="path"):
        load_config(overrides=["recipe=scope_rl", "rollout.scaffold.model={backend: hf}"])

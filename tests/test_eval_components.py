"""Evaluation keeps every score: each verifier component aggregated with an interval, the protocol written into
each result and compared, and results exported as a table (`rlvr table`)."""

from __future__ import annotations

import json

import numpy as np
import pytest
from typer.testing import CliRunner

from rlvr.cli.commands import app
from rlvr.core.types import Completion, Example, Score
from rlvr.eval.evaluate import evaluate
from rlvr.eval.output import export_table, protocol_differences, write_eval
from rlvr.tasks.base import Task, WeightedVerifier
from rlvr.verifiers import BaseVerifier


class Parts(BaseVerifier):
    """Correct when the text is the answer; ``strict`` = len(text) / 10; ``grounded`` only for texts that are
    not 'x' (so some samples lack it); a non-numeric ``note`` is never aggregated."""

    name = "parts"

    def score(self, example, text):
        ok = float(text == example.answer)
        comps = {"correct": ok, "strict": len(text) / 10}
        if text != "x":
            comps["grounded"] = 1.0
        return Score(ok, comps, {"note": "n"})


class Engine:  # per prompt e{i}: samples cycle through the texts given
    def __init__(self, texts):
        self.texts = texts

    def generate(self, requests, sampling):
        return [Completion(r.example.id, [1], [2], None, "stop", self.texts[r.example.id][k], group=i)
                for i, r in enumerate(requests) for k in range(r.n)]


class PartsTask(Task):
    """A task that scores its own way, its components those training sees (as POW3R's and FGRPO's tasks)."""

    def score(self, example, text):
        return self.verifiers[0].verifier.score(example, text)


def _task():
    ex = [Example(f"e{i}", "q", str(i)) for i in range(3)]
    return PartsTask("parts", {"eval": ex}, [WeightedVerifier(Parts())])


def test_every_component_is_kept_per_sample_and_aggregated_with_an_interval():
    texts = {"e0": ["0", "00"], "e1": ["1", "x"], "e2": ["abc", "2"]}
    out = evaluate(Engine(texts), _task(), samples=2, temperature=1.0, seed=3)
    # strict per prompt: mean(0.1, 0.2) = .15, mean(.1, .1) = .1, mean(.3, .1) = .2 -> .15
    assert out["component/strict"] == pytest.approx(np.mean([0.15, 0.1, 0.2]))
    lo, hi = out["ci95"]["component/strict"]
    assert lo <= out["component/strict"] <= hi
    assert "component/grounded" not in out  # prompt e1 has a sample without it
    assert "component/correct" not in out and "component/note" not in out
    assert out["per_prompt"][0]["components"] == {"grounded": [1.0, 1.0], "strict": [0.1, 0.2]}
    assert out["per_prompt"][1]["components"] == {"strict": [0.1, 0.1]}


def test_the_protocol_is_written_into_each_result_and_differences_are_named():
    texts = {"e0": ["0"] * 4, "e1": ["1"] * 4, "e2": ["2"] * 4}
    a = evaluate(Engine(texts), _task(), samples=4, temperature=0.7, max_new_tokens=32, seed=1,
                 protocol={"chat_template": True})
    assert a["protocol"] == {"task": "parts", "split": "eval", "num_examples": 3, "samples": 4, "temperature": 0.7,
                             "top_p": 1.0, "max_new_tokens": 32, "seed": 1, "verifiers": ["parts"],
                             "chat_template": True}
    b = evaluate(Engine(texts), _task(), samples=2, temperature=0.7, max_new_tokens=64, seed=9,
                 protocol={"chat_template": True})
    assert protocol_differences(a, b) == ["samples: 4 vs 2", "max_new_tokens: 32 vs 64"]  # the seed is not one
    assert protocol_differences(a, a) == []
    assert protocol_differences(a, {"accuracy": 1.0}) != []


def test_a_table_a_paper_can_use(tmp_path):
    texts = {"e0": ["0", "00"], "e1": ["1", "x"], "e2": ["abc", "2"]}
    r = evaluate(Engine(texts), _task(), samples=2, temperature=1.0)
    md = export_table([("grpo", r), ("dapo", r)])
    head, rule, row, _ = md.split("\n", 3)
    assert head.startswith("| method | accuracy |") and "component/strict" in head
    acc, (lo, hi) = r["accuracy"], r["ci95"]["accuracy"]
    assert f"| grpo | {100 * acc:.1f} [{100 * lo:.1f}, {100 * hi:.1f}] |" in row
    assert f"{r['component/strict']:.3f}" in row  # not a rate: as it is, not in percent
    tex = export_table([("dr_grpo", r)], "latex")
    assert tex.startswith("\\begin{tabular}") and "dr\\_grpo" in tex and tex.rstrip().endswith("\\end{tabular}")
    csv = export_table([("a", r)], "csv", metrics=["accuracy"]).splitlines()
    assert csv[0] == "name,accuracy,accuracy lo,accuracy hi" and csv[1].startswith(f"a,{100 * acc:.1f},")
    with pytest.raises(ValueError, match="markdown, latex or csv"):
        export_table([("a", r)], "html")


def test_rlvr_table_reads_results_and_runs_and_warns_on_protocol_differences(tmp_path):
    texts = {"e0": ["0", "0"], "e1": ["1", "1"], "e2": ["2", "2"]}
    write_eval(evaluate(Engine(texts), _task(), samples=2, temperature=1.0), tmp_path / "a.json")
    write_eval(evaluate(Engine(texts), _task(), samples=1, temperature=0.0), tmp_path / "b.json")
    run = tmp_path / "run"
    write_eval(evaluate(Engine(texts), _task(), samples=2, temperature=1.0), run / "eval" / "step_000010.json")
    write_eval({"accuracy": 0.0, "num_examples": 1, "samples": 1, "temperature": 0}, run / "eval" / "step_000002.json")
    r = CliRunner().invoke(app, ["table", str(tmp_path / "a.json"), f"greedy={tmp_path / 'b.json'}", str(run)])
    assert r.exit_code == 0, r.output
    assert "| a | 100.0" in r.output and "| greedy | 100.0" in r.output and "| run | 100.0" in r.output
    assert "greedy was evaluated differently from a: samples: 2 vs 1; temperature: 1.0 vs 0.0" in r.output
    bad = CliRunner().invoke(app, ["table", str(tmp_path / "nothing.json")])
    assert bad.exit_code == 2 and "no such file" in bad.output
    (tmp_path / "x.json").write_text(json.dumps({"not": "a result"}))
    bad = CliRunner().invoke(app, ["table", str(tmp_path / "x.json")])
    assert bad.exit_code == 2 and "not an eval result" in bad.output


def test_a_runs_evaluations_record_their_protocol(tiny_cfg_overrides, tmp_path):
    from rlvr.config.run import load_config
    from rlvr.run.train import train

    train(load_config(overrides=tiny_cfg_overrides + ["train.steps=1", "sft.steps=0", "eval.samples=2",
                                                      "eval.temperature=1.0"]))
    res = json.loads((tmp_path / "run" / "eval" / "step_000001.json").read_text())
    p = res["protocol"]
    assert (p["samples"], p["temperature"], p["max_new_tokens"], p["chat_template"]) == (2, 1.0, 4, False)
    assert p["task_config"]["name"] == "arithmetic" and p["split"] == "eval"

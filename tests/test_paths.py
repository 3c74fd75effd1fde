"""Paths that travel: every config field naming a local file or directory is resolved once (beside the config file,
else in the working directory) and stored absolute, so resume, eval and compare work from any directory."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from rlvr.config.run import dump_config, load_config
from rlvr.core.paths import LocalPathStr, resolve_local_paths, resolve_path

ROOT = Path(__file__).resolve().parents[1]


@pytest.fixture
def elsewhere(tmp_path, monkeypatch):
    cwd = tmp_path / "cwd"
    cwd.mkdir()
    monkeypatch.chdir(cwd)
    return cwd


def test_beside_the_config_then_the_working_directory(tmp_path, elsewhere):
    exp = tmp_path / "exp"
    exp.mkdir()
    (exp / "train.jsonl").write_text("{}\n")
    (elsewhere / "held.jsonl").write_text("{}\n")
    (exp / "run.yaml").write_text("task: {name: jsonl, train_path: train.jsonl, eval_path: held.jsonl}\n"
                                  "model: {path: ../models/m}\n")
    cfg = load_config(exp / "run.yaml")
    assert cfg.task.params.train_path == str(exp / "train.jsonl")  # beside the config
    assert cfg.task.params.eval_path == str(elsewhere / "held.jsonl")  # not there: the working directory
    assert cfg.model.path == str(elsewhere.parent / "models" / "m")  # neither: the working directory, absolute
    dumped = yaml.safe_load(dump_config(cfg))
    assert dumped["task"]["train_path"] == str(exp / "train.jsonl")
    assert load_config(base=dumped) == cfg  # the written config.yaml reads back the same from anywhere


def test_overrides_nested_components_and_home(tmp_path, elsewhere, monkeypatch):
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    pairs = elsewhere / "pairs.jsonl"
    pairs.write_text("")
    cfg = load_config(overrides=["task.name=jsonl", "task.train_path=./d/../data.jsonl",
                                 "rollout.guidance.demo_path=~/demos.jsonl",
                                 "algorithm.loss_terms=[{name: f_preference, path: pairs.jsonl}]"])
    assert cfg.task.params.train_path == str(elsewhere / "data.jsonl")  # normalised
    assert cfg.rollout.guidance.demo_path == str(tmp_path / "home" / "demos.jsonl")
    assert cfg.algorithm.loss_terms[0].params.path == str(pairs)  # inside a list of components
    assert cfg.model.path is None and cfg.algorithm.discriminator.demos is None  # unset stays unset
    absolute = str(tmp_path / "abs.jsonl")
    assert load_config(overrides=["task.name=jsonl", f"task.train_path={absolute}"]).task.params.train_path == absolute


def test_a_verifiers_model_paths_in_its_params_mapping_resolve_too(tmp_path, elsewhere):
    """A reward model's or judge's ``path`` sits in a plain mapping (``verifier_params``, a reward's ``params``,
    an appeal verifier's ``verifier_params``): it resolves by the config's rule, other keys stay as written."""
    exp = tmp_path / "exp"
    (exp / "rm").mkdir(parents=True)
    (exp / "data.jsonl").write_text("{}\n")
    (exp / "one.yaml").write_text("task: {name: jsonl, train_path: data.jsonl, verifier: reward_model,\n"
                                  "       verifier_params: {path: rm, batch_size: 4}}\n"
                                  "scoring: {appeal: {verifier: reward_model, verifier_params: {path: ./rm/../rm}}}\n")
    cfg = load_config(exp / "one.yaml")
    assert cfg.task.params.verifier_params == {"path": str(exp / "rm"), "batch_size": 4}  # beside the config
    assert cfg.scoring.appeal.verifier_params == {"path": str(exp / "rm")}  # normalised
    assert load_config(base=yaml.safe_load(dump_config(cfg))) == cfg  # config.yaml reads back the same
    (exp / "list.yaml").write_text("task: {name: jsonl, train_path: data.jsonl, rewards: [{fn: exact},\n"
                                   "  {fn: reward_model, weight: 0.5, params: {path: other}}]}\n")
    rewards = load_config(exp / "list.yaml").task.params.rewards
    assert rewards[0].params == {} and rewards[1].params == {"path": str(elsewhere / "other")}  # not beside: cwd
    # a string that only looks like a path, in a field that is none, stays as written
    kept = load_config(overrides=["task.name=jsonl", "task.train_path=d.jsonl", "task.verifier=format",
                                  "task.verifier_params={pattern: 'rm/x'}"])
    assert kept.task.params.verifier_params == {"pattern": "rm/x"}
    # an SQL verifier's database folder and a judge's reply cache are local paths as well
    sql = load_config(overrides=["task.name=jsonl", "task.train_path=d.jsonl", "task.verifier=sql_exec",
                                 "task.verifier_params={db_root: dbs}"])
    assert sql.task.params.verifier_params == {"db_root": str(elsewhere / "dbs")}


def test_a_judges_model_nested_in_a_rubric_resolves_too(tmp_path, elsewhere):
    """A rubric's ``judge`` holds the judge verifier's params (a field marked ParamsOf): its ``path`` and
    ``cache_path`` resolve at any depth, in a task's params and in a verifier's params mapping alike."""
    exp = tmp_path / "exp"
    (exp / "judge_model").mkdir(parents=True)
    (exp / "rows.jsonl").write_text("{}\n")
    judge = "{backend: hf, path: judge_model, cache_path: replies.jsonl}"
    (exp / "task.yaml").write_text(f"task: {{name: rubric, train_path: rows.jsonl, judge: {judge}}}\n")
    cfg = load_config(exp / "task.yaml")
    assert cfg.task.params.judge == {"backend": "hf", "path": str(exp / "judge_model"),
                                     "cache_path": str(elsewhere / "replies.jsonl")}  # not beside: the cwd
    (exp / "verifier.yaml").write_text("task: {name: jsonl, train_path: rows.jsonl, verifier: rubric,\n"
                                       f"       verifier_params: {{required_gate: true, judge: {judge}}}}}\n")
    params = load_config(exp / "verifier.yaml").task.params.verifier_params
    assert params["required_gate"] is True and params["judge"]["path"] == str(exp / "judge_model")


def test_resolution_leaves_other_strings_and_unchanged_trees_alone(tmp_path):
    from pydantic import BaseModel

    class Inner(BaseModel):
        path: LocalPathStr | None = None
        name: str = "x.jsonl"  # a string that is no path field

    class Outer(BaseModel):
        inner: Inner = Inner()
        items: list[Inner] = []

    o = Outer()
    assert resolve_local_paths(o, tmp_path) is o  # nothing to resolve: the same object
    r = resolve_local_paths(Outer(inner=Inner(path="a"), items=[Inner(), Inner(path="b")]), tmp_path)
    assert r.inner.path == str(Path("a").resolve()) and r.inner.name == "x.jsonl"
    assert r.items[0].path is None and r.items[1].path == str(Path("b").resolve())
    assert resolve_path("/x/y", tmp_path) == "/x/y"


def _rlvr(*args: str, cwd: Path) -> subprocess.CompletedProcess:
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    return subprocess.run([sys.executable, "-m", "rlvr", *args], cwd=cwd, env=env, capture_output=True, text=True,
                          timeout=300)


def test_a_run_resumes_and_evaluates_from_another_directory(tmp_path):
    """The run is started in exp/ with a relative data file and a reward module beside its config, then resumed
    and evaluated from another directory: both find the data and the reward."""
    exp, other = tmp_path / "exp", tmp_path / "other"
    exp.mkdir()
    other.mkdir()
    (exp / "qa.jsonl").write_text("".join(json.dumps({"prompt": f"say {i}:", "answer": "abcdefgh"[i:]}) + "\n"
                                          for i in range(8)))
    (exp / "my_reward.py").write_text("def score(prompts, completions, answers, **kw):\n"
                                      "    return [sum(ch in c for ch in a) / len(a) for c, a in zip(completions, answers)]\n")
    (exp / "run.yaml").write_text(yaml.safe_dump({
        "task": {"name": "jsonl", "train_path": "qa.jsonl", "eval_fraction": 0.25, "verifier": "my_reward:score"},
        "model": {"tiny": {"hidden_size": 32, "intermediate_size": 64, "num_layers": 1}},
        "rollout": {"prompts_per_step": 2, "group_size": 2, "max_new_tokens": 4},
        "sft": {"steps": 0}, "train": {"steps": 1, "checkpoint_every": 1, "eval_every": 0},
        "eval": {"num_examples": 2, "samples": 1, "report_greedy": False}}))
    first = _rlvr("train", "-c", "run.yaml", "--out", "run", cwd=exp)
    assert first.returncode == 0, first.stderr[-3000:]
    saved = yaml.safe_load((exp / "run" / "config.yaml").read_text())
    assert saved["task"]["train_path"] == str(exp / "qa.jsonl")
    assert saved["task"]["verifier"] == f"{exp / 'my_reward.py'}:score"
    again = _rlvr("train", "--resume", str(exp / "run"), "--set", "train.steps=2", cwd=other)
    assert again.returncode == 0, again.stderr[-3000:]
    assert [json.loads(x)["step"] for x in (exp / "run" / "metrics.jsonl").read_text().splitlines()] == [1, 2]
    ev = _rlvr("eval", "--model", str(exp / "run"), cwd=other)
    assert ev.returncode == 0, ev.stderr[-3000:]

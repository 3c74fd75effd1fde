"""The leaderboard's kept board (benchmarks/leaderboard.py): which files of a run the repository keeps, and the
check that every run of one seed started from the same weights."""

from __future__ import annotations

import importlib.util
import json
import shutil
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


def _board_module():
    spec = importlib.util.spec_from_file_location("leaderboard_script", ROOT / "benchmarks" / "leaderboard.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def _run(tmp: Path, name: str, seed: int, start: Path) -> Path:
    run = tmp / "board" / "runs" / name / f"seed{seed}"
    run.mkdir(parents=True)
    (run / "summary.json").write_text(json.dumps({"steps": 2, "sft_start": {"key": "k", "path": str(start)}}))
    return run


def _start(tmp: Path, name: str, weights: bytes) -> Path:
    d = tmp / name / "model"
    d.mkdir(parents=True)
    (d / "model.safetensors").write_bytes(weights)
    (d / "config.json").write_text("{}")  # not weights: not in the digest
    return d.parent


def test_a_seed_takes_runs_from_one_start_only(tmp_path):
    mod = _board_module()
    a, same, other = (_start(tmp_path, n, w) for n, w in (("a", b"W1"), ("same", b"W1"), ("other", b"W2")))
    (same / "model" / "config.json").write_text('{"x": 1}')
    check = mod.StartCheck(tmp_path / "board" / "start.json")
    check.check_run(_run(tmp_path, "grpo", 0, a), 0)
    kept = json.loads((tmp_path / "board" / "start.json").read_text())
    assert list(kept["seeds"]) == ["0"] and kept["seeds"]["0"]["weights_sha256"] == mod.start_digest(a)
    check.check_run(_run(tmp_path, "dapo", 0, same), 0)  # equal weights, another copy: accepted
    check.check_run(_run(tmp_path, "grpo", 1, other), 1)  # another seed may start elsewhere
    # a later invocation (another machine) reads the kept record
    again = mod.StartCheck(tmp_path / "board" / "start.json")
    bad = _run(tmp_path, "gspo", 0, other)
    with pytest.raises(SystemExit, match="seed 0"):
        again.check_run(bad, 0)
    assert not bad.exists()  # not left beside the seed's runs from the other start
    assert (tmp_path / "board" / "runs" / "dapo" / "seed0").is_dir()
    assert mod.start_digest(a) != mod.start_digest(other)
    shutil.rmtree(a / "model")
    (a / "model").mkdir()
    with pytest.raises(SystemExit, match="no weights"):
        mod.start_digest(a)


def test_the_repository_keeps_a_runs_results_not_its_checkpoints():
    if shutil.which("git") is None or not (ROOT / ".git").exists():
        pytest.skip("needs the git checkout")
    run = "benchmarks/leaderboard/board/runs/grpo/seed0"
    kept = [f"{run}/config.yaml", f"{run}/metrics.jsonl", f"{run}/summary.json", f"{run}/eval/step_80.json",
            "benchmarks/leaderboard/board/compare.json", "benchmarks/leaderboard/board/start.json"]
    dropped = [f"{run}/checkpoints/step_80/model/model.safetensors", f"{run}/warmup/state.json", f"{run}/.lock",
               f"{run}/reference/model.safetensors", f"{run}/plot.png", f"{run}/completions.jsonl",
               "benchmarks/leaderboard/board/report.html", "runs/leaderboard/runs/grpo/seed0/summary.json"]
    out = subprocess.run(["git", "check-ignore", "--no-index", *kept, *dropped], cwd=ROOT, capture_output=True,
                         text=True).stdout.split()
    assert sorted(out) == sorted(dropped)


def test_compact_keeps_the_scores_and_the_final_records(tmp_path):
    from rlvr.compare.aggregate import final_metrics, heldout_curve, load_run
    from rlvr.eval.output import write_eval

    mod = _board_module()
    run = tmp_path / "run"
    (run / "metrics.jsonl").parent.mkdir(parents=True)
    (run / "metrics.jsonl").write_text(json.dumps({"step": 1, "reward": 0.5}) + "\n")
    (run / "summary.json").write_text(json.dumps({"steps": 4}))
    for step, acc in ((0, 0.25), (2, 0.5), (4, 0.75)):
        rows = [{"id": f"p{i}", "correct": [float(i < 4 * acc)] * 2, "reward": [float(i < 4 * acc)] * 2,
                 "length": [3, 5], "answers": ["x", "y"]} for i in range(4)]
        write_eval({"step": step, "accuracy": acc, "samples": 2, "per_prompt": rows}, run / "eval" / f"step_{step:06d}.json")
    before = final_metrics([load_run(run, 0, 4)])
    mod.compact(run, 4)
    mod.compact(run, 4)  # again: nothing more to drop
    evals = {s: json.loads((run / "eval" / f"step_{s:06d}.json").read_text()) for s in (0, 2, 4)}
    assert "per_prompt" not in evals[2] and evals[2]["accuracy"] == 0.5
    assert evals[0]["per_prompt"][0]["answers"] == ["x", "y"] and len(evals[4]["per_prompt"]) == 4
    r = load_run(run, 0, 4)
    assert heldout_curve([r])[:2] == ([0, 2, 4], [0.25, 0.5, 0.75])
    after = final_metrics([r])
    assert after["mean"] == before["mean"] and after["ci95"] == before["ci95"] and after["mean"]["accuracy"] == 0.75


def test_the_status_counts_runs_per_seed_and_estimates_the_rest_from_each_methods_own_time():
    from rlvr.compare.aggregate import RunData

    mod = _board_module()

    def run(seed, secs, finished=True):
        return RunData(seed, Path("."), 2, [], {2: {"accuracy": 0.5}} if finished else {},
                       {"steps": 2, "rl_seconds": secs} if finished else {})

    # grpo: 2 of 3 seeds at 300 s; rose: 1 of 3 at 1800 s; new: none yet (the mean of all finished runs, 800 s);
    # an unfinished run counts as left
    runs = {"grpo": [run(0, 300.0), run(1, 300.0)], "rose": [run(0, 1800.0), run(1, 0.0, finished=False)],
            "new": []}
    text = mod.status_text(runs, [0, 1, 2])
    assert "3 of 9 runs finished (seed 0: 2 of 3, seed 1: 1 of 3, seed 2: 0 of 3)" in text
    left = (1 * 300 + 2 * 1800 + 3 * 800) / 3600
    assert f"The 6 runs left take about {left:.1f} hours" in text and "13.3 minutes, the mean of all" in text
    complete = {"grpo": [run(s, 300.0) for s in (0, 1)], "rose": [run(s, 1800.0) for s in (0, 1)]}
    assert mod.status_text(complete, [0, 1]) == "Status: complete, all 4 runs finished (seed 0: 2 of 2, seed 1: 2 of 2)."
    assert "runs left" not in mod.status_text({"grpo": [], "rose": []}, [0])  # nothing finished: no estimate


def test_a_board_elsewhere_writes_its_own_page_not_the_kept_one(tmp_path, monkeypatch):
    mod = _board_module()
    assert mod.page_of(mod.HERE / "board") == ROOT / "docs" / "leaderboard.md"
    monkeypatch.chdir(ROOT / "benchmarks")
    assert mod.page_of(Path("leaderboard/board")) == ROOT / "docs" / "leaderboard.md"  # the same folder, relative
    assert mod.page_of(tmp_path / "rerun") == tmp_path / "rerun" / "leaderboard.md"

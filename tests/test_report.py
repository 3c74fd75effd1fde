"""Inline SVG charts, and `rlvr report RUN_DIR` regenerating a run's plot, summary and HTML report."""

import json
import math
import re

import pytest
from typer.testing import CliRunner

from rlvr.cli import app
from rlvr.config.run import load_config
from rlvr.report import report_run
from rlvr.report.svg import Series, interval_chart, line_chart, nice_ticks


def test_nice_ticks_cover_the_range_with_round_steps():
    assert nice_ticks(0, 1) == pytest.approx([0, 0.2, 0.4, 0.6, 0.8, 1.0])
    for lo, hi in [(0, 1), (3.2, 17.9), (-0.4, 0.05), (1000, 1000), (0, 123456)]:
        t = nice_ticks(lo, hi)
        assert t[0] <= lo and t[-1] >= hi and 2 <= len(t) <= 12
        steps = {round(b - a, 9) for a, b in zip(t, t[1:])}
        assert len(steps) == 1


def test_line_chart_draws_lines_bands_and_legend_and_skips_nan():
    svg = line_chart([Series("a", [0, 1, 2], [0.1, float("nan"), 0.3], [0.0, 0.1, 0.2], [0.2, 0.3, 0.4]),
                      Series("b<c", [0, 2], [0.5, 0.6])], "t", ylim=(0, 1), chart_id="c1")
    assert svg.startswith('<svg class="chart" id="c1"') and svg.count('class="line"') == 2
    assert svg.count('class="band"') == 1 and "b&lt;c" in svg and "nan" not in svg.lower()
    d = re.search(r'data-series="a" d="([^"]+)"', svg).group(1)
    assert d.count("L") == 1  # the NaN point is dropped, not drawn at 0
    empty = line_chart([], "empty")
    assert "<svg" in empty and 'class="line"' not in empty


def test_interval_chart_has_one_point_and_interval_per_method():
    svg = interval_chart(["x", "y"], [0.4, 0.6], [(0.3, 0.5), (math.nan, math.nan)], "final")
    assert svg.count('class="point"') == 2 and svg.count('class="interval"') == 1


TINY = ["model.tiny.hidden_size=32", "model.tiny.intermediate_size=64", "model.tiny.num_layers=1",
        "task.max_value=20", "task.num_eval=16", "rollout.prompts_per_step=4", "rollout.group_size=4",
        "rollout.max_new_tokens=4", "train.micro_batch_size=16", "sft.steps=0", "train.steps=2",
        "train.eval_every=1", "eval.samples=2", "eval.report_greedy=false"]


@pytest.fixture(scope="module")
def trained(tmp_path_factory):
    from rlvr.run.train import train

    run = tmp_path_factory.mktemp("report") / "run"
    return train(load_config(overrides=TINY + [f"out={run}"])), run


@pytest.fixture
def finished_run(trained, tmp_path):
    """A private copy of the trained run, free to modify."""
    import shutil

    summary, run = trained
    shutil.copytree(run, tmp_path / "run")
    return summary, tmp_path / "run"


def test_report_regenerates_plot_summary_and_html(finished_run):
    summary, run = finished_run
    assert sorted(p.name for p in (run / "eval").iterdir()) == ["step_000000.json", "step_000001.json",
                                                                "step_000002.json"]
    after = json.loads((run / "eval" / "step_000002.json").read_text())
    assert after["accuracy"] == summary["eval_after"]["accuracy"] and len(after["per_prompt"]) == 16
    assert "per_prompt" not in summary["eval_after"] and "pass@2" in summary["eval_after"]
    (run / "plot.png").unlink()
    (run / "summary.json").write_text(json.dumps({"rl_seconds": 1.5, "peak_memory_mb": 10.0}))
    new = report_run(run)
    assert (run / "plot.png").stat().st_size > 1000
    assert new["eval_after"] == {k: v for k, v in after.items() if k not in ("per_prompt", "step")}
    assert new["eval_before"]["accuracy"] == summary["eval_before"]["accuracy"]
    assert new["rl_seconds"] == 1.5 and new["steps_done"] == 2 and new["tokens_generated"] > 0
    html = (run / "report.html").read_text()
    for ident in ('id="chart-heldout"', 'id="chart-reward"', 'id="final-table"', 'id="eval-table"'):
        assert ident in html
    assert "<script" not in html and 'src="http' not in html


def test_report_of_an_unfinished_run_and_cli(finished_run, tmp_path):
    _, run = finished_run
    lines = (run / "metrics.jsonl").read_text().splitlines()
    (run / "metrics.jsonl").write_text(lines[0] + "\n")
    (run / "eval" / "step_000002.json").unlink()
    (run / "summary.json").unlink()
    r = CliRunner().invoke(app, ["report", str(run)])
    assert r.exit_code == 0, r.output
    s = json.loads((run / "summary.json").read_text())
    assert s["steps_done"] == 1 and s["eval_after"] is None and s["eval_before"] is not None
    bad = CliRunner().invoke(app, ["report", str(tmp_path / "nothing")])
    assert bad.exit_code == 2 and "not a run directory" in bad.output

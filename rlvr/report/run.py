"""``rlvr report RUN_DIR``: regenerate a run's plot, summary and HTML report from what the run wrote.

Reads ``config.yaml``, ``metrics.jsonl``, ``eval/step_N.json`` (full eval results) and the existing
``summary.json`` (for what only the live run measured: wall-clock, peak memory); rewrites ``plot.png``
and ``summary.json`` and writes ``report.html`` (self-contained). Works on an unfinished run too: the
summary then describes the steps done so far.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from rlvr.eval.output import ordered_metrics
from rlvr.report.html import fmt, fmt_ci, page, section, table
from rlvr.report.svg import Series, line_chart
from rlvr.run.logging import read_metrics
from rlvr.run.plot import accuracy_label, eval_series, plot_run

__all__ = ["report_run", "load_evals", "step_tokens", "run_tokens", "eval_rows"]

CURVES = [("reward", "reward"), ("accuracy", "train accuracy"), ("completion_length", "completion length"),
          ("kl", "KL to reference"), ("kl_old", "KL to pre-update policy"), ("entropy", "entropy"),
          ("time/step", "seconds per step")]


def load_evals(run_dir: str | Path) -> dict[int, dict[str, Any]]:
    """Full eval results by step (0 is before RL)."""
    out = {}
    for p in sorted((Path(run_dir) / "eval").glob("step_*.json")):
        out[int(p.stem.split("_")[1])] = json.loads(p.read_text())
    return out


def step_tokens(m: dict[str, Any]) -> float:
    """Completion tokens generated in one step (every dynamic-sampling round counted)."""
    spent = m.get("rollouts/spent", m.get("rollout/completions_generated"))  # the older name, in older runs
    if spent is not None and "generated/completion_length" in m:
        return float(spent) * float(m["generated/completion_length"])
    return float(m.get("completions", 0.0)) * float(m.get("completion_length", 0.0))


def run_tokens(metrics: list[dict[str, Any]]) -> float:
    return sum(step_tokens(m) for m in metrics)


def eval_rows(result: dict[str, Any]) -> list[list[str]]:
    """Rows ``metric, value, 95% CI`` of one eval result, in the eval table's order."""
    ci = result.get("ci95", {})
    return [[k, fmt(result[k]), fmt_ci(ci.get(k))] for k in ordered_metrics(result)]


def _strip(result: dict[str, Any] | None) -> dict[str, Any] | None:
    return None if result is None else {k: v for k, v in result.items() if k not in ("per_prompt", "step")}


def _summary(run_dir: Path, cfg, metrics, evals, old: dict[str, Any]) -> dict[str, Any]:
    done = metrics[-1]["step"] if metrics else 0
    before = _strip(evals.get(0)) or old.get("eval_before")
    after = _strip(evals.get(cfg.train.steps)) if done >= cfg.train.steps else None
    return {**old, "run_dir": str(run_dir), "steps": cfg.train.steps, "steps_done": done, "seed": cfg.seed,
            "eval_before": before, "eval_after": after or (old.get("eval_after") if done >= cfg.train.steps else None),
            "final_metrics": metrics[-1] if metrics else {}, "tokens_generated": run_tokens(metrics)}


def _html(run_dir: Path, cfg, metrics, evals, summary) -> str:
    label = accuracy_label(cfg.eval.temperature, cfg.eval.samples)
    charts = []
    held = eval_series(metrics, summary.get("eval_before"), summary.get("eval_after"), cfg.train.steps, label)
    if any(held.values()):
        charts.append(line_chart([Series(k, [p[0] for p in v], [p[1] for p in v], markers=True)
                                  for k, v in held.items() if v], "held-out accuracy", ylim=(0.0, 1.0),
                                 chart_id="chart-heldout"))
    for key, title in CURVES:
        pts = [(m["step"], m[key]) for m in metrics if isinstance(m.get(key), (int, float))]
        if pts:
            charts.append(line_chart([Series(key, [p[0] for p in pts], [p[1] for p in pts])], title,
                                     chart_id="chart-" + key.replace("/", "-")))
    sections = [section("Curves", f'<div class="charts">{"".join(charts)}</div>', "curves")]
    rows = []
    for step in sorted(evals):
        r = evals[step]
        rows.append([str(step), fmt(r.get("accuracy")), fmt_ci(r.get("ci95", {}).get("accuracy")),
                     fmt(r.get("greedy_accuracy")), fmt(r.get("mean_reward")), fmt(r.get("mean_length"), 1)])
    if rows:
        sections.append(section("Held-out evaluations", table(
            ["step", label, "95% CI", "greedy", "mean reward", "mean length"], rows, "eval-table"), "evals"))
    last = evals[max(evals)] if evals else None
    if last:
        sections.append(section(f"Final evaluation (step {max(evals)})",
                                table(["metric", "value", "95% CI (bootstrap over prompts)"], eval_rows(last),
                                      "final-table"), "final"))
    cost = [["steps done", f"{summary['steps_done']} / {summary['steps']}"],
            ["completion tokens generated", fmt(summary["tokens_generated"])]]
    cost += [[k.replace("_", " "), fmt(summary[k], 1)] for k in ("rl_seconds", "sft_seconds", "peak_memory_mb")
             if summary.get(k) is not None]
    sections.append(section("Run", table(["", "value"], cost, "run-table"), "run"))
    method = cfg.recipe.name if cfg.recipe else "custom"
    return page(f"rlvr run {run_dir.name}", sections,
                f"method {method}, task {cfg.task.name}, seed {cfg.seed}; held-out accuracy is {label}.")


def report_run(run_dir: str | Path) -> dict[str, Any]:
    """Regenerate ``plot.png``, ``summary.json`` and ``report.html`` of a run directory; returns the summary."""
    from rlvr.config.run import load_config

    run_dir = Path(run_dir)
    if not (run_dir / "config.yaml").is_file() or not (run_dir / "metrics.jsonl").is_file():
        raise FileNotFoundError(f"{run_dir} is not a run directory (needs config.yaml and metrics.jsonl)")
    cfg = load_config(run_dir / "config.yaml")
    metrics = read_metrics(run_dir / "metrics.jsonl")
    evals = load_evals(run_dir)
    old = json.loads((run_dir / "summary.json").read_text()) if (run_dir / "summary.json").is_file() else {}
    summary = _summary(run_dir, cfg, metrics, evals, old)
    label = accuracy_label(cfg.eval.temperature, cfg.eval.samples)
    plot_run(metrics, run_dir / "plot.png",
             eval_series(metrics, summary["eval_before"], summary["eval_after"], cfg.train.steps, label))
    (run_dir / "summary.json").write_text(json.dumps(summary, indent=2))
    (run_dir / "report.html").write_text(_html(run_dir, cfg, metrics, evals, summary))
    return summary

"""The comparison's self-contained HTML report (``OUT/report.html``) and its numbers (``OUT/results.json``).

Sections, each with an id a browser test can find: ``setup`` (task, budget, seeds, the tests used),
``learning-curves`` (inline SVG, mean over seeds with a min..max band), ``final-metrics`` (table
``final-table`` and chart ``chart-final``), ``significance`` (table ``significance-table``), ``cost``
(table ``cost-table``) and ``runs`` (table ``runs-table``).
"""

from __future__ import annotations

import html
import json
import math
from pathlib import Path
from typing import Any

from rlvr.compare.aggregate import RunData, costs, curve, final_metrics, heldout_curve, load_run, significance
from rlvr.compare.variants import Variant, read_plan, rollout_budget, run_dir_of, variant_config
from rlvr.eval.output import json_safe
from rlvr.report.html import fmt, fmt_ci, page, section, table
from rlvr.report.svg import PALETTE, Series, interval_chart, line_chart

__all__ = ["write_report", "collect"]

_TESTS = (
    "Intervals: 95% percentile bootstrap over held-out prompts (2000 resamples) of each prompt's value averaged "
    "over a method's seeds; they show evaluation noise, the seed s.d. beside them shows training-run spread. "
    "Significance against the first method: (1) paired over held-out prompts, the per-prompt accuracy "
    "difference (seed-averaged) under a two-sided sign-flip permutation test (exact up to 16 prompts, else "
    "20000 random flips), with a bootstrap 95% interval of the mean difference; (2) paired over seeds, the "
    "final accuracy difference of runs with the same seed under an exact two-sided sign-flip test (with S "
    "seeds the smallest possible p is 2/2^S, so it takes 6 seeds to get below 0.05). The verdict column says "
    "which tests give p < 0.05.")


def collect(out: Path, variants: list[Variant], seeds: list[int]) -> dict[str, list[RunData]]:
    plan = read_plan(out)
    runs: dict[str, list[RunData]] = {}
    for v in variants:
        runs[v.name] = []
        for s in seeds:
            cfg = variant_config(v, s, out, plan.get("base"), plan.get("overrides"))
            r = load_run(run_dir_of(out, v, s), s, cfg.train.steps)
            if r is not None:
                runs[v.name].append(r)
    return runs


def _chart(runs: dict[str, list[RunData]], title: str, chart_id: str, getter, ylim=None) -> str:
    series = []
    for i, (name, rs) in enumerate(runs.items()):
        xs, mean, lo, hi = getter(rs)
        if xs:
            series.append(Series(f"{name} (n={len(rs)})", xs, mean, lo, hi, PALETTE[i % len(PALETTE)],
                                 markers=len(xs) < 30))
    return line_chart(series, title, ylim=ylim, chart_id=chart_id)


def _curves(runs: dict[str, list[RunData]], steps: int) -> str:
    window = max(1, round(steps / 25))
    smooth = f" ({window}-step moving average)" if window > 1 else ""
    charts = [
        _chart(runs, "held-out accuracy (mean over seeds, band: min..max)", "chart-heldout",
               lambda rs: heldout_curve(rs), ylim=(0.0, 1.0)),
        _chart(runs, "train reward" + smooth, "chart-reward", lambda rs: curve(rs, "reward", window)),
        _chart(runs, "completion length" + smooth, "chart-length", lambda rs: curve(rs, "completion_length", window)),
        _chart(runs, "wall-clock seconds per step" + smooth, "chart-time", lambda rs: curve(rs, "time/step", window)),
    ]
    return f'<div class="charts">{"".join(charts)}</div>'


def _final(finals: dict[str, dict[str, Any]]) -> str:
    keys: list[str] = []
    for f in finals.values():
        keys += [k for k in f.get("mean", {}) if k not in keys and k != "mean_length"]
    rows = []
    for name, f in finals.items():
        row = [html.escape(name), str(len(f["seeds"]))]
        for k in keys:
            if k not in f.get("mean", {}):
                row.append("–")
                continue
            row.append(f'<span class="value">{fmt(f["mean"][k])}</span><br><small>{fmt_ci(f["ci95"].get(k))} '
                       f'· s.d. {fmt(f["seed_sd"].get(k))}</small>')
        per_seed = f.get("per_seed", {}).get("accuracy", [])
        row += [fmt(f.get("before_accuracy")), ", ".join(f"{s}: {v:.3f}" for s, v in zip(f["seeds"], per_seed))]
        rows.append(row)
    names = [n for n, f in finals.items() if f["seeds"]]
    chart = interval_chart(names, [finals[n]["mean"]["accuracy"] for n in names],
                           [tuple(finals[n]["ci95"].get("accuracy", (math.nan, math.nan))) for n in names],
                           "final held-out accuracy (95% CI over prompts)", chart_id="chart-final")
    note = ('<p class="note">Each cell: mean over seeds, then [95% bootstrap CI over prompts] · standard '
            'deviation over seeds.</p>')
    return note + table(["method", "seeds", *keys, "accuracy before RL", "accuracy per seed"], rows, "final-table") \
        + f'<div class="charts">{chart}</div>'


def _verdict(s: dict[str, Any]) -> str:
    """Both tests at 0.05; says so when there are too few seeds for the seed test to ever reach it."""
    by_prompts, by_seeds = s["prompt_p"] < 0.05, s["paired_seeds"] > 0 and s["seed_p"] < 0.05
    if by_prompts and by_seeds:
        return '<span class="sig">significant (prompts and seeds)</span>'
    if by_prompts and not (s["paired_seeds"] and s["seed_min_p"] < 0.05):
        return '<span class="sig">significant over prompts</span>; too few seeds for the seed test'
    if by_prompts:
        return "significant over prompts, not over seeds"
    return "not significant"


def _significance(sig: dict[str, dict[str, Any]], baseline: str) -> str:
    rows = []
    for name, s in sig.items():
        if not s:
            rows.append([html.escape(name)] + ["–"] * 7)
            continue
        verdict = _verdict(s)
        rows.append([html.escape(name), f"{s['diff']:+.3f}", fmt_ci(s["prompt_diff_ci95"]),
                     f"{s['prompt_p']:.4f} ({s['prompts']} prompts)",
                     f"{s['seed_p']:.3f} ({s['paired_seeds']} seeds, min {s['seed_min_p']:.3f})"
                     if s["paired_seeds"] else "–", verdict, s["metric"], html.escape(baseline)])
    return table(["method", "Δ accuracy vs baseline", "95% CI of Δ (prompts)", "p, paired over prompts",
                  "p, paired over seeds", "at 0.05", "metric", "baseline"], rows, "significance-table")


def _cost(cost: dict[str, dict[str, Any]], budget: dict[str, int]) -> str:
    rows = []
    for name, c in cost.items():
        if not c.get("runs"):
            rows.append([html.escape(name), "0"] + ["–"] * 6)
            continue
        rows.append([html.escape(name), str(c["runs"]), fmt(budget[name], 0), fmt(c["completions_per_run"], 0),
                     fmt(c["tokens_per_run"], 0), fmt(c["seconds_per_run"], 1), fmt(c["rl_seconds_per_run"], 1),
                     fmt(c["seconds_total"], 1)])
    return table(["method", "finished runs", "budget (completions)", "completions generated per run",
                  "completion tokens per run", "wall-clock s per run (SFT + RL)", "RL s per run",
                  "wall-clock s, all runs"], rows, "cost-table")


def _runs_table(runs: dict[str, list[RunData]], out: Path) -> str:
    rows = []
    for name, rs in runs.items():
        for r in rs:
            rel = r.run_dir.relative_to(out).as_posix()
            state = "finished" if r.summary else f"step {r.metrics[-1]['step'] if r.metrics else 0} of {r.steps}"
            acc = r.final["accuracy"] if r.final else float("nan")
            rows.append([html.escape(name), str(r.seed), state, fmt(acc),
                         f'<a href="{html.escape(rel)}/plot.png">plot</a> · '
                         f'<a href="{html.escape(rel)}/summary.json">summary</a> · <code>{html.escape(rel)}</code>'])
    return table(["method", "seed", "state", "final accuracy", "files"], rows, "runs-table")


def write_report(out: str | Path, variants: list[Variant], seeds: list[int], warnings: list[str] | None = None) -> dict:
    """Aggregate the runs under ``out`` into ``report.html`` and ``results.json``; returns the results."""
    out = Path(out)
    plan = read_plan(out)
    runs = collect(out, variants, seeds)
    cfg0 = variant_config(variants[0], seeds[0], out, plan.get("base"), plan.get("overrides"))
    budget = {v.name: rollout_budget(variant_config(v, seeds[0], out, plan.get("base"), plan.get("overrides")))
              for v in variants}
    finals = {n: final_metrics(rs) for n, rs in runs.items()}
    base = variants[0].name
    sig = {n: significance(runs[base], rs) for n, rs in runs.items() if n != base}
    cost = {n: costs(rs) for n, rs in runs.items()}
    e = cfg0.eval
    setup = (f"<p>Task <code>{html.escape(cfg0.task.name)}</code>; {len(variants)} methods x seeds "
             f"{', '.join(map(str, seeds))}; each run trains on {cfg0.rollout.prompts_per_step} prompts x "
             f"{cfg0.rollout.group_size} completions x {cfg0.train.steps} steps. Held-out accuracy is avg@{e.samples} "
             f"at T={e.temperature:g} on split <code>{html.escape(e.split)}</code>"
             f"{f' (first {e.num_examples} prompts)' if e.num_examples else ''}. Baseline: <b>{html.escape(base)}</b>."
             f"</p><p class=\"note\">{_TESTS}</p>"
             + "".join(f'<p class="note warning">warning: {html.escape(w)}</p>' for w in warnings or []))
    body = [section("Setup", setup, "setup"),
            section("Learning curves", _curves(runs, cfg0.train.steps), "learning-curves"),
            section("Final held-out metrics", _final(finals), "final-metrics"),
            section(f"Difference from {base}", _significance(sig, base), "significance"),
            section("Cost", _cost(cost, budget), "cost"),
            section("Runs", _runs_table(runs, out), "runs")]
    (out / "report.html").write_text(page(f"rlvr compare: {', '.join(v.name for v in variants)}", body))
    results = {"variants": [v.name for v in variants], "seeds": seeds, "baseline": base, "budget": budget,
               "final": finals, "significance": sig, "cost": cost, "warnings": list(warnings or []),
               "tests": _TESTS}
    (out / "results.json").write_text(json.dumps(json_safe(results), indent=2))
    return results

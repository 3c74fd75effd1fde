"""Collect a comparison's runs into curves over seeds, final metrics with intervals, tests and costs.

Per method, a metric's final value is the mean over seeds of each seed's final held-out value; its
interval is a 95% percentile bootstrap over held-out prompts of the per-prompt value averaged over seeds
(so it reflects evaluation noise, not training-run variance; the seed standard deviation is given beside
it). Significance against the first method uses the paired sign-flip tests of
:mod:`rlvr.eval.significance`, over prompts and over seeds.
"""

from __future__ import annotations

import json
import statistics
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from rlvr.eval.evaluate import per_prompt_columns
from rlvr.eval.metrics import bootstrap_cis
from rlvr.eval.output import ordered_metrics
from rlvr.eval.significance import bootstrap_diff_ci, min_attainable_p, sign_flip_test
from rlvr.report.run import load_evals, run_tokens

__all__ = ["RunData", "load_run", "curve", "heldout_curve", "final_metrics", "significance", "on_common_seeds",
           "costs"]


@dataclass
class RunData:
    seed: int
    run_dir: Path
    steps: int
    metrics: list[dict[str, Any]] = field(default_factory=list)
    evals: dict[int, dict[str, Any]] = field(default_factory=dict)
    summary: dict[str, Any] = field(default_factory=dict)

    @property
    def final(self) -> dict[str, Any] | None:
        return self.evals.get(self.steps) if self.summary else None


def load_run(run_dir: Path, seed: int, steps: int) -> RunData | None:
    """A run's files, or None when it has not started."""
    from rlvr.run.logging import read_metrics

    if not (run_dir / "metrics.jsonl").is_file():
        return None
    summary = json.loads((run_dir / "summary.json").read_text()) if (run_dir / "summary.json").is_file() else {}
    return RunData(seed, run_dir, steps, read_metrics(run_dir / "metrics.jsonl"), load_evals(run_dir), summary)


def _band(per_run: list[dict[int, float]]) -> tuple[list[int], list[float], list[float], list[float]]:
    steps = sorted({s for r in per_run for s in r})
    xs, mean, lo, hi = [], [], [], []
    for s in steps:
        vals = [r[s] for r in per_run if s in r]
        xs.append(s)
        mean.append(float(np.mean(vals)))
        lo.append(float(min(vals)))
        hi.append(float(max(vals)))
    return xs, mean, lo, hi


def _smooth(values: dict[int, float], window: int) -> dict[int, float]:
    if window <= 1:
        return values
    steps = sorted(values)
    return {s: float(np.mean([values[t] for t in steps[max(0, i - window + 1): i + 1]])) for i, s in enumerate(steps)}


def curve(runs: list[RunData], key: str, window: int = 1):
    """Mean over seeds of a per-step metric (trailing moving average of ``window`` steps), band min..max."""
    per_run = [_smooth({m["step"]: float(m[key]) for m in r.metrics if isinstance(m.get(key), (int, float))}, window)
               for r in runs]
    return _band([p for p in per_run if p])


def heldout_curve(runs: list[RunData], key: str = "accuracy"):
    """Mean over seeds of held-out ``key`` at every evaluated step (0 is before RL), band min..max."""
    return _band([{s: float(e[key]) for s, e in r.evals.items() if key in e} for r in runs])


def _prompt_columns(runs: list[RunData]) -> dict[str, dict[str, list[float]]]:
    """metric -> prompt id -> values over seeds, from each run's final per-prompt records."""
    out: dict[str, dict[str, list[float]]] = {}
    for r in runs:
        pp = r.final["per_prompt"]
        for metric, col in per_prompt_columns(pp).items():
            for rec, v in zip(pp, col):
                out.setdefault(metric, {}).setdefault(rec["id"], []).append(v)
    return out


def final_metrics(runs: list[RunData]) -> dict[str, Any]:
    """Final held-out metrics of the finished runs of one method: means over seeds, intervals, seed spread."""
    done = [r for r in runs if r.final is not None]
    if not done:
        return {"seeds": []}
    keys = [k for k in ordered_metrics(done[0].final) if all(k in r.final for r in done)]
    cols = _prompt_columns(done)
    ci = bootstrap_cis({m: [float(np.mean(v)) for v in by_id.values()] for m, by_id in cols.items()})
    out: dict[str, Any] = {"seeds": [r.seed for r in done], "per_seed": {}, "mean": {}, "seed_sd": {}, "ci95": {}}
    for k in keys:
        vals = [float(r.final[k]) for r in done]
        out["per_seed"][k] = vals
        out["mean"][k] = float(np.mean(vals))
        out["seed_sd"][k] = float(statistics.stdev(vals)) if len(vals) > 1 else float("nan")
        if k in ci:
            out["ci95"][k] = list(ci[k])
    before = [r.evals[0]["accuracy"] for r in done if 0 in r.evals]
    out["before_accuracy"] = float(np.mean(before)) if before else float("nan")
    return out


def on_common_seeds(base: list[RunData], other: list[RunData]) -> tuple[list[RunData], list[RunData], list[int]]:
    """The finished runs of ``base`` and ``other`` on the seeds both have finished, and those seeds; with no
    seed in common, every finished run of each and no seeds."""
    b = [r for r in base if r.final is not None]
    o = [r for r in other if r.final is not None]
    common = sorted({r.seed for r in b} & {r.seed for r in o})
    if common:
        b, o = [r for r in b if r.seed in common], [r for r in o if r.seed in common]
    return b, o, common


def significance(base: list[RunData], other: list[RunData], metric: str = "accuracy") -> dict[str, Any]:
    """``other`` minus ``base`` on ``metric``: paired over prompts (seed-averaged) and paired over seeds. Only
    the seeds both have finished are compared (``seeds``), so a method missing a seed (an unfinished board, a
    failed run) is set against the baseline's runs of its own seeds, not against the average of others; with
    no seed in common, every finished run is (``seeds`` empty)."""
    b, o, common = on_common_seeds(base, other)
    if not b or not o:
        return {}
    cb, co = _prompt_columns(b)[metric], _prompt_columns(o)[metric]
    ids = [i for i in cb if i in co]
    diffs = [float(np.mean(co[i]) - np.mean(cb[i])) for i in ids]
    by_seed_b = {r.seed: r.final[metric] for r in b}
    seed_diffs = [r.final[metric] - by_seed_b[r.seed] for r in o if r.seed in by_seed_b]
    return {
        "metric": metric, "seeds": common,
        "diff": float(np.mean([r.final[metric] for r in o]) - np.mean([r.final[metric] for r in b])),
        "prompts": len(ids), "prompt_diff": float(np.mean(diffs)) if diffs else float("nan"),
        "prompt_diff_ci95": list(bootstrap_diff_ci(diffs)), "prompt_p": sign_flip_test(diffs),
        "paired_seeds": len(seed_diffs), "seed_p": sign_flip_test(seed_diffs) if seed_diffs else float("nan"),
        "seed_min_p": min_attainable_p(len(seed_diffs)) if seed_diffs else float("nan"),
    }


def _own_sft_seconds(summary: dict[str, Any]) -> float:
    """The warm-up time a run spent itself: none when it reused a shared start (its summary's ``sft_seconds``
    is then the stored start's own record; the start was paid for once, by the run that built it)."""
    if (summary.get("sft_start") or {}).get("reused"):
        return 0.0
    return float(summary.get("sft_seconds", 0.0))


def costs(runs: list[RunData]) -> dict[str, Any]:
    """Wall-clock, generated tokens and completions per finished run (means) and in total."""
    done = [r for r in runs if r.summary]
    if not done:
        return {"runs": 0}
    secs = [float(r.summary.get("rl_seconds", 0.0)) + _own_sft_seconds(r.summary) for r in done]
    rl = [float(r.summary.get("rl_seconds", 0.0)) for r in done]
    toks = [run_tokens(r.metrics) for r in done]
    comps = [sum(float(m.get("rollouts/spent", m.get("rollout/completions_generated", m.get("completions", 0.0)))) for m in r.metrics)
             for r in done]
    return {"runs": len(done), "seconds_per_run": float(np.mean(secs)), "rl_seconds_per_run": float(np.mean(rl)),
            "seconds_total": float(sum(secs)), "tokens_per_run": float(np.mean(toks)),
            "tokens_total": float(sum(toks)), "completions_per_run": float(np.mean(comps))}

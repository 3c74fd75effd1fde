"""A comparison as a Markdown page with a picture of its learning curves (``rlvr compare --markdown PATH``).

What a paper's results table or a leaderboard needs, from the runs ``rlvr compare`` made: per method the final
held-out accuracy (avg@k) with its 95% interval, the largest pass@k, greedy accuracy, the mean completion
length, tokens generated and RL wall time per run (a shared start's warm-up is left out: it is paid once, by
whichever run built it, and is no method's cost), and the paired difference from the baseline (the first
method) with its p-values (:mod:`rlvr.compare.aggregate`). Learning curves (held-out accuracy, completion
length and truncation rate over steps, means over seeds) go to ``PATH`` with ``.png`` instead of ``.md``.

With ``claims`` (method -> ``{metric, direction, claim}``), each method gets a verdict on the direction its
paper claims against the baseline: **reproduced** (the difference has the claimed sign and the paired test
over held-out prompts gives p < 0.05), **reversed** (the opposite sign, p < 0.05) or **not reproduced** (no
significant difference), or **inactive** when the claim names the training metric that shows its mechanism
acting (``active: METRIC``, e.g. the tokens a speculative rollout reused) and that metric was 0 at every step
of every finished run: the method's numbers then measure the rest of its recipe, not its mechanism (a
metric that no run logged gives "not measured", so a misspelt name cannot pass for an idle mechanism).
``metric`` is a held-out metric with a per-prompt column (``accuracy``,
``greedy_accuracy``, ``pass@k``) or ``mean_length`` (each prompt's mean completion length); ``direction`` is
``higher`` or ``lower``. The test is the one of :func:`rlvr.compare.aggregate.significance`: over prompts,
seed-averaged, sign-flip permutation, two-sided; the seed-paired test is shown beside it (with 3 seeds its
smallest attainable p is 0.25, so it cannot decide alone).
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable

import numpy as np

from rlvr.compare.aggregate import RunData, costs, curve, final_metrics, heldout_curve, on_common_seeds, significance
from rlvr.eval.significance import bootstrap_diff_ci, sign_flip_test

if TYPE_CHECKING:
    from rlvr.compare.variants import Variant
    from rlvr.config.run import RunConfig

__all__ = ["write_markdown", "write_page", "read_claims", "setup_text", "claim_verdict", "length_significance",
           "mechanism_activity", "DIRECTIONS"]

DIRECTIONS = ("higher", "lower")


def _f(x: Any, digits: int = 3) -> str:
    return "–" if x is None or (isinstance(x, float) and math.isnan(x)) else f"{x:.{digits}f}"


def _p(p: Any) -> str:
    if p is None or (isinstance(p, float) and math.isnan(p)):
        return "–"
    return "<0.001" if p < 0.001 else f"{p:.3f}"


def length_significance(base: list[RunData], other: list[RunData]) -> dict[str, Any]:
    """``other`` minus ``base`` on each held-out prompt's mean completion length (seed-averaged), paired over
    prompts, as :func:`significance` does for accuracy (on the seeds both have finished)."""
    base, other, _ = on_common_seeds(base, other)

    def cols(runs: list[RunData]) -> dict[str, list[float]]:
        out: dict[str, list[float]] = {}
        for r in runs:
            if r.final is not None:
                for p in r.final["per_prompt"]:
                    out.setdefault(p["id"], []).append(float(np.mean(p["length"])))
        return out

    cb, co = cols(base), cols(other)
    ids = [i for i in cb if i in co]
    if not ids:
        return {}
    diffs = [float(np.mean(co[i]) - np.mean(cb[i])) for i in ids]
    return {"metric": "mean_length", "prompt_diff": float(np.mean(diffs)),
            "prompt_diff_ci95": list(bootstrap_diff_ci(diffs)), "prompt_p": sign_flip_test(diffs), "prompts": len(ids)}


def mechanism_activity(runs: list[RunData], metric: str) -> float | None:
    """The mean per training step of ``metric`` over the finished runs; None when no finished run logged it."""
    vals = [float(m[metric]) for r in runs if r.summary for m in r.metrics
            if isinstance(m.get(metric), (int, float)) and not isinstance(m.get(metric), bool)]
    return float(np.mean(vals)) if vals else None


def claim_verdict(claim: dict[str, Any] | None, test: dict[str, Any], alpha: float = 0.05,
                  activity: float | None = None) -> str:
    """reproduced / reversed / not reproduced for ``claim`` given the paired test ``test`` of its metric;
    with ``claim["active"]`` (a training metric), ``activity`` is that metric's mean per step
    (:func:`mechanism_activity`): 0 gives inactive, None (never logged) not measured."""
    if not claim:
        return "–"
    if claim.get("active"):
        if activity is None:
            return "not measured"
        if activity == 0:
            return "inactive"
    if not test or math.isnan(test.get("prompt_p", math.nan)):
        return "not measured"
    if claim["direction"] not in DIRECTIONS:
        raise ValueError(f"claim direction {claim['direction']!r}: choose higher or lower")
    diff, p = test["prompt_diff"], test["prompt_p"]
    if p >= alpha or diff == 0:
        return "not reproduced"
    return "reproduced" if (diff > 0) == (claim["direction"] == "higher") else "reversed"


def _claim_test(base: list[RunData], other: list[RunData], metric: str, accuracy: dict[str, Any]) -> dict[str, Any]:
    """The paired test of a claim's metric (``accuracy``: the one the table already computed)."""
    if metric == "accuracy":
        return accuracy
    return length_significance(base, other) if metric == "mean_length" else significance(base, other, metric)


def _curves_png(runs: dict[str, list[RunData]], path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    panels = [("held-out accuracy (avg@k)", lambda rs: heldout_curve(rs)),
              ("completion length (train)", lambda rs: curve(rs, "completion_length", 10)),
              ("truncated fraction (train)", lambda rs: curve(rs, "truncated_frac", 10))]
    fig, axes = plt.subplots(1, len(panels), figsize=(6 * len(panels), 4.5))
    cmap = plt.get_cmap("tab20")
    for ax, (title, get) in zip(axes, panels):
        for i, (name, rs) in enumerate(runs.items()):
            xs, mean, _, _ = get(rs) if rs else ([], [], [], [])
            if xs:
                ax.plot(xs, mean, label=name, color=cmap(i % 20), lw=2.2 if i == 0 else 1.2,
                        ls="-" if i < 20 else "--")
        ax.set_title(title)
        ax.set_xlabel("RL step")
        ax.grid(alpha=0.3)
    axes[0].legend(fontsize=7, ncol=2)
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=90)
    plt.close(fig)


def write_markdown(path: str | Path, runs: dict[str, list[RunData]], setup: str,
                   claims: dict[str, dict[str, Any]] | None = None, command: str | None = None,
                   title: str = "Comparison") -> dict[str, Any]:
    """Write the page to ``path`` and its curves to ``path`` with ``.png``; ``runs``: method -> finished and
    unfinished runs (the first method is the baseline); ``setup``: a paragraph saying what was run. Returns the
    rows (method -> numbers and verdict)."""
    path = Path(path)
    names = list(runs)
    base = names[0]
    claims = claims or {}
    rows: dict[str, dict[str, Any]] = {}
    lines = [f"# {title}", ""]
    if command:
        lines += ["Regenerate this page (finished runs are kept; an interrupted board continues where it stopped):",
                  "", "```bash", command, "```", ""]
    lines += [setup, ""]
    head = ["method", "seeds", "avg@k [95% CI]", "pass@k", "greedy", "length", f"Δ vs {base} [95% CI]",
            "p (prompts)", "p (seeds)", "tokens/run", "RL s/run", "claim", "verdict"]
    lines += ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for name in names:
        fin = final_metrics(runs[name])
        cost = costs(runs[name])
        mean, ci = fin.get("mean", {}), fin.get("ci95", {})
        ks = sorted((k for k in mean if k.startswith("pass@")), key=lambda k: int(k[5:]))
        sig = significance(runs[base], runs[name]) if name != base else {}
        claim = claims.get(name)
        test = _claim_test(runs[base], runs[name], claim["metric"], sig) if claim and name != base else {}
        activity = mechanism_activity(runs[name], claim["active"]) if claim and claim.get("active") else None
        verdict = claim_verdict(claim, test, activity=activity) if claim else "–"
        acc_ci = ci.get("accuracy")
        row = {"seeds": fin.get("seeds", []), "accuracy": mean.get("accuracy"), "accuracy_ci95": acc_ci,
               "pass": (ks[-1], mean[ks[-1]]) if ks else None, "greedy_accuracy": mean.get("greedy_accuracy"),
               "mean_length": mean.get("mean_length"), "significance": sig, "claim_test": test,
               "activity": activity, "verdict": verdict, "cost": cost}
        rows[name] = row
        delta = (f"{sig['prompt_diff']:+.3f} [{sig['prompt_diff_ci95'][0]:+.3f}, {sig['prompt_diff_ci95'][1]:+.3f}]"
                 if sig else "–")
        cells = [f"`{name}`", str(len(row["seeds"])),
                 f"{_f(row['accuracy'])} [{_f(acc_ci[0])}, {_f(acc_ci[1])}]" if acc_ci else _f(row["accuracy"]),
                 f"{row['pass'][0]} {_f(row['pass'][1])}" if row["pass"] else "–", _f(row["greedy_accuracy"]),
                 _f(row["mean_length"], 1), delta, _p(sig.get("prompt_p")), _p(sig.get("seed_p")),
                 f"{cost['tokens_per_run']:,.0f}" if cost.get("runs") else "–",
                 f"{cost['rl_seconds_per_run']:,.0f}" if cost.get("runs") else "–",
                 (f"{claim['metric']} {claim['direction']}" if claim else "–"), verdict]
        lines.append("| " + " | ".join(cells) + " |")
    png = path.with_suffix(".png")
    _curves_png(runs, png)
    lines += ["", f"![learning curves]({png.name})", ""]
    if claims:
        lines += ["## Claims", "", "The mechanism column is the training metric that shows a method's mechanism "
                  "acting, as its mean per step (where the claims file names one); 0 makes the verdict inactive.", "",
                  "| method | the paper's claim | metric | Δ vs baseline | p (prompts) | mechanism | verdict |",
                  "|---|---|---|---|---|---|---|"]
        for name in names:
            c = claims.get(name)
            if not c or name == base:
                continue
            t, act = rows[name]["claim_test"], rows[name]["activity"]
            mech = f"`{c['active']}` {act:,.4g}" if c.get("active") and act is not None else \
                (f"`{c['active']}` not logged" if c.get("active") else "–")
            lines.append(f"| `{name}` | {c.get('claim', '')} | {c['metric']} {c['direction']} | "
                         f"{_f(t.get('prompt_diff'), 3) if t else '–'} | {_p(t.get('prompt_p')) if t else '–'} | "
                         f"{mech} | {rows[name]['verdict']} |")
        lines.append("")
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("\n".join(lines) + "\n")
    return rows


def read_claims(path: str | Path) -> dict:
    """A claims file: ``method: {metric, direction: higher|lower, claim: text, active: TRAINING_METRIC}`` per
    method (``active`` optional), checked."""
    from rlvr.core import yaml_io

    raw = yaml_io.load(Path(path).read_text()) or {}
    if not isinstance(raw, dict):
        raise ValueError(f"{path}: expected a mapping of method -> {{metric, direction, claim}}")
    for name, c in raw.items():
        if not isinstance(c, dict) or "metric" not in c or c.get("direction") not in DIRECTIONS \
                or not isinstance(c.get("active", ""), str):
            raise ValueError(f"{path}: {name}: expected {{metric: NAME, direction: higher|lower, claim: TEXT}} "
                             f"(and optionally active: TRAINING_METRIC), got {c!r}")
    return raw


def setup_text(cfg: RunConfig, n_methods: int, seeds: list[int], base: str) -> str:
    """What a comparison ran, in words (the task, the budget, the evaluation, the start)."""
    e, r = cfg.eval, cfg.rollout
    start = (f" Every run starts RL from one shared warm-up ({cfg.sft.steps} SFT steps, seed {cfg.sft.seed})."
             if cfg.sft.steps and cfg.sft.seed is not None else "")
    return (f"Task `{cfg.task.name}`; {n_methods} methods x seeds {', '.join(map(str, seeds))}; every run trains on "
            f"{r.prompts_per_step} prompts x {r.group_size} completions x {cfg.train.steps} steps (at most "
            f"{r.max_new_tokens} new tokens). Held-out accuracy is avg@{e.samples} at T={e.temperature:g} on split "
            f"`{e.split}`{f' (first {e.num_examples} prompts)' if e.num_examples else ''}. Baseline: `{base}`."
            f"{start} Intervals are 95% bootstrap intervals over held-out prompts; p (prompts) is a two-sided "
            "sign-flip test of the per-prompt difference (seed-averaged), p (seeds) the same test over seeds (with "
            "3 seeds it cannot go below 0.25).")


def write_page(path: str | Path, out: str | Path, variants: list[Variant], seeds: list[int],
               claims: dict[str, dict[str, Any]] | None = None, command: str | None = None,
               title: str = "Comparison", notes: Callable[[dict[str, list[RunData]]], str] | None = None
               ) -> dict[str, Any]:
    """The page of the comparison kept in ``out`` (its plan names the shared config), from its runs so far:
    :func:`setup_text` of the first variant's config, then ``notes(runs)`` when given. Returns the rows."""
    from rlvr.compare.report import collect
    from rlvr.compare.variants import read_plan, variant_config

    out = Path(out)
    plan = read_plan(out)
    cfg0 = variant_config(variants[0], seeds[0], out, plan.get("base"), plan.get("overrides"))
    runs = collect(out, variants, seeds)
    setup = setup_text(cfg0, len(variants), seeds, variants[0].name)
    extra = notes(runs) if notes is not None else ""
    return write_markdown(path, runs, setup + (f"\n\n{extra}" if extra else ""), claims, command, title)

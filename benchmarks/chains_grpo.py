"""GRPO from the chains testbed's shared start, on several seeds: does RL visibly work, and how fast?

    python benchmarks/chains_grpo.py                      # seeds 0-2, the leaderboard's config, 15-minute steps
    python benchmarks/chains_grpo.py --report-only        # the report from the runs finished so far
    python benchmarks/chains_grpo.py --seeds 3 4 --steps 300

Each seed is one ``rlvr train`` run from the shared start of ``benchmarks/leaderboard/chains.yaml`` (trained
once per machine and cached; the first run builds it) with the GRPO defaults and ``--steps`` RL steps; an
existing run directory is skipped, so rerunning continues. The report (printed as Markdown) holds, per seed:
held-out avg@4 before and after RL and at each evaluation, pass@k and greedy accuracy before and after, the
accuracy per problem family, RL wall time; the length distribution of held-out completions (quantiles, and the
share cut at ``max_new_tokens``) before and after; the truncation rate and mean length of training
completions over training. Run it on an idle machine: the figure of interest is the gain within a wall-clock
budget, and a busy machine stretches the steps.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))


def _quantiles(xs: list[float]) -> str:
    xs = sorted(xs)
    q = lambda f: xs[min(len(xs) - 1, int(f * len(xs)))]  # noqa: E731
    return f"{q(0.1):.0f} / {q(0.5):.0f} / {q(0.9):.0f} / {xs[-1]:.0f}"


def _families(cfg) -> dict[str, str]:
    """Held-out example id -> its problem family, from the run's own task config."""
    from rlvr.run.setup import build_task

    task = build_task(cfg)
    return {e.id: e.meta.get("family", "?") for e in task.examples("eval")}


def _eval_row(ev: dict, fam: dict[str, str], max_new: int) -> dict:
    lengths = [n for p in ev["per_prompt"] for n in p["length"]]
    by_fam: dict[str, list[float]] = {}
    for p in ev["per_prompt"]:
        by_fam.setdefault(fam.get(p["id"], "?"), []).extend(p["correct"])
    ks = sorted((k for k in ev if k.startswith("pass@")), key=lambda k: int(k[5:]))
    return {"avg@4": ev["avg@4"], "greedy": ev.get("greedy_accuracy"), "pass": {k: ev[k] for k in ks},
            "families": {f: sum(v) / len(v) for f, v in sorted(by_fam.items())},
            "lengths": lengths, "cut": sum(n >= max_new for n in lengths) / len(lengths)}


def report(runs: dict[int, Path]) -> str:
    from rlvr.config.run import load_config

    out = []
    gains = []
    for seed, run in runs.items():
        summary = json.loads((run / "summary.json").read_text())
        cfg = load_config(run / "config.yaml")
        max_new, fam = cfg.rollout.max_new_tokens, _families(cfg)
        evals = {int(f.stem.split("_")[1]): json.loads(f.read_text()) for f in sorted((run / "eval").glob("step_*.json"))}
        first, last = evals[min(evals)], evals[max(evals)]
        b, a = _eval_row(first, fam, max_new), _eval_row(last, fam, max_new)
        gain = 100 * (a["avg@4"] - b["avg@4"])
        gains.append(gain)
        curve = ", ".join(f"{s}: {e['avg@4']:.3f}" for s, e in sorted(evals.items()))
        metrics = [json.loads(x) for x in (run / "metrics.jsonl").read_text().splitlines() if x.strip()]
        metrics = [m for m in metrics if "truncated_frac" in m]
        edges = [0, 5, 25, 50, 100, 200, 400, 800, 1600, 3200]  # windows of steps, finer at the start
        train_curve = "; ".join(
            f"{lo + 1}-{min(hi, len(metrics))}: {sum(m['truncated_frac'] for m in chunk) / len(chunk):.3f} cut, "
            f"{sum(m['completion_length'] for m in chunk) / len(chunk):.1f} long"
            for lo, hi in zip(edges, edges[1:]) if (chunk := metrics[lo:hi]))
        out += [f"### seed {seed} ({run})", "",
                f"- avg@4 {b['avg@4']:.4f} -> {a['avg@4']:.4f} (**{gain:+.2f} points**) in {summary['steps']} RL steps, "
                f"{summary['rl_seconds']:.0f} s of RL wall time (evaluations included), {summary['threads']} threads",
                f"- held-out avg@4 over training: {curve}",
                "- pass@k before -> after: " + ", ".join(f"{k} {b['pass'][k]:.3f} -> {a['pass'][k]:.3f}" for k in b["pass"]),
                f"- greedy {b['greedy']:.3f} -> {a['greedy']:.3f}",
                "- per family avg@4: " + ", ".join(f"{f} {b['families'][f]:.3f} -> {a['families'].get(f, 0):.3f}"
                                                    for f in b["families"]),
                f"- held-out completion length (characters = tokens) p10 / p50 / p90 / max: before {_quantiles(b['lengths'])}, "
                f"after {_quantiles(a['lengths'])}; cut at {max_new} tokens: {b['cut']:.3f} -> {a['cut']:.3f}",
                f"- training completions, truncated share and mean length by window: {train_curve}", ""]
    if gains:
        out.insert(0, f"GRPO on the chains start: gains in avg@4 points {', '.join(f'{g:+.2f}' for g in gains)} "
                      f"(seeds {', '.join(map(str, runs))}); smallest {min(gains):+.2f}.\n")
    return "\n".join(out)


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2])
    ap.add_argument("--steps", type=int, default=400, help="RL steps per seed")
    ap.add_argument("--eval-every", type=int, default=100)
    ap.add_argument("--config", type=Path, default=ROOT / "benchmarks" / "leaderboard" / "chains.yaml")
    ap.add_argument("--out", type=Path, default=ROOT / "runs" / "chains_grpo")
    ap.add_argument("--set", dest="overrides", action="append", default=[], help="override for every run")
    ap.add_argument("--report-only", action="store_true")
    args = ap.parse_args(argv)

    runs = {}
    for seed in args.seeds:
        run = args.out / f"seed{seed}"
        if not args.report_only and not (run / "summary.json").exists():
            cmd = [sys.executable, "-m", "rlvr", "train", "-c", str(args.config), "--seed", str(seed),
                   "--out", str(run), "--set", f"train.steps={args.steps}", "--set", f"train.eval_every={args.eval_every}"]
            for o in args.overrides:
                cmd += ["--set", o]
            if (run / "checkpoints").exists():
                cmd = [sys.executable, "-m", "rlvr", "train", "--resume", str(run)]
            print(" ".join(cmd), flush=True)
            subprocess.run(cmd, check=True)
        if (run / "summary.json").exists():
            runs[seed] = run
    print(report(runs))


if __name__ == "__main__":
    main()

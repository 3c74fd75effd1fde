"""Verifier noise: does accuracy fall with noise, and does the backward correction recover it?

    python benchmarks/noise.py --out runs/noise                          # the demo; seeds 0, 1, 2; 200 RL steps
    python benchmarks/noise.py --out /tmp/noise --seeds 0 --steps 100 --reinforce-lrs 2e-4
    python benchmarks/noise.py --out runs/noise_chains --testbed chains --arms grpo-clean,grpo-noisy

The directions of Cai et al. 2025 (arXiv:2510.00915: accuracy falls with verifier noise, the backward correction
recovers part of it) and of "noise is destructive to RLVR" (wrong gold answers cost accuracy) on rlvr's own
testbeds. By default the demo (``--recipe demo``: two-digit addition after a warm-up on a teacher who forgets to
carry; avg@4 about 0.61 at the start), every arm of a seed from the same warm-up (built once per seed, kept under
OUT/starts) and the same budget. GRPO with the exact verifier and with the noisy one shows whether accuracy falls
with noise. The correction needs an advantage that does not normalise the rewards away (a group-normalised one
cancels any affine map of them), so it is shown with REINFORCE and a constant baseline (``fixed_baseline`` at
--baseline, about the start's pass rate), the setting the paper's unbiasedness argument is about, at each rate of
--reinforce-lrs:

    grpo-clean / grpo-noisy                         the exact verifier / scoring.noise at --fp, --fn (per sample)
    grpo-labels@F                                   label noise: a share F of the training examples carry a
                                                    wrong gold answer (data.label_noise; --label-noise)
    reinforce-{clean,noisy,corrected}@LR            the same with REINFORCE at lr LR; corrected: noise_backward
                                                    with rho0 = fp, rho1 = fn

``--testbed chains`` runs the arms on the reasoning testbed instead, with the leaderboard's config
(benchmarks/leaderboard/chains.yaml: its shared start, 80 RL steps, evaluation every 20) and the grpo recipe
under every arm, so ``grpo-clean`` is the leaderboard's GRPO run of the same seed (read from
benchmarks/leaderboard/board when it is there with the same config, else trained).

Why a grid of rates: with a constant baseline b the corrected advantage is
(R~ - rho0) / (1 - rho0 - rho1) - b = (R~ - rho0 - (1 - rho0 - rho1) b) / (1 - rho0 - rho1), the noisy arm's
advantage with another baseline, scaled by 1 / (1 - rho0 - rho1). Under SGD the scale is a larger step, so one
rate would compare rates; AdamW does not see a constant scale, so there the correction is the baseline shift
(tests/methods/test_transforms_rewards.py). The grid shows how the noise's harm grows with the rate, and each
arm at its best rate of the grid is the comparison a tuned rate allows.

Every run is kept under OUT/seedS/ARM and skipped when its summary.json exists, so an interrupted experiment
continues. Printed and written to OUT/results.json: per arm, held-out avg@4 before and after (clean verifier) per
seed and the mean gain; the paired differences (over the 200 held-out prompts, seed-averaged, sign-flip p) of
noisy against clean, and corrected against noisy, at each rate and with each arm at its best rate.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from rlvr.compare.aggregate import RunData, load_run, significance  # noqa: E402
from rlvr.config.run import load_config  # noqa: E402
from rlvr.run.train import train  # noqa: E402


def arms(fp: float, fn: float, baseline: float, lrs: list[float], labels: list[float] = ()) -> dict[str, list[str]]:
    """Arm name -> the --set overrides that make it (over the testbed's config)."""
    noise = [f"scoring.noise.fp={fp}", f"scoring.noise.fn={fn}"]
    corrected = [f"algorithm.reward_transforms=[{{name: noise_backward, rho0: {fp}, rho1: {fn}}}]"]
    out: dict[str, list[str]] = {"grpo-clean": [], "grpo-noisy": noise}
    for share in labels:
        out[f"grpo-labels@{share:g}"] = [f"data.label_noise.fraction={share}"]
    for lr in lrs:
        rf = [f"algorithm.advantage={{name: fixed_baseline, baseline: {baseline}}}", f"optim.lr={lr}"]
        out[f"reinforce-clean@{lr:g}"] = rf
        out[f"reinforce-noisy@{lr:g}"] = rf + noise
        out[f"reinforce-corrected@{lr:g}"] = rf + noise + corrected
    return out


CHAINS = Path(__file__).resolve().parent / "leaderboard" / "chains.yaml"
BOARD = CHAINS.parent / "board" / "runs"
TESTBEDS = {"demo": (None, "demo", 200, 50, 0.6), "chains": (CHAINS, "grpo", None, None, 0.35)}
"""testbed -> (config file, recipe, default RL steps, default eval interval (None: the config's), baseline)"""


def run_arm(out: Path, seed: int, sets: list[str], common: list[str], testbed: str) -> RunData:
    """The arm's run for one seed, trained unless its summary says it finished."""
    path, recipe = TESTBEDS[testbed][:2]
    cfg = load_config(path, common + sets + [f"seed={seed}", f"out={out}"], recipe=recipe)
    kept = BOARD / "grpo" / f"seed{seed}"
    if testbed == "chains" and not sets and (kept / "summary.json").is_file():
        from rlvr.config.run import read_config_file

        mine = cfg.model_dump(mode="json")
        theirs = load_config(base=read_config_file(kept / "config.yaml")).model_dump(mode="json")
        if {**theirs, "out": None} == {**mine, "out": None}:
            out = kept  # the leaderboard's run of this arm: the same config, so the same numbers
    if not (out / "summary.json").is_file():
        train(cfg)
    steps = cfg.train.steps
    run = load_run(out, seed, steps)
    if run is None or run.final is None:
        raise SystemExit(f"{out}: the run ended without a final evaluation at step {steps}")
    return run


def _diff(base: list[RunData], other: list[RunData]) -> dict:
    s = significance(base, other)
    return {"diff": s["diff"], "ci95": s["prompt_diff_ci95"], "p": s["prompt_p"], "seeds": s["paired_seeds"]}


def best_rate(runs: dict[str, list[RunData]], family: str, lrs: list[float]) -> float:
    """The rate of the grid at which ``family`` ends highest (mean over seeds)."""
    def mean_final(lr: float) -> float:
        rs = runs[f"{family}@{lr:g}"]
        return sum(r.final["accuracy"] for r in rs) / len(rs)
    return max(lrs, key=mean_final)


def report(runs: dict[str, list[RunData]], lrs: list[float]) -> dict:
    """Per-arm gains and the paired differences the experiment is about (those whose arms were run)."""
    table = {}
    for name, rs in runs.items():
        before = [r.evals[0]["accuracy"] for r in rs]
        after = [r.final["accuracy"] for r in rs]
        table[name] = {"seeds": [r.seed for r in rs], "before": before, "after": after,
                       "mean_gain": sum(a - b for a, b in zip(after, before)) / len(rs),
                       "rl_seconds": [r.summary.get("rl_seconds") for r in rs],
                       "curve": {s: sum(r.evals[s]["accuracy"] for r in rs) / len(rs)
                                 for s in sorted(rs[0].evals) if all(s in r.evals for r in rs)}}
    pairs, best = {}, {}

    def pair(label: str, base: str, other: str) -> None:
        if base in runs and other in runs:
            pairs[label] = _diff(runs[base], runs[other])

    pair("grpo: noisy - clean", "grpo-clean", "grpo-noisy")
    for name in runs:
        if name.startswith("grpo-labels@"):
            pair(f"grpo: {name.removeprefix('grpo-')} - clean", "grpo-clean", name)
    for lr in lrs:
        pair(f"reinforce@{lr:g}: noisy - clean", f"reinforce-clean@{lr:g}", f"reinforce-noisy@{lr:g}")
        pair(f"reinforce@{lr:g}: corrected - noisy", f"reinforce-noisy@{lr:g}", f"reinforce-corrected@{lr:g}")
    families = ("clean", "noisy", "corrected")
    if all(f"reinforce-{f}@{lr:g}" in runs for f in families for lr in lrs):
        best = {f: best_rate(runs, f"reinforce-{f}", lrs) for f in families}
        tuned = {f: f"reinforce-{f}@{lr:g}" for f, lr in best.items()}
        pair("reinforce, best rates: noisy - clean", tuned["clean"], tuned["noisy"])
        pair("reinforce, best rates: corrected - noisy", tuned["noisy"], tuned["corrected"])
        pair("reinforce, best rates: corrected - clean", tuned["clean"], tuned["corrected"])
    return {"arms": table, "best_rates": best, "paired": pairs}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", required=True)
    ap.add_argument("--testbed", choices=sorted(TESTBEDS), default="demo")
    ap.add_argument("--seeds", default="0,1,2")
    ap.add_argument("--steps", type=int, default=None, help="RL steps per arm (demo: 200, its GRPO gains most of "
                    "its +25-32 points in the first 100 of its 600; chains: the leaderboard's 80)")
    ap.add_argument("--eval-every", type=int, default=None, help="held-out evaluation every N steps (the curves; "
                    "demo: 50, chains: 20)")
    ap.add_argument("--fp", type=float, default=0.2)
    ap.add_argument("--fn", type=float, default=0.2)
    ap.add_argument("--baseline", type=float, default=None, help="REINFORCE's constant baseline, about the start's "
                    "training reward (demo: 0.6, chains: 0.35)")
    ap.add_argument("--reinforce-lrs", default="1e-4,2e-4,4e-4", help="REINFORCE's rates, comma-separated")
    ap.add_argument("--label-noise", default="0.2,0.5", help="shares of wrong gold answers, one GRPO arm each "
                    "(comma-separated; empty: none)")
    ap.add_argument("--arms", default=None, help="comma-separated arms to run (default: all)")
    args = ap.parse_args()
    lrs = [float(x) for x in args.reinforce_lrs.split(",")]
    _, _, steps, every, baseline = TESTBEDS[args.testbed]
    steps, every = args.steps or steps, args.eval_every or every
    labels = [float(x) for x in args.label_noise.split(",") if x.strip()]
    plan = arms(args.fp, args.fn, baseline if args.baseline is None else args.baseline, lrs, labels)
    if args.arms:
        unknown = set(args.arms.split(",")) - set(plan)
        if unknown:
            ap.error(f"unknown arms {sorted(unknown)}; the arms are {list(plan)}")
        plan = {k: v for k, v in plan.items() if k in args.arms.split(",")}
    root = Path(args.out).resolve()
    common = ([f"train.steps={steps}"] if steps else []) + ([f"train.eval_every={every}"] if every else [])
    if args.testbed == "demo":  # (the chains config keeps its shared start in the machine's cache)
        common += ["train.checkpoint_every=0", f"sft.cache={root / 'starts'}"]
    seeds = [int(s) for s in args.seeds.split(",")]
    runs: dict[str, list[RunData]] = {name: [] for name in plan}
    for seed in seeds:
        for name, sets in plan.items():
            r = run_arm(root / f"seed{seed}" / name, seed, sets, common, args.testbed)
            runs[name].append(r)
            print(f"{name} seed {seed}: {r.evals[0]['accuracy']:.3f} -> {r.final['accuracy']:.3f}", flush=True)
    print(f"\n{args.testbed}: fp {args.fp}, fn {args.fn}, {runs[next(iter(runs))][0].steps} RL steps, seeds {seeds} "
          "(held-out avg@4, clean verifier)")
    print(f"{'arm':>26} {'seed':>4} {'start':>7} {'after':>7} {'gain':>7} {'RL s':>6}")
    for name, rs in runs.items():
        for r in rs:
            a0, a1 = r.evals[0]["accuracy"], r.final["accuracy"]
            print(f"{name:>26} {r.seed:>4} {a0:7.3f} {a1:7.3f} {a1 - a0:+7.3f} {r.summary.get('rl_seconds', 0):6.0f}")
    res = report(runs, lrs)
    for name, row in res["arms"].items():
        curve = "  ".join(f"{s}:{a:.3f}" for s, a in row["curve"].items())
        print(f"{name:>26} mean gain {row['mean_gain']:+.3f} over {len(row['seeds'])} seed(s); mean curve {curve}")
    print(f"best REINFORCE rates: {res['best_rates']}")
    for name, d in res["paired"].items():
        print(f"{name:>42}: {d['diff']:+.3f} [{d['ci95'][0]:+.3f}, {d['ci95'][1]:+.3f}] p {d['p']:.3g}")
    (root / "results.json").write_text(json.dumps(res, indent=1))


if __name__ == "__main__":
    main()

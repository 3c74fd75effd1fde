"""Verifier noise on the demo task: does accuracy fall with noise, and does the backward correction recover it?

    python benchmarks/noise.py --out runs/noise                       # seeds 0, 1; 400 RL steps each arm
    python benchmarks/noise.py --out /tmp/noise --seeds 0 --steps 100 --sft-steps 300

The direction of Cai et al. 2025 (arXiv:2510.00915) on rlvr's own testbed, from the demo's SFT warm-up, the same
seed and budget. GRPO (the demo's settings) with the exact verifier and with the noisy one shows whether accuracy
falls with noise; the correction needs an advantage that does not normalise the rewards away (a group-normalised
one cancels any affine map of them), so it is shown with REINFORCE and a constant baseline (``fixed_baseline``
at --baseline, about the start's pass rate; lr --reinforce-lr, since its advantages are not scaled up by a
group's spread), the setting the paper's unbiasedness argument is about:

    grpo-clean / grpo-noisy                        the exact verifier / scoring.noise at --fp, --fn (per sample)
    reinforce-clean / -noisy / -corrected          the same, and noise_backward with rho0 = fp, rho1 = fn

Printed per arm and seed: held-out avg@4 after the warm-up and after RL (clean verifier), and the gain.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from rlvr.config.run import load_config  # noqa: E402
from rlvr.run.train import train  # noqa: E402


def arms(fp: float, fn: float, baseline: float, lr: float) -> dict[str, list[str]]:
    noise = [f"scoring.noise.fp={fp}", f"scoring.noise.fn={fn}"]
    rf = [f"algorithm.advantage={{name: fixed_baseline, baseline: {baseline}}}", f"optim.lr={lr}"]
    return {"grpo-clean": [], "grpo-noisy": noise, "reinforce-clean": rf, "reinforce-noisy": rf + noise,
            "reinforce-corrected": rf + noise + [
                f"algorithm.reward_transforms=[{{name: noise_backward, rho0: {fp}, rho1: {fn}}}]"]}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", required=True)
    ap.add_argument("--seeds", default="0,1")
    ap.add_argument("--steps", type=int, default=400)
    ap.add_argument("--sft-steps", type=int, default=600)
    ap.add_argument("--fp", type=float, default=0.2)
    ap.add_argument("--fn", type=float, default=0.2)
    ap.add_argument("--baseline", type=float, default=0.15)
    ap.add_argument("--reinforce-lr", type=float, default=2e-4)
    ap.add_argument("--arms", default=None, help="comma-separated arms to run (default: all)")
    args = ap.parse_args()
    plan = arms(args.fp, args.fn, args.baseline, args.reinforce_lr)
    if args.arms:
        plan = {k: v for k, v in plan.items() if k in args.arms.split(",")}
    common = ["algorithm.kl.coef=0.0", f"train.steps={args.steps}", f"sft.steps={args.sft_steps}", "train.eval_every=0",
              "train.checkpoint_every=0", "eval.samples=4", "eval.temperature=1.0"]
    rows = []
    for seed in (int(s) for s in args.seeds.split(",")):
        for name, sets in plan.items():
            out = Path(args.out) / f"seed{seed}" / name
            s = train(load_config(overrides=common + sets + [f"seed={seed}", f"out={out}"]))
            rows.append((name, seed, s["eval_before"]["accuracy"], s["eval_after"]["accuracy"], s["rl_seconds"]))
            print(f"{name} seed {seed}: {rows[-1][2]:.3f} -> {rows[-1][3]:.3f}", flush=True)
    print(f"\nfp {args.fp}, fn {args.fn}, {args.steps} RL steps (held-out avg@4, clean verifier)")
    print(f"{'arm':>20} {'seed':>4} {'start':>7} {'after':>7} {'gain':>7} {'RL s':>7}")
    for name, seed, a0, a1, t in rows:
        print(f"{name:>20} {seed:>4} {a0:7.3f} {a1:7.3f} {a1 - a0:+7.3f} {t:7.0f}")
    for name in plan:
        gains = [a1 - a0 for n, _, a0, a1, _ in rows if n == name]
        print(f"{name:>20} mean gain {sum(gains) / len(gains):+.3f} over {len(gains)} seed(s)")


if __name__ == "__main__":
    main()

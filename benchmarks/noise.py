"""Verifier noise on the demo task: does accuracy fall with noise, and does the backward correction recover it?

    python benchmarks/noise.py --out runs/noise                       # seeds 0, 1; 300 RL steps each arm
    python benchmarks/noise.py --out /tmp/noise --seeds 0 --steps 100 --sft-steps 300

The direction of Cai et al. 2025 (arXiv:2510.00915) on rlvr's own testbed. Every arm is REINFORCE with a constant
baseline (``fixed_baseline`` 0.5, the setting the paper's unbiasedness argument is about: a group-normalised
advantage would cancel the affine correction), from the demo's SFT warm-up, the same seed and budget:

    clean      the exact verifier
    noisy      scoring.noise: false positives at --fp, false negatives at --fn (per sample)
    corrected  the same noise, and reward_transforms noise_backward with rho0 = fp, rho1 = fn

Printed per arm and seed: held-out avg@4 after the warm-up and after RL (clean verifier), and the gain.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from rlvr.config.run import load_config  # noqa: E402
from rlvr.run.train import train  # noqa: E402


def arms(fp: float, fn: float) -> dict[str, list[str]]:
    noise = [f"scoring.noise.fp={fp}", f"scoring.noise.fn={fn}"]
    return {"clean": [], "noisy": noise,
            "corrected": noise + [f"algorithm.reward_transforms=[{{name: noise_backward, rho0: {fp}, rho1: {fn}}}]"]}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", required=True)
    ap.add_argument("--seeds", default="0,1")
    ap.add_argument("--steps", type=int, default=300)
    ap.add_argument("--sft-steps", type=int, default=600)
    ap.add_argument("--fp", type=float, default=0.2)
    ap.add_argument("--fn", type=float, default=0.2)
    args = ap.parse_args()
    common = ["algorithm.advantage={name: fixed_baseline, baseline: 0.5}", "algorithm.kl.coef=0.0",
              f"train.steps={args.steps}", f"sft.steps={args.sft_steps}", "train.eval_every=0",
              "train.checkpoint_every=0", "eval.samples=4", "eval.temperature=1.0"]
    rows = []
    for seed in (int(s) for s in args.seeds.split(",")):
        for name, sets in arms(args.fp, args.fn).items():
            out = Path(args.out) / f"seed{seed}" / name
            s = train(load_config(overrides=common + sets + [f"seed={seed}", f"out={out}"]))
            rows.append((name, seed, s["eval_before"]["accuracy"], s["eval_after"]["accuracy"], s["rl_seconds"]))
            print(f"{name} seed {seed}: {rows[-1][2]:.3f} -> {rows[-1][3]:.3f}", flush=True)
    print(f"\nfp {args.fp}, fn {args.fn}, {args.steps} RL steps (held-out avg@4, clean verifier)")
    print(f"{'arm':>10} {'seed':>4} {'start':>7} {'after':>7} {'gain':>7} {'RL s':>7}")
    for name, seed, a0, a1, t in rows:
        print(f"{name:>10} {seed:>4} {a0:7.3f} {a1:7.3f} {a1 - a0:+7.3f} {t:7.0f}")
    for name in arms(args.fp, args.fn):
        gains = [a1 - a0 for n, _, a0, a1, _ in rows if n == name]
        print(f"{name:>10} mean gain {sum(gains) / len(gains):+.3f} over {len(gains)} seed(s)")


if __name__ == "__main__":
    main()

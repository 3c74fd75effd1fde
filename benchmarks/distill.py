"""On-policy distillation on the demo task: a larger tiny teacher into a smaller student, against RL alone.

    python benchmarks/distill.py --out runs/distill                    # teacher 1000 RL steps, students 200
    python benchmarks/distill.py --out /tmp/distill --teacher-steps 300 --steps 100

1. The teacher: a wider, deeper tiny model (``--teacher-width`` 192, 3 layers) trained as the demo is (SFT
   warm-up, then GRPO for ``--teacher-steps``); its final checkpoint is the teacher directory.
2. Students of the demo's size from the same SFT warm-up and seed, ``--steps`` RL steps each: GRPO alone, and
   GRPO with the ``distill`` advantage transform for each of ``--divergences`` (reverse_kl, forward_kl, jsd at
   beta 0.5; ``--coef``). ``--teacher DIR`` reuses a teacher already trained.

Printed: the teacher's held-out avg@4, each student's before and after, and the RL seconds (the distilled
student pays one teacher forward a step).
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from rlvr.config.run import load_config  # noqa: E402
from rlvr.run.checkpoint import latest_checkpoint  # noqa: E402
from rlvr.run.train import train  # noqa: E402


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", required=True)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--teacher-steps", type=int, default=1000)
    ap.add_argument("--teacher-width", type=int, default=192)
    ap.add_argument("--steps", type=int, default=200)
    ap.add_argument("--coef", type=float, default=1.0)
    ap.add_argument("--divergences", default="reverse_kl", help="comma-separated: reverse_kl, forward_kl, jsd")
    ap.add_argument("--teacher", default=None, help="a trained teacher's model directory (skips step 1)")
    args = ap.parse_args()
    out = Path(args.out)
    common = [f"seed={args.seed}", "train.eval_every=0", "eval.samples=4", "eval.temperature=1.0"]
    rows = []
    if args.teacher:
        teacher = Path(args.teacher)
    else:
        t = train(load_config(overrides=common + [
            f"out={out / 'teacher'}", f"train.steps={args.teacher_steps}",
            f"model.tiny.hidden_size={args.teacher_width}", "model.tiny.num_layers=3",
            f"model.tiny.intermediate_size={4 * args.teacher_width}"]))
        teacher = latest_checkpoint(out / "teacher") / "model"
        rows.append(("teacher", t["eval_before"]["accuracy"], t["eval_after"]["accuracy"], t["rl_seconds"]))
    runs = [("rl", [])] + [(f"rl+{d}", [f"algorithm.advantage_transforms=[{{name: distill, teacher: '{teacher}', "
                                        f"coef: {args.coef}, divergence: {d}}}]"])
                           for d in args.divergences.split(",") if d]
    for name, extra in runs:
        s = train(load_config(overrides=common + [f"out={out / name}", f"train.steps={args.steps}", *extra]))
        rows.append((name, s["eval_before"]["accuracy"], s["eval_after"]["accuracy"], s["rl_seconds"]))
    print(f"\n{'run':>14} {'before':>7} {'after':>7} {'gain':>7} {'RL s':>7}")
    for name, a0, a1, sec in rows:
        print(f"{name:>14} {a0:7.3f} {a1:7.3f} {a1 - a0:+7.3f} {sec:7.0f}")


if __name__ == "__main__":
    main()

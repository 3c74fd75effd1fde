"""On-policy distillation on the demo task: a larger tiny teacher into a smaller student, against RL alone.

    python benchmarks/distill.py --out runs/distill                    # teacher 1000 RL steps, students 200
    python benchmarks/distill.py --out /tmp/distill --teacher-steps 300 --steps 100

1. The teacher: a wider, deeper tiny model (``--teacher-width`` 192, 3 layers) trained as the demo is (SFT
   warm-up, then GRPO for ``--teacher-steps``); its final checkpoint is the teacher directory.
2. Two students of the demo's size from the same SFT warm-up and seed, ``--steps`` RL steps each: GRPO alone,
   and GRPO with the ``distill`` advantage transform (the teacher's per-token reverse KL, ``--coef``).

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
    args = ap.parse_args()
    out = Path(args.out)
    common = [f"seed={args.seed}", "train.eval_every=0", "eval.samples=4", "eval.temperature=1.0"]
    t = train(load_config(overrides=common + [
        f"out={out / 'teacher'}", f"train.steps={args.teacher_steps}", f"model.tiny.hidden_size={args.teacher_width}",
        "model.tiny.num_layers=3", f"model.tiny.intermediate_size={4 * args.teacher_width}"]))
    teacher = latest_checkpoint(out / "teacher") / "model"
    rows = [("teacher", t["eval_before"]["accuracy"], t["eval_after"]["accuracy"], t["rl_seconds"])]
    for name, extra in (("rl", []), ("rl+distill", [
            f"algorithm.advantage_transforms=[{{name: distill, teacher: '{teacher}', coef: {args.coef}}}]"])):
        s = train(load_config(overrides=common + [f"out={out / name}", f"train.steps={args.steps}", *extra]))
        rows.append((name, s["eval_before"]["accuracy"], s["eval_after"]["accuracy"], s["rl_seconds"]))
    print(f"\n{'run':>12} {'before':>7} {'after':>7} {'gain':>7} {'RL s':>7}")
    for name, a0, a1, sec in rows:
        print(f"{name:>12} {a0:7.3f} {a1:7.3f} {a1 - a0:+7.3f} {sec:7.0f}")


if __name__ == "__main__":
    main()

"""SPEC-RL against plain sampling on the demo task: tokens generated per step, rollout time and accuracy.

    python benchmarks/spec_rl_tokens.py                      # 40 RL steps per variant, ~5 min on 2 CPU cores
    python benchmarks/spec_rl_tokens.py --steps 100 --num-train 256 --lenience 0 0.5 1

SPEC-RL (``rollout.strategy: spec_rl``, rlvr/rollout/strategies/spec_rl.py) saves generation only when prompts recur, so
the demo's arithmetic train split is cut to ``--num-train`` problems (``task.num_train``): with the demo's 32
prompts per step an epoch is ``num_train / 32`` steps. One SFT warm-up (the demo's) is trained once and
saved; every variant then runs ``--steps`` RL steps of the ``spec_rl`` recipe's algorithm from it, the
baseline with ``rollout.strategy: plain`` (identical otherwise), the others with each ``--lenience`` (and
``--exact`` adds the exact mode, lenience 0). Printed per variant, over the steps after the first epoch
(when every prompt has drafts):

- ``gen tok/step``: tokens sampled by the engine per step, and its ratio to plain's;
- ``accept``, ``full reuse``: SPEC-RL's acceptance rate (reused / draft tokens) and share of drafts reused
  whole;
- ``rollout s/step``: generation time per step (the scoring forward over the drafts included), and its
  ratio to plain's, measured in the same process;
- ``acc before/after``: held-out accuracy (avg@4, T = 1) before and after the RL steps; ``train acc``: mean
  training accuracy over the last quarter of the steps.

Short runs say what reuse costs and saves; they are not a ranking (use ``rlvr compare`` with seeds).
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from rlvr.config.run import load_config  # noqa: E402


def _sft_start(root: Path, base: list[str]) -> Path:
    from rlvr.run.train import run_sft

    out = root / "sft"
    run_sft(load_config(overrides=base + [f"out={out}"]))
    return out / "model"


def _run(name: str, strategy: str, root: Path, model_dir: Path, steps: int, base: list[str],
         epoch_steps: int) -> dict:
    from rlvr.run.train import train

    over = base + [f"out={root / name}", f"model.path={model_dir}", "defaults=demo", "sft.steps=0", f"train.steps={steps}",
                   "train.eval_every=0", "train.checkpoint_every=0", f"rollout.strategy={strategy}"]
    cfg = load_config(overrides=over, recipe="spec_rl")
    t0 = time.perf_counter()
    summary = train(cfg)
    wall = time.perf_counter() - t0
    lines = [json.loads(x) for x in (root / name / "metrics.jsonl").read_text().splitlines()]
    later = lines[epoch_steps:] or lines
    tail = lines[-max(1, len(lines) // 4):]

    def gen_tokens(m: dict) -> float:
        if "engine/spec_rl/generated_tokens" in m:
            return m["engine/spec_rl/generated_tokens"]
        return m["generated/completion_length"] * m["rollouts/spent"]

    def mean(key: str, rows=later) -> float | None:
        vals = [m[key] for m in rows if key in m]
        return sum(vals) / len(vals) if vals else None

    return {"acc_before": summary["eval_before"]["accuracy"], "acc_after": summary["eval_after"]["accuracy"],
            "train_acc": mean("accuracy", tail), "gen_tokens": statistics.mean(gen_tokens(m) for m in later),
            "gen_tokens_first": gen_tokens(lines[0]), "accept": mean("engine/spec_rl/accept_rate"),
            "full": mean("engine/spec_rl/full_reuse_frac"),
            "rollout_s": statistics.median(m["time/rollout"] for m in later), "wall": wall,
            "per_step": [round(gen_tokens(m)) for m in lines]}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--steps", type=int, default=40, help="RL steps per variant")
    ap.add_argument("--num-train", type=int, default=128, help="train problems (an epoch is this / 32 steps)")
    ap.add_argument("--lenience", type=float, nargs="*", default=[0.5, 0.0], help="SPEC-RL lenience values")
    ap.add_argument("--exact", action="store_true", help="also run exact mode (lenience 0)")
    ap.add_argument("--eval-examples", type=int, default=100, help="held-out problems for before/after accuracy")
    ap.add_argument("--out", type=Path, default=None, help="keep the run directories here")
    ap.add_argument("--set", dest="overrides", action="append", default=[],
                    help="a config override for every run, e.g. optim.lr=1e-4 (repeatable)")
    args = ap.parse_args()
    import transformers

    transformers.utils.logging.set_verbosity_error()
    transformers.utils.logging.disable_progress_bar()
    root = args.out or Path(tempfile.mkdtemp(prefix="rlvr-spec-rl-"))
    root.mkdir(parents=True, exist_ok=True)
    base = [f"eval.num_examples={args.eval_examples}", f"task.num_train={args.num_train}", *args.overrides]
    per_step = load_config(overrides=base).rollout.prompts_per_step
    epoch_steps = -(-args.num_train // per_step)
    t0 = time.perf_counter()
    model_dir = _sft_start(root, base)
    print(f"shared SFT start: {model_dir} ({time.perf_counter() - t0:.0f} s); an epoch is {epoch_steps} steps",
          flush=True)
    variants = [("plain", "plain")] + [(f"spec_rl l={x:g}", f"{{name: spec_rl, lenience: {x}}}") for x in args.lenience]
    if args.exact:
        variants.append(("spec_rl exact", "{name: spec_rl, exact: true}"))
    results = {}
    for i, (name, strategy) in enumerate(variants):
        results[name] = r = _run(f"v{i}", strategy, root, model_dir, args.steps, base, epoch_steps)
        print(f"[{i + 1}/{len(variants)}] {name}: generated tokens per step {r['per_step']}", flush=True)
    plain = results["plain"]
    print(f"\n{args.steps} RL steps from one SFT start, {args.num_train} train problems; means over steps "
          f"{epoch_steps}..{args.steps - 1} (after the first epoch)\n")
    print(f"{'variant':<16} {'gen tok/step':>12} {'vs plain':>9} {'accept':>7} {'full reuse':>10} "
          f"{'rollout s/step':>14} {'vs plain':>9} {'acc before':>10} {'acc after':>9} {'train acc':>9}")
    for name, r in results.items():
        acc = f"{r['accept']:.3f}" if r["accept"] is not None else "-"
        full = f"{r['full']:.3f}" if r["full"] is not None else "-"
        print(f"{name:<16} {r['gen_tokens']:>12.0f} {r['gen_tokens'] / plain['gen_tokens']:>8.2f}x {acc:>7} "
              f"{full:>10} {r['rollout_s']:>14.3f} {r['rollout_s'] / plain['rollout_s']:>8.2f}x "
              f"{r['acc_before']:>10.3f} {r['acc_after']:>9.3f} {r['train_acc']:>9.3f}")


if __name__ == "__main__":
    main()

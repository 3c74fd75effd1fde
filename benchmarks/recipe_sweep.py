"""Every recipe on the demo task from one shared supervised start, side by side with GRPO.

    python benchmarks/recipe_sweep.py                     # every recipe, 40 RL steps each
    python benchmarks/recipe_sweep.py --recipes grpo dars aero --steps 100

One SFT warm-up (the demo's) is trained once and saved; each recipe then runs ``--steps`` RL steps from it
with the demo's rollout budget per step (``rollout.prompts_per_step x rollout.group_size``), so the columns
compare like with like. Printed per recipe:

- ``acc before/after``: held-out avg@4 (T = 1) before and after the RL steps;
- ``train acc``: mean training accuracy over the last quarter of the steps;
- ``zero-var``: the share of groups with no reward variance (no signal for a group-relative advantage);
- ``rollouts``: completions generated per step (allocators such as DARS spend more, AERO less);
- ``s/step`` and its ratio to GRPO's, measured in the same process.

A recipe that fails (bad config for this task, an error during training) is listed with its error and the
script carries on. ``tac`` needs a task mixture: it runs on the demo's additions mixed with
multiplications (weights 3 : 1).
Short runs say whether each recipe trains and what it costs; they are not a ranking of the methods — use
``rlvr compare`` with several seeds for that.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
import time
import traceback
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from rlvr.config.run import load_config  # noqa: E402
from rlvr.config.recipes import recipe_names  # noqa: E402


def _sft_start(root: Path, base: list[str]) -> Path:
    from rlvr.run.train import run_sft

    out = root / "sft"
    run_sft(load_config(overrides=base + [f"out={out}"]))
    return out / "model"


NEEDS_TASK = {"tac": ["task.name=mixture",
                     "task.tasks=[{task: {name: arithmetic}, weight: 3, name: add},"
                     " {task: {name: arithmetic, ops: ['*']}, name: mul}]"]}


def _run(name: str, root: Path, model_dir: Path, steps: int, base: list[str]) -> dict:
    from rlvr.run.train import train

    over = NEEDS_TASK.get(name, []) + base + [f"out={root / name}", f"model.path={model_dir}", "defaults=demo", "sft.steps=0", f"train.steps={steps}",
                   "train.eval_every=0", "train.checkpoint_every=0"]
    cfg = load_config(overrides=over, recipe=name)
    t0 = time.perf_counter()
    summary = train(cfg)
    wall = time.perf_counter() - t0
    lines = [json.loads(x) for x in (root / name / "metrics.jsonl").read_text().splitlines()]
    tail = lines[-max(1, len(lines) // 4):]

    def mean(key: str, rows=lines) -> float | None:
        vals = [m[key] for m in rows if key in m]
        return sum(vals) / len(vals) if vals else None

    return {"acc_before": summary["eval_before"]["accuracy"], "acc_after": summary["eval_after"]["accuracy"],
            "train_acc": mean("accuracy", tail), "zero_var": mean("zero_variance_group_frac"),
            "rollouts": mean("rollouts/spent") or mean("completions"),
            "s_per_step": statistics.median(m["time/step"] for m in lines), "wall": wall}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--recipes", nargs="*", default=None, help="recipe names (default: all)")
    ap.add_argument("--steps", type=int, default=40, help="RL steps per recipe")
    ap.add_argument("--eval-examples", type=int, default=100, help="held-out problems for before/after accuracy")
    ap.add_argument("--out", type=Path, default=None, help="keep the run directories here")
    ap.add_argument("--json", type=Path, default=None, help="also write the results as JSON")
    ap.add_argument("--set", dest="overrides", action="append", default=[],
                    help="a config override for every run, e.g. optim.lr=1e-4 (repeatable)")
    args = ap.parse_args()
    import transformers

    transformers.utils.logging.set_verbosity_error()
    transformers.utils.logging.disable_progress_bar()
    names = args.recipes or recipe_names()
    if "grpo" not in names:
        names = ["grpo", *names]
    names = ["grpo", *[n for n in names if n != "grpo"]]
    root = args.out or Path(tempfile.mkdtemp(prefix="rlvr-sweep-"))
    root.mkdir(parents=True, exist_ok=True)
    base = [f"eval.num_examples={args.eval_examples}", *args.overrides]
    t0 = time.perf_counter()
    model_dir = _sft_start(root, base)
    print(f"shared SFT start: {model_dir} ({time.perf_counter() - t0:.0f} s)", flush=True)
    results: dict[str, dict] = {}
    for i, name in enumerate(names):
        try:
            results[name] = _run(name, root, model_dir, args.steps, base)
            r = results[name]
            print(f"[{i + 1}/{len(names)}] {name}: acc {r['acc_before']:.3f} -> {r['acc_after']:.3f}, "
                  f"{r['s_per_step']:.3f} s/step", flush=True)
        except Exception as e:  # report and carry on: the sweep is a check of every recipe
            results[name] = {"error": f"{type(e).__name__}: {e}".splitlines()[0][:200]}
            print(f"[{i + 1}/{len(names)}] {name}: FAILED {results[name]['error']}", flush=True)
            traceback.print_exc(limit=3)
    base_t = results.get("grpo", {}).get("s_per_step")
    print(f"\n{args.steps} RL steps per recipe from one SFT start; budget per step as each recipe sets it\n")
    print(f"{'recipe':<16} {'acc before':>10} {'acc after':>10} {'train acc':>10} {'zero-var':>9} "
          f"{'rollouts':>9} {'s/step':>8} {'vs grpo':>8}")
    for name, r in results.items():
        if "error" in r:
            print(f"{name:<16} FAILED: {r['error']}")
            continue
        ratio = f"{r['s_per_step'] / base_t:.2f}x" if base_t else "-"
        zv = f"{r['zero_var']:.2f}" if r["zero_var"] is not None else "-"
        print(f"{name:<16} {r['acc_before']:>10.3f} {r['acc_after']:>10.3f} {r['train_acc']:>10.3f} {zv:>9} "
              f"{r['rollouts']:>9.0f} {r['s_per_step']:>8.3f} {ratio:>8}")
    failed = [n for n, r in results.items() if "error" in r]
    print(f"\n{len(results) - len(failed)} recipes trained, {len(failed)} failed"
          + (f": {', '.join(failed)}" if failed else ""))
    if args.json:
        args.json.write_text(json.dumps(results, indent=2))
    sys.exit(1 if failed else 0)


if __name__ == "__main__":
    main()

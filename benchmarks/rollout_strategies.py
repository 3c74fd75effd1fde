"""Every rollout strategy against plain sampling on the demo task at an equal rollout budget, via ``rlvr compare``.

Variants (recipes): ``grpo`` (plain sampling, the baseline), ``spec_rl`` (speculative reuse of the
previous epoch's completions), ``latr`` (lookahead tree rollouts), ``arrol`` (over-provisioned groups
pruned by an online quality head; the checkpoint is set to token 2 for the demo's 3-token answers), ``rose`` (groups grown by
branching at semantically uncertain tokens, segment-level tree advantages; with the recipe's dynamic sampling)
``spec_rl_exact`` (the same with ``lenience: 0, exact: true``: exactly on-policy reuse), ``mu_grpo`` (four generation stages with the relaxed clip and veto), ``propa`` (step-level MCTS; the
demo's answers are one step, so its trees are one level of sibling answers labelled by their simulated
correctness) and ``murphy`` (failing answers refined after the verifier's feedback). Each runs ``--steps`` RL steps per seed from the demo's own SFT
warm-up, with the demo's budget per step; ``rlvr compare`` checks the budgets are equal and writes
``OUT/report.html``. Printed per variant: completion tokens generated per step (mean over steps and seeds;
SPEC-RL and ROSE count only the tokens they sampled, not those they reused), RL seconds per run, and held-out avg@4 after
RL with its 95% interval over seeds.

    python benchmarks/rollout_strategies.py --out runs/strategies                 # 3 seeds x 200 steps
    python benchmarks/rollout_strategies.py --out /tmp/s --seeds 0 --steps 100    # a quick look
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import yaml  # noqa: E402

from rlvr.compare import make_variants, run_compare  # noqa: E402
from rlvr.config.recipes import load_recipe  # noqa: E402

VARIANTS = ["grpo", "spec_rl", "latr", "arrol", "rose", "mu_grpo", "propa", "murphy"]
# variants that are a recipe with its strategy changed: name -> (recipe, strategy fields set)
DERIVED = {
    # the recipe's checkpoint (token 256) is past the demo's 3-token answers
    "arrol": ("arrol", {"checkpoints": [2]}),
    # SPEC-RL's exact mode: the exact test and residual resampling, so reused rollouts are on-policy samples
    "spec_rl_exact": ("spec_rl", {"lenience": 0.0, "exact": True}),
}


def tokens_per_step(run_dir: Path) -> tuple[float, float]:
    """Mean completion tokens generated per step over the run and over its second half (where SPEC-RL has a
    draft for every prompt once the run is past its first epoch)."""
    rows = [json.loads(x) for x in (run_dir / "metrics.jsonl").read_text().splitlines()]
    # SPEC-RL reports the tokens it sampled (reused prefixes excluded); the others: completions x mean length
    # ROSE: its reused prefixes too; arrol: what it sampled, pruned rollouts included
    per = [m.get("engine/spec_rl/generated_tokens", m.get("engine/arrol/generated_tokens",
                 m["rollouts/spent"] * m["generated/completion_length"] - m.get("engine/rose/reused_tokens", 0.0)))
           for m in rows]
    return statistics.mean(per), statistics.mean(per[len(per) // 2:])


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", required=True)
    ap.add_argument("--seeds", default="0,1,2")
    ap.add_argument("--steps", type=int, default=200)
    ap.add_argument("--variants", nargs="+", default=VARIANTS)
    args = ap.parse_args()
    seeds = [int(s) for s in args.seeds.split(",")]
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    recipes, files = [v for v in args.variants if v not in DERIVED], []
    for name in (v for v in args.variants if v in DERIVED):
        recipe, fields = DERIVED[name]
        raw = load_recipe(recipe)
        raw["rollout"]["strategy"].update(fields)
        (out / f"{name}.yaml").write_text(yaml.safe_dump(raw))
        files.append(out / f"{name}.yaml")
    result = run_compare(make_variants(recipes, files), seeds, out,
                         overrides=[f"train.steps={args.steps}", "train.eval_every=0"], allow_budget_mismatch=True)
    print(f"\n{'variant':14s} {'tokens/step':>12s} {'2nd half':>9s} {'RL s/run':>9s} {'held-out acc':>13s} "
          f"{'95% CI':>16s}")
    for v in args.variants:
        runs = [out / "runs" / v / f"seed{s}" for s in seeds]
        per_run = [tokens_per_step(r) for r in runs]
        tok, late = statistics.mean(t for t, _ in per_run), statistics.mean(t for _, t in per_run)
        secs = statistics.mean(json.loads((r / "summary.json").read_text())["rl_seconds"] for r in runs)
        final = result["final"][v]
        lo, hi = final.get("ci95", {}).get("accuracy", [float("nan")] * 2)
        print(f"{v:14s} {tok:12.0f} {late:9.0f} {secs:9.1f} {final['mean']['accuracy']:13.3f} [{lo:.3f}, {hi:.3f}]")
    for v, sig in result.get("significance", {}).items():
        lo, hi = sig["prompt_diff_ci95"]
        print(f"{v} - {args.variants[0]}: {sig['diff']:+.3f} (prompt-paired 95% CI [{lo:+.3f}, {hi:+.3f}], "
              f"p = {sig['prompt_p']:.3f}; seed-paired p = {sig['seed_p']:.3f})")
    print(f"\nbefore RL: {result['final'][args.variants[0]].get('before_accuracy', float('nan')):.3f}; "
          f"report: {out / 'report.html'}")


if __name__ == "__main__":
    main()

"""The leaderboard: the baselines and the seed methods whose mechanism needs long completions, each on three
seeds at an equal budget on the chains testbed, from one shared start; writes docs/leaderboard.md.

    python benchmarks/leaderboard.py                          # run the board (or continue it), write the page
    python benchmarks/leaderboard.py --report-only            # rewrite the page from the runs finished so far
    python benchmarks/leaderboard.py --methods grpo dapo --seeds 0   # a part of it

It is ``rlvr compare`` (resumable: finished runs are skipped, an interrupted one resumes from its newest
checkpoint, so rerunning the same command continues the board) with the shared config
``benchmarks/leaderboard/chains.yaml`` (the task, the model, the shared start: ``sft.seed`` and ``sft.cache``,
so the warm-up trains once and every run starts RL from the same weights; the budget: steps x prompts x
completions, equal for every method) and the claims ``benchmarks/leaderboard/claims.yaml`` (the direction each
method's paper claims against GRPO). The page (:mod:`rlvr.compare.markdown`) holds the final held-out avg@4
with intervals, pass@k, greedy accuracy, mean length, tokens generated and wall time per run, the paired
difference from GRPO with its p-values, the learning curves as a picture, and a verdict per claim.

The board's runs live in ``benchmarks/leaderboard/board`` and their results are kept in the repository (each
run's config, metrics, held-out evaluations and summary; checkpoints and the copied start are not, see
.gitignore): a finished run is told by its summary, so a board continued from another checkout or machine
skips the runs already kept and the page can be regenerated from them. Runs are only comparable from the same
start, so ``board/start.json`` records, per seed, a digest of the start's weights; a machine whose start comes
out different (another CPU's kernels, other library versions) may add whole seeds but not runs to a seed begun
from another start.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

BASELINES = ["grpo", "dr_grpo", "dapo", "gspo", "cispo", "rloo", "reinforce_pp", "ppo"]
# seed methods whose mechanism acts on what long completions have: length (delta_l, balanced, luspo, lite_ppo),
# token position and certainty (ucas, cepo, grpo_sg, rlrt, sspo), branching and shared prefixes (latr, rose,
# spec_rl, arrol), partial solutions and steps (propa, scope_rl, grpo_vps); then a_grae and tpo, which act at
# every step, because two of those need a prompt to recur and a board run sees each prompt once: spec_rl's
# reuse and scope_rl's scaffolds (their verdicts say inactive). The other sequence-level objectives (dhpo,
# maspo) fit any completion length and are left to ``--methods``: they would add 6 runs, about 45 minutes
METHODS = ["delta_l", "balanced", "luspo", "lite_ppo", "ucas", "cepo", "grpo_sg", "rlrt", "sspo", "latr", "rose",
           "spec_rl", "arrol", "propa", "scope_rl", "grpo_vps", "a_grae", "tpo"]
HERE = ROOT / "benchmarks" / "leaderboard"


def start_digest(start: Path) -> str:
    """sha256 over the start's weight files (names and bytes)."""
    h = hashlib.sha256()
    files = sorted(f for f in start.rglob("*.safetensors") if f.is_file())
    if not files:
        raise SystemExit(f"no weights found under the shared start {start}")
    for f in files:
        h.update(str(f.relative_to(start)).encode() + b"\0" + f.read_bytes())
    return h.hexdigest()


class StartCheck:
    """Which start each seed's runs came from, kept as ``start.json`` (per seed: the start's key and weight
    digest). A machine rebuilds the shared start when it has none cached, and another CPU's kernels or other
    library versions can give other weights; the runs of one seed must all start from the same weights (the
    paired comparisons pair runs of a seed), so a run whose start differs from its seed's kept runs is
    removed and the board stops, saying how to go on."""

    def __init__(self, path: Path):
        self.path = path
        self.kept = json.loads(path.read_text()) if path.is_file() else {"seeds": {}}

    def check_run(self, run_dir: Path, seed: int) -> None:
        rec = json.loads((run_dir / "summary.json").read_text()).get("sft_start") or {}
        if not rec.get("path"):
            return
        mine = {"key": rec["key"], "weights_sha256": start_digest(Path(rec["path"]))}
        kept = self.kept["seeds"].get(str(seed))
        if kept is None:
            self.kept["seeds"][str(seed)] = mine
            self.path.parent.mkdir(parents=True, exist_ok=True)
            self.path.write_text(json.dumps(self.kept, indent=2) + "\n")
        elif kept["weights_sha256"] != mine["weights_sha256"]:
            import shutil

            shutil.rmtree(run_dir)  # not kept beside its seed's runs from the other start
            raise SystemExit(
                f"this machine's shared start ({rec['path']}, weights sha256 {mine['weights_sha256'][:16]}) differs "
                f"from the one seed {seed}'s kept runs started from (sha256 {kept['weights_sha256'][:16]}, "
                f"{self.path}): finish seed {seed} on a machine that rebuilds that start (the same CPU kind, the "
                f"versions of constraints.txt, 2 threads), or delete seed {seed}'s runs (runs/*/seed{seed}) and its "
                "entry in start.json to run the whole seed again here")


ABOUT = ("What this budget can show, what it cannot, and why it is counted in RL steps: benchmarks/README.md, "
         "section `leaderboard.py`. The runs behind this page are kept in `benchmarks/leaderboard/board` (each "
         "run's config, metrics, held-out evaluations and summary; `start.json`: the start each seed began from).")


def page_of(out: Path) -> Path:
    """The page of a board: docs/leaderboard.md for the kept board, ``OUT/leaderboard.md`` for any other."""
    return ROOT / "docs" / "leaderboard.md" if Path(out).resolve() == (HERE / "board").resolve() \
        else Path(out) / "leaderboard.md"


def status_text(runs: dict, seeds: list[int]) -> str:
    """How far the board is: finished runs per seed, what a partial board's verdicts are worth, and how long the
    rest takes at the finished runs' mean wall time (each method's own mean where it has finished runs, since
    methods differ: a tree rollout takes several times GRPO's)."""
    finished = [r for rs in runs.values() for r in rs if r.seed in seeds and r.final is not None]
    done = {s: sum(1 for r in finished if r.seed == s) for s in seeds}
    total = len(runs) * len(seeds)
    n = sum(done.values())
    per_seed = ", ".join(f"seed {s}: {d} of {len(runs)}" for s, d in done.items())
    if n == total:
        return f"Status: complete, all {total} runs finished ({per_seed})."
    text = (f"Status: **in progress**, {n} of {total} runs finished ({per_seed}). Until every seed is in, a row "
            "stands on the seeds it has: its interval and the p over prompts show evaluation noise only, not the "
            "spread between training runs, so verdicts are provisional.")
    secs = [float(r.summary["rl_seconds"]) for r in finished if r.summary.get("rl_seconds")]
    if secs:
        overall = sum(secs) / len(secs)
        left = 0.0
        for rs in runs.values():
            own = [float(r.summary["rl_seconds"]) for r in rs if r.seed in seeds and r.final is not None
                   and r.summary.get("rl_seconds")]
            left += (len(seeds) - sum(1 for r in rs if r.seed in seeds and r.final is not None)) * \
                (sum(own) / len(own) if own else overall)
        text += (f" The {total - n} runs left take about {left / 3600:.1f} hours at the wall time of the finished "
                 f"runs (each method's mean, else {overall / 60:.1f} minutes, the mean of all).")
    return text


def compact(run_dir: Path, final_step: int) -> None:
    """Drop the per-prompt records of a finished run's intermediate evaluations: the page reads only their
    scores (the learning curves); the start's and the final evaluation keep theirs, answers included, for the
    paired tests and for anyone who re-checks the verdicts. A run's kept files are then about 300 KB, not 500."""
    from rlvr.eval.output import write_eval

    for f in sorted((run_dir / "eval").glob("step_*.json")):
        d = json.loads(f.read_text())
        if d.get("step") not in (0, final_step) and d.pop("per_prompt", None) is not None:
            write_eval(d, f)


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--methods", nargs="+", default=BASELINES + METHODS, help="recipes (the first is the baseline)")
    ap.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2])
    ap.add_argument("--out", type=Path, default=HERE / "board", help="the board's runs")
    ap.add_argument("--config", type=Path, default=HERE / "chains.yaml", help="the shared config")
    ap.add_argument("--claims", type=Path, default=HERE / "claims.yaml")
    ap.add_argument("--page", type=Path, default=None,
                    help="the page (default: docs/leaderboard.md for the kept board, OUT/leaderboard.md for another "
                         "--out, so a part of the board rerun elsewhere does not overwrite the kept page)")
    ap.add_argument("--set", dest="overrides", action="append", default=[], help="override for every run")
    ap.add_argument("--report-only", action="store_true", help="rewrite the page from the runs so far")
    args = ap.parse_args(argv)
    args.page = args.page or page_of(args.out)

    from rlvr.compare import make_variants, rewrite_report, run_compare
    from rlvr.compare.markdown import read_claims, write_page

    variants = make_variants(args.methods, None)
    if args.report_only:
        rewrite_report(variants, args.seeds, args.out, args.config, args.overrides)
    else:
        start = StartCheck(args.out / "start.json")

        def event(kind: str, name: str, seed: int, run_dir: Path) -> None:
            print(f"{kind} {name} seed {seed} ({run_dir})", flush=True)
            if kind == "done":
                start.check_run(run_dir, seed)
                compact(run_dir, json.loads((run_dir / "summary.json").read_text())["steps"])

        run_compare(variants, args.seeds, args.out, args.config, args.overrides, False, event)
    command = "python benchmarks/leaderboard.py" + "".join(f" {a}" for a in (argv if argv is not None else sys.argv[1:]))
    rows = write_page(args.page, args.out, variants, args.seeds, read_claims(args.claims), command, "Leaderboard",
                      lambda runs: status_text(runs, args.seeds) + "\n\n" + ABOUT)
    done = sum(1 for r in rows.values() if len(r["seeds"]) == len(args.seeds))
    print(f"{args.page}: {done} of {len(rows)} methods finished on every seed")


if __name__ == "__main__":
    main()

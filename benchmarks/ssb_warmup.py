"""SSB's warm-up against more plain SFT, from one supervised start on the demo task.

    python benchmarks/ssb_warmup.py --out runs/ssb                      # seeds 0, 1, 2; 200 steps each arm
    python benchmarks/ssb_warmup.py --out /tmp/ssb --seeds 0 --steps 50

Per seed: the demo's SFT warm-up (600 steps) gives the start; from it, ``--steps`` more steps of plain SFT on
the reference answers (``sft.method: targets``) and ``--steps`` steps of SSB (``sft.method: ssb``: 4 attempts
per problem on ``--problems`` training problems, the model's robust solution from its correct and most common
wrong attempt, distilled into the bare question; a short teacher template, since the tiny model's context is
128 positions). Printed: held-out avg@4 of the start and of each arm, the SSB rows curated, and each arm's
seconds.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from rlvr.config.run import load_config  # noqa: E402
from rlvr.run.train import run_sft  # noqa: E402

TEMPLATE = "{question}{correct}\n{incorrect}\n{question}"


def _sft(out: Path, seed: int, sets: list[str]) -> tuple[dict, float]:
    t0 = time.perf_counter()
    res = run_sft(load_config(None, [f"out={out}", f"seed={seed}", *sets]))
    return res, time.perf_counter() - t0


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", required=True)
    ap.add_argument("--seeds", default="0,1,2")
    ap.add_argument("--steps", type=int, default=200)
    ap.add_argument("--problems", type=int, default=512)
    args = ap.parse_args()
    out = Path(args.out)
    rows = []
    for seed in (int(s) for s in args.seeds.split(",")):
        start, _ = _sft(out / f"seed{seed}" / "start", seed, [])
        model = start["model_dir"]
        common = [f"model.path={model}", "defaults=demo", f"sft.steps={args.steps}", "sft.warmup_steps=0", "sft.lr=1e-3"]
        plain, t_plain = _sft(out / f"seed{seed}" / "plain", seed, common)
        ssb, t_ssb = _sft(out / f"seed{seed}" / "ssb", seed, common + [
            "sft.method=ssb", f"sft.ssb.max_problems={args.problems}", f"sft.ssb.template={json.dumps(TEMPLATE)}"])
        n_rows = sum(1 for _ in open(out / f"seed{seed}" / "ssb" / "ssb_data.jsonl"))
        rows.append((seed, start["eval"]["accuracy"], plain["eval"]["accuracy"], ssb["eval"]["accuracy"], n_rows,
                     t_plain, t_ssb))
    print(f"\n{'seed':>4} {'start':>7} {'+SFT':>7} {'+SSB':>7} {'SSB rows':>9} {'SFT s':>7} {'SSB s':>7}")
    for seed, a0, a1, a2, n, t1, t2 in rows:
        print(f"{seed:>4} {a0:7.3f} {a1:7.3f} {a2:7.3f} {n:9d} {t1:7.1f} {t2:7.1f}")


if __name__ == "__main__":
    main()

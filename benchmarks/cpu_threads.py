"""Step time of the demo's RL step by torch thread count and OpenMP wait policy, idle and with a busy core.

Each setting runs in its own process (OpenMP reads ``OMP_WAIT_POLICY`` once, when torch loads): the demo's
tiny model and step shape (32 prompts x 8 completions, 8 new tokens, 4 minibatches), 2 warm-up and
``--steps`` timed RL steps, the median printed. "busy" starts a pure-Python spinning process per
``--busy`` core beside it, as another job on a shared machine would. Ratios are against the idle run with
torch's default thread count, measured in the same invocation. "auto" is ``train.threads: null`` (rlvr's
choice from the cores other processes leave free).

    python benchmarks/cpu_threads.py                 # ~3 minutes on 2 cores
    python benchmarks/cpu_threads.py --steps 5 --busy 1
"""

from __future__ import annotations

import argparse
import json
import multiprocessing as mp
import os
import statistics
import subprocess
import sys
import time

WORKER = r"""
import json, sys, time
import torch
from rlvr.config.run import load_config
from rlvr.train.loop import rl_step
from rlvr.run.setup import build_components, prepare
threads, steps = int(sys.argv[1]), int(sys.argv[2])
over = [f"train.threads={threads}"] if threads else []  # 0: rlvr's auto choice
cfg = load_config(overrides=["sft.steps=0", "train.steps=100", "eval.num_examples=8"] + over)
p = prepare(cfg)
c = build_components(cfg, p.model, p.tokenizer, p.task, p.device)
times = []
for i in range(steps + 2):
    t0 = time.perf_counter()
    rl_step(cfg, c, i)
    times.append(time.perf_counter() - t0)
print(json.dumps({"threads": torch.get_num_threads(), "times": times[2:]}))
"""


def _spin(stop_at: float) -> None:
    x = 0
    while time.time() < stop_at:
        x += 1


def run(threads: int, policy: str | None, busy: int, steps: int) -> dict:
    env = {**os.environ}
    env.pop("OMP_WAIT_POLICY", None)
    if policy:
        env["OMP_WAIT_POLICY"] = policy
    spinners = [mp.Process(target=_spin, args=(time.time() + 600,)) for _ in range(busy)]
    for s in spinners:
        s.start()
    try:
        out = subprocess.run([sys.executable, "-c", WORKER, str(threads), str(steps)], env=env,
                             capture_output=True, text=True, check=True, timeout=1200)
    finally:
        for s in spinners:
            s.terminate()
            s.join()
    res = json.loads(out.stdout.strip().splitlines()[-1])
    return {"threads": res["threads"] if threads else f"auto ({res['threads']})", "policy": policy or "default", "busy": busy,
            "median_s": statistics.median(res["times"])}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--steps", type=int, default=6)
    ap.add_argument("--busy", type=int, default=1, help="spinning processes in the busy runs")
    args = ap.parse_args()
    cores = os.cpu_count() or 1
    settings = [(t, pol) for t in sorted({1, cores}) for pol in (None, "PASSIVE")] + [(0, None)]
    rows = []
    for busy in (0, args.busy):
        for threads, policy in settings:
            rows.append(run(threads, policy, busy, args.steps))
            print(json.dumps(rows[-1]), flush=True)
    base = next(r["median_s"] for r in rows if r["threads"] == cores and r["policy"] == "default" and r["busy"] == 0)
    print(f"\n{cores} cores; ratio = median step time / idle {cores}-thread default policy ({base:.2f} s)\n")
    print("| threads | OMP_WAIT_POLICY | busy cores | s/step | ratio |\n|---|---|---|---|---|")
    for r in rows:
        print(f"| {r['threads']} | {r['policy']} | {r['busy']} | {r['median_s']:.2f} | {r['median_s'] / base:.2f} |")


if __name__ == "__main__":
    main()

"""PromptStats at scale: memory per prompt, one step's update, and a checkpoint's save and load.

    python benchmarks/prompt_stats.py [--prompts 1000000] [--batch 512] [--group 16]

Fills the table with ``--prompts`` distinct prompts (one update per batch of prompts), then times a
training step's update (``--batch`` prompts x ``--group`` completions), ``state_dict`` -> ``json.dumps``
(as ``state.json`` is written, ``indent=1``) and ``json.loads`` -> ``load_state_dict``. Memory is the growth
of the process's traced allocations (tracemalloc) while filling.
"""

from __future__ import annotations

import argparse
import json
import time
import tracemalloc

import numpy as np

from rlvr.sampling import PromptStats


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--prompts", type=int, default=1_000_000)
    ap.add_argument("--batch", type=int, default=512)
    ap.add_argument("--group", type=int, default=16)
    a = ap.parse_args()
    rng = np.random.default_rng(0)
    ids = [f"dataset-{i:08d}" for i in range(a.prompts)]
    tracemalloc.start()
    base = tracemalloc.get_traced_memory()[0]
    stats = PromptStats()
    t0 = time.perf_counter()
    chunk = 4096
    for start in range(0, a.prompts, chunk):
        part = ids[start: start + chunk]
        rep = [i for i in part for _ in range(2)]
        stats.update(rep, rng.integers(0, 2, size=len(rep)).tolist(), 0, domains=["d"] * len(rep))
    fill = time.perf_counter() - t0
    mem = tracemalloc.get_traced_memory()[0] - base
    tracemalloc.stop()

    times = []
    for step in range(20):
        chosen = rng.choice(a.prompts, size=a.batch, replace=False)
        batch = [ids[i] for i in chosen for _ in range(a.group)]
        correct = rng.integers(0, 2, size=len(batch)).tolist()
        t = time.perf_counter()
        stats.update(batch, correct, step + 1, rewards=correct, domains=["d"] * len(batch))
        times.append(time.perf_counter() - t)

    t = time.perf_counter()
    text = json.dumps(stats.state_dict(), indent=1)
    save = time.perf_counter() - t
    t = time.perf_counter()
    back = PromptStats()
    back.load_state_dict(json.loads(text))
    load = time.perf_counter() - t
    assert back.ids == stats.ids and np.array_equal(back.column("ema_pass"), stats.column("ema_pass"))

    print(f"prompts                    {a.prompts:,}")
    print(f"memory (table + index)     {mem / 2**20:.1f} MiB  ({mem / a.prompts:.0f} B/prompt; the id strings "
          f"are the examples' own and not counted)")
    print(f"fill ({a.prompts:,} new rows)   {fill:.2f} s")
    print(f"update ({a.batch} x {a.group} completions)  median {np.median(times) * 1e3:.1f} ms, "
          f"max {max(times) * 1e3:.1f} ms")
    print(f"state.json size            {len(text) / 2**20:.1f} MiB")
    print(f"save (state_dict + dumps)  {save:.2f} s")
    print(f"load (loads + load_state)  {load:.2f} s")


if __name__ == "__main__":
    main()

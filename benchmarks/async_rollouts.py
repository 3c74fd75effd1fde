"""Steps per second of synchronous vs asynchronous (``rollout.max_staleness``) training on CPU.

A workload where generation and update take comparable time: a 256-wide, 4-layer tiny model, 8 prompts x
8 completions of 24 new tokens, one optimizer step per RL step. Each setting runs in its own process
(thread counts are per process): ``train.steps`` RL steps through ``rlvr.train.run.train`` with no SFT and
no checkpoints before the end, timed by the RL phase's own clock (``rl_seconds``). Ratios are against the
synchronous run with 2 threads, measured in the same invocation.

With ``max_staleness = 1`` the producer thread generates step k+1 while the trainer updates step k. Each
side runs its torch ops on ``train.threads`` threads, so ``async, 1 thread`` keeps the two cores busy
with one thread each, where the synchronous run alternates generation and update on both. Both sides are
threads of one Python process there, so they also take turns holding its interpreter lock; ``async, Ray
worker`` (the ``ray`` extra; left out with ``--no-ray`` or when Ray is not installed) generates in a Ray
actor process on one CPU (``rollout.engine: ray``, ``hf`` inside it, weights sent after each snapshot)
while the trainer's process updates on one thread.

    python benchmarks/async_rollouts.py             # ~4 minutes on 2 cores
    python benchmarks/async_rollouts.py --steps 10
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import subprocess
import sys
import tempfile
from pathlib import Path

WORKER = r"""
import json, sys
from rlvr.config import load_config
from rlvr.train.run import train
out, steps, threads, stale = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4])
extra = json.loads(sys.argv[5])
cfg = load_config(overrides=[
    f"out={out}", "sft.steps=0", f"train.steps={steps}", "train.eval_every=0", "train.checkpoint_every=0",
    "eval.num_examples=4", "eval.samples=1", "eval.report_greedy=false", f"train.threads={threads}",
    "algorithm.minibatches=1", "train.micro_batch_size=64", f"rollout.max_staleness={stale}",
    "algorithm.correction.name=tis"] + extra)
s = train(cfg)
m = [json.loads(l) for l in open(f"{out}/metrics.jsonl")]
tail = m[2:]  # past warm-up
print(json.dumps({"rl_seconds": s["rl_seconds"], "steps": steps,
                  "rollout": sum(x["time/rollout"] + x["time/score"] for x in tail) / len(tail),
                  "update": sum(x["time/update"] for x in tail) / len(tail),
                  "step": sum(x["time/step"] for x in tail) / len(tail),
                  "reward": sum(x["reward"] for x in m) / len(m)}))
"""


WORKLOAD = ["model.tiny.hidden_size=256", "model.tiny.intermediate_size=512", "model.tiny.num_layers=4",
            "rollout.prompts_per_step=8", "rollout.group_size=8", "rollout.max_new_tokens=24"]


REWARD = """import time
def score(prompts, completions, answer, **kw):
    time.sleep({latency})  # a remote judge's or a sandbox's wall-clock latency: no CPU used
    return [sum(ch in c for ch in a) / len(a) for c, a in zip(completions, answer)]
"""


def judge_task(d: Path, latency: float) -> list[str]:
    """A JSONL task whose reward function waits ``latency`` seconds per step's batch (partial credit)."""
    data = d / "data.jsonl"
    words = [f"{a}{b}" for a in "abcdefgh" for b in "ijklmnop"]
    data.write_text("".join(json.dumps({"prompt": f"say {w}:", "answer": w}) + "\n" for w in words))
    (d / "judge.py").write_text(REWARD.format(latency=latency))
    return ["task.name=jsonl", f"task.train_path={data}", "task.eval_fraction=0.1", f"task.verifier={d / 'judge.py'}:score"]


def run(steps: int, threads: int, stale: int, extra: list[str], latency: float = 0.0) -> dict:
    with tempfile.TemporaryDirectory() as d:
        if latency:
            extra = judge_task(Path(d), latency) + extra
        out = subprocess.run([sys.executable, "-c", WORKER, str(Path(d) / "run"), str(steps), str(threads),
                              str(stale), json.dumps(extra)], capture_output=True, text=True, check=True)
    return json.loads(out.stdout.strip().splitlines()[-1])


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--steps", type=int, default=12)
    ap.add_argument("--set", action="append", default=[], help="config overrides of the workload")
    ap.add_argument("--judge-latency", type=float, default=0.0,
                    help="seconds the reward function waits per step (a remote judge, a sandbox); 0: the demo task")
    ap.add_argument("--no-ray", action="store_true", help="leave out the setting with a Ray rollout worker")
    args = ap.parse_args()
    workload = WORKLOAD + args.set
    ray = ["rollout.engine=ray", "rollout.ray.engine=hf", "rollout.ray.num_cpus=1"]
    settings = [("sync, 2 threads", 2, 0, []), ("sync, 1 thread", 1, 0, []), ("async s=1, 1 thread", 1, 1, []),
                ("async s=1, 2 threads", 2, 1, [])]
    if not args.no_ray and importlib.util.find_spec("ray") is not None:
        settings.append(("async s=1, Ray worker", 1, 1, ray))
    rows = []
    for name, threads, stale, extra in settings:
        r = run(args.steps, threads, stale, workload + extra, args.judge_latency)
        rows.append((name, r))
        print(f"{name:24s} {r['steps'] / r['rl_seconds']:.3f} steps/s  (rollout+score {r['rollout']:.2f} s, "
              f"update {r['update']:.2f} s, step {r['step']:.2f} s, mean reward {r['reward']:.3f})", flush=True)
    base = rows[0][1]["steps"] / rows[0][1]["rl_seconds"]
    print("\nsteps/s relative to sync, 2 threads:")
    for name, r in rows:
        print(f"  {name:24s} {r['steps'] / r['rl_seconds'] / base:.2f}x")


if __name__ == "__main__":
    main()

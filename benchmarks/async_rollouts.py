"""Steps per second of synchronous vs asynchronous (``rollout.max_staleness``) training on CPU.

The model: a 256-wide, 4-layer tiny model, 8 prompts x 8 completions of 24 new tokens, one optimizer step
per RL step. Two workloads: ``--workload judge`` (the default), a JSONL task whose reward function waits
``--judge-latency`` seconds per step (a remote judge or sandbox: wall time without local CPU), with 2 update
epochs, so that the rollout phase (generation + judge) and the update take about the same time; and
``--workload compute``, the demo task with both phases on the CPU. Each setting runs in its own process
(thread counts are per process): ``train.steps`` RL steps through ``rlvr.run.train.train`` with no SFT and
no checkpoints before the end, timed by the RL phase's own clock (``rl_seconds``).

The settings: the synchronous run on 2 threads (the baseline) and on 1; with ``max_staleness = s`` (the
producer thread generates step k+1 while the trainer updates step k) the trainer and the producer on 1
thread each, on 2 each, and the trainer on 2 with the producer on 1 (``rollout.producer_threads=1``); and
``async, Ray worker`` (with ``--ray``, when the ``ray`` extra is installed), which generates in a Ray actor
process on one CPU (``rollout.engine: ray``, ``hf`` inside it) while the trainer's process updates on one
thread. In-process, both sides are threads of one Python process, so they also take turns holding its
interpreter lock.

A 2-core VM's speed drifts by a third within minutes, so the settings run in ``--rounds`` interleaved
rounds (every setting once per round, in order) and each ratio is taken against the synchronous run of its
own round; the median and range of those paired ratios are printed. Every setting runs with
``OMP_WAIT_POLICY=PASSIVE`` (waiting OpenMP threads sleep instead of spinning, which matters when the
producer's and the trainer's thread pools share the cores; ``--omp-spin`` for OpenMP's default).

    python benchmarks/async_rollouts.py                                   # the judge workload, ~8 minutes
    python benchmarks/async_rollouts.py --workload compute --no-one-thread   # CPU-bound both sides
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import os
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

WORKER = r"""
import json, sys
from rlvr.config.run import load_config
from rlvr.run.train import train
out, steps, threads, stale = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4])
extra, skip = json.loads(sys.argv[5]), int(sys.argv[6])
cfg = load_config(overrides=[
    f"out={out}", "sft.steps=0", f"train.steps={steps}", "train.eval_every=0", "train.checkpoint_every=0",
    "eval.num_examples=4", "eval.samples=1", "eval.report_greedy=false", f"train.threads={threads}",
    "algorithm.minibatches=1", "train.micro_batch_size=64", f"rollout.max_staleness={stale}",
    "algorithm.correction.name=tis"] + extra)
s = train(cfg)
m = [json.loads(l) for l in open(f"{out}/metrics.jsonl")]
tail = m[skip:]  # past warm-up and the pipeline's first step
print(json.dumps({"rl_seconds": s["rl_seconds"], "steps": steps,
                  "rollout": sum(x["time/rollout"] + x["time/score"] for x in tail) / len(tail),
                  "update": sum(x["time/update"] for x in tail) / len(tail),
                  "step": sum(x["time/step"] for x in tail) / len(tail),
                  "reward": sum(x["reward"] for x in m) / len(m)}))
"""


SKIP = 2  # steps left out of the steady-state step time: warm-up, and the asynchronous pipeline's first step

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


def run(steps: int, threads: int, stale: int, extra: list[str], latency: float = 0.0, passive: bool = False) -> dict:
    env = {k: v for k, v in os.environ.items() if k != "OMP_WAIT_POLICY"}
    if passive:
        env["OMP_WAIT_POLICY"] = "PASSIVE"
    with tempfile.TemporaryDirectory() as d:
        if latency:
            extra = judge_task(Path(d), latency) + extra
        out = subprocess.run([sys.executable, "-c", WORKER, str(Path(d) / "run"), str(steps), str(threads),
                              str(stale), json.dumps(extra), str(SKIP)],
                             capture_output=True, text=True, check=True, env=env)
    return json.loads(out.stdout.strip().splitlines()[-1])


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--steps", type=int, default=20)
    ap.add_argument("--set", action="append", default=[], help="config overrides of the workload")
    ap.add_argument("--workload", choices=("judge", "compute"), default="judge",
                    help="judge: a JSONL task whose reward waits --judge-latency s per step, 2 update epochs (rollout "
                         "phase ~ update); compute: the demo task, both phases on the CPU")
    ap.add_argument("--judge-latency", type=float, default=0.5, help="seconds the judge waits per step")
    ap.add_argument("--ray", action="store_true", help="add the setting with a Ray rollout worker (the ray extra)")
    ap.add_argument("--rounds", type=int, default=3, help="interleaved rounds of every setting (paired ratios)")
    ap.add_argument("--omp-spin", action="store_true",
                    help="OpenMP's default spin-waiting instead of OMP_WAIT_POLICY=PASSIVE in every setting")
    ap.add_argument("--staleness", type=int, nargs="+", default=[1], help="rollout.max_staleness of the async settings")
    ap.add_argument("--no-one-thread", action="store_true", help="leave out the 1-thread settings")
    args = ap.parse_args()
    judge = args.workload == "judge"
    latency = args.judge_latency if judge else 0.0
    passive = not args.omp_spin
    workload = WORKLOAD + (["algorithm.epochs=2"] if judge else []) + args.set
    ray = ["rollout.engine=ray", "rollout.ray.engine=hf", "rollout.ray.num_cpus=1"]
    settings = [("sync, 2 threads", 2, 0, [])] + ([] if args.no_one_thread else [("sync, 1 thread", 1, 0, [])])
    for s in args.staleness:
        settings += [] if args.no_one_thread else [(f"async s={s}, 1 thread", 1, s, [])]
        settings.append((f"async s={s}, 2 threads", 2, s, []))
        settings.append((f"async s={s}, 2 + producer 1", 2, s, ["rollout.producer_threads=1"]))
        if args.ray and importlib.util.find_spec("ray") is not None:
            settings.append((f"async s={s}, Ray worker", 1, s, ray))
    ratios: dict[str, list[float]] = {name: [] for name, *_ in settings}
    steady: dict[str, list[float]] = {name: [] for name, *_ in settings}
    for k in range(args.rounds):
        base = None
        for name, threads, stale, extra in settings:
            r = run(args.steps, threads, stale, workload + extra, latency, passive)
            rate = r["steps"] / r["rl_seconds"]
            base = (rate, r["step"]) if base is None else base
            ratios[name].append(rate / base[0])
            steady[name].append(base[1] / r["step"])
            print(f"round {k + 1} {name:26s} {rate:.3f} steps/s = {rate / base[0]:.2f}x, steady step "
                  f"{base[1] / r['step']:.2f}x  (rollout+score {r['rollout']:.2f} s, update {r['update']:.2f} s, "
                  f"step {r['step']:.2f} s, mean reward {r['reward']:.3f})", flush=True)
    print(f"\nrelative to sync, 2 threads, in the same round (median [min, max] of {args.rounds} rounds): steps/s over "
          f"the whole run (the pipeline's first step included) | mean step time past the first {SKIP} steps")
    for name in ratios:
        xs, ys = ratios[name], steady[name]
        print(f"  {name:26s} {statistics.median(xs):.2f}x [{min(xs):.2f}, {max(xs):.2f}] | "
              f"{statistics.median(ys):.2f}x [{min(ys):.2f}, {max(ys):.2f}]")


if __name__ == "__main__":
    main()

"""A real-size rehearsal on the CPU: a Qwen2.5-0.5B-shaped model (494M parameters, its real vocabulary of 151,936;
random weights written locally) trains RL steps with bfloat16 autocast and activation checkpointing, saves a
checkpoint, resumes from it, and its peak memory is set beside ``rlvr plan``'s.

    python benchmarks/rehearsal.py                          # the hf engine
    python benchmarks/rehearsal.py --engine native
    .venv-vllm/bin/python benchmarks/rehearsal.py --engine vllm    # vLLM's CPU build (scripts/setup.sh vllm)

Two processes, as a user would run them: ``rlvr train`` for ``--steps`` steps with a checkpoint after each,
then ``rlvr train --resume`` for one step more. Each prints its seconds, its peak resident memory
(``summary.json``: ``peak_memory_mb``), the plan's peak and their ratio; the resumed run must start from the
checkpoint's step and write the next one. Nothing is downloaded. The figures are in ``benchmarks/README.md``.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "benchmarks"))

from plan_memory import overrides, write_model, write_task  # noqa: E402

SHAPE = "qwen2-0.5b"
VOCAB = 151936


def settings(model: Path, data: Path, out: Path, args) -> list[str]:
    extra = ["train.autocast=bfloat16", "train.activation_checkpointing=true", f"rollout.engine={args.engine}"]
    if args.engine == "vllm":
        extra += ["rollout.vllm.kv_cache_gib=1", "rollout.vllm.max_model_len=256"]
    return overrides(model, data, out, args, extra, steps=args.steps, checkpoint_every=1)


def run(cmd: list[str]) -> float:
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    t0 = time.perf_counter()
    proc = subprocess.run(cmd, capture_output=True, text=True, env=env)
    if proc.returncode:
        raise RuntimeError(f"{' '.join(cmd[:4])} ... failed:\n{proc.stdout[-2000:]}\n{proc.stderr[-4000:]}")
    return time.perf_counter() - t0


def rehearse(args, tmp: Path) -> dict:
    from rlvr.config.run import load_config
    from rlvr.models.shape import model_shape
    from rlvr.run.plan import GIB, plan_memory

    model, data, out = tmp / "model", tmp / "task.jsonl", tmp / "run"
    if not model.is_dir():
        write_model(SHAPE, model)
        write_task(data, args.prompt_words, VOCAB)
    sets = settings(model, data, out, args)
    first = run([sys.executable, "-m", "rlvr", "train", *[x for s in sets for x in ("--set", s)]])
    s1 = json.loads((out / "summary.json").read_text())
    ckpts = sorted(p.name for p in (out / "checkpoints").iterdir())
    second = run([sys.executable, "-m", "rlvr", "train", "--resume", str(out), "--set",
                  f"train.steps={args.steps + 1}"])
    s2 = json.loads((out / "summary.json").read_text())
    steps = [json.loads(x)["step"] for x in (out / "metrics.jsonl").read_text().splitlines()]
    resumed = sorted(p.name for p in (out / "checkpoints").iterdir())
    cfg = load_config(overrides=sets)
    shape = model_shape(cfg.model)
    gpu = s1.get("peak_gpu_memory_mb")  # torch's allocator only: vLLM's own pool (sleep mode) is not in it
    plan = plan_memory(cfg, device="cuda" if gpu is not None else "cpu", prompt_tokens=args.prompt_words,
                       shape=shape)
    out = {"device": plan.device}
    if gpu is not None:
        out.update({"peak_gpu_torch_gib": round(gpu / 1024, 3), "plan_update_gib": round(plan.total("update") / GIB, 3),
                    "plan_update_over_peak": round(plan.total("update") / (gpu * 2**20), 3)})
    return {**out, "engine": args.engine, "params": shape.params, "vocab": shape.vocab,
            "first_run_s": round(first, 1), "resumed_run_s": round(second, 1),
            "peak_gib": round(s1["peak_memory_mb"] / 1024, 3), "resumed_peak_gib": round(s2["peak_memory_mb"] / 1024, 3),
            "plan_gib": round(plan.peak / GIB, 3), "plan_over_peak": round(plan.peak / (s1["peak_memory_mb"] * 2**20), 3),
            "checkpoints_after_first": ckpts, "checkpoints_after_resume": resumed, "steps_logged": steps,
            "plan": {p.name: round(max(p.during(ph) for ph in ("generation", "passes", "update")) / GIB, 3)
                     for p in plan.parts}}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--engine", default="hf", choices=["hf", "native", "vllm"])
    ap.add_argument("--steps", type=int, default=2, help="steps before the resume (one more after it)")
    ap.add_argument("--prompts", type=int, default=2)
    ap.add_argument("--group", type=int, default=4)
    ap.add_argument("--new-tokens", type=int, default=32)
    ap.add_argument("--prompt-words", type=int, default=32)
    ap.add_argument("--micro", type=int, default=8)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--set", action="append", default=[], help="more config overrides (key=value)")
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as d:
        print(json.dumps(rehearse(args, Path(d)), indent=1), flush=True)


if __name__ == "__main__":
    main()

"""``rlvr plan`` against the measured peak memory of real runs on the CPU, for several model shapes.

    python benchmarks/plan_memory.py                       # every shape, each run in its own process
    python benchmarks/plan_memory.py --shapes s256 s512    # some of them
    python benchmarks/plan_memory.py --shapes s512 --variants base checkpointing autocast-bf16

For each shape it writes a random-initialised Qwen2 model directory (float32) with a word-level tokenizer of
the shape's vocabulary, and a JSONL task whose prompts are ``--prompt-words`` words long; runs ``rlvr train``
for two RL steps (no warm-up, the hf engine, checkpoints at the end) in a fresh process; and prints the peak
resident memory the run reports (``summary.json``: ``peak_memory_mb``, the process's ru_maxrss) beside the
plan's peak for the same config, and their ratio. Nothing is downloaded.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "benchmarks"))

from vllm_engine import word_tokenizer  # noqa: E402  (the benchmarks' word-level tokenizer)

SHAPES = {  # Qwen2 shapes: the last is Qwen2-0.5B's own (hidden 896, 24 layers, vocab 151936, tied)
    "s256": dict(hidden_size=256, num_hidden_layers=4, num_attention_heads=4, num_key_value_heads=2,
                 intermediate_size=1024, vocab_size=32000),
    "s512": dict(hidden_size=512, num_hidden_layers=8, num_attention_heads=8, num_key_value_heads=2,
                 intermediate_size=2048, vocab_size=32000),
    "qwen2-0.5b": dict(hidden_size=896, num_hidden_layers=24, num_attention_heads=14, num_key_value_heads=2,
                       intermediate_size=4864, vocab_size=151936),
}


def write_model(shape: str, where: Path) -> None:
    import torch
    from transformers import Qwen2Config, Qwen2ForCausalLM

    tok = word_tokenizer(SHAPES[shape]["vocab_size"])
    cfg = Qwen2Config(**SHAPES[shape], max_position_embeddings=1024, tie_word_embeddings=True, pad_token_id=0,
                      eos_token_id=1, bos_token_id=1)
    torch.manual_seed(0)
    Qwen2ForCausalLM(cfg).save_pretrained(where, safe_serialization=True)
    tok.save_pretrained(where)


def write_task(where: Path, words: int, vocab: int, n: int = 64) -> None:
    import random

    rng = random.Random(0)
    with open(where, "w") as f:
        for i in range(n):
            prompt = " ".join(f"w{rng.randrange(3, vocab)}" for _ in range(words))
            f.write(json.dumps({"prompt": prompt, "answer": f"w{rng.randrange(3, vocab)}", "id": str(i)}) + "\n")


def overrides(model: Path, data: Path, out: Path, args, extra: tuple[str, ...] | list[str] = (), steps: int = 2,
              checkpoint_every: int = 0) -> list[str]:
    """The run's settings: the model and task written here, the arguments' sizes, then ``extra``, then ``--set``."""
    return [f"model.path={model}", "task.name=jsonl", f"task.train_path={data}", "task.verifier=exact",
            "task.eval_fraction=0.1", "sft.steps=0", f"train.steps={steps}",
            f"train.checkpoint_every={checkpoint_every}",
            "train.eval_every=0", f"train.threads={args.threads}", f"rollout.prompts_per_step={args.prompts}",
            f"rollout.group_size={args.group}", f"rollout.max_new_tokens={args.new_tokens}",
            f"rollout.batch_size={args.prompts * args.group}", "algorithm.minibatches=1",
            f"train.micro_batch_size={args.micro}", "eval.num_examples=2", "eval.samples=1",
            "eval.report_greedy=false", "eval.batch_size=8", "model.dtype=float32", f"out={out}",
            *extra, *args.set]


VARIANTS = {  # name -> (config overrides, argument changes); "base" is the arguments as given
    "base": ([], {}),
    "checkpointing": (["train.activation_checkpointing=true"], {}),
    "no-shared-prefix": (["train.shared_prefix=false"], {}),
    "autocast-bf16": (["train.autocast=bfloat16"], {}),
    "long-completions": ([], {"new_tokens": 128}),
    "groups-of-8": ([], {"group": 8, "prompts": 2, "micro": 8}),
}


def run_shape(shape: str, args, tmp: Path, variant: str = "base") -> dict:
    from rlvr.config.run import load_config
    from rlvr.models.shape import model_shape
    from rlvr.run.plan import plan_memory

    model, data = tmp / f"{shape}-model", tmp / f"{shape}.jsonl"
    if not model.is_dir():
        write_model(shape, model)
        write_task(data, args.prompt_words, SHAPES[shape]["vocab_size"])
    extra, changes = VARIANTS[variant]
    args = argparse.Namespace(**{**vars(args), **changes, "set": [*args.set, *extra]})
    out = tmp / f"{shape}-{variant}-run"
    sets = overrides(model, data, out, args)
    cmd = [sys.executable, "-m", "rlvr", "train", *[x for s in sets for x in ("--set", s)]]
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    proc = subprocess.run(cmd, capture_output=True, text=True, env=env)
    if proc.returncode:
        raise RuntimeError(proc.stderr[-3000:])
    measured = json.loads((out / "summary.json").read_text())["peak_memory_mb"] * 2**20
    cfg = load_config(overrides=sets)
    plan = plan_memory(cfg, device="cpu", prompt_tokens=args.prompt_words, shape=model_shape(cfg.model))
    return {"shape": shape, "variant": variant, "params": model_shape(cfg.model).params, "measured_gib": measured / 2**30,
            "plan_gib": plan.peak / 2**30, "ratio": plan.peak / measured,
            "plan": {p.name: round(max(p.update, p.generation) / 2**30, 3) for p in plan.parts}}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--shapes", nargs="*", default=list(SHAPES), choices=sorted(SHAPES))
    ap.add_argument("--prompts", type=int, default=4)
    ap.add_argument("--group", type=int, default=4)
    ap.add_argument("--new-tokens", type=int, default=64)
    ap.add_argument("--prompt-words", type=int, default=64)
    ap.add_argument("--micro", type=int, default=16)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--variants", nargs="*", default=["base"], choices=list(VARIANTS),
                    help="settings to run each shape with (base: the arguments as given)")
    ap.add_argument("--set", action="append", default=[], help="more config overrides (key=value)")
    args = ap.parse_args()
    rows = []
    with tempfile.TemporaryDirectory() as d:
        for shape in args.shapes:
            for variant in args.variants:
                r = run_shape(shape, args, Path(d), variant)
                rows.append(r)
                print(json.dumps(r), flush=True)
    print(f"\n{'shape':<12}{'variant':<18}{'params':>12}{'measured GiB':>14}{'plan GiB':>10}{'plan/measured':>15}")
    for r in rows:
        print(f"{r['shape']:<12}{r['variant']:<18}{r['params']:>12,}{r['measured_gib']:>14.3f}{r['plan_gib']:>10.3f}"
              f"{r['ratio']:>15.3f}")


if __name__ == "__main__":
    main()

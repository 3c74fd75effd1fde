"""Where an RL step's time goes on one device, with the update under FSDP2: tokens/s and model FLOPs utilisation.

Prepared for a GPU (a few minutes); ``--shape tiny --device cpu`` runs the same code as a smoke test. Nothing
is downloaded: a random-initialised Qwen2 of the chosen shape (``qwen2-0.5b``: Qwen2-0.5B's config, 494M
parameters, float32 master weights) and a word-level tokenizer of its vocabulary (``vllm_engine.py``'s).

One process joins a one-rank process group and shards the model exactly as ``train.distributed.strategy:
fsdp`` does (``rlvr.distributed.fsdp.shard``: decoder layers, then the log-prob root). On a synthetic batch of
``--rows`` completions (``--prompt-tokens`` + ``--tokens`` each, random ids) it times, medians of
``--steps`` after a warm-up:

1. **generate**: the configured engine on the same number of sequences (``--engine hf``, or ``vllm`` when
   installed: rlvr's ``VLLMEngine`` with its weight push), tokens/s of new tokens;
2. **logprob pass**: ``batch_logprobs`` on gathered weights (the old / reference log-prob pass);
3. **update**: ``update_policy`` through the FSDP2 module (forward, backward, reduce-scatter, AdamW),
   with ``train.autocast`` / ``train.activation_checkpointing`` as given.

Tokens/s counts every position the update processes (rows x (prompt + completion)); model FLOPs are
``6 x parameters x tokens`` for the update and ``2 x`` for the logprob pass (the attention term is left out,
so MFU is slightly understated at long contexts); MFU divides by ``--peak-tflops`` (989: an H100/H200's
dense bf16).

    python benchmarks/fsdp_update.py                                  # GPU, qwen2-0.5b, 64 x (128 + 512), bf16
    python benchmarks/fsdp_update.py --engine vllm --checkpointing
    python benchmarks/fsdp_update.py --shape tiny --device cpu --autocast none --rows 8 --tokens 16
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import time
from dataclasses import replace
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parent))
from vllm_engine import SHAPES, build_model, word_tokenizer  # noqa: E402


def synced(fn, device: str):
    if device.startswith("cuda"):
        torch.cuda.synchronize()
    t0 = time.perf_counter()
    out = fn()
    if device.startswith("cuda"):
        torch.cuda.synchronize()
    return out, time.perf_counter() - t0


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--shape", choices=sorted(SHAPES), default="qwen2-0.5b")
    ap.add_argument("--device", default="cuda")
    ap.add_argument("--rows", type=int, default=64)
    ap.add_argument("--prompt-tokens", type=int, default=128)
    ap.add_argument("--tokens", type=int, default=512)
    ap.add_argument("--micro-batch", type=int, default=8)
    ap.add_argument("--steps", type=int, default=3)
    ap.add_argument("--autocast", default="bfloat16", choices=["bfloat16", "float16", "none"])
    ap.add_argument("--checkpointing", action="store_true")
    ap.add_argument("--engine", default="hf", choices=["hf", "vllm", "none"])
    ap.add_argument("--peak-tflops", type=float, default=989.0)
    args = ap.parse_args()

    import torch.distributed as dist

    from rlvr.config.run import load_config
    from rlvr.core.batch import build_batch
    from rlvr.core.types import Completion
    from rlvr.models.logprobs import CompletionLogprobs
    from rlvr.distributed.fsdp import full_weights, shard
    from rlvr.train.loop import settings
    from rlvr.models.logprobs import batch_logprobs, pass_args
    from rlvr.train.update import update_policy

    os.environ.setdefault("MASTER_ADDR", "127.0.0.1")
    os.environ.setdefault("MASTER_PORT", "29517")
    dist.init_process_group("nccl" if args.device.startswith("cuda") else "gloo", rank=0, world_size=1)
    tok = word_tokenizer(SHAPES[args.shape]["vocab_size"])
    model = build_model(args.shape, args.device, torch.float32, tok)
    n_params = sum(p.numel() for p in model.parameters())
    root = shard(CompletionLogprobs(model))
    cfg = load_config(overrides=[f"train.micro_batch_size={args.micro_batch}", "algorithm.minibatches=1",
                                 f"train.activation_checkpointing={str(args.checkpointing).lower()}",
                                 "optim.optimizer.name=adamw", "optim.lr=1e-6"] +
                      ([] if args.autocast == "none" else [f"train.autocast={args.autocast}"]))
    s = settings(cfg)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-6)
    sched = torch.optim.lr_scheduler.LambdaLR(opt, lambda i: 1.0)
    g = torch.Generator().manual_seed(0)
    vocab = SHAPES[args.shape]["vocab_size"]
    comps = [Completion(str(i // 8), torch.randint(3, vocab, (args.prompt_tokens,), generator=g).tolist(),
                        torch.randint(3, vocab, (args.tokens,), generator=g).tolist(), None, "length", "", i // 8)
             for i in range(args.rows)]
    batch = build_batch(comps, [float(i % 2) for i in range(args.rows)], tok.pad_token_id).to(args.device)
    batch = replace(batch, advantages=torch.randn(args.rows, 1, device=args.device) * batch.completion_mask)

    engine = None
    if args.engine != "none":
        from rlvr.engines.base import ENGINES
        import rlvr.rollout  # noqa: F401

        engine = ENGINES.get(args.engine).fn(model, tok, batch_size=args.rows, rollout=cfg.rollout, seed=0)
    times: dict[str, list[float]] = {"generate": [], "logprob pass": [], "update": []}
    new_tokens = 0
    for step in range(args.steps + 1):
        if engine is not None:
            from rlvr.core.types import Example, GenerationRequest, SamplingParams

            reqs = [GenerationRequest(Example(str(i), " ".join(f"w{3 + (i * 7 + j) % (vocab - 3)}"
                                                               for j in range(args.prompt_tokens)), ""), 8)
                    for i in range(args.rows // 8)]
            with full_weights(root):
                engine.sync_weights()
                out, dt = synced(lambda: engine.generate(reqs, SamplingParams(1.0, 1.0, args.tokens, seed=step)),
                                 args.device)
            new_tokens = sum(len(c) for c in out)
            times["generate"].append(dt)
        with full_weights(root):
            _, dt = synced(lambda: batch_logprobs(model, batch, **pass_args(s)), args.device)
        times["logprob pass"].append(dt)
        _, dt = synced(lambda: update_policy(model, opt, sched, batch, s, module=root), args.device)
        times["update"].append(dt)
    med = {k: statistics.median(v[1:]) for k, v in times.items() if v}
    positions = args.rows * (args.prompt_tokens + args.tokens)
    peak = args.peak_tflops * 1e12
    result = {
        "shape": args.shape, "parameters": n_params, "rows": args.rows, "prompt_tokens": args.prompt_tokens,
        "completion_tokens": args.tokens, "autocast": args.autocast, "checkpointing": args.checkpointing,
        "seconds": med, "share_of_step": {k: v / sum(med.values()) for k, v in med.items()},
        "update_tokens_per_s": positions / med["update"],
        "update_mfu": 6 * n_params * positions / med["update"] / peak,
        "logprob_pass_mfu": 2 * n_params * positions / med["logprob pass"] / peak,
        "generate_new_tokens_per_s": new_tokens / med["generate"] if "generate" in med else None,
        "peak_gpu_memory_gib": torch.cuda.max_memory_allocated() / 2**30 if torch.cuda.is_available() else None,
    }
    print(json.dumps(result, indent=2))
    dist.destroy_process_group()


if __name__ == "__main__":
    main()

"""Generation-only speed of the ``hf``, ``native`` (eager and compiled) and (when installed) ``vllm`` rollout engines.

Both engines get the same model object, the same requests and the same seed, and are timed in turn
(alternating, so load on a shared machine hits both alike). Generated tokens per second is the sum of
completion lengths over the wall time of ``generate``; the script also checks that both engines produced
the same tokens (they draw from the same distribution with the same random numbers), so the work is equal.
``vllm`` draws its own random numbers, so its tokens/s counts the tokens it generated (EOS ends rows at
random in all three).

    python benchmarks/decode_speed.py                     # tiny (128 x 2) and 512 x 8 Qwen2, 16 x 8 x 64
    python benchmarks/decode_speed.py --prompts 32 --samples 8 --tokens 128 --repeats 5
    python benchmarks/decode_speed.py --context 200       # 200 more prompt tokens: prefill sharing shows
    python benchmarks/decode_speed.py --threads 0         # torch's default thread count instead of 1

The last line per model is a floor: the CPU time of the decode's dense matrix products alone (every
projection, MLP and LM-head product of every row at every step, with the model's weights), which any engine
decoding in the same precision must spend; ``hf``'s CPU time over it is the most any engine can gain.
"""

from __future__ import annotations

import argparse
import statistics
import time

import torch

from rlvr.core.types import Example, GenerationRequest, SamplingParams
from rlvr.models import TinyModelConfig, build_tiny_model, char_tokenizer
from rlvr.engines.hf import HFEngine
from rlvr.engines.native import NativeEngine

SIZES = {
    "tiny-128x2": TinyModelConfig(hidden_size=128, num_layers=2, num_heads=4, num_kv_heads=2, intermediate_size=512,
                                  max_positions=512),
    "qwen2-512x8": TinyModelConfig(hidden_size=512, num_layers=8, num_heads=8, num_kv_heads=4,
                                   intermediate_size=1536, max_positions=512),
}


def requests(n_prompts: int, n_samples: int, context: int = 0) -> list[GenerationRequest]:
    """Prompts of different lengths (7 to 17 characters after ``context`` characters of preamble), so the
    batch is left-padded."""
    pre = ("Add the numbers. " * (context // 17 + 1))[:context]
    return [GenerationRequest(Example(str(i), pre + f"{i * 37 % 100}+{i * 53 % 1000}=" + "?" * (i % 6), "0"),
                              n_samples) for i in range(n_prompts)]


def timed(engine, reqs, sampling) -> tuple[float, float, list]:
    t0, c0 = time.perf_counter(), time.process_time()
    out = engine.generate(reqs, sampling)
    return time.perf_counter() - t0, time.process_time() - c0, out


@torch.inference_mode()
def linear_floor(model, rows: int, steps: int) -> float:
    """CPU seconds of the decode's dense matrix products alone: every layer's projections and MLP and the LM
    head, for ``rows`` tokens at each of ``steps`` steps, with the model's own weights (no attention, norms,
    sampling or Python around them). Any engine that decodes in this precision does at least this work, so
    ``generate``'s time over it bounds the speed-up any engine can reach on the workload."""
    lins = [m for m in model.modules() if isinstance(m, torch.nn.Linear)]
    xs = {m.in_features: torch.randn(rows, m.in_features) for m in lins}
    best = float("inf")
    for _ in range(3):
        c0 = time.process_time()
        for _ in range(steps):
            for m in lins:
                torch.nn.functional.linear(xs[m.in_features], m.weight, m.bias)
        best = min(best, time.process_time() - c0)
    return best


def bench(name: str, cfg: TinyModelConfig, args) -> None:
    tok = char_tokenizer()
    model = build_tiny_model(cfg, tok, seed=0).eval()
    reqs = requests(args.prompts, args.samples, args.context)
    sampling = SamplingParams(temperature=1.0, max_new_tokens=args.tokens, seed=0)
    rows = args.prompts * args.samples
    engines = {"hf": HFEngine(model, tok, batch_size=rows), "native": NativeEngine(model, tok, batch_size=rows)}
    if "native-compile" in args.engines:  # rollout.native.compile; the warm-up call below compiles
        engines["native-compile"] = NativeEngine(model, tok, batch_size=rows, compile=True)
    if "vllm" in args.engines:
        from rlvr.engines.vllm import VLLMEngine

        engines["vllm"] = VLLMEngine(model, tok, batch_size=rows)
    times: dict[str, list[float]] = {k: [] for k in engines}
    cpu: dict[str, list[float]] = {k: [] for k in engines}
    outs = {}
    for k, e in engines.items():  # warm-up
        outs[k] = timed(e, reqs, sampling)[2]
    for _ in range(args.repeats):
        for k, e in engines.items():
            dt, dc, outs[k] = timed(e, reqs, sampling)
            times[k].append(dt)
            cpu[k].append(dc)
    tokens = sum(len(c) for c in outs["hf"])
    params = sum(p.numel() for p in model.parameters()) / 1e6
    width = max(len(c.prompt_ids) for c in outs["hf"])
    print(f"\n{name}: {params:.1f}M params, {args.prompts} prompts (up to {width} tokens) x {args.samples} "
          f"samples x {args.tokens} tokens ({tokens} generated), median of {args.repeats}")
    base, base_cpu = statistics.median(times["hf"]), statistics.median(cpu["hf"])
    base_tps, base_cpu_tps = tokens / base, tokens / base_cpu
    for k in engines:
        same = sum(a.completion_ids == b.completion_ids for a, b in zip(outs["hf"], outs[k]))
        med, med_cpu = statistics.median(times[k]), statistics.median(cpu[k])
        n = sum(len(c) for c in outs[k])  # vllm draws other random numbers: its own token count
        check = f"same tokens as hf: {same}/{len(outs[k])}" if k != "vllm" else f"{n} tokens (own sampler)"
        print(f"  {k:14s} wall {med * 1e3:8.1f} ms {n / med:8.0f} tok/s x{n / med / base_tps:5.2f} | "
              f"CPU {med_cpu * 1e3:8.1f} ms x{n / med_cpu / base_cpu_tps:5.2f} | {check}")
    steps = max(len(c.completion_ids) for c in outs["hf"])  # the batch decodes until its longest row ends
    floor = linear_floor(model, rows, steps)
    print(f"  {'floor':14s} CPU {floor * 1e3:8.1f} ms: the dense matrix products of {rows} rows x {steps} steps "
          f"alone; hf's CPU time over it: x{base_cpu / floor:.2f}, the most any engine in this precision can gain")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--prompts", type=int, default=16)
    ap.add_argument("--samples", type=int, default=8)
    ap.add_argument("--tokens", type=int, default=64)
    ap.add_argument("--context", type=int, default=0, help="characters of shared preamble per prompt")
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--threads", type=int, default=1, help="torch intra-op threads (0: torch's default)")
    ap.add_argument("--sizes", nargs="+", default=list(SIZES), choices=list(SIZES))
    ap.add_argument("--engines", nargs="+", default=["hf", "native", "native-compile", "vllm"],
                    choices=["hf", "native", "native-compile", "vllm"],
                    help="hf and native always run; native-compile: rollout.native.compile (compiles in the "
                         "warm-up); vllm when installed (scripts/setup_vllm.sh)")
    args = ap.parse_args()
    import importlib.util

    if "vllm" in args.engines and importlib.util.find_spec("vllm") is None:
        print("vllm skipped: not installed (bash scripts/setup_vllm.sh, then run from .venv-vllm)")
        args.engines = [e for e in args.engines if e != "vllm"]
    if args.threads:
        torch.set_num_threads(args.threads)
    print(f"torch {torch.__version__}, {torch.get_num_threads()} thread(s)")
    for name in args.sizes:
        bench(name, SIZES[name], args)


if __name__ == "__main__":
    main()

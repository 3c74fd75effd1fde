"""The ``vllm`` rollout engine against raw vLLM on the same requests, weight-sync time and sleep-mode memory.

Prepared for a GPU (a few minutes on one device); ``--shape tiny --device cpu`` runs the same code on vLLM's
CPU build as a smoke test. Nothing is downloaded: the model is a random-initialised Qwen2 of the chosen shape
(``qwen2-0.5b``: Qwen2-0.5B's config, 494M parameters) and the tokenizer a word-level one built here with the
model's vocabulary size, so the LM head costs what it costs in the real model.

Measured, in one process:

1. **rollout tokens/s**: ``VLLMEngine.generate`` (rlvr's request building, per-request sampling params,
   behaviour log-probs, ``Completion`` objects) against ``vllm.LLM.generate`` on the same token prompts with
   the same ``SamplingParams`` (``logprobs=0``: raw vLLM also returns the sampled token's log-prob), timed
   in alternation; tokens/s counts the tokens each produced (at a 152k vocabulary a random model almost
   never samples EOS, so both run to the limit). Goal: rlvr ≥ 0.9× raw.
2. **seconds per weight sync**: the trainer's ``state_dict`` pushed in memory through ``reload_weights``
   (median of several), with the prefix-cache reset.
3. **memory with sleep mode on and off**: device memory in use (``torch.cuda.mem_get_info``) after a
   generate (engine awake), and the peak of a mock update (forward + backward of the trainer on the rollout
   batch) with the engine awake (sleep off) and asleep (sleep on, level 2).

    python benchmarks/vllm_engine.py                              # GPU, qwen2-0.5b, 64 prompts x 8 x 256
    python benchmarks/vllm_engine.py --prompts 32 --tokens 512
    python benchmarks/vllm_engine.py --shape tiny --device cpu    # smoke run on vLLM's CPU build
"""

from __future__ import annotations

import argparse
import json
import statistics
import tempfile
import time

import torch

SHAPES = {
    # Qwen2-0.5B's config.json (hidden 896, 24 layers, 14 heads / 2 KV heads, MLP 4864, vocab 151936, tied)
    "qwen2-0.5b": dict(hidden_size=896, num_hidden_layers=24, num_attention_heads=14, num_key_value_heads=2,
                       intermediate_size=4864, vocab_size=151936, max_position_embeddings=4096,
                       tie_word_embeddings=True, rope_theta=1e6),
    "tiny": dict(hidden_size=128, num_hidden_layers=2, num_attention_heads=4, num_key_value_heads=2,
                 intermediate_size=512, vocab_size=512, max_position_embeddings=512, tie_word_embeddings=True),
}


def word_tokenizer(vocab_size: int):
    """A word-level tokenizer with ``vocab_size`` tokens (``w0`` ... plus pad / eos / unk)."""
    from tokenizers import Tokenizer, models, pre_tokenizers
    from transformers import PreTrainedTokenizerFast

    vocab = {"<pad>": 0, "<eos>": 1, "<unk>": 2, **{f"w{i}": i for i in range(3, vocab_size)}}
    tok = Tokenizer(models.WordLevel(vocab=vocab, unk_token="<unk>"))
    tok.pre_tokenizer = pre_tokenizers.WhitespaceSplit()
    return PreTrainedTokenizerFast(tokenizer_object=tok, pad_token="<pad>", eos_token="<eos>", unk_token="<unk>",
                                   padding_side="left")


def build_model(shape: str, device: str, dtype: torch.dtype, tok):
    from transformers import Qwen2Config, Qwen2ForCausalLM

    cfg = Qwen2Config(**SHAPES[shape], pad_token_id=0, eos_token_id=1, bos_token_id=1)
    torch.manual_seed(0)
    with torch.device(device):
        model = Qwen2ForCausalLM(cfg).to(dtype)
    return model


def device_used_gib() -> float:
    if not torch.cuda.is_available():
        return float("nan")
    free, total = torch.cuda.mem_get_info()
    return (total - free) / 2**30


def mock_update(model, comps, pad_id: int) -> float:
    """Peak device GiB in use during a forward + backward of the trainer on the rollout batch."""
    from rlvr.core.batch import build_batch
    from rlvr.models.logprobs import completion_logprobs

    if torch.cuda.is_available():
        torch.cuda.synchronize()
        torch.cuda.reset_peak_memory_stats()
        base = device_used_gib() - torch.cuda.memory_allocated() / 2**30
    batch = build_batch(comps, [0.0] * len(comps), pad_id).to(next(model.parameters()).device)
    model.train()
    lp, _ = completion_logprobs(model, batch, 1.0)
    (-(lp * batch.completion_mask).sum()).backward()
    model.zero_grad(set_to_none=True)
    if not torch.cuda.is_available():
        return float("nan")
    torch.cuda.synchronize()
    return base + torch.cuda.max_memory_allocated() / 2**30


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--shape", choices=sorted(SHAPES), default="qwen2-0.5b")
    ap.add_argument("--device", default="cuda")
    ap.add_argument("--prompts", type=int, default=64)
    ap.add_argument("--samples", type=int, default=8)
    ap.add_argument("--prompt-tokens", type=int, default=128)
    ap.add_argument("--tokens", type=int, default=256)
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--syncs", type=int, default=5)
    ap.add_argument("--gpu-memory-utilization", type=float, default=0.25)
    ap.add_argument("--skip-sleep", action="store_true", help="skip the sleep-mode part")
    ap.add_argument("--part", choices=["speed", "sleep"], help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.part is None:
        # one live vLLM engine per process (shutting one down tears down vLLM's process-wide parallel state),
        # so each part runs in its own process
        result = _part(args, "speed")
        if args.device.startswith("cuda") and not args.skip_sleep:
            result["memory_gib"].update(_part(args, "sleep")["memory_gib"])
        print(json.dumps(result, indent=2))
        return
    print("RESULT " + json.dumps(speed(args) if args.part == "speed" else sleep(args)))


def _part(args, part: str) -> dict:
    import subprocess
    import sys

    argv = [sys.executable, __file__, *sys.argv[1:], "--part", part]
    done = subprocess.run(argv, capture_output=True, text=True)
    lines = [x for x in done.stdout.splitlines() if x.startswith("RESULT ")]
    if done.returncode != 0 or not lines:
        raise SystemExit(f"part {part} failed:\n{done.stderr[-4000:]}")
    return json.loads(lines[-1][len("RESULT "):])


def setup(args):
    from rlvr.core.types import Example, GenerationRequest, SamplingParams
    from rlvr.engines.vllm_config import VLLMConfig

    on_gpu = args.device.startswith("cuda")
    dtype = torch.bfloat16 if on_gpu else torch.float32
    tok = word_tokenizer(SHAPES[args.shape]["vocab_size"])
    model = build_model(args.shape, args.device, dtype, tok)
    n_params = sum(p.numel() for p in model.parameters())
    g = torch.Generator().manual_seed(0)
    prompts = [" ".join(f"w{int(t)}" for t in torch.randint(3, SHAPES[args.shape]["vocab_size"],
                                                             (args.prompt_tokens,), generator=g))
               for _ in range(args.prompts)]
    reqs = [GenerationRequest(Example(str(i), p, ""), args.samples) for i, p in enumerate(prompts)]
    sampling = SamplingParams(temperature=1.0, max_new_tokens=args.tokens, seed=0)
    common = VLLMConfig(gpu_memory_utilization=args.gpu_memory_utilization, enable_prefix_caching=True)
    return on_gpu, dtype, tok, model, n_params, prompts, reqs, sampling, common


def sleep(args) -> dict:
    from rlvr.engines.vllm import VLLMEngine

    on_gpu, dtype, tok, model, n_params, prompts, reqs, sampling, common = setup(args)
    sleepy = VLLMEngine(model, tok, batch_size=args.prompts * args.samples, seed=0,
                        settings=common.model_copy(update={"sleep_mode": True}))
    comps = sleepy.generate(reqs[: max(1, len(reqs) // 4)], sampling)  # ends asleep
    out = {"asleep_after_generate": round(device_used_gib(), 2),
           "update_peak_sleep_on": round(mock_update(model, comps, tok.pad_token_id), 2)}
    t0 = time.perf_counter()
    sleepy.push_weights()  # wake, push, rebuild the cache
    torch.cuda.synchronize()
    out["wake_and_sync_s"] = round(time.perf_counter() - t0, 3)
    return {"memory_gib": out}


def speed(args) -> dict:
    import vllm

    from rlvr.engines.vllm import VLLMEngine

    on_gpu, dtype, tok, model, n_params, prompts, reqs, sampling, common = setup(args)
    result: dict = {"shape": args.shape, "params_M": round(n_params / 1e6, 1), "device": args.device,
                    "vllm": vllm.__version__, "workload": f"{args.prompts} x {args.samples} x {args.tokens}"}
    t0 = time.perf_counter()
    ours = VLLMEngine(model, tok, batch_size=args.prompts * args.samples, settings=common, seed=0)
    result["rlvr_engine_start_s"] = round(time.perf_counter() - t0, 2)
    ours.push_weights()

    # raw vLLM on the same prompts: its own engine, the same weights pushed the same way
    raw_dir = tempfile.mkdtemp(prefix="raw-vllm-")
    model.config.save_pretrained(raw_dir)
    tok.save_pretrained(raw_dir)
    t0 = time.perf_counter()
    raw = vllm.LLM(model=raw_dir, load_format="dummy", dtype=str(dtype).split(".")[-1], seed=0,
                   gpu_memory_utilization=args.gpu_memory_utilization, enable_prefix_caching=True,
                   distributed_executor_backend="external_launcher", logprobs_mode="processed_logprobs",
                   enforce_eager=not on_gpu, max_num_seqs=args.prompts * args.samples)
    result["raw_engine_start_s"] = round(time.perf_counter() - t0, 2)
    weights = [(k, v.detach()) for k, v in model.state_dict().items()]
    raw.collective_rpc("reload_weights", kwargs={"weights_iterator": iter(weights)})
    ids = [tok(p, add_special_tokens=True)["input_ids"] for p in prompts]
    raw_prompts = [{"prompt_token_ids": list(x)} for x in ids]

    def raw_params(i):
        return vllm.SamplingParams(n=args.samples, temperature=1.0, top_p=1.0, max_tokens=args.tokens,
                                   seed=i * 1000003, logprobs=0, stop_token_ids=[tok.eos_token_id])

    timings = {"rlvr": [], "raw": []}
    toks = {"rlvr": 0, "raw": 0}
    for r in range(args.repeats + 1):  # the first round warms both up
        for name in (("rlvr", "raw") if r % 2 == 0 else ("raw", "rlvr")):
            if on_gpu:
                torch.cuda.synchronize()
            t0 = time.perf_counter()
            if name == "rlvr":
                out = ours.generate(reqs, sampling)
                n_tok = sum(len(c.completion_ids) for c in out)
            else:
                res = raw.generate(raw_prompts, [raw_params(i) for i in range(len(raw_prompts))], use_tqdm=False)
                n_tok = sum(len(o.token_ids) for x in res for o in x.outputs)
            dt = time.perf_counter() - t0
            if r > 0:
                timings[name].append(dt)
                toks[name] = n_tok
    tps = {k: toks[k] / statistics.median(v) for k, v in timings.items()}
    result["rollout_tokens_per_s"] = {k: round(v, 1) for k, v in tps.items()}
    result["rlvr_over_raw"] = round(tps["rlvr"] / tps["raw"], 3)

    syncs = []
    for _ in range(args.syncs):
        with torch.no_grad():
            next(model.parameters()).add_(1e-3)
        if on_gpu:
            torch.cuda.synchronize()
        t0 = time.perf_counter()
        ours.push_weights()
        if on_gpu:
            torch.cuda.synchronize()
        syncs.append(time.perf_counter() - t0)
    result["weight_sync_s"] = round(statistics.median(syncs), 4)
    comps = ours.generate(reqs[: max(1, len(reqs) // 4)], sampling)
    result["memory_gib"] = {"awake_after_generate": round(device_used_gib(), 2),
                            "update_peak_sleep_off": round(mock_update(model, comps, tok.pad_token_id), 2)}
    return result


if __name__ == "__main__":
    main()

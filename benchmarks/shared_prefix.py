"""The shared-prefix update against the standard layout: forward + backward of the completion log-probs.

For each model and batch shape (``groups x n`` completions of ``T`` tokens after ``P``-token prompts, every
completion of a group after the same prompt), the same model computes the log-probs of the same batch with
``train.shared_prefix`` off and on, one after the other, and the script prints the tokens each layout runs
through the model, the median seconds of each (forward + backward, as in the update) and the ratio.
It also checks that the two give the same log-probs (max abs difference printed).

    python benchmarks/shared_prefix.py                 # 1 thread, ~2 minutes
    python benchmarks/shared_prefix.py --repeats 9 --threads 2
"""

from __future__ import annotations

import argparse
import random
import statistics
import time

import torch

from rlvr.core.batch import build_batch
from rlvr.core.types import Completion
from rlvr.models import shared_prefix as sp
from rlvr.models.logprobs import completion_logprobs
from rlvr.models.tiny import TinyModelConfig, build_tiny_model, char_tokenizer

MODELS = {"tiny 128x2 (0.5M)": TinyModelConfig(max_positions=2048),
          "qwen2 512x8 (25M)": TinyModelConfig(hidden_size=512, num_layers=8, num_heads=8, num_kv_heads=4,
                                               intermediate_size=1536, max_positions=2048)}
# (groups, n, P, T): the demo's shape, trl_speed.py's two workloads, a long prompt, a long completion
SHAPES = [(32, 8, 6, 4), (4, 8, 17, 16), (16, 8, 17, 64), (4, 8, 256, 64), (4, 8, 16, 256)]


def batch_of(groups: int, n: int, p: int, t: int, vocab: int, seed: int = 0):
    rng = random.Random(seed)
    comps = []
    for g in range(groups):
        prompt = [rng.randrange(3, vocab) for _ in range(p)]
        comps += [Completion(f"e{g}", prompt, [rng.randrange(3, vocab) for _ in range(t)], None, "length", "",
                             group=g) for _ in range(n)]
    return build_batch(comps, [0.0] * len(comps), pad_id=0)


def step(model, batch) -> torch.Tensor:
    model.zero_grad(set_to_none=True)
    lp, _ = completion_logprobs(model, batch)
    (lp * batch.completion_mask).sum().backward()
    return lp.detach()


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repeats", type=int, default=5)
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--models", default=",".join(MODELS), help="comma-separated names of MODELS")
    a = ap.parse_args()
    torch.set_num_threads(a.threads)
    tok = char_tokenizer()
    print(f"torch {torch.__version__}, {a.threads} thread(s), median of {a.repeats}; forward + backward of the "
          "completion log-probs")
    print(f"{'model':<20} {'groups x n x P x T':<20} {'tokens std':>10} {'packed':>8} {'std s':>8} "
          f"{'shared s':>9} {'speed-up':>9} {'max |dlogp|':>12}")
    for name in a.models.split(","):
        torch.manual_seed(0)
        model = build_tiny_model(MODELS[name], tok)
        for groups, n, p, t in SHAPES:
            batch = batch_of(groups, n, p, t, model.config.vocab_size)
            packed = sp.pack(batch, min_saving=-1.0)
            std_tokens = batch.size * (p + t)
            packed_tokens = packed.input_ids.numel()
            times = {"std": [], "shared": []}
            outs = {}
            for r in range(a.repeats + 1):
                for mode in ("std", "shared") if r % 2 else ("shared", "std"):
                    model.config._attn_implementation = "sdpa"
                    if mode == "shared":
                        sp.enable(model)
                    t0 = time.perf_counter()
                    old, sp.MIN_SAVING = sp.MIN_SAVING, -1.0  # packed whatever it saves, to time it
                    try:
                        outs[mode] = step(model, batch)
                    finally:
                        sp.MIN_SAVING = old
                    if r:  # the first round warms up
                        times[mode].append(time.perf_counter() - t0)
            s, h = statistics.median(times["std"]), statistics.median(times["shared"])
            diff = (outs["std"] - outs["shared"]).abs().max().item()
            print(f"{name:<20} {f'{groups}x{n}x{p}x{t}':<20} {std_tokens:>10} {packed_tokens:>8} {s:>8.3f} "
                  f"{h:>9.3f} {s / h:>8.2f}x {diff:>12.1e}")
        model.config._attn_implementation = "sdpa"


if __name__ == "__main__":
    main()

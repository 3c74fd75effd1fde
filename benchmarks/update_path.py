"""What a leaner update path buys on CPU: the optimizer kernel and the chosen-token log-prob, measured.

Two measurements, each variant against the current one in the same run (alternating, medians):

1. **AdamW step**: torch's per-parameter loop (``foreach=False``, torch's CPU default), the multi-tensor
   ``foreach`` path and the ``fused`` kernel, on the tiny demo model and a 25M-parameter Qwen2.
2. **log-prob of the chosen token, forward + backward**, for ``K`` tokens at vocabulary ``V`` from hidden
   states through the LM head: ``log_softmax(z).gather`` (what rlvr does), ``z.gather - logsumexp(z)``
   (no ``[K, V]`` log-softmax output) and ``-cross_entropy(z, t, reduction="none")``; then the two ways of
   also computing the entropy metric that the update reports (reusing the log-softmax, or a second no-grad
   log-softmax beside the cross-entropy).

    python benchmarks/update_path.py                 # both, 1 thread
    python benchmarks/update_path.py --repeats 10
"""

from __future__ import annotations

import argparse
import statistics
import time

import torch
import torch.nn.functional as F

from rlvr.models.tiny import TinyModelConfig, build_tiny_model, char_tokenizer

MODELS = {"tiny 128x2 (0.5M)": TinyModelConfig(),
          "qwen2 512x8 (25M)": TinyModelConfig(hidden_size=512, num_layers=8, num_heads=8, num_kv_heads=4,
                                               intermediate_size=1536)}


def _entropy(logsm: torch.Tensor) -> torch.Tensor:
    with torch.no_grad():
        return -(logsm.exp() * logsm).sum(-1)


def _ls_with_entropy(z, t):  # rlvr's update: the entropy metric reuses the log-softmax
    logsm = F.log_softmax(z, -1)
    return logsm.gather(-1, t[:, None]).squeeze(-1) + 0 * _entropy(logsm)[:, None].sum(-1)


def _ce_with_entropy(z, t):  # cross-entropy for the gradient, a no-grad log-softmax for the metric
    return -F.cross_entropy(z, t, reduction="none") + 0 * _entropy(F.log_softmax(z.detach(), -1))


HEADS = {"log_softmax + gather": lambda z, t: F.log_softmax(z, -1).gather(-1, t[:, None]).squeeze(-1),
         "gather - logsumexp": lambda z, t: z.gather(-1, t[:, None]).squeeze(-1) - torch.logsumexp(z, -1),
         "-cross_entropy": lambda z, t: -F.cross_entropy(z, t, reduction="none"),
         "log_softmax + entropy": _ls_with_entropy,
         "-cross_entropy + entropy": _ce_with_entropy}


def timeit(fn, repeats: int) -> float:
    fn()  # warm-up
    times = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t0)
    return statistics.median(times)


def adamw(repeats: int) -> None:
    tok = char_tokenizer()
    print("AdamW step (ms, median):")
    for name, cfg in MODELS.items():
        model = build_tiny_model(cfg, tok)
        for p in model.parameters():
            p.grad = torch.randn_like(p)
        kinds = {"loop": {"foreach": False}, "foreach": {"foreach": True}, "fused": {"fused": True}}
        opts = {k: torch.optim.AdamW(model.parameters(), lr=1e-4, **kw) for k, kw in kinds.items()}
        res: dict[str, list[float]] = {k: [] for k in kinds}
        for r in range(3):
            for k in (list(kinds) if r % 2 == 0 else list(kinds)[::-1]):
                res[k].append(timeit(opts[k].step, repeats))
        base = statistics.median(res["loop"])
        print(f"  {name:20}" + "".join(f"{k:>9} {statistics.median(v) * 1e3:8.2f} (x{base / statistics.median(v):4.2f})"
                                        for k, v in res.items()))


def heads(repeats: int) -> None:
    print("chosen-token log-prob through the LM head, forward + backward (ms, median):")
    for K, H, V in ((8192, 128, 97), (2048, 256, 32000)):
        g = torch.Generator().manual_seed(0)
        h = torch.randn(K, H, generator=g).requires_grad_()
        W = (0.02 * torch.randn(V, H, generator=g)).requires_grad_()
        t = torch.randint(0, V, (K,), generator=g)
        ref = HEADS["log_softmax + gather"]((h @ W.T).float(), t)
        res = {}
        for name, f in HEADS.items():
            assert torch.allclose(f((h @ W.T).float(), t), ref, atol=1e-5), name

            def step():
                f((h @ W.T).float(), t).sum().backward()
                h.grad = W.grad = None

            res[name] = timeit(step, repeats)
        base, with_ent = res["log_softmax + gather"], res["log_softmax + entropy"]
        print(f"  K={K} V={V}:")
        for k, v in res.items():
            print(f"    {k:26} {v * 1e3:8.1f} ms  x{(with_ent if 'entropy' in k else base) / v:4.2f}")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repeats", type=int, default=5)
    ap.add_argument("--threads", type=int, default=1)
    a = ap.parse_args()
    if a.threads:
        torch.set_num_threads(a.threads)
    adamw(a.repeats)
    heads(a.repeats)


if __name__ == "__main__":
    main()

"""Peak memory and time of completion log-probs: rlvr's chunked head vs the naive full-logits path.

Each variant runs forward + backward in a fresh subprocess and reports its peak resident memory, so the
numbers are comparable. Prints both and their ratio. Usage: python benchmarks/logprob_memory.py
"""

from __future__ import annotations

import json
import resource
import subprocess
import sys
import time

VOCAB, HIDDEN, TOKENS = 32_000, 256, 4096


def run(variant: str) -> dict:
    import torch
    import torch.nn.functional as F

    from rlvr.models.logprobs import token_logprobs_from_hidden

    torch.manual_seed(0)
    head = torch.nn.Linear(HIDDEN, VOCAB, bias=False)
    h = torch.randn(TOKENS, HIDDEN, requires_grad=True)
    t = torch.randint(0, VOCAB, (TOKENS,))
    base = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    t0 = time.perf_counter()
    if variant == "naive":
        lp = F.log_softmax(head(h).float(), -1).gather(-1, t[:, None]).squeeze(-1)
    else:
        lp, _ = token_logprobs_from_hidden(head, h, t, chunk_tokens=512)
    lp.sum().backward()
    dt = time.perf_counter() - t0
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    return {"variant": variant, "extra_peak_mb": (peak - base) / 1024, "seconds": dt}


def main() -> None:
    if len(sys.argv) > 1:
        print(json.dumps(run(sys.argv[1])))
        return
    res = {}
    for v in ("naive", "chunked"):
        out = subprocess.run([sys.executable, __file__, v], capture_output=True, text=True, check=True)
        res[v] = json.loads(out.stdout.strip().splitlines()[-1])
    n, c = res["naive"], res["chunked"]
    print(f"tokens={TOKENS} vocab={VOCAB} hidden={HIDDEN}")
    print(f"naive   : extra peak {n['extra_peak_mb']:8.1f} MB  {n['seconds']:.3f} s")
    print(f"chunked : extra peak {c['extra_peak_mb']:8.1f} MB  {c['seconds']:.3f} s")
    print(f"memory ratio chunked/naive = {c['extra_peak_mb'] / max(n['extra_peak_mb'], 1e-9):.3f}; "
          f"time ratio chunked/naive = {c['seconds'] / n['seconds']:.2f}")


if __name__ == "__main__":
    main()

"""What the sandbox costs: median wall time of a trivial program under it vs a plain subprocess, sandbox
runs per second with N parallel workers, and the code verifier's latency for one small example.

Usage: python benchmarks/sandbox_overhead.py [--runs 30] [--workers 1 2 4] [--fallback]
Prints one JSON object. The plain baseline is the same interpreter with the same flags (``-I -S -B``), so
the difference is bubblewrap, the launcher's setup (mounts, uid switch, rlimits, seccomp), the cgroup and the
host-side supervision.
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import time
from concurrent.futures import ThreadPoolExecutor

from rlvr.core.types import Example
from rlvr.sandbox import Limits, LocalSandbox, Program
from rlvr.verifiers.code import CodeVerifier

TRIVIAL = "pass"


def _median_ms(fn, runs: int) -> float:
    times = []
    for _ in range(runs):
        t0 = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t0)
    return round(1000 * statistics.median(times), 1)


def plain(python: str) -> None:
    subprocess.run([python, "-I", "-S", "-B", "-c", TRIVIAL], check=True, env={})


def throughput(sb: LocalSandbox, workers: int, runs: int) -> float:
    """Sandbox runs completed per second with ``workers`` threads submitting ``runs`` runs in total."""
    t0 = time.perf_counter()
    with ThreadPoolExecutor(workers) as pool:
        results = list(pool.map(lambda _: sb.run(Program(TRIVIAL), Limits(wall_s=30)), range(runs)))
    dt = time.perf_counter() - t0
    assert all(r.exit_code == 0 for r in results), [r.stderr for r in results if r.exit_code]
    return round(runs / dt, 1)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--runs", type=int, default=30)
    ap.add_argument("--workers", type=int, nargs="+", default=[1, 2, 4])
    ap.add_argument("--fallback", action="store_true", help="measure the no-bubblewrap fallback instead")
    args = ap.parse_args()
    sb = LocalSandbox(use_bwrap=False if args.fallback else None)
    mode = sb.mode()
    sb.run(Program(TRIVIAL))  # warm caches
    out = {"mode": mode, "protections": sb.protections().active(), "runs": args.runs,
           "plain_subprocess_ms": _median_ms(lambda: plain(sb.python), args.runs),
           "sandbox_ms": _median_ms(lambda: sb.run(Program(TRIVIAL)), args.runs)}
    out["overhead_ms"] = round(out["sandbox_ms"] - out["plain_subprocess_ms"], 1)
    out["runs_per_s"] = {str(w): throughput(sb, w, max(args.runs, 2 * w)) for w in args.workers}
    ex = Example("add", "p", "", meta={"tests": ["assert add(1, 2) == 3", "assert add(2, 2) == 4"]})
    v = CodeVerifier(sandbox=sb)
    out["code_verifier_ms"] = _median_ms(lambda: v(ex, "def add(a, b):\n    return a + b"), max(args.runs // 3, 3))
    print(json.dumps(out, indent=2))


if __name__ == "__main__":
    main()

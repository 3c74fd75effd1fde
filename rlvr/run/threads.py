"""How many CPU threads torch uses (``train.threads``), chosen so a run degrades gracefully on a shared machine.

torch starts one OpenMP thread per core. When another process keeps a core busy, every parallel region
waits for the thread that shares a core with it while the others spin. Measured on 2 cores with the demo's
step (``benchmarks/cpu_threads.py``, docs/cpu-threads.md): idle, 2 threads take 0.26 s a step and 1 thread
0.38 s; with one core busy, 2 threads take 1.24 s (4.7x) and 1 thread 0.43 s. So ``null`` (auto) looks
before the run starts: it samples for a quarter of a second how busy the cores are (``/proc/stat``) and
uses the cores other processes leave free, at least one (0.36 s a step in that busy case, 0.31 s idle).
Under torchrun each of the node's ``LOCAL_WORLD_SIZE`` processes takes an equal share of them.
``RLVR_THREADS`` or an explicit ``train.threads`` overrides it. ``OMP_WAIT_POLICY=PASSIVE`` halves the busy
2-thread time but costs 23% idle, so rlvr leaves it to the user.

Reproducibility: a long run's numbers depend on the thread count (some CPU kernels add a sum's parts in
an order that depends on it; the demo with 1 and 2 threads parts at its twelfth RL step), so set
``train.threads`` wherever results must reproduce on machines under different loads (the demo recipe sets 2).
The count in force is in ``summary.json`` (``threads``). docs/cpu-threads.md says what MKL's strict mode
(``MKL_CBWR=AVX2,STRICT``) does and does not fix.
"""

from __future__ import annotations

import functools
import math
import os
import time

import torch

__all__ = ["apply_threads", "auto_threads", "busy_cores", "usable_cores"]


def usable_cores() -> int:
    try:
        return len(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        return os.cpu_count() or 1


def _cpu_times() -> tuple[float, float] | None:
    """(busy, total) jiffies of all cores since boot, or None where /proc/stat is unavailable."""
    try:
        with open("/proc/stat") as f:
            fields = [float(x) for x in f.readline().split()[1:]]
    except (OSError, ValueError):
        return None
    idle = fields[3] + (fields[4] if len(fields) > 4 else 0.0)  # idle + iowait
    total = sum(fields[:8])  # user nice system idle iowait irq softirq steal (guest is inside user)
    return total - idle, total


def busy_cores(sample_s: float = 0.25) -> float:
    """How many cores other processes keep busy, sampled over ``sample_s`` seconds (0.0 if unknown)."""
    a = _cpu_times()
    own = time.process_time()
    time.sleep(sample_s)
    b = _cpu_times()
    if a is None or b is None or b[1] <= a[1]:
        return 0.0
    ncpu = os.cpu_count() or 1
    busy_frac = (b[0] - a[0]) / (b[1] - a[1])
    own_cores = (time.process_time() - own) / sample_s  # this process's own share, not competition
    return max(0.0, busy_frac * ncpu - own_cores)


@functools.lru_cache(maxsize=1)
def _free_cores() -> int:
    cores = usable_cores()
    return max(1, min(cores, math.floor(cores - busy_cores() + 0.5)))


def auto_threads() -> int:
    """``RLVR_THREADS`` if set, else the usable cores not busy with other processes (at least 1), sampled
    once per process (a resumed or repeated run in the same process keeps the same count)."""
    env = os.environ.get("RLVR_THREADS")
    if env:
        return max(1, int(env))
    return max(1, _free_cores() // max(1, int(os.environ.get("LOCAL_WORLD_SIZE", "1"))))  # torchrun: a share each


def apply_threads(threads: int | None) -> int:
    """Set torch's intra-op thread count (``None``: :func:`auto_threads`); returns the count in force."""
    n = threads if threads is not None else auto_threads()
    if n != torch.get_num_threads():
        torch.set_num_threads(n)
    return n

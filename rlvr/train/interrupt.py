"""Stopping cleanly: Ctrl-C (SIGINT) and SIGTERM finish the current step, then the caller saves and exits.

SIGTERM is what SLURM, Kubernetes and ``timeout`` send before killing a job, so it is handled like the first
Ctrl-C: the step in progress completes, a checkpoint is written, and the run exits. A second signal aborts
at once. Outside the main thread (where Python cannot install signal handlers) nothing is deferred.
"""

from __future__ import annotations

import contextlib
import signal
import sys
import threading
from typing import Callable, Iterator

__all__ = ["deferred_interrupt", "SIGNAL_NAMES"]

SIGNAL_NAMES = {signal.SIGINT: "Ctrl-C", signal.SIGTERM: "SIGTERM"}


@contextlib.contextmanager
def deferred_interrupt(what: str = "this step") -> Iterator[Callable[[], str | None]]:
    """Yields ``interrupted()``: the name of the first signal received (``"Ctrl-C"``, ``"SIGTERM"``) or None."""
    hits: list[int] = []
    if threading.current_thread() is not threading.main_thread():
        yield lambda: None
        return

    def handler(signum, frame):
        hits.append(signum)
        if len(hits) > 1:
            raise KeyboardInterrupt(f"{SIGNAL_NAMES.get(signum, signum)} again: aborted without saving")
        print(f"\n{SIGNAL_NAMES.get(signum, signum)}: finishing {what}, then saving (send it again to abort)",
              file=sys.stderr, flush=True)

    previous = {s: signal.signal(s, handler) for s in SIGNAL_NAMES}
    try:
        yield lambda: SIGNAL_NAMES.get(hits[0], str(hits[0])) if hits else None
    finally:
        for s, h in previous.items():
            signal.signal(s, h)

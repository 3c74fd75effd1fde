"""Stopping cleanly: Ctrl-C (SIGINT) and SIGTERM finish the current step, then the caller saves and exits.

SIGTERM is what SLURM, Kubernetes and ``timeout`` send before killing a job, so it is handled like the first
Ctrl-C: the step in progress completes, a checkpoint is written, and the run exits. A second signal aborts
at once. Outside the main thread (where Python cannot install signal handlers) no signal is deferred.

Another thread or process may ask for the same clean stop with :func:`request_stop` (the trainer actor of
``--launcher ray`` does when the driver gets Ctrl-C or SIGTERM): it is seen by the ``interrupted()`` of
the current :func:`deferred_interrupt`, in any thread.
"""

from __future__ import annotations

import contextlib
import signal
import sys
import threading
from typing import Callable, Iterator

__all__ = ["deferred_interrupt", "request_stop", "SIGNAL_NAMES"]

SIGNAL_NAMES = {signal.SIGINT: "Ctrl-C", signal.SIGTERM: "SIGTERM"}
_requests: list[str] = []  # reasons given to request_stop, until a deferred_interrupt context ends


def request_stop(reason: str) -> None:
    """Ask the running loop to finish its step, save and stop, as a first Ctrl-C would (thread-safe)."""
    _requests.append(reason)


@contextlib.contextmanager
def deferred_interrupt(what: str = "this step") -> Iterator[Callable[[], str | None]]:
    """Yields ``interrupted()``: the name of the first signal received (``"Ctrl-C"``, ``"SIGTERM"``) or None."""
    hits: list[int] = []
    if threading.current_thread() is not threading.main_thread():
        try:
            yield lambda: _requests[0] if _requests else None
        finally:
            _requests.clear()  # handled (a request between two contexts waits for the next one)
        return

    def handler(signum, frame):
        hits.append(signum)
        if len(hits) > 1:
            raise KeyboardInterrupt(f"{SIGNAL_NAMES.get(signum, signum)} again: aborted without saving")
        print(f"\n{SIGNAL_NAMES.get(signum, signum)}: finishing {what}, then saving (send it again to abort)",
              file=sys.stderr, flush=True)

    previous = {s: signal.signal(s, handler) for s in SIGNAL_NAMES}
    try:
        yield lambda: (SIGNAL_NAMES.get(hits[0], str(hits[0])) if hits else None) or (_requests[0] if _requests
                                                                                       else None)
    finally:
        _requests.clear()
        for s, h in previous.items():
            signal.signal(s, h)

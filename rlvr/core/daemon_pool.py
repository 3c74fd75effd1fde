"""A thread pool whose stuck calls can be abandoned: per-call deadlines measured from when a call starts, and a
process that exits however many calls hang.

``concurrent.futures.ThreadPoolExecutor`` cannot serve a deadline that must hold: its workers are joined when the
interpreter exits, so one reward function that never returns keeps the process alive for good, and a worker
stuck in a call holds every call queued behind it. Here the workers are daemon threads; :meth:`DaemonPool.abandon`
retires the worker running a call that overran (it leaves when the call returns, if ever) and starts a fresh one
in its place, so the queue goes on. A Python thread cannot be killed: an abandoned call keeps its thread (and its
CPU) until it returns; what it can no longer do is hold up the pool or the exit.

Each future carries ``started``: the :func:`time.monotonic` second its call began (None while queued), so a
caller's deadline counts from the start of the call, not from the submission (a queued call is not late).
"""

from __future__ import annotations

import concurrent.futures as cf
import itertools
import queue
import threading
import time
from typing import Any, Callable

__all__ = ["DaemonPool", "wait_each"]

_STOP = object()


class DaemonPool:
    """``workers`` daemon threads running submitted calls in order (``name``: the threads' name prefix)."""

    def __init__(self, workers: int = 1, name: str = "rlvr-pool"):
        self.workers, self.name = max(1, workers), name
        self._queue: queue.SimpleQueue = queue.SimpleQueue()
        self._lock = threading.Lock()
        self._ids = itertools.count()
        self._running: dict[int, cf.Future] = {}  # worker id -> the future it runs
        self._retired: set[int] = set()
        self._closed = False
        self.abandoned = 0  # calls abandoned so far (their threads may still run)
        for _ in range(self.workers):
            self._start_worker()

    def _start_worker(self) -> None:
        wid = next(self._ids)
        threading.Thread(target=self._work, args=(wid,), name=f"{self.name}-{wid}", daemon=True).start()

    def _work(self, wid: int) -> None:
        while True:
            item = self._queue.get()
            if item is _STOP:
                return
            fut, fn, args, kwargs = item
            if not fut.set_running_or_notify_cancel():
                continue
            with self._lock:
                self._running[wid] = fut
            fut.started = time.monotonic()
            try:
                result = fn(*args, **kwargs)
            except BaseException as e:  # noqa: BLE001 (handed to the caller through the future)
                if not fut.done():
                    fut.set_exception(e)
            else:
                if not fut.done():
                    fut.set_result(result)
            with self._lock:
                self._running.pop(wid, None)
                if wid in self._retired:  # abandoned while in the call: a fresh worker already took its place
                    self._retired.discard(wid)
                    return

    def submit(self, fn: Callable[..., Any], *args: Any, **kwargs: Any) -> cf.Future:
        if self._closed:
            raise RuntimeError("submit on a closed DaemonPool")
        fut: cf.Future = cf.Future()
        fut.started = None
        self._queue.put((fut, fn, args, kwargs))
        return fut

    def abandon(self, fut: cf.Future) -> None:
        """Give up on ``fut``: it is cancelled if still queued; if running, its worker is retired and replaced."""
        if fut.cancel():
            return
        with self._lock:
            wid = next((w for w, f in self._running.items() if f is fut), None)
            if wid is None or wid in self._retired:
                return
            self._retired.add(wid)
            self.abandoned += 1
        self._start_worker()

    def shutdown(self, wait: bool = False, cancel_futures: bool = True) -> None:
        """Stop taking calls; queued ones are cancelled; running ones finish (or hang) on their daemon threads."""
        self._closed = True
        if cancel_futures:
            while True:
                try:
                    item = self._queue.get_nowait()
                except queue.Empty:
                    break
                if item is not _STOP:
                    item[0].cancel()
        for _ in range(self.workers):
            self._queue.put(_STOP)


def wait_each(futures: list[cf.Future], timeout_s: float, pool: DaemonPool | None = None,
              poll_s: float = 0.02) -> list[tuple[Any, str | None]]:
    """``(result, None)`` per future, or ``(None, "timeout")`` for a call that ran longer than ``timeout_s`` from
    its start (abandoned in ``pool``), or ``(exception, "error")`` for one that raised. Futures of another kind
    (a Ray pool's: ``result(timeout)`` and ``cancel()`` only) share one deadline from now."""
    if not all(isinstance(f, cf.Future) for f in futures):
        return _wait_shared(futures, timeout_s)
    out: list[Any] = [None] * len(futures)
    pending = set(range(len(futures)))
    t0 = time.monotonic()
    while pending:
        cf.wait([futures[i] for i in pending], timeout=poll_s, return_when=cf.FIRST_COMPLETED)
        now = time.monotonic()
        for i in sorted(pending):
            f = futures[i]
            if f.done():
                exc = None if f.cancelled() else f.exception()
                out[i] = (None, "timeout") if f.cancelled() else (exc, "error") if exc is not None else \
                    (f.result(), None)
                pending.discard(i)
                continue
            start = getattr(f, "started", t0)  # (None: still queued; absent: a plain Future, from now)
            if start is not None and now - start > timeout_s:
                if pool is not None:
                    pool.abandon(f)
                else:
                    f.cancel()
                out[i] = (None, "timeout")
                pending.discard(i)
    return out


def _wait_shared(futures: list[Any], timeout_s: float) -> list[tuple[Any, str | None]]:
    """:func:`wait_each` for futures that only offer ``result(timeout)`` and ``cancel()``: one deadline for all."""
    deadline = time.monotonic() + timeout_s
    out: list[tuple[Any, str | None]] = []
    for f in futures:
        try:
            out.append((f.result(timeout=max(0.0, deadline - time.monotonic())), None))
        except cf.TimeoutError:
            f.cancel()
            out.append((None, "timeout"))
        except Exception as e:  # noqa: BLE001 (the caller decides what an error means)
            out.append((e, "error"))
    return out

"""A small pool of long-lived worker processes with a hard, kill-based deadline per request.

Why processes and not threads or ``signal.alarm``: sympy can spend unbounded time inside C (big-integer
powers) where no Python-level timeout fires, and ``signal`` only works on the main thread. So each
comparison runs in a worker (:mod:`._worker`), and the caller waits on the workers' pipes with
``selectors``, never with signals: this works from any thread, and the caller never blocks longer than a
deadline. A worker that misses its deadline is killed (``SIGKILL``) and replaced at once, and its request
is answered ``how="timeout"``.

Workers start lazily on first use (each imports sympy, about a second) and are reused. The deadline of
a request starts when it is written to a ready worker, so start-up time is not charged to it; start-up
itself is bounded by ``startup_timeout_s``. Workers die with the parent (see :mod:`._worker`); a forked
child of the parent gets fresh workers instead of sharing its parent's pipes. Calls from several
threads are serialised by a lock.
"""

from __future__ import annotations

import json
import os
import selectors
import subprocess
import sys
import threading
import time
import weakref
from collections import deque

__all__ = ["WorkerPool"]

_WORKER = os.path.join(os.path.dirname(os.path.abspath(__file__)), "_worker.py")


class _Slot:
    """One worker process and what it is doing: starting, idle, or busy with one request."""

    def __init__(self, argv: list[str]):
        self.proc = subprocess.Popen(argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                     stderr=subprocess.DEVNULL, close_fds=True, bufsize=0)
        os.set_blocking(self.proc.stdout.fileno(), False)
        self.started, self.ready, self.buf = time.monotonic(), False, b""
        self.job: int | None = None
        self.sent = 0.0

    def kill(self) -> None:
        for f in (self.proc.stdin, self.proc.stdout):
            try:
                f.close()
            except OSError:
                pass
        try:
            self.proc.kill()
            self.proc.wait(timeout=5)
        except (OSError, subprocess.TimeoutExpired):
            pass


def _kill_all(slots: list) -> None:
    for s in slots:
        s.kill()
    slots.clear()


class WorkerPool:
    """``run(requests)`` answers each request dict with ``{"ok": bool, "how": str}``, in order."""

    def __init__(self, size: int = 2, timeout_s: float = 3.0, backend: str = "auto", memory_mb: int = 4096,
                 startup_timeout_s: float = 60.0, argv: list[str] | None = None):
        self.size, self.timeout_s, self.startup_timeout_s = max(1, size), timeout_s, startup_timeout_s
        soft = max(0.05, timeout_s - max(0.25, 0.2 * timeout_s))
        self._argv = argv or [sys.executable, "-P", _WORKER, str(os.getpid()), str(soft), str(memory_mb), backend]
        self._slots: list[_Slot] = []
        self._lock = threading.Lock()
        self._pid = os.getpid()
        self.restarts = 0
        self._finalizer = weakref.finalize(self, _kill_all, self._slots)

    def close(self) -> None:
        with self._lock:
            _kill_all(self._slots)

    def _spawn(self) -> _Slot:
        argv = list(self._argv)
        if argv[1:3] == ["-P", _WORKER]:
            argv[3] = str(os.getpid())
        return _Slot(argv)

    def _ensure(self) -> None:
        if os.getpid() != self._pid:  # forked: the pipes belong to the parent's workers; leave them alone
            self._slots.clear()
            self._pid = os.getpid()
        self._slots[:] = [s for s in self._slots if s.proc.poll() is None]
        while len(self._slots) < self.size:
            self._slots.append(self._spawn())

    def _replace(self, slot: _Slot) -> None:
        slot.kill()
        self._slots[self._slots.index(slot)] = self._spawn()
        self.restarts += 1

    def run(self, requests: list[dict]) -> list[dict]:
        with self._lock:
            return self._run(requests)

    def _run(self, requests: list[dict]) -> list[dict]:
        results: list[dict | None] = [None] * len(requests)
        if not requests:
            return []
        self._ensure()
        pending, tries = deque(range(len(requests))), [0] * len(requests)
        failed_starts = 0
        while pending or any(s.job is not None for s in self._slots):
            self._dispatch(pending, requests, tries)
            with selectors.DefaultSelector() as sel:  # fresh each round: slots come and go
                for s in self._slots:
                    sel.register(s.proc.stdout.fileno(), selectors.EVENT_READ, s)
                events = sel.select(self._wait_time())
            for key, _ in events:
                if not self._read(key.data, results):
                    failed_starts += self._on_death(key.data, pending, results, tries)
            failed_starts += self._expire(results)
            if failed_starts > 2 * self.size:  # workers cannot start (no sympy?): answer now, never hang
                for i in list(pending) + [s.job for s in self._slots if s.job is not None]:
                    results[i] = {"ok": False, "how": "worker unavailable"}
                pending.clear()
                for s in self._slots:
                    s.job = None
        return [r or {"ok": False, "how": "worker unavailable"} for r in results]

    def _dispatch(self, pending: deque, requests: list[dict], tries: list) -> None:
        for s in self._slots:
            while pending and s.ready and s.job is None:
                i = pending.popleft()
                line = json.dumps(dict(requests[i], id=i)).encode() + b"\n"
                try:
                    s.proc.stdin.write(line)
                    s.proc.stdin.flush()
                except (BrokenPipeError, OSError, ValueError):
                    pending.appendleft(i)
                    self._replace(s)
                    break
                s.job, s.sent = i, time.monotonic()
                tries[i] += 1

    def _wait_time(self) -> float:
        now, waits = time.monotonic(), [1.0]
        for s in self._slots:
            if s.job is not None:
                waits.append(s.sent + self.timeout_s - now)
            elif not s.ready:
                waits.append(s.started + self.startup_timeout_s - now)
        return max(0.0, min(waits))

    def _read(self, slot: _Slot, results: list) -> bool:
        """Consume the worker's output; False when it has exited."""
        try:
            chunk = os.read(slot.proc.stdout.fileno(), 65536)
        except BlockingIOError:
            return True
        except OSError:
            return False
        if not chunk:
            return False
        slot.buf += chunk
        while b"\n" in slot.buf:
            line, slot.buf = slot.buf.split(b"\n", 1)
            try:
                msg = json.loads(line)
            except ValueError:
                continue
            if msg.get("ready"):
                slot.ready = True
            elif msg.get("id") == slot.job:
                results[slot.job] = {"ok": bool(msg.get("ok")), "how": str(msg.get("how"))}
                slot.job = None
        return True

    def _on_death(self, slot: _Slot, pending: deque, results: list, tries: list) -> int:
        """A worker exited: retry its request once on a fresh worker. Returns 1 if it died starting up."""
        job, was_ready = slot.job, slot.ready
        slot.job = None
        if job is not None:
            if tries[job] < 2:
                pending.appendleft(job)
            else:
                results[job] = {"ok": False, "how": "worker crashed"}
        self._replace(slot)
        return 0 if was_ready else 1

    def _expire(self, results: list) -> int:
        """Kill workers past their deadline (answering "timeout") or stuck starting. Returns failed starts."""
        now, failed = time.monotonic(), 0
        for s in list(self._slots):
            if s.job is not None and now - s.sent > self.timeout_s:
                results[s.job] = {"ok": False, "how": "timeout"}
                s.job = None
                self._replace(s)
            elif not s.ready and now - s.started > self.startup_timeout_s:
                self._replace(s)
                failed += 2 * self.size + 1  # a start-up that hangs will hang again: give up on this call
        return failed

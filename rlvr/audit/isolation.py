"""Scoring one completion under a hard deadline, so that no verifier can hang or kill the audit.

:class:`ProcessScorer` (the default on POSIX) forks one worker process that holds the task (the same objects,
nothing is rebuilt or pickled) and scores one completion at a time, sent over a pipe. A call that outlives its
deadline gets its worker killed (its whole process group, ``SIGKILL``) and a fresh worker forked for the next
call; a worker that dies during a call (a verifier that runs ``os._exit``, segfaults, or runs out of memory)
is reported as a crash and replaced the same way. This holds even for a verifier stuck in C code holding the
GIL (a regex backtracking over a megabyte), which no thread-based deadline can stop.

:class:`ThreadScorer` (``isolation="thread"``, and where ``fork`` is unavailable) runs each call on a thread
and abandons it at the deadline, as :class:`rlvr.tasks.scoring.Scorer` does in training: the audit goes on,
but a call stuck in pure Python keeps its thread and one holding the GIL stalls everything.

A call past its deadline is *slow* either way; it is waited for ``grace_s`` more (default: the deadline again)
before it is killed or abandoned, so that a moderately slow call (a verifier's own 2 s query limit) leaves its
worker alive and warm, and its late reward is kept in the report.

Both score a completion exactly as training does: ``task.score(example, text)``, or ``task.score_batch``
with one completion for a task whose verifier scores batches (a TRL-style reward function). The group hook
(``score_group``) is not called, as in evaluation. A new worker first scores the gold answer of the first
example and two junk completions (:data:`WARMUP_TEXTS`) untimed (up to ``warmup_s`` each), so that no probe is
charged for lazy start-up (the symbolic-math workers take seconds to import SymPy; the code sandbox).
"""

from __future__ import annotations

import concurrent.futures as cf
import math
import multiprocessing as mp
import os
import signal
import sys
import time
import traceback
from dataclasses import dataclass, field
from typing import Any, Sequence

from rlvr.core.types import Example, Score

__all__ = ["Outcome", "ProcessScorer", "ThreadScorer", "make_scorer", "score_once"]

MAX_TEXT = 2000  # characters of a reason or traceback kept
WARMUP_TEXTS = ("x", "1 or 2")  # junk that sends most verifiers down their slow path once, before any probe


@dataclass
class Outcome:
    """What one scoring call gave: the reward and components, or the verifier error, or a timeout or a crash
    of the scoring process; ``seconds`` is the time of the call itself (the deadline for a timeout)."""

    reward: float | None = None
    components: dict[str, float] = field(default_factory=dict)
    reason: str | None = None
    error: str | None = None  # the verifier raised (caught by its wrapper or escaping score)
    traceback: str | None = None
    timed_out: bool = False  # past the deadline (then reward and reason are those of a late result, if any)
    died: str | None = None  # the scoring process died during the call
    seconds: float = 0.0


def _error_of(s: Score) -> tuple[str | None, str | None]:
    """The verifier error recorded in a score (``rlvr.tasks.scoring``'s rule), and its traceback."""
    from rlvr.tasks.scoring import _error_text, _is_error  # the scorer's own test for "the verifier raised"

    if not _is_error(s):
        return None, None
    tb = next((str(v) for k, v in s.info.items() if k == "traceback" or k.endswith(".traceback")), None)
    return _error_text(s), tb


def score_once(task: Any, example: Example, text: str) -> Outcome:
    """Score one completion as training does and summarise it as plain data (picklable, JSON-able)."""
    t0 = time.perf_counter()
    try:
        if getattr(task, "batched", False):
            s = list(task.score_batch([example], [text]))[0]
        else:
            s = task.score(example, text)
        seconds = time.perf_counter() - t0
    except BaseException as e:  # noqa: B902  (SystemExit too: a verifier must never end the process)
        return Outcome(error=f"raised {type(e).__name__}: {e}"[:MAX_TEXT], traceback=traceback.format_exc()[-MAX_TEXT:],
                       seconds=time.perf_counter() - t0)
    err, tb = _error_of(s)
    comps = {}
    for k, v in (s.components or {}).items():
        try:
            comps[str(k)] = float(v)
        except (TypeError, ValueError):
            continue
    reason = next((str(v) for k, v in s.info.items() if k == "reason" or k.endswith(".reason")), None)
    try:
        reward = float(s.reward)
    except (TypeError, ValueError):
        return Outcome(error=f"reward is not a number: {s.reward!r}"[:MAX_TEXT], seconds=seconds)
    if not math.isfinite(reward):
        err = err or f"non-finite reward {reward} (training stops with ScoringError)"
    return Outcome(reward=reward, components=comps, reason=reason[:MAX_TEXT] if reason else None,
                   error=err[:MAX_TEXT] if err else None, traceback=tb[-MAX_TEXT:] if tb else None, seconds=seconds)


def _serve(conn, other_end, task, examples: Sequence[Example], quiet: bool) -> None:
    """The worker: score ``(example index, text)`` requests until ``None`` or the parent's end closes."""
    other_end.close()  # so that the parent's death is an end of file here
    try:
        os.setpgid(0, 0)  # its own process group: a timeout kills whatever it started too
    except OSError:
        pass
    try:  # the parent marks it daemonic (ended with the parent); a verifier may still start processes of its own
        mp.current_process().daemon = False
    except (AssertionError, AttributeError):
        pass
    if quiet:  # verifiers' own prints and warnings would break the report on the terminal
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, 1)
        os.dup2(devnull, 2)
        # fresh stream objects: a lock of the inherited ones may have been held by a parent thread at the fork
        sys.stdout = open(os.devnull, "w")
        sys.stderr = open(os.devnull, "w")
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # Ctrl-C is the parent's to handle
    while True:
        try:
            msg = conn.recv()
        except (EOFError, OSError):
            return
        if msg is None:
            return
        i, text = msg
        conn.send(score_once(task, examples[i], text))


def _late(out: Outcome, seconds: float) -> Outcome:
    """A result that came after the deadline: slow, with what it said kept."""
    out.timed_out, out.seconds = True, seconds
    return out


class ProcessScorer:
    """Scores in a forked worker with a kill-based deadline per call (see the module doc)."""

    def __init__(self, task: Any, examples: Sequence[Example], warmup_s: float = 60.0, quiet: bool = True,
                 grace_s: float | None = None):
        self.task, self.examples, self.warmup_s, self.quiet = task, list(examples), warmup_s, quiet
        self.grace_s = grace_s
        self._ctx = mp.get_context("fork")
        self._proc = None
        self._conn = None
        self.restarts = 0

    def _start(self, warm: bool = True) -> None:
        parent, child = self._ctx.Pipe()
        proc = self._ctx.Process(target=_serve, args=(child, parent, self.task, self.examples, self.quiet), daemon=True,
                                 name="rlvr-audit-scorer")
        proc.start()
        child.close()
        self._proc, self._conn = proc, parent
        if warm and self.examples and self.warmup_s > 0:
            for text in (self.examples[0].answer, *WARMUP_TEXTS):
                self._call(0, text, self.warmup_s, 0.0)
                if self._proc is None:  # the warm-up itself hung or crashed: start cold (the probes will say why)
                    self._start(warm=False)
                    return

    def _kill(self) -> None:
        proc, self._proc = self._proc, None
        if self._conn is not None:
            self._conn.close()
            self._conn = None
        if proc is None:
            return
        if proc.is_alive():
            try:
                os.killpg(proc.pid, signal.SIGKILL)
            except OSError:
                proc.kill()
        proc.join(5)

    def _call(self, index: int, text: str, timeout_s: float, grace_s: float) -> Outcome:
        t0 = time.perf_counter()
        try:
            self._conn.send((index, text))
            if self._conn.poll(timeout_s):
                return self._conn.recv()
            if grace_s > 0 and self._conn.poll(grace_s):
                return _late(self._conn.recv(), time.perf_counter() - t0)
            self._kill()
            self.restarts += 1
            return Outcome(timed_out=True, seconds=time.perf_counter() - t0)
        except (EOFError, OSError, BrokenPipeError):
            proc = self._proc
            if proc is not None:
                proc.join(2)
            code = proc.exitcode if proc is not None else None
            self._kill()
            self.restarts += 1
            return Outcome(died=f"the scoring process died (exit code {code})", seconds=time.perf_counter() - t0)

    def __call__(self, index: int, text: str, timeout_s: float) -> Outcome:
        if self._proc is None or not self._proc.is_alive():
            self._kill()
            self._start()
        return self._call(index, text, timeout_s, timeout_s if self.grace_s is None else self.grace_s)

    def close(self) -> None:
        if self._conn is not None and self._proc is not None and self._proc.is_alive():
            try:
                self._conn.send(None)
                self._proc.join(5)
            except OSError:
                pass
        self._kill()


class ThreadScorer:
    """Scores on a thread, abandoned at the deadline (training's guard; cannot stop a call holding the GIL)."""

    def __init__(self, task: Any, examples: Sequence[Example], warmup_s: float = 60.0, quiet: bool = True,
                 grace_s: float | None = None):
        self.task, self.examples, self.grace_s = task, list(examples), grace_s
        self._pool = self._fresh()
        self.restarts = 0
        if self.examples and warmup_s > 0:
            for text in (self.examples[0].answer, *WARMUP_TEXTS):
                self(0, text, warmup_s)

    @staticmethod
    def _fresh() -> cf.ThreadPoolExecutor:
        return cf.ThreadPoolExecutor(max_workers=1, thread_name_prefix="rlvr-audit")

    def __call__(self, index: int, text: str, timeout_s: float) -> Outcome:
        t0 = time.perf_counter()
        fut = self._pool.submit(score_once, self.task, self.examples[index], text)
        try:
            return fut.result(timeout=timeout_s)
        except cf.TimeoutError:
            pass
        try:
            return _late(fut.result(timeout=timeout_s if self.grace_s is None else self.grace_s),
                         time.perf_counter() - t0)
        except cf.TimeoutError:
            self._pool.shutdown(wait=False, cancel_futures=True)
            self._pool = self._fresh()  # the stuck thread is left behind; the next call gets a fresh one
            self.restarts += 1
            return Outcome(timed_out=True, seconds=time.perf_counter() - t0)

    def close(self) -> None:
        self._pool.shutdown(wait=False, cancel_futures=True)


def make_scorer(task: Any, examples: Sequence[Example], isolation: str = "auto", warmup_s: float = 60.0,
                quiet: bool = True, grace_s: float | None = None):
    """A :class:`ProcessScorer` (``"process"``, or ``"auto"`` where ``fork`` exists) or a :class:`ThreadScorer`."""
    if isolation not in ("auto", "process", "thread"):
        raise ValueError(f"isolation must be auto, process or thread, got {isolation!r}")
    if isolation == "auto":
        isolation = "process" if "fork" in mp.get_all_start_methods() else "thread"
    cls = ProcessScorer if isolation == "process" else ThreadScorer
    return cls(task, examples, warmup_s, quiet, grace_s)

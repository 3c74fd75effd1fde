"""Scoring completions with a task's verifiers: in-line or on a thread pool, always with a deadline.

Verifiers that run external work (the code sandbox, SQL, the symbolic-math workers) bound and kill that work
themselves; the pool (``scoring.workers`` threads, one by default) adds concurrency for them and one more
guard, whatever the number of workers: a completion whose scoring runs longer than ``timeout_s`` (counted from
the start of its own call, not from the step's) scores 0 with reason ``"timeout"`` and the step goes on. A
Python thread cannot be killed, so a verifier that hangs in pure Python keeps its thread; the pool's threads are
daemons and a fresh one takes the stuck one's place (:class:`rlvr.core.daemon_pool.DaemonPool`), so the calls
behind it go on and the process still exits. The same deadline holds in training, evaluation and ``rlvr
verify``. A reward that is NaN or
infinite stops the run with :class:`ScoringError`, naming the task, the example and the completion. Timeouts and
verifier errors are counted and reported in the step metrics as ``score/timeouts`` and ``score/errors``.

After the per-completion scores, ``score_many`` hands each prompt's group (the completions whose examples
share an ``id``, in order of first appearance) to the task's ``score_group`` hook, for rewards that need the
whole group (POW3R). The hook runs in the calling thread; if it raises, or returns the wrong number of
scores, that group scores 0 with a ``verifier error`` reason and counts as errors.

A task with a batch verifier (a TRL-style reward function, see :func:`rlvr.verifiers.from_callable`) is
scored with one ``score_batch`` call per generation call; with ``workers > 1`` that call runs on the pool
under the same deadline (all of its completions time out together).

**Bad output or a broken verifier.** A completion the verifier rejects scores 0 and training goes on. A
verifier that *raises* is different: the score is 0 too, but it is an error of the verifier, not of the
model. Errors are counted (``score/errors``); the first one's traceback is printed once, and when more than
``max_error_frac`` of one call's completions error, :class:`ScoringError` stops the run with that
traceback instead of training on rewards that mean nothing. :func:`check_verifier` runs the same test on
the gold answers of a few examples before any training, so a function that always raises fails at once.
"""

from __future__ import annotations

import math
import sys
import time
from typing import Any, Callable, Sequence

from rlvr.core.daemon_pool import DaemonPool, wait_each
from rlvr.core.types import Example, Score

__all__ = ["Scorer", "ScoreStats", "ScoringError", "check_verifier"]

TIMEOUT = Score(0.0, {"correct": 0.0}, {"reason": "timeout"})


class ScoreStats(dict):
    """``{"score/timeouts": n, "score/errors": n, "score/seconds": s}``."""


class ScoringError(RuntimeError):
    """The verifier itself fails (raises) on too many completions: the rewards would be noise."""


def _pop_traceback(s: Score) -> str | None:
    """Remove the traceback a failing verifier left in ``info`` (kept out of records), and return it."""
    keys = [k for k in s.info if k == "traceback" or k.endswith(".traceback")]
    found = None
    for k in keys:
        found = found or s.info[k]
        del s.info[k]
    return found


def _error_text(s: Score) -> str:
    for k, v in s.info.items():
        if k.endswith("error") or str(v).startswith("verifier error"):
            return str(v)
    return "unknown error"


def _is_error(s: Score) -> bool:
    return any(str(v).startswith("verifier error") for k, v in s.info.items() if k.endswith("reason")) or \
        any(k.endswith("error") for k in s.info)


class Scorer:
    """Scores a step's completions; ``max_error_frac`` (1.0: never stop) is the share of one call's
    completions whose verifier may raise before :class:`ScoringError`; ``warn`` prints the first error."""

    def __init__(self, task, workers: int = 1, timeout_s: float = 30.0, max_error_frac: float = 1.0,
                 warn: Callable[[str], None] | None = None, pool: Any = None, noise: Any = None,
                 noise_seed: int = 0):
        self.task, self.workers, self.timeout_s = task, workers, timeout_s
        self.noise, self.noise_seed = (noise if noise is not None and noise.on else None), noise_seed
        self.max_error_frac = max_error_frac
        self.warn = warn if warn is not None else (lambda msg: print(msg, file=sys.stderr, flush=True))
        self.first_error: str | None = None  # the first error's traceback (or message), for reports
        from rlvr.tasks.appeals import AppealState

        self.appeal = AppealState()  # scoring.appeal's running false-negative estimate (checkpointed)
        # e.g. rlvr.distributed.ray_engine.RayPool (one deadline for a call's futures); else daemon threads
        self._pool = pool if pool is not None else DaemonPool(workers, "rlvr-score")

    def score_many(self, examples: Sequence[Example], texts: Sequence[str],
                   groups: bool = True) -> tuple[list[Score], ScoreStats]:
        """Score ``texts`` (one per example) under the deadline; ``groups``: then the task's ``score_group``
        hook (training; evaluation scores each completion alone)."""
        t0 = time.perf_counter()
        own = self._pool if isinstance(self._pool, DaemonPool) else None
        if getattr(self.task, "batched", False):
            ((got, status),) = wait_each([self._pool.submit(self.task.score_batch, examples, texts)], self.timeout_s,
                                         own)
            if status == "error":
                raise got
            scores = [TIMEOUT] * len(texts) if status == "timeout" else list(got)
            timeouts = len(texts) if status == "timeout" else 0
        else:
            done = wait_each([self._pool.submit(self.task.score, e, t) for e, t in zip(examples, texts)],
                             self.timeout_s, own)
            for got, status in done:
                if status == "error":
                    raise got
            scores = [TIMEOUT if status == "timeout" else got for got, status in done]
            timeouts = sum(status == "timeout" for _, status in done)
        if groups:
            scores = self._score_groups(examples, texts, scores)
        self._check_finite(examples, texts, scores)
        errors = self._check_errors(scores)
        stats = ScoreStats({"score/timeouts": float(timeouts), "score/errors": float(errors),
                            "score/seconds": time.perf_counter() - t0})
        if self.noise is not None:  # controlled verifier noise (rlvr.tasks.noise): training scores only
            from rlvr.tasks.noise import add_noise

            scores, counts = add_noise(examples, scores, self.noise, self.noise_seed)
            stats.update(counts)
        return scores, stats

    def _check_finite(self, examples: Sequence[Example], texts: Sequence[str], scores: list[Score]) -> None:
        """A NaN or infinite reward would train on nothing (an infinite advantage, a NaN loss): stop, naming the
        reward and an example, before any update."""
        for e, t, sc in zip(examples, texts, scores):
            bad = {k: v for k, v in sc.components.items() if isinstance(v, float) and not math.isfinite(v)}
            if math.isfinite(float(sc.reward)) and not bad:
                continue
            named = ", ".join(f"{k}={v}" for k, v in bad.items()) or "no component"
            raise ScoringError(
                f"task {getattr(self.task, 'name', '?')!r} returned a non-finite reward ({sc.reward}) for example "
                f"{e.id!r} (non-finite components: {named}); completion: {t[:200]!r}. Rewards must be finite "
                "numbers: return 0 (or a penalty) for a completion your function cannot score")

    def _check_errors(self, scores: list[Score]) -> int:
        failed = [s for s in scores if _is_error(s)]
        tracebacks = [_pop_traceback(s) for s in scores]
        if not failed:
            return 0
        first = next((t for t in tracebacks if t), None) or _error_text(failed[0])
        if self.first_error is None:
            self.first_error = first
            self.warn(f"warning: the verifier raised on {len(failed)} of {len(scores)} completions; those score 0 "
                      f"(counted as score/errors). First error:\n{first.rstrip()}")
        if len(failed) > self.max_error_frac * len(scores):
            raise ScoringError(
                f"the verifier failed on {len(failed)} of {len(scores)} completions of this step "
                f"(more than scoring.max_error_frac={self.max_error_frac:g}): a broken verifier or reward function, "
                f"not bad model output. First error:\n{first.rstrip()}")
        return len(failed)

    def _score_groups(self, examples: Sequence[Example], texts: Sequence[str], scores: list[Score]) -> list[Score]:
        hook = getattr(self.task, "score_group", None)
        if hook is None:
            return scores
        groups: dict[str, list[int]] = {}
        for i, e in enumerate(examples):
            groups.setdefault(e.id, []).append(i)
        out = list(scores)
        for idx in groups.values():
            try:
                new = list(hook(examples[idx[0]], [texts[i] for i in idx], [scores[i] for i in idx]))
                if len(new) != len(idx):
                    raise ValueError(f"returned {len(new)} scores for {len(idx)} completions")
            except Exception as e:  # a group-level bug must not stop training: score 0, counted as errors
                reason = f"verifier error: score_group: {type(e).__name__}: {e}"
                new = [Score(0.0, {"correct": 0.0}, {"reason": reason}) for _ in idx]
            for i, s in zip(idx, new):
                out[i] = s
        return out

    def close(self) -> None:
        if self._pool is not None:
            self._pool.shutdown(wait=False, cancel_futures=True)


def check_verifier(task, examples: Sequence[Example], max_examples: int = 8, timeout_s: float = 30.0) -> None:
    """Before any training: score the gold answers of the first ``max_examples`` examples, each under the
    scoring deadline; raise :class:`ScoringError` if the verifier raises on every one of them (it would fail on
    every completion), or outlives its deadline on every one (it would hang every step).

    Gold answers scoring 0 is allowed (a reward function may want more than the bare answer); only errors
    of the verifier itself count. The task's ``score_group`` hook is not called (it may keep state).
    """
    picked = list(examples)[:max_examples]
    if not picked:
        return
    golds = [str(e.answer) for e in picked]
    pool = DaemonPool(1, "rlvr-gold-check")
    try:
        done = wait_each([pool.submit(task.score_batch, picked, golds)] if getattr(task, "batched", False)
                         else [pool.submit(task.score, e, g) for e, g in zip(picked, golds)], timeout_s, pool)
    finally:
        pool.shutdown()
    if all(status == "timeout" for _, status in done):
        raise ScoringError(f"the verifier of task {task.name!r} ran past its deadline (scoring.timeout_s={timeout_s:g}) "
                           f"on the gold answer of each of the first {len(done)} examples, so every step would wait "
                           "for it and score 0: a reward function that hangs, or a deadline too short for it")
    for got, status in done:
        if status == "error":
            raise got
    scores = [s for got, status in done if status is None
              for s in (got if getattr(task, "batched", False) else [got])]
    failed = [s for s in scores if _is_error(s)]
    tracebacks = [t for t in (_pop_traceback(s) for s in scores) if t]
    if failed and len(failed) == len(scores):
        first = tracebacks[0] if tracebacks else _error_text(failed[0])
        raise ScoringError(f"the verifier of task {task.name!r} raised on the gold answer of each of the first "
                           f"{len(picked)} examples, so it would fail on every completion. First error:\n"
                           f"{first.rstrip()}")

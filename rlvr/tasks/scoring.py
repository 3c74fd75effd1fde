"""Scoring completions with a task's verifiers: in-line or on a thread pool, always with a deadline.

Verifiers that run external work (the code sandbox, SQL, the symbolic-math workers) bound and kill that work
themselves; the pool adds concurrency for them and one more guard: a completion whose scoring outlives
``timeout_s`` scores 0 with reason ``"timeout"`` and the step goes on (a Python thread cannot be killed, so a
verifier that hangs in pure Python keeps its thread; it is reported, never waited for). Timeouts and
verifier errors are counted and reported in the step metrics as ``score/timeouts`` and ``score/errors``.

After the per-completion scores, ``score_many`` hands each prompt's group (the completions whose examples
share an ``id``, in order of first appearance) to the task's ``score_group`` hook, for rewards that need the
whole group (POW3R). The hook runs in the calling thread; if it raises, or returns the wrong number of
scores, that group scores 0 with a ``verifier error`` reason and counts as errors.
"""

from __future__ import annotations

import concurrent.futures as cf
import time
from typing import Sequence

from rlvr.core.types import Example, Score

__all__ = ["Scorer", "ScoreStats"]

TIMEOUT = Score(0.0, {"correct": 0.0}, {"reason": "timeout"})


class ScoreStats(dict):
    """``{"score/timeouts": n, "score/errors": n, "score/seconds": s}``."""


def _is_error(s: Score) -> bool:
    return any(str(v).startswith("verifier error") for k, v in s.info.items() if k.endswith("reason")) or \
        any(k.endswith("error") for k in s.info)


class Scorer:
    def __init__(self, task, workers: int = 1, timeout_s: float = 30.0):
        self.task, self.workers, self.timeout_s = task, workers, timeout_s
        self._pool = cf.ThreadPoolExecutor(max_workers=workers, thread_name_prefix="rlvr-score") if workers > 1 else None

    def score_many(self, examples: Sequence[Example], texts: Sequence[str]) -> tuple[list[Score], ScoreStats]:
        t0 = time.perf_counter()
        if self._pool is None:
            scores = [self.task.score(e, t) for e, t in zip(examples, texts)]
            timeouts = 0
        else:
            futures = [self._pool.submit(self.task.score, e, t) for e, t in zip(examples, texts)]
            deadline = t0 + self.timeout_s
            scores, timeouts = [], 0
            for f in futures:
                try:
                    scores.append(f.result(timeout=max(0.0, deadline - time.perf_counter())))
                except cf.TimeoutError:
                    f.cancel()
                    scores.append(TIMEOUT)
                    timeouts += 1
        scores = self._score_groups(examples, texts, scores)
        stats = ScoreStats({"score/timeouts": float(timeouts),
                            "score/errors": float(sum(_is_error(s) for s in scores)),
                            "score/seconds": time.perf_counter() - t0})
        return scores, stats

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

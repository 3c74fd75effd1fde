"""The scoring pool: order kept, a hanging verifier times out without stalling, errors are counted."""

import threading
import time

from rlvr.core.types import Example, Score
from rlvr.tasks.base import Task, WeightedVerifier
from rlvr.tasks.scoring import Scorer
from rlvr.verifiers import BaseVerifier


class Slow(BaseVerifier):
    name = "slow"

    def __init__(self):
        self.release = threading.Event()

    def score(self, example, text):
        if text == "hang":
            self.release.wait(10)
        if text == "boom":
            raise RuntimeError("bad output")
        return Score(float(text == example.answer), {"correct": float(text == example.answer)})


def _task(v):
    ex = [Example(f"e{i}", "q", str(i)) for i in range(4)]
    return Task("t", {"train": ex}, [WeightedVerifier(v)]), ex


def test_inline_and_pool_agree_and_keep_order():
    v = Slow()
    task, ex = _task(v)
    texts = ["0", "x", "2", "3"]
    a, sa = Scorer(task).score_many(ex, texts)
    b, sb = Scorer(task, workers=3).score_many(ex, texts)
    assert [s.reward for s in a] == [s.reward for s in b] == [1.0, 0.0, 1.0, 1.0]
    assert sa["score/timeouts"] == sb["score/timeouts"] == 0


def test_hanging_verifier_times_out_and_is_counted():
    v = Slow()
    task, ex = _task(v)
    scorer = Scorer(task, workers=2, timeout_s=0.3)
    t0 = time.perf_counter()
    scores, stats = scorer.score_many(ex, ["0", "hang", "2", "3"])
    elapsed = time.perf_counter() - t0
    v.release.set()
    scorer.close()
    assert elapsed < 2.0
    assert scores[1].reward == 0.0 and scores[1].info["reason"] == "timeout"
    assert [scores[i].reward for i in (0, 2, 3)] == [1.0, 1.0, 1.0]
    assert stats["score/timeouts"] == 1


def test_verifier_errors_score_zero_and_are_counted():
    v = Slow()
    task, ex = _task(v)
    scores, stats = Scorer(task).score_many(ex, ["0", "boom", "boom", "3"])
    assert [s.reward for s in scores] == [1.0, 0.0, 0.0, 1.0]
    assert stats["score/errors"] == 2
    assert "RuntimeError" in scores[1].info["slow.reason"]

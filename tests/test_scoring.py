"""The scoring pool: order kept, a hanging verifier times out without stalling, errors are counted."""

import threading
import time

import pytest

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


class GroupTask(Task):
    """Records each group the scorer hands over; the training reward is the group's size."""

    def __init__(self, fail_on: str | None = None, wrong_length: bool = False):
        super().__init__("g", {}, [WeightedVerifier(Slow())])
        self.calls, self.fail_on, self.wrong_length = [], fail_on, wrong_length

    def score_group(self, example, texts, scores):
        self.calls.append((example.id, list(texts), [s.reward for s in scores]))
        if example.id == self.fail_on:
            raise RuntimeError("group bug")
        out = [Score(float(len(texts)), {"correct": 0.0}, {"text": t}) for t in texts]
        return out + [Score(0.0)] if self.wrong_length and example.id == "b" else out


@pytest.mark.parametrize("workers", [1, 3])
def test_group_hook_gets_whole_groups_in_first_appearance_order(workers):
    task = GroupTask()
    a, b, c = Example("a", "q", "1"), Example("b", "q", "2"), Example("c", "q", "3")
    exs, texts = [a, b, a, c, b, a], ["1", "2", "x", "3", "y", "1"]
    scores, stats = Scorer(task, workers=workers).score_many(exs, texts)
    assert task.calls == [("a", ["1", "x", "1"], [1.0, 0.0, 1.0]), ("b", ["2", "y"], [1.0, 0.0]),
                          ("c", ["3"], [1.0])]
    assert [s.reward for s in scores] == [3.0, 2.0, 3.0, 1.0, 2.0, 3.0]  # each score back in its own slot
    assert [s.info["text"] for s in scores] == texts
    assert stats["score/errors"] == 0


def test_group_hook_failure_scores_that_group_zero_and_counts_errors():
    for task in (GroupTask(fail_on="b"), GroupTask(wrong_length=True)):
        exs = [Example("a", "q", "1"), Example("b", "q", "2"), Example("b", "q", "2")]
        scores, stats = Scorer(task).score_many(exs, ["1", "2", "2"])
        assert [s.reward for s in scores] == [1.0, 0.0, 0.0]
        assert all(s.info["reason"].startswith("verifier error: score_group") for s in scores[1:])
        assert stats["score/errors"] == 2


def test_default_task_keeps_scores_and_has_no_state():
    task, ex = _task(Slow())
    assert Scorer(task).score_many(ex, ["0", "x", "2", "3"])[0] == [task.score(e, t) for e, t in
                                                                    zip(ex, ["0", "x", "2", "3"])]
    assert task.state_dict() == {}
    task.load_state_dict({})


def test_the_deadline_holds_with_one_worker_and_a_hang_does_not_block_the_next_call():
    """scoring.workers=1 (the default) still runs under the deadline; the hung thread is left behind and the next
    call scores on fresh threads at once."""
    v = Slow()
    task, ex = _task(v)
    scorer = Scorer(task, workers=1, timeout_s=0.3)
    t0 = time.perf_counter()
    scores, stats = scorer.score_many(ex, ["0", "hang", "2", "3"])
    assert time.perf_counter() - t0 < 2.0
    assert scores[0].reward == 1.0 and scores[1].info["reason"] == "timeout"
    assert stats["score/timeouts"] >= 1  # (those queued behind the hang on the one thread time out with it)
    t1 = time.perf_counter()
    again, stats2 = scorer.score_many(ex, ["0", "1", "2", "x"])
    assert time.perf_counter() - t1 < 1.0 and stats2["score/timeouts"] == 0
    assert [s.reward for s in again] == [1.0, 1.0, 1.0, 0.0]
    v.release.set()
    scorer.close()


@pytest.mark.parametrize("bad", [float("nan"), float("inf"), float("-inf")])
@pytest.mark.parametrize("where", ["only", "second"])
def test_a_non_finite_reward_stops_with_the_task_example_and_completion(bad, where):
    """One verifier, or the second of two (the task's reward is their weighted sum; the message names the
    component that is not finite)."""
    from rlvr.tasks.scoring import ScoringError

    class NonFinite(BaseVerifier):
        name = "nonfinite"

        def score(self, example, text):
            return Score(bad if text == "odd" else 1.0, {"correct": 0.0})

    v = NonFinite()
    ex = [Example(f"e{i}", "q", str(i)) for i in range(4)]
    verifiers = [WeightedVerifier(v)] if where == "only" else [WeightedVerifier(Slow()), WeightedVerifier(v, 0.5)]
    task = Task("t", {"train": ex}, verifiers)
    with pytest.raises(ScoringError) as e:
        Scorer(task).score_many(ex, ["a", "b", "odd", "c"])
    msg = str(e.value)
    assert "'t'" in msg and "'e2'" in msg and "'odd'" in msg and "non-finite" in msg and "nonfinite=" in msg
    scores, _ = Scorer(task).score_many(ex, ["a", "b", "c", "d"])  # finite rewards pass
    assert all(s.reward == (1.0 if where == "only" else 0.5) for s in scores)

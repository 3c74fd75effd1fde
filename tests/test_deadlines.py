"""Deadlines that hold: every reward call in training, evaluation, ``rlvr verify`` and the gold check is bounded by
its own deadline (counted from the start of the call) in every worker setting; a call that overruns scores 0, is
counted and is abandoned so that the calls behind it go on and the process can exit."""

from __future__ import annotations

import subprocess
import sys
import textwrap
import threading
import time
from pathlib import Path

import pytest

from rlvr.core.daemon_pool import DaemonPool, wait_each
from rlvr.core.types import Example, Score
from rlvr.tasks.base import Task, WeightedVerifier
from rlvr.tasks.scoring import Scorer, ScoringError, check_verifier
from rlvr.verifiers import BaseVerifier

ROOT = Path(__file__).resolve().parents[1]
FOREVER = threading.Event()  # never set: a call waiting on it hangs for good


class Timed(BaseVerifier):
    """``hang`` never returns; ``slow:S`` takes S seconds then is correct; else exact match."""

    name = "timed"

    def score(self, example, text):
        if text == "hang":
            FOREVER.wait()
        if text.startswith("slow:"):
            time.sleep(float(text[5:]))
            return Score(1.0, {"correct": 1.0})
        ok = float(text == example.answer)
        return Score(ok, {"correct": ok})


def _task(n=4):
    ex = [Example(f"e{i}", "q", str(i)) for i in range(n)]
    return Task("t", {"train": ex, "eval": ex}, [WeightedVerifier(Timed())]), ex


def test_the_deadline_counts_from_the_start_of_each_call():
    """One worker, three calls of 0.25 s under a 0.6 s deadline: 0.75 s in all, but no call is late, so none
    times out (a deadline from the step's start would have cut the third)."""
    task, ex = _task(3)
    scorer = Scorer(task, workers=1, timeout_s=0.6)
    scores, stats = scorer.score_many(ex, ["slow:0.25"] * 3)
    scorer.close()
    assert stats["score/timeouts"] == 0 and [s.reward for s in scores] == [1.0, 1.0, 1.0]


@pytest.mark.parametrize("workers", [1, 2, 5])
def test_hangs_score_zero_and_the_calls_behind_them_go_on(workers):
    """Two hanging calls among correct ones, whatever the number of workers: each hang costs one deadline, the
    rest score as they should, and the next step's calls run at once."""
    task, ex = _task(6)
    scorer = Scorer(task, workers=workers, timeout_s=0.3)
    t0 = time.perf_counter()
    scores, stats = scorer.score_many(ex, ["0", "hang", "2", "hang", "4", "5"])
    assert time.perf_counter() - t0 < 0.3 * 2 + 1.0
    assert [s.reward for s in scores] == [1.0, 0.0, 1.0, 0.0, 1.0, 1.0]
    assert [s.info.get("reason") for s in scores].count("timeout") == 2 and stats["score/timeouts"] == 2
    t1 = time.perf_counter()
    again, st = scorer.score_many(ex, [str(i) for i in range(6)])
    assert time.perf_counter() - t1 < 0.5 and st["score/timeouts"] == 0 and all(s.reward == 1.0 for s in again)
    scorer.close()


def test_a_batch_reward_function_is_bounded_too():
    from rlvr.verifiers import from_callable

    def reward(prompts, completions, **kw):
        if "hang" in completions:
            FOREVER.wait()
        return [1.0 for _ in completions]

    ex = [Example(f"e{i}", "q", str(i)) for i in range(3)]
    task = Task("b", {"train": ex}, [WeightedVerifier(from_callable(reward))])
    scorer = Scorer(task, workers=1, timeout_s=0.3)
    scores, stats = scorer.score_many(ex, ["a", "hang", "c"])
    assert stats["score/timeouts"] == 3 and all(s.info["reason"] == "timeout" for s in scores)
    scores, stats = scorer.score_many(ex, ["a", "b", "c"])
    assert stats["score/timeouts"] == 0 and [s.reward for s in scores] == [1.0, 1.0, 1.0]
    scorer.close()


def test_evaluation_enforces_the_deadline():
    from rlvr.core.types import Completion
    from rlvr.eval.evaluate import evaluate

    class Engine:  # answers "hang" to the second prompt, the right answer elsewhere
        def generate(self, requests, sampling):
            return [Completion(r.example.id, [1], [2], None, "stop", "hang" if r.example.id == "e1" else
                               r.example.answer, group=i) for i, r in enumerate(requests) for _ in range(r.n)]

    task, _ = _task(4)
    t0 = time.perf_counter()
    out = evaluate(Engine(), task, samples=1, scorer=Scorer(task, timeout_s=0.3))
    assert time.perf_counter() - t0 < 3.0
    assert out["score_timeouts"] == 1 and out["accuracy"] == pytest.approx(0.75)


def test_the_gold_check_is_bounded_and_names_a_hanging_reward():
    class Hangs(Timed):
        def score(self, example, text):
            FOREVER.wait()

    ex = [Example(f"e{i}", "q", str(i)) for i in range(3)]
    t0 = time.perf_counter()
    with pytest.raises(ScoringError, match=r"ran past its deadline \(scoring.timeout_s=0.2\).*hangs"):
        check_verifier(Task("h", {"train": ex}, [WeightedVerifier(Hangs())]), ex, timeout_s=0.2)
    assert time.perf_counter() - t0 < 3.0
    check_verifier(Task("ok", {"train": ex}, [WeightedVerifier(Timed())]), ex, timeout_s=0.2)


def test_a_process_with_hung_reward_calls_exits():
    """Abandoned calls live on daemon threads: the interpreter exits without waiting for them (a
    ThreadPoolExecutor would join them at exit, for good)."""
    code = textwrap.dedent("""
        import threading, time
        from rlvr.core.types import Example, Score
        from rlvr.tasks.base import Task, WeightedVerifier
        from rlvr.tasks.scoring import Scorer
        from rlvr.verifiers import BaseVerifier
        class Hang(BaseVerifier):
            name = "hang"
            def score(self, example, text):
                threading.Event().wait()
        ex = [Example(f"e{i}", "q", "1") for i in range(3)]
        s = Scorer(Task("h", {"train": ex}, [WeightedVerifier(Hang())]), workers=2, timeout_s=0.2)
        scores, stats = s.score_many(ex, ["1", "1", "1"])
        print("timeouts", int(stats["score/timeouts"]), flush=True)
    """)
    t0 = time.perf_counter()
    proc = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert "timeouts 3" in proc.stdout and time.perf_counter() - t0 < 30


def test_rlvr_verify_honours_its_timeout(tmp_path, monkeypatch):
    import json

    import rlvr.cli.verify as verify

    monkeypatch.setattr(verify, "build_verifier", lambda name, *a, **k: Timed())
    src = tmp_path / "in.jsonl"
    src.write_text("".join(json.dumps({"completion": c, "answer": "1", "task": "numeric"}) + "\n"
                           for c in ["1", "hang", "2", "hang", "1"]))
    t0 = time.perf_counter()
    summary = verify.verify_file(src, tmp_path / "out.jsonl", workers=2, timeout_s=0.3)
    assert time.perf_counter() - t0 < 3.0
    rows = [json.loads(line) for line in (tmp_path / "out.jsonl").read_text().splitlines()]
    assert [r["reward"] for r in rows] == [1.0, 0.0, 0.0, 0.0, 1.0]
    assert sum(r.get("reason") == "timeout" for r in rows) == 2, (rows, summary)


def test_the_pool_replaces_abandoned_workers_and_cancels_queued_calls():
    pool = DaemonPool(1, "t")
    gate = threading.Event()
    stuck = pool.submit(gate.wait)
    queued = pool.submit(lambda: 7)
    time.sleep(0.05)
    assert stuck.started is not None and queued.started is None  # queued behind the stuck call
    (_, status), (value, status2) = wait_each([stuck, queued], 0.2, pool)
    assert status == "timeout" and (value, status2) == (7, None) and pool.abandoned == 1
    gate.set()
    assert pool.submit(lambda: 1).result(timeout=1) == 1  # the replacement worker serves the queue
    hold = threading.Event()
    busy = pool.submit(hold.wait)  # the one worker is in a call: what is queued behind it waits
    late = pool.submit(lambda: 1)
    time.sleep(0.05)
    pool.shutdown()
    assert late.cancelled() and not busy.done()  # queued calls are cancelled; the running one goes on
    hold.set()
    assert busy.result(timeout=1) is True
    with pytest.raises(RuntimeError, match="closed"):
        pool.submit(lambda: 1)


def test_futures_of_another_pool_share_one_deadline():
    """A Ray pool's futures offer result(timeout) and cancel() only: one deadline for the call, as before."""
    import concurrent.futures as cf

    class Remote:  # a stand-in for rlvr.distributed.ray_engine._Future
        def __init__(self, value=None, hang=False, boom=False):
            self.value, self.hang, self.boom, self.cancelled = value, hang, boom, False

        def result(self, timeout=None):
            if self.boom:
                raise RuntimeError("remote failed")
            if self.hang:
                time.sleep(timeout or 0)
                raise cf.TimeoutError()
            return self.value

        def cancel(self):
            self.cancelled = True
            return True

    hung = Remote(hang=True)
    t0 = time.perf_counter()
    out = wait_each([Remote(1), hung, Remote(boom=True), Remote(3)], 0.2)
    assert time.perf_counter() - t0 < 1.0 and hung.cancelled
    assert out[0] == (1, None) and out[1] == (None, "timeout") and out[2][1] == "error" and out[3] == (3, None)

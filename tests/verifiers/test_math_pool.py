"""Worker pool deadlines: hung, crashing and unstartable workers, pathological inputs, and workers that
die with their parent. A scripted fake worker stands in where a real one cannot be made to hang in C."""

import json
import os
import signal
import subprocess
import sys
import textwrap
import time

import pytest

from rlvr.verifiers.math import MathVerifier, WorkerPool

FAKE_WORKER = textwrap.dedent("""
    import json, os, sys, time
    out = sys.stdout.buffer
    out.write(b'{"ready": true}\\n'); out.flush()
    for line in sys.stdin.buffer:
        req = json.loads(line)
        if req["gold"] == "hang":
            while True:          # never answers, ignores nothing: only SIGKILL ends it
                time.sleep(100)
        if req["gold"] == "crash":
            os._exit(3)
        reply = {"id": req["id"], "ok": req["gold"] == req["pred"], "how": "symbolic", "pid": os.getpid()}
        out.write(json.dumps(reply).encode() + b"\\n"); out.flush()
""")


def _req(gold, pred="x"):
    return {"gold": gold, "gpct": False, "pred": pred, "ppct": False}


@pytest.fixture
def fake_argv(tmp_path):
    path = tmp_path / "fake_worker.py"
    path.write_text(FAKE_WORKER)
    return [sys.executable, str(path)]


def _alive(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().split(")")[-1].split()[0] != "Z"
    except OSError:
        return False


def test_hung_worker_is_killed_at_the_deadline_and_replaced(fake_argv):
    pool = WorkerPool(size=1, timeout_s=0.5, argv=fake_argv)
    try:
        assert pool.run([_req("a", "a")]) == [{"ok": True, "how": "symbolic"}]
        old = pool._slots[0].proc
        t = time.perf_counter()
        assert pool.run([_req("hang")]) == [{"ok": False, "how": "timeout"}]
        assert time.perf_counter() - t < 0.5 + 1.0
        assert old.poll() is not None and pool.restarts == 1 and pool._slots[0].proc is not old
        assert pool.run([_req("b", "b"), _req("b", "c")]) == [{"ok": True, "how": "symbolic"},
                                                              {"ok": False, "how": "symbolic"}]
    finally:
        pool.close()


def test_batch_with_a_hung_pair_still_answers_the_rest(fake_argv):
    pool = WorkerPool(size=2, timeout_s=0.5, argv=fake_argv)
    try:
        t = time.perf_counter()
        got = pool.run([_req("hang"), *[_req(str(i), str(i)) for i in range(20)], _req("hang")])
        assert time.perf_counter() - t < 2 * 0.5 + 2.0
        assert got[0] == got[-1] == {"ok": False, "how": "timeout"}
        assert all(r == {"ok": True, "how": "symbolic"} for r in got[1:-1])
    finally:
        pool.close()


def test_crashing_worker_is_retried_once_then_reported(fake_argv):
    pool = WorkerPool(size=1, timeout_s=2.0, argv=fake_argv)
    try:
        assert pool.run([_req("crash"), _req("a", "a")]) == [{"ok": False, "how": "worker crashed"},
                                                              {"ok": True, "how": "symbolic"}]
        assert pool.restarts == 2
    finally:
        pool.close()


def test_workers_that_cannot_start_do_not_hang_the_caller(tmp_path):
    bad = tmp_path / "bad.py"
    bad.write_text("import sys; sys.exit(1)\n")
    pool = WorkerPool(size=1, timeout_s=1.0, argv=[sys.executable, str(bad)])
    t = time.perf_counter()
    assert pool.run([_req("a"), _req("b")]) == [{"ok": False, "how": "worker unavailable"}] * 2
    assert time.perf_counter() - t < 10
    pool.close()


def test_worker_that_never_gets_ready_is_abandoned_quickly(tmp_path):
    stuck = tmp_path / "stuck.py"
    stuck.write_text("import time\nwhile True:\n    time.sleep(100)\n")
    pool = WorkerPool(size=1, timeout_s=1.0, startup_timeout_s=0.5, argv=[sys.executable, str(stuck)])
    t = time.perf_counter()
    assert pool.run([_req("a")]) == [{"ok": False, "how": "worker unavailable"}]
    assert time.perf_counter() - t < 3
    pool.close()


def test_worker_killed_between_calls_is_replaced(fake_argv):
    pool = WorkerPool(size=1, timeout_s=1.0, argv=fake_argv)
    try:
        assert pool.run([_req("a", "a")])[0]["ok"]
        victim = pool._slots[0].proc
        os.kill(victim.pid, signal.SIGKILL)
        victim.wait()
        assert pool.run([_req("b", "b")]) == [{"ok": True, "how": "symbolic"}]
        assert pool._slots[0].proc is not victim
    finally:
        pool.close()


def test_pathological_answers_return_within_the_deadline():
    v = MathVerifier(timeout_s=1.0, workers=1)
    try:
        assert v.verify("\\frac{\\sqrt2}{2}", "\\boxed{\\frac{1}{\\sqrt2}}").reward == 1  # workers started
        # decided by our parser at once (a tower is "too large"; the binomial is a 40-digit float, far from
        # 5), where math-verify, if asked, spent its whole deadline on each
        for answer, why in (("9^{9^{9^9}}", "too large"), ("\\binom{10^{9}}{10^{5}}", "not equal")):
            t = time.perf_counter()
            s = v.verify("5", f"\\boxed{{{answer}}}")
            assert time.perf_counter() - t < 0.5, answer
            assert (s.reward, s.info["reason"]) == (0.0, why), answer
        # decided quickly without a deadline: sizes are capped instead of computed
        for answer in ("10^{10^{10}}", "(10^{10})!", "100000!", "1e999999999", "(x+1)^{100000}"):
            t = time.perf_counter()
            assert v.verify("5", f"\\boxed{{{answer}}}").reward == 0
            assert time.perf_counter() - t < 1.0, answer
        s = v.verify("1", "\\boxed{" + "(" * 200 + "1" + ")" * 200 + "}")
        assert (s.reward, s.info["reason"]) == (0.0, "too complex")
        assert v.verify("x^2+2x+1", "\\boxed{(x+1)^2}").reward == 1  # the pool still works
    finally:
        v.close()


def test_workers_die_with_their_parent(tmp_path):
    """The parent is SIGKILLed (no cleanup runs) while a worker is busy for the next ~20 s: the workers must
    go at once, not when that computation ends."""
    pool_py = os.path.join(os.path.dirname(__file__), "..", "..", "rlvr", "verifiers", "math", "pool.py")
    code = textwrap.dedent(f"""
        import importlib.util, json, os, signal, sys, threading, time
        spec = importlib.util.spec_from_file_location("pool", {os.path.abspath(pool_py)!r})
        pool = importlib.util.module_from_spec(spec); spec.loader.exec_module(pool)
        p = pool.WorkerPool(size=2, timeout_s=30.0)
        got = p.run([{{"gold": "1", "gpct": False, "pred": "\\\\frac{{2}}{{2}}", "ppct": False}}] * 2)
        slow = {{"gold": "5", "gpct": False, "pred": "9^{{9^{{9^9}}}}", "ppct": False}}
        threading.Thread(target=p.run, args=([slow, slow],), daemon=True).start()
        time.sleep(0.5)
        print(json.dumps({{"got": got, "pids": [s.proc.pid for s in p._slots]}}), flush=True)
        os.kill(os.getpid(), signal.SIGKILL)
    """)
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert out.returncode == -signal.SIGKILL, out.stderr
    msg = json.loads(out.stdout)
    assert msg["got"] == [{"ok": True, "how": "symbolic"}] * 2
    deadline = time.monotonic() + 3
    while any(_alive(p) for p in msg["pids"]) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not any(_alive(p) for p in msg["pids"])

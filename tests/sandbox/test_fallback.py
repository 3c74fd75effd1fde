"""The weak fallback (no bubblewrap): it must still kill infinite loops, cap output, and say it is weak."""

from __future__ import annotations

import logging
import os
import uuid

import pytest

from rlvr.sandbox import Limits, LocalSandbox, Program
from rlvr.sandbox import runner
from tests.sandbox.conftest import kill_all, wait_gone


def test_fallback_runs_and_reports_itself_weak(fallback_sandbox):
    res = fallback_sandbox.run(Program("import sys; print(sys.stdin.read()[::-1]); sys.exit(4)", stdin=b"abc"))
    assert res.stdout == b"cba\n" and res.exit_code == 4
    assert res.weak and not res.protections.bwrap and not res.protections.network_isolated
    assert res.protections.rlimits and res.protections.clean_env
    assert res.protections.uid_drop == (os.geteuid() == 0)


def test_fallback_kills_infinite_loops(fallback_sandbox):
    res = fallback_sandbox.run(Program("while True: pass"), Limits(wall_s=10, cpu_s=1))
    assert res.killed_reason == "cpu_time"
    res = fallback_sandbox.run(Program("import time; time.sleep(60)"), Limits(wall_s=1, cpu_s=5))
    assert res.timed_out and res.killed_reason == "wall_time" and res.wall_s < 5


def test_fallback_caps_output(fallback_sandbox):
    res = fallback_sandbox.run(Program("import sys\nwhile True: sys.stderr.write('y' * 65536)"),
                               Limits(wall_s=10, output_bytes=50_000))
    assert res.killed_reason == "output_limit" and res.stderr_truncated and len(res.stderr) == 50_000


def test_fallback_drops_root_and_cleans_up_daemons(fallback_sandbox):
    if os.geteuid() != 0:
        pytest.skip("uid drop and per-uid cleanup need root")
    marker = uuid.uuid4().hex
    src = (f"import os, sys\nprint(os.getuid())\nif os.fork() == 0:\n    os.setsid()\n"
           f"    os.execv(sys.executable, [sys.executable, '-c', 'import time; time.sleep(60)', '{marker}'])")
    try:
        res = fallback_sandbox.run(Program(src))
        assert int(res.stdout) != 0
        assert wait_gone(marker) == []
    finally:
        kill_all(wait_gone(marker, timeout=0))


def test_missing_bwrap_warns_loudly_once(monkeypatch, caplog):
    monkeypatch.setattr(runner, "find_bwrap", lambda: None)
    monkeypatch.setattr(runner, "_warned", False)
    with caplog.at_level(logging.WARNING, logger="rlvr.sandbox"):
        a, b = LocalSandbox(), LocalSandbox()
        assert a.mode() == b.mode() == "fallback"
    warnings = [r for r in caplog.records if "WEAK sandbox" in r.getMessage()]
    assert len(warnings) == 1
    assert a.run(Program("print(1)")).weak


def test_required_bwrap_fails_closed(monkeypatch):
    monkeypatch.setattr(runner, "find_bwrap", lambda: None)
    with pytest.raises(RuntimeError, match="bubblewrap sandbox required"):
        LocalSandbox(use_bwrap=True).mode()

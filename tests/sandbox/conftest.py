"""Fixtures for the sandbox tests: a bubblewrap sandbox (skipped where it cannot run), the fallback, and a
guard that kills anything a hostile test program might have left behind, even when the test fails."""

from __future__ import annotations

import fcntl
import os
import signal
import time

import pytest

from rlvr.sandbox import LocalSandbox, uids
from rlvr.sandbox.uids import UID_BASE, UID_COUNT


def sandbox_processes(marker: str | None = None) -> list[int]:
    """Live host pids running as a sandbox uid, or (``marker``) whose command line contains the marker.

    Zombies are not counted: they run nothing. (bubblewrap's outer process exits without reaping its inner
    helper, which init then collects; on this VM's init that takes a second or two.)"""
    found = []
    for pid in os.listdir("/proc"):
        if not pid.isdigit() or int(pid) == os.getpid():
            continue
        try:
            with open(f"/proc/{pid}/stat") as f:
                if f.read().rsplit(")", 1)[1].split()[0] == "Z":
                    continue
            if marker is not None:
                with open(f"/proc/{pid}/cmdline", "rb") as f:
                    if marker.encode() in f.read():
                        found.append(int(pid))
                continue
            with open(f"/proc/{pid}/status") as f:
                uid = next(int(ln.split()[1]) for ln in f if ln.startswith("Uid:"))
            if UID_BASE <= uid < UID_BASE + UID_COUNT:
                found.append(int(pid))
        except (OSError, StopIteration, ValueError):
            continue
    return found


def wait_gone(marker: str | None = None, timeout: float = 3.0) -> list[int]:
    """Pids still present after ``timeout`` (the kernel reaps a killed namespace asynchronously)."""
    deadline = time.monotonic() + timeout
    while True:
        left = sandbox_processes(marker)
        if not left or time.monotonic() > deadline:
            return left
        time.sleep(0.05)


def kill_all(pids: list[int]) -> None:
    for pid in pids:
        try:
            os.kill(pid, signal.SIGKILL)
        except OSError:
            pass


@pytest.fixture(scope="session")
def bwrap_sandbox() -> LocalSandbox:
    sb = LocalSandbox(use_bwrap=None)
    if sb.mode() != "bwrap":
        pytest.skip("bubblewrap is missing or cannot create namespaces here (apt-get install -y bubblewrap)")
    return sb


@pytest.fixture(scope="session")
def fallback_sandbox() -> LocalSandbox:
    return LocalSandbox(use_bwrap=False)


def _uid_in_use(uid: int) -> bool:
    """Is a run (ours or a concurrent one) holding this uid's lease right now?"""
    path = os.path.join(uids._lock_dir(), f"{uid}.lock")
    if not os.path.exists(path):
        return False
    fd = os.open(path, os.O_RDWR)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        return False
    except OSError:
        return True
    finally:
        os.close(fd)


@pytest.fixture(autouse=True)
def _no_leftovers():
    """After every test, kill whatever still runs as a sandbox uid no run holds any more (a failed containment
    must not linger; a concurrent run of someone else's is left alone)."""
    yield
    if os.geteuid() != 0:
        return
    for pid in sandbox_processes():
        try:
            uid = os.stat(f"/proc/{pid}").st_uid
        except OSError:
            continue
        if not _uid_in_use(uid):
            kill_all([pid])

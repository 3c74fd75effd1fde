"""Per-run unprivileged uids.

Why not root: started as root, the sandbox's uid maps to host root, ``RLIMIT_NPROC`` is ignored and
``/proc/sys`` files such as ``kernel/core_pattern`` open for writing from inside. Why not one shared uid such
as ``nobody``: ``RLIMIT_NPROC`` counts every process of a uid, so one run's fork bomb would starve every other
run, and processes of one run could signal another's. So when we are root, each concurrent run leases its own
uid from a reserved range (no ``/etc/passwd`` entry is needed), held by an ``flock`` so that separate processes
(e.g. data-loader workers) never share one. When we are not root, runs use our own uid: it is unprivileged
already, and there is no other we could switch to.

The range (``RLVR_SANDBOX_UID_BASE``, default 1,950,000,000, 4096 uids) is far above normal users and the
usual subordinate-uid ranges.
"""

from __future__ import annotations

import fcntl
import os
import random
import tempfile
import time
from dataclasses import dataclass

__all__ = ["UidLease", "lease_uid", "UID_BASE", "UID_COUNT"]

UID_BASE = int(os.environ.get("RLVR_SANDBOX_UID_BASE", "1950000000"))
UID_COUNT = 4096


def _lock_dir() -> str:
    for d in ("/run/rlvr-sandbox-uids", os.path.join(tempfile.gettempdir(), "rlvr-sandbox-uids")):
        try:
            os.makedirs(d, mode=0o700, exist_ok=True)
            if os.stat(d).st_uid == os.geteuid():
                return d
        except OSError:
            continue
    raise OSError("no writable directory for uid leases")


@dataclass
class UidLease:
    """A uid/gid pair for one run; ``dropped`` is False when we run as ourselves (not root)."""

    uid: int
    gid: int
    dropped: bool
    _fd: int | None = None

    def release(self) -> None:
        if self._fd is not None:
            os.close(self._fd)  # closing drops the flock
            self._fd = None

    def __enter__(self) -> UidLease:
        return self

    def __exit__(self, *exc) -> None:
        self.release()


def lease_uid(timeout_s: float = 30.0) -> UidLease:
    """An unused uid from the range when root, else our own uid."""
    if os.geteuid() != 0:
        return UidLease(os.getuid(), os.getgid(), False)
    d = _lock_dir()
    deadline = time.monotonic() + timeout_s
    while True:
        start = random.randrange(UID_COUNT)
        for i in range(UID_COUNT):
            uid = UID_BASE + (start + i) % UID_COUNT
            fd = os.open(os.path.join(d, f"{uid}.lock"), os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o600)
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except OSError:
                os.close(fd)
                continue
            return UidLease(uid, uid, True, fd)
        if time.monotonic() > deadline:
            raise TimeoutError("every sandbox uid is in use")
        time.sleep(0.05)

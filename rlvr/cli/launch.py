"""``rlvr train --nproc N``: start the same command under ``torchrun`` with N processes on this machine.

It runs ``python -m torch.distributed.run --standalone --nproc-per-node N -m rlvr train ARGS`` with the
command's other arguments unchanged, and returns torchrun's exit code. On several machines, call torchrun
yourself (docs/distributed.md).
"""

from __future__ import annotations

import os
import subprocess
import sys
from typing import Any, Callable

__all__ = ["launch_torchrun", "without_nproc"]


def without_nproc(argv: list[str]) -> list[str]:
    """``argv`` without its ``--nproc N`` / ``--nproc=N``."""
    out, skip = [], False
    for a in argv:
        if skip:
            skip = False
        elif a == "--nproc":
            skip = True
        elif not a.startswith("--nproc="):
            out.append(a)
    return out


def launch_torchrun(nproc: int, argv: list[str] | None = None, check: Callable[[], Any] | None = None) -> int:
    """Start ``nproc`` ranks of this command under torchrun; ``check()`` first (it raises or exits on a bad config,
    so the error is said once, before any rank starts)."""
    if check is not None:
        check()
    if int(os.environ.get("WORLD_SIZE", "1")) > 1:
        print("error: --nproc inside a torchrun process; drop --nproc (torchrun already started the ranks)",
              file=sys.stderr)
        return 2
    args = without_nproc(list(sys.argv[1:] if argv is None else argv))
    cmd = [sys.executable, "-m", "torch.distributed.run", "--standalone", f"--nproc-per-node={nproc}",
           "-m", "rlvr", *args]
    return subprocess.call(cmd)

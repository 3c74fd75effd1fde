"""Run directories: created once per run, and locked while a process writes to them.

The lock is an ``fcntl.flock`` on ``RUN_DIR/.lock``: the kernel releases it when the holder exits, however
it exits (SIGKILL included), so a crashed run never leaves a stale lock behind, and a second ``rlvr train
--resume`` of a directory that is being written stops at once instead of interleaving duplicate steps.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
from datetime import datetime
from pathlib import Path
from typing import Iterator

from rlvr.config.run import RunConfig, dump_config

__all__ = ["RunDirBusy", "make_run_dir", "lock_run_dir", "run_dir_path"]


class RunDirBusy(RuntimeError):
    """Another process holds the run directory's lock."""


def run_dir_path(cfg: RunConfig, default_root: str = "runs") -> Path:
    """``cfg.out``, or a new ``runs/<time>`` folder name."""
    return Path(cfg.out) if cfg.out else Path(default_root) / datetime.now().strftime("%Y%m%d-%H%M%S")


def make_run_dir(cfg: RunConfig, default_root: str = "runs") -> tuple[RunConfig, Path]:
    """Create the run directory and write the resolved ``config.yaml``; a directory holding a run is refused."""
    out = run_dir_path(cfg, default_root)
    if (out / "checkpoints").exists():
        raise FileExistsError(f"{out} already holds a run; resume it with `rlvr train --resume {out}` "
                              f"or choose another --out")
    out.mkdir(parents=True, exist_ok=True)
    cfg = cfg.model_copy(update={"out": str(out)})
    (out / "config.yaml").write_text(dump_config(cfg))
    return cfg, out


@contextlib.contextmanager
def lock_run_dir(run_dir: str | Path) -> Iterator[None]:
    """Hold ``run_dir``'s lock for the block; :class:`RunDirBusy` when another process holds it."""
    path = Path(run_dir) / ".lock"
    path.parent.mkdir(parents=True, exist_ok=True)
    fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            holder = os.pread(fd, 64, 0).decode(errors="replace").strip() or "unknown"
            raise RunDirBusy(f"{run_dir} is in use by another rlvr process (pid {holder}); wait for it to finish "
                             "or stop it first") from None
        os.ftruncate(fd, 0)
        os.pwrite(fd, str(os.getpid()).encode(), 0)
        try:
            yield
        finally:
            os.ftruncate(fd, 0)
            fcntl.flock(fd, fcntl.LOCK_UN)
    finally:
        os.close(fd)

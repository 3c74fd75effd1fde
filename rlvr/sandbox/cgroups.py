"""Per-run cgroups: one memory and pids budget for a run's whole process tree.

Why: ``RLIMIT_AS`` is per process, so a dozen forked children can hold many GiB between them; and
``RLIMIT_NPROC`` counts per uid. A cgroup bounds the run as a whole and lets the host kill every process in
it at the deadline, including ones that left the process group with ``setsid``.

Both layouts are supported: cgroup v2 (``memory.max``, ``pids.max``, ``cgroup.kill``) and v1 with separate
``memory`` and ``pids`` hierarchies (``memory.limit_in_bytes``, ``pids.max``; killing is a loop over
``cgroup.procs``). Each run's cgroup is created *below the cgroup this process is in*, so whatever limits the
host already placed on us still apply. Where nothing is writable (not root, no delegation) :func:`detect`
returns None and runs go on without cgroups; :class:`~rlvr.sandbox.api.Protections` says so.
"""

from __future__ import annotations

import itertools
import os
import signal
import time
from dataclasses import dataclass

__all__ = ["CgroupSupport", "RunCgroup", "detect"]

_ROOT = "/sys/fs/cgroup"
_counter = itertools.count()


def _own_paths() -> dict[str, str]:
    """controller ("memory", "pids", or "" for v2) -> this process's cgroup path."""
    out: dict[str, str] = {}
    try:
        with open("/proc/self/cgroup") as f:
            for line in f:
                _, ctrls, path = line.rstrip("\n").split(":", 2)
                for c in ctrls.split(","):
                    out[c] = path
    except OSError:
        pass
    return out


def _write(path: str, value: str) -> None:
    with open(path, "w") as f:
        f.write(value)


def _usable(parent: str, files: tuple[str, ...]) -> bool:
    """Can we create a child of ``parent`` that has ``files``? (Creates and removes a probe cgroup.)"""
    probe = os.path.join(parent, f"rlvr-sbx-probe-{os.getpid()}-{next(_counter)}")
    try:
        os.mkdir(probe)
    except OSError:
        return False
    try:
        return all(os.path.exists(os.path.join(probe, f)) for f in files)
    finally:
        try:
            os.rmdir(probe)
        except OSError:
            pass


@dataclass(frozen=True)
class CgroupSupport:
    """Where per-run cgroups go: v2 ``parent``, or the v1 memory and pids parents."""

    version: int
    memory_parent: str | None
    pids_parent: str | None

    def create(self, memory_bytes: int, max_procs: int) -> RunCgroup:
        name = f"rlvr-sbx-{os.getpid()}-{next(_counter)}-{os.urandom(3).hex()}"
        cg = RunCgroup(self.version, [])
        try:
            for parent in dict.fromkeys(p for p in (self.memory_parent, self.pids_parent) if p):
                os.mkdir(os.path.join(parent, name))
                cg.dirs.append(os.path.join(parent, name))
            cg.configure(self, name, memory_bytes, max_procs)
        except OSError:
            cg.remove()
            raise
        return cg


def _enable_v2(parent: str) -> bool:
    if _usable(parent, ("memory.max", "pids.max")):
        return True
    try:  # controllers not yet delegated to children: works where the parent has no processes (e.g. root)
        _write(os.path.join(parent, "cgroup.subtree_control"), "+memory +pids")
    except OSError:
        return False
    return _usable(parent, ("memory.max", "pids.max"))


def detect() -> CgroupSupport | None:
    """The writable cgroup layout on this machine, or None."""
    own = _own_paths()
    if os.path.exists(os.path.join(_ROOT, "cgroup.controllers")) and "" in own:
        parent = os.path.normpath(_ROOT + own[""])
        return CgroupSupport(2, parent, parent) if _enable_v2(parent) else None
    mem = os.path.normpath(os.path.join(_ROOT, "memory") + own.get("memory", "/"))
    pids = os.path.normpath(os.path.join(_ROOT, "pids") + own.get("pids", "/"))
    mem_ok = "memory" in own and _usable(mem, ("memory.limit_in_bytes",))
    pids_ok = "pids" in own and _usable(pids, ("pids.max",))
    if not (mem_ok or pids_ok):
        return None
    return CgroupSupport(1, mem if mem_ok else None, pids if pids_ok else None)


@dataclass
class RunCgroup:
    """The cgroup(s) of one run: attach the first process, kill everything, read OOM kills, remove."""

    version: int
    dirs: list[str]
    memory_dir: str | None = None
    pids_dir: str | None = None

    def configure(self, sup: CgroupSupport, name: str, memory_bytes: int, max_procs: int) -> None:
        if sup.memory_parent:
            self.memory_dir = os.path.join(sup.memory_parent, name)
        if sup.pids_parent:
            self.pids_dir = os.path.join(sup.pids_parent, name)
        if self.version == 2:
            _write(os.path.join(self.memory_dir, "memory.max"), str(memory_bytes))
            if os.path.exists(os.path.join(self.memory_dir, "memory.swap.max")):
                _write(os.path.join(self.memory_dir, "memory.swap.max"), "0")
            _write(os.path.join(self.pids_dir, "pids.max"), str(max_procs))
            return
        if self.memory_dir:
            _write(os.path.join(self.memory_dir, "memory.limit_in_bytes"), str(memory_bytes))
            memsw = os.path.join(self.memory_dir, "memory.memsw.limit_in_bytes")
            if os.path.exists(memsw):  # no swapping around the limit
                _write(memsw, str(memory_bytes))
        if self.pids_dir:
            _write(os.path.join(self.pids_dir, "pids.max"), str(max_procs))

    def attach(self, pid: int) -> None:
        for d in self.dirs:
            _write(os.path.join(d, "cgroup.procs"), str(pid))

    def pids(self) -> set[int]:
        found: set[int] = set()
        for d in self.dirs:
            try:
                with open(os.path.join(d, "cgroup.procs")) as f:
                    found.update(int(x) for x in f.read().split())
            except OSError:
                pass
        return found

    def kill(self, rounds: int = 100, exclude: frozenset[int] = frozenset()) -> None:
        """SIGKILL every process in the run but ``exclude``, repeating until none is left (forks race a
        single pass)."""
        if self.version == 2 and self.dirs and not exclude:
            try:
                _write(os.path.join(self.dirs[0], "cgroup.kill"), "1")
            except OSError:
                pass
        for _ in range(rounds):
            pids = self.pids() - exclude
            if not pids:
                return
            for pid in pids:
                try:
                    os.kill(pid, signal.SIGKILL)
                except OSError:
                    pass
            time.sleep(0.002)

    def oom_kills(self) -> int:
        name = "memory.events" if self.version == 2 else "memory.oom_control"
        try:
            with open(os.path.join(self.memory_dir or "", name)) as f:
                for line in f:
                    key, _, val = line.partition(" ")
                    if key == "oom_kill":
                        return int(val)
        except (OSError, ValueError):
            pass
        return 0

    def peak_memory(self) -> int | None:
        name = "memory.peak" if self.version == 2 else "memory.max_usage_in_bytes"
        try:
            with open(os.path.join(self.memory_dir or "", name)) as f:
                return int(f.read())
        except (OSError, ValueError):
            return None

    def remove(self) -> None:
        """rmdir each cgroup, retrying: the kernel frees a cgroup a moment after its last process exits."""
        for d in self.dirs:
            for attempt in range(200):
                try:
                    os.rmdir(d)
                    break
                except FileNotFoundError:
                    break
                except OSError:
                    if attempt % 20 == 19:
                        self.kill(rounds=5)
                    time.sleep(0.005)
        self.dirs = []

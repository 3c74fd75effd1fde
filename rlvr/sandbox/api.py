"""The sandbox contract: what to run (:class:`Program`), within what (:class:`Limits`), and what came back
(:class:`SandboxResult`, with the :class:`Protections` that were actually in force for that run).

Any backend (the local bubblewrap one here; a remote service such as E2B or SandboxFusion could be another)
implements :class:`Sandbox`: ``run(program, limits) -> SandboxResult``. ``run`` never raises because of what
the program did; a program that cannot be contained as asked fails closed (``setup_failed``).
"""

from __future__ import annotations

from dataclasses import dataclass, field, fields
from typing import Protocol, runtime_checkable

__all__ = ["Limits", "Program", "Protections", "SandboxResult", "Sandbox", "MiB"]

MiB = 1 << 20


@dataclass(frozen=True)
class Limits:
    """Resource limits for one run. Each says what enforces it.

    - ``wall_s``: wall clock; the host kills the whole process group and cgroup at the deadline.
    - ``cpu_s``: ``RLIMIT_CPU`` per process (SIGXCPU, then SIGKILL one second later).
    - ``memory_bytes``: the whole run's memory (cgroup ``memory.max``), forked children included.
    - ``address_space_bytes``: ``RLIMIT_AS`` per process; the only memory bound where no cgroup is writable.
    - ``max_procs``: processes and threads (cgroup ``pids.max`` and ``RLIMIT_NPROC`` of the run's own uid).
    - ``file_size_bytes``: ``RLIMIT_FSIZE``, the largest file one write may produce.
    - ``open_files``: ``RLIMIT_NOFILE``.
    - ``scratch_bytes`` / ``scratch_files``: the writable ``/tmp`` (the working directory) is a tmpfs mounted
      with ``size=`` and ``nr_inodes=``, so both bytes and file count are hard kernel limits.
    - ``shm_bytes``: size of ``/dev/shm`` (bubblewrap's default would be half the host's RAM).
    - ``output_bytes``: stdout and stderr are each kept up to this many bytes; past it the run is killed.
    - ``channel_bytes``: the same for the optional result channel (fd 3).
    """

    wall_s: float = 10.0
    cpu_s: int = 10
    memory_bytes: int = 512 * MiB
    address_space_bytes: int = 1024 * MiB
    max_procs: int = 64
    file_size_bytes: int = 16 * MiB
    open_files: int = 128
    scratch_bytes: int = 32 * MiB
    scratch_files: int = 1024
    shm_bytes: int = 1 * MiB
    output_bytes: int = 256 * 1024
    channel_bytes: int = 4 * MiB

    def __post_init__(self) -> None:
        # 0 would not mean "nothing": tmpfs reads size=0 / nr_inodes=0 as unlimited
        bad = [f.name for f in fields(self) if not getattr(self, f.name) > 0]
        if bad:
            raise ValueError(f"sandbox limits must be positive: {', '.join(bad)}")


@dataclass(frozen=True)
class Program:
    """A Python program: ``source`` runs as ``__main__`` from ``/box/main.py``.

    ``files`` (relative path -> text or bytes) appear read-only under ``/box``, which is on ``sys.path``;
    the working directory is the empty, writable, size-capped ``/tmp``. ``stdin`` is fed through a pipe.
    With ``channel=True`` the program gets a pipe on fd 3 whose contents come back in
    ``SandboxResult.channel`` (the code verifier's judge reports through it). ``nondumpable`` makes the
    main process unreadable through ``/proc`` by anything it starts (the judge sets it so the solution
    process cannot read the judge's memory or file descriptors). ``python_site`` keeps ``site`` (and so
    site-packages) enabled; the default runs the interpreter with ``-I -S -B``.
    """

    source: str
    files: dict[str, str | bytes] = field(default_factory=dict)
    stdin: bytes = b""
    argv: tuple[str, ...] = ()
    channel: bool = False
    nondumpable: bool = False
    python_site: bool = False


@dataclass(frozen=True)
class Protections:
    """Which layers were in force for a run (True = active)."""

    bwrap: bool = False  # bubblewrap namespaces: mount, pid, ipc, uts, user, cgroup
    network_isolated: bool = False  # empty network namespace (loopback only)
    uid_drop: bool = False  # bubblewrap / the program started as an unprivileged, per-run uid
    cgroup_memory: bool = False
    cgroup_pids: bool = False
    seccomp: bool = False
    scratch_file_cap: bool = False  # tmpfs nr_inodes on the scratch directory
    readonly_system: bool = False  # /usr, /dev, /proc/sys and / read-only; host files not mounted
    clean_env: bool = False  # bubblewrap itself and the program start with an empty environment
    rlimits: bool = False

    def active(self) -> list[str]:
        return [f.name for f in fields(self) if getattr(self, f.name)]

    def missing(self) -> list[str]:
        return [f.name for f in fields(self) if not getattr(self, f.name)]


@dataclass
class SandboxResult:
    """What one run did.

    ``exit_code`` is the program's exit status; death by signal N reads 128+N, as in a shell (bubblewrap's
    convention, applied to the fallback too). ``killed_reason`` is one
    of ``wall_time``, ``output_limit``, ``cpu_time``, ``memory``, ``setup_failed`` or None. ``weak`` is True
    when the run used the fallback without bubblewrap (no namespaces: network and host files reachable).
    """

    exit_code: int | None
    stdout: bytes
    stderr: bytes
    timed_out: bool = False
    killed_reason: str | None = None
    wall_s: float = 0.0
    stdout_truncated: bool = False
    stderr_truncated: bool = False
    channel: bytes = b""
    channel_truncated: bool = False
    protections: Protections = field(default_factory=Protections)
    weak: bool = False
    peak_memory_bytes: int | None = None

    @property
    def ok(self) -> bool:
        """Exited by itself with status 0."""
        return self.exit_code == 0 and self.killed_reason is None


@runtime_checkable
class Sandbox(Protocol):
    """A backend that runs a :class:`Program` under :class:`Limits`."""

    def run(self, program: Program, limits: Limits | None = None) -> SandboxResult: ...

"""Command lines: bubblewrap's, and the fallback's, for one run; plus the launcher's config.

Under bubblewrap (:func:`bwrap_command`) a run sees:

- every namespace unshared (user, mount, pid, ipc, uts, net, cgroup): an empty network namespace, its own
  pid 1 (when it exits, every process of the run dies, daemons included), no host processes;
- ``/usr`` (and the ``/bin``, ``/lib`` links) bound read-only; no ``/home``, ``/root``, ``/work``, ``/etc``
  beyond a two-line passwd/group; the root itself remounted read-only;
- the program and its files copied from memory (memfds) into ``/box``, read-only: no host path of ours is
  mounted, so none shows up in ``/proc/self/mountinfo``;
- a fresh procfs whose ``/proc/sys`` the launcher rebinds read-only; a minimal ``/dev`` mounted read-only with
  a size-capped tmpfs on ``/dev/shm``;
- ``--die-with-parent`` and ``--new-session`` (no terminal to inject into, no signal from our process group);
- an environment of PATH, HOME and LANG only (bubblewrap itself is started with an empty environment too,
  since it stays pid 1 and its ``/proc/1/environ`` is readable from inside).

The fallback (:func:`fallback_command`) has none of the namespace layers: it runs the launcher directly in a
fresh temporary directory, which then applies rlimits, no_new_privs and seccomp; the host adds a new
session, a per-run uid when root, cgroups when writable, and the deadline.
"""

from __future__ import annotations

import marshal
import os
import shutil
import sys
import tempfile
from dataclasses import dataclass, field
from pathlib import Path

from rlvr.sandbox.api import Limits, Program

__all__ = ["Staged", "bwrap_command", "fallback_command", "find_bwrap", "default_python", "launcher_config",
           "SANDBOX_UID"]

SANDBOX_UID = 65534  # the uid the program sees inside bubblewrap ("nobody"); the host uid differs per run
_LAUNCHER = Path(__file__).with_name("launcher.py")
_ENV = {"PATH": "/usr/local/bin:/usr/bin:/bin", "LANG": "C.UTF-8", "HOME": "/tmp"}


def find_bwrap() -> str | None:
    return shutil.which("bwrap") or next((p for p in ("/usr/bin/bwrap", "/bin/bwrap") if os.path.exists(p)), None)


def default_python() -> str:
    """The system interpreter when there is one: the host's virtualenv may live where the sandbox uid cannot
    read (e.g. under /root)."""
    for p in ("/usr/bin/python3", "/usr/local/bin/python3"):
        if os.path.exists(p):
            return p
    return os.path.realpath(sys.executable)


@dataclass
class Staged:
    """What a spawned run needs kept open until it exits, and removed afterwards."""

    argv: list[str]
    env: dict[str, str]
    pass_fds: list[int] = field(default_factory=list)
    channel_w: int | None = None
    tmpdir: str | None = None

    def close_child_fds(self) -> None:
        for fd in self.pass_fds:
            try:
                os.close(fd)
            except OSError:
                pass
        self.pass_fds = []

    def cleanup(self) -> None:
        self.close_child_fds()
        if self.tmpdir:
            shutil.rmtree(self.tmpdir, ignore_errors=True)
            self.tmpdir = None


def _rlimits(limits: Limits) -> dict[str, object]:
    return {"CPU": [limits.cpu_s, limits.cpu_s + 1], "AS": limits.address_space_bytes,
            "FSIZE": limits.file_size_bytes, "NOFILE": limits.open_files, "NPROC": limits.max_procs,
            "CORE": 0, "MEMLOCK": 0, "MSGQUEUE": 0}


def launcher_config(mode: str, program: Program, limits: Limits, *, box: str, scratch: str,
                    seccomp: str | None, channel_fd: int | None) -> dict:
    return {"mode": mode, "box": box, "main": os.path.join(box, "main.py"), "argv": list(program.argv),
            "scratch": scratch, "scratch_bytes": limits.scratch_bytes, "scratch_files": limits.scratch_files,
            "uid": SANDBOX_UID, "gid": SANDBOX_UID, "rlimits": _rlimits(limits), "seccomp": seccomp,
            "nondumpable": program.nondumpable, "channel_fd": channel_fd}


def _memfd(name: str, data: bytes) -> int:
    fd = os.memfd_create(name, 0)  # not CLOEXEC: handed to bubblewrap through pass_fds
    os.write(fd, data)
    os.lseek(fd, 0, os.SEEK_SET)
    return fd


def _as_bytes(data: str | bytes) -> bytes:
    return data.encode() if isinstance(data, str) else data


def _check_rel(path: str) -> str:
    p = os.path.normpath(path)
    if p.startswith(("/", "..")) or p in (".", "main.py"):
        raise ValueError(f"bad program file path {path!r}")
    return p


def _system_binds(python: str) -> list[str]:
    args = ["--ro-bind", "/usr", "/usr"]
    for d in ("/bin", "/sbin", "/lib", "/lib64", "/lib32", "/libx32"):
        if os.path.islink(d):
            args += ["--symlink", os.readlink(d), d]
        elif os.path.isdir(d):
            args += ["--ro-bind", d, d]
    real = os.path.realpath(python)
    if not real.startswith("/usr/"):  # an interpreter installed elsewhere: bind its prefix read-only
        prefix = str(Path(real).parent.parent)
        args += ["--ro-bind", prefix, prefix]
    return args


def bwrap_command(bwrap: str, python: str, program: Program, limits: Limits, seccomp: bytes | None,
                  channel_w: int | None) -> Staged:
    """bubblewrap + launcher command line; inputs travel as memfds copied into the sandbox."""
    staged = Staged([], {}, channel_w=channel_w)
    files: list[tuple[str, bytes]] = [("/box/main.py", _as_bytes(program.source))]
    files += [("/box/" + _check_rel(k), _as_bytes(v)) for k, v in sorted(program.files.items())]
    cfg = launcher_config("bwrap", program, limits, box="/box", scratch="/tmp",
                          seccomp="/sbx/seccomp.bpf" if seccomp else None, channel_fd=channel_w)
    files += [("/sbx/launcher.py", _LAUNCHER.read_bytes()), ("/sbx/launch.cfg", marshal.dumps(cfg, 2)),
              ("/etc/passwd", b"root:x:0:0::/:/bin/false\nsandbox:x:65534:65534::/tmp:/bin/false\n"),
              ("/etc/group", b"root:x:0:\nsandbox:x:65534:\n")]
    if seccomp:
        files.append(("/sbx/seccomp.bpf", seccomp))
    argv = [bwrap, "--unshare-all", "--unshare-user", "--die-with-parent", "--new-session",
            "--uid", "0", "--gid", "0", "--cap-add", "CAP_SYS_ADMIN", "--cap-add", "CAP_SETFCAP",
            "--hostname", "sandbox", *_system_binds(python),
            "--proc", "/proc", "--dev", "/dev", "--size", str(limits.shm_bytes), "--tmpfs", "/dev/shm",
            "--remount-ro", "/dev", "--dir", "/tmp", "--dir", "/box", "--dir", "/sbx"]
    try:
        for dest, data in files:  # bubblewrap creates missing parent directories itself
            fd = _memfd(os.path.basename(dest), data)
            staged.pass_fds.append(fd)
            argv += ["--perms", "0444", "--file", str(fd), dest]
    except BaseException:
        staged.close_child_fds()
        raise
    if channel_w is not None:
        staged.pass_fds.append(channel_w)
    argv += ["--remount-ro", "/", "--clearenv"]
    for k, v in _ENV.items():
        argv += ["--setenv", k, v]
    site = [] if program.python_site else ["-S"]
    argv += ["--chdir", "/", "--", python, "-I", *site, "-B", "/sbx/launcher.py", "/sbx/launch.cfg"]
    staged.argv = argv
    return staged


def fallback_command(python: str, program: Program, limits: Limits, seccomp: bytes | None,
                     channel_w: int | None, uid: int | None) -> Staged:
    """Launcher run directly from a temporary directory: ``box`` and ``sbx`` root-owned and read-only to the
    program, ``work`` owned by the run's uid."""
    tmp = tempfile.mkdtemp(prefix="rlvr-sbx-")
    staged = Staged([], {}, channel_w=channel_w, tmpdir=tmp)
    try:
        _fill_fallback_dir(staged, tmp, python, program, limits, seccomp, channel_w, uid)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    return staged


def _fill_fallback_dir(staged: Staged, tmp: str, python: str, program: Program, limits: Limits,
                       seccomp: bytes | None, channel_w: int | None, uid: int | None) -> None:
    os.chmod(tmp, 0o755)
    box, sbx, work = (os.path.join(tmp, d) for d in ("box", "sbx", "work"))
    for d in (box, sbx, work):
        os.mkdir(d, 0o755)
    files = {"main.py": program.source, **{_check_rel(k): v for k, v in program.files.items()}}
    for rel, data in files.items():
        dest = os.path.join(box, rel)
        os.makedirs(os.path.dirname(dest), mode=0o755, exist_ok=True)
        Path(dest).write_bytes(_as_bytes(data))
        os.chmod(dest, 0o444)
    if seccomp:
        Path(sbx, "seccomp.bpf").write_bytes(seccomp)
    cfg = launcher_config("fallback", program, limits, box=box, scratch=work,
                          seccomp=os.path.join(sbx, "seccomp.bpf") if seccomp else None, channel_fd=channel_w)
    Path(sbx, "launch.cfg").write_bytes(marshal.dumps(cfg, 2))
    shutil.copyfile(_LAUNCHER, os.path.join(sbx, "launcher.py"))
    if uid is not None:
        os.chown(work, uid, uid)
        os.chmod(work, 0o700)
    if channel_w is not None:
        staged.pass_fds.append(channel_w)
    site = [] if program.python_site else ["-S"]
    staged.argv = [python, "-I", *site, "-B", os.path.join(sbx, "launcher.py"), os.path.join(sbx, "launch.cfg")]
    staged.env = {**_ENV, "HOME": work}

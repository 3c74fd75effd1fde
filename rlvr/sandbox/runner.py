"""The local sandbox backend: supervise one run from spawn to cleanup.

Host-side protections (the in-sandbox ones are in ``bwrap.py`` and ``launcher.py``):

- a per-run unprivileged uid (``uids.py``) for bubblewrap or the fallback program;
- a per-run cgroup (``cgroups.py``), entered *before* anything runs: the command starts behind a one-line
  ``sh`` gate that waits on stdin until the host has moved it into the cgroup;
- a wall-clock deadline, after which the whole process group is SIGKILLed (bubblewrap's pid 1 dies with it
  and takes every process of the run's pid namespace along), then every process left in the cgroup, and in
  the fallback every process of the run's uid;
- stdout, stderr and the result channel read concurrently and capped: past a cap the run is killed, so a
  flood costs neither memory nor time.

When bubblewrap is missing or cannot create namespaces here, :class:`LocalSandbox` logs one loud warning and
uses the fallback; every result then has ``weak=True`` and its :class:`Protections` say what is missing.
"""

from __future__ import annotations

import dataclasses
import logging
import os
import selectors
import signal
import subprocess
import threading
import time
from dataclasses import dataclass, field

from rlvr.sandbox import cgroups
from rlvr.sandbox.api import Limits, Program, Protections, SandboxResult
from rlvr.sandbox.bwrap import Staged, bwrap_command, default_python, fallback_command, find_bwrap
from rlvr.sandbox.seccomp import build_filter
from rlvr.sandbox.uids import UidLease, lease_uid

__all__ = ["LocalSandbox", "default_sandbox"]

log = logging.getLogger("rlvr.sandbox")
_SETUP_MARK = b"rlvr-sandbox launcher:"
_GRACE_S = 0.5  # after the main process exits, how long leftover writers may keep our pipes open
_warned = False


@dataclass
class _Stream:
    cap: int
    buf: bytearray = field(default_factory=bytearray)
    truncated: bool = False

    def add(self, data: bytes) -> bool:
        """Keep up to ``cap`` bytes; True when the cap was exceeded."""
        room = self.cap - len(self.buf)
        self.buf += data[:max(room, 0)]
        if len(data) > room:
            self.truncated = True
        return self.truncated


class LocalSandbox:
    """Runs programs under bubblewrap (or the weaker fallback) with rlimits, cgroups and seccomp.

    ``use_bwrap=None`` detects; ``False`` forces the fallback (tests use it); ``True`` fails closed instead of
    falling back. ``use_cgroups`` / ``use_seccomp`` switch those layers off (for measuring what each does).
    Thread-safe: each run has its own uid, cgroup and pipes.
    """

    def __init__(self, python: str | None = None, use_bwrap: bool | None = None, use_cgroups: bool = True,
                 use_seccomp: bool = True):
        self.python = python or default_python()
        self._want_bwrap = use_bwrap
        self._bwrap = find_bwrap() if use_bwrap is not False else None
        self._seccomp = build_filter() if use_seccomp else None
        self._cg = cgroups.detect() if use_cgroups else None
        self._mode: str | None = None
        self._lock = threading.Lock()

    # -- mode detection -------------------------------------------------------------------------------
    def mode(self) -> str:
        """``"bwrap"`` or ``"fallback"``, decided once by a probe run."""
        with self._lock:
            if self._mode is None:
                self._mode = self._detect()
        return self._mode

    def _detect(self) -> str:
        if self._bwrap:
            probe = self._run("bwrap", Program("import sys; sys.stdout.write('ok')"), Limits(wall_s=20))
            if probe.stdout == b"ok" and probe.exit_code == 0:
                return "bwrap"
            why = f"probe failed (rc={probe.exit_code}): {probe.stderr.decode(errors='replace')[-300:]}"
        else:
            why = "bwrap not found (apt-get install -y bubblewrap)"
        if self._want_bwrap:
            raise RuntimeError(f"bubblewrap sandbox required but unusable: {why}")
        global _warned
        if not _warned and self._want_bwrap is None:
            _warned = True
            log.warning("!!! rlvr sandbox: bubblewrap unavailable (%s). Falling back to a WEAK sandbox: no network "
                        "or filesystem isolation, only rlimits, seccomp, a new session, a temp dir and a "
                        "dropped uid when root. Do not run untrusted code like this. !!!", why)
        return "fallback"

    def protections(self) -> Protections:
        return self._protections(self.mode(), lease_dropped=os.geteuid() == 0, cg_mem=self._cg is not None
                                 and self._cg.memory_parent is not None,
                                 cg_pids=self._cg is not None and self._cg.pids_parent is not None)

    def _protections(self, mode: str, lease_dropped: bool, cg_mem: bool, cg_pids: bool) -> Protections:
        bw = mode == "bwrap"
        return Protections(bwrap=bw, network_isolated=bw, uid_drop=lease_dropped or (bw and os.geteuid() != 0),
                           cgroup_memory=cg_mem, cgroup_pids=cg_pids, seccomp=self._seccomp is not None,
                           scratch_file_cap=bw, readonly_system=bw, clean_env=True, rlimits=True)

    # -- running ----------------------------------------------------------------------------------------
    def run(self, program: Program, limits: Limits | None = None) -> SandboxResult:
        return self._run(self.mode(), program, limits or Limits())

    def _run(self, mode: str, program: Program, limits: Limits) -> SandboxResult:
        lease = lease_uid()
        cg = None
        staged: Staged | None = None
        try:
            if self._cg is not None:
                try:
                    cg = self._cg.create(limits.memory_bytes, limits.max_procs)
                except OSError as e:
                    log.debug("sandbox cgroup unavailable for this run: %s", e)
            channel_r, channel_w = os.pipe() if program.channel else (None, None)
            try:
                if mode == "bwrap":
                    staged = bwrap_command(self._bwrap, self.python, program, limits, self._seccomp, channel_w)
                else:
                    staged = fallback_command(self.python, program, _fallback_limits(limits, lease), self._seccomp,
                                              channel_w, lease.uid if lease.dropped else None)
            except BaseException:  # e.g. a file path escaping /box: the caller's error, raised after cleanup
                for fd in (channel_r, channel_w):
                    if fd is not None:
                        os.close(fd)
                raise
            prot = self._protections(mode, lease.dropped, cg is not None and cg.memory_dir is not None,
                                     cg is not None and cg.pids_dir is not None)
            res = self._supervise(staged, program, limits, lease, cg, channel_r, mode)
            res.protections, res.weak = prot, mode != "bwrap"
            return res
        finally:
            if staged is not None:
                staged.cleanup()
            if cg is not None:
                cg.kill()
                cg.remove()
            lease.release()

    def _spawn(self, staged: Staged, lease: UidLease, gated: bool) -> subprocess.Popen:
        argv = ["/bin/sh", "-c", 'read -r _ && exec "$@"', "sh", *staged.argv] if gated else staged.argv
        ids = {"user": lease.uid, "group": lease.gid, "extra_groups": []} if lease.dropped else {}
        return subprocess.Popen(argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                pass_fds=staged.pass_fds, env=staged.env, cwd="/", start_new_session=True,
                                **ids)

    def _supervise(self, staged: Staged, program: Program, limits: Limits, lease: UidLease, cg, channel_r,
                   mode: str) -> SandboxResult:
        t0 = time.monotonic()
        killed: list[str] = []
        try:
            proc = self._spawn(staged, lease, gated=cg is not None)
        except OSError as e:  # e.g. the interpreter or bwrap vanished: not the program's doing, but no run
            if channel_r is not None:
                os.close(channel_r)
            return SandboxResult(None, b"", f"cannot start the sandbox: {e}".encode(), killed_reason="setup_failed")
        staged.close_child_fds()  # our copies: EOF on the channel must mean the run closed it
        try:
            if cg is not None:
                try:
                    cg.attach(proc.pid)  # before the gate opens: nothing has run yet
                except OSError:
                    killed.append("setup_failed")
            stdin = b"" if killed else (b"\n" if cg is not None else b"") + program.stdin
            out, err, chan = _pump(proc, stdin, channel_r, limits, t0 + (0 if killed else limits.wall_s), killed)
        finally:
            self._stop(proc, cg, lease, mode, killed)
        rc = proc.returncode
        if rc is not None and rc < 0:  # one convention in both modes: bubblewrap reports death by signal N as 128+N
            rc = 128 - rc
        reason = killed[0] if killed else None
        if reason is None:
            if rc == 128 + signal.SIGXCPU:
                reason = "cpu_time"
            elif cg is not None and cg.oom_kills() > 0:
                reason = "memory"
            elif rc == 125 and err.buf.startswith(_SETUP_MARK):
                reason = "setup_failed"
        return SandboxResult(exit_code=rc, stdout=bytes(out.buf), stderr=bytes(err.buf),
                             timed_out=reason == "wall_time", killed_reason=reason,
                             wall_s=time.monotonic() - t0, stdout_truncated=out.truncated,
                             stderr_truncated=err.truncated, channel=bytes(chan.buf) if chan else b"",
                             channel_truncated=bool(chan and chan.truncated),
                             peak_memory_bytes=cg.peak_memory() if cg is not None else None)

    def _stop(self, proc: subprocess.Popen, cg, lease: UidLease, mode: str, killed: list[str]) -> None:
        """End the run. Bubblewrap's outer process is left to reap its pid 1 and exit by itself where
        possible: killed first, it would leave that child as a zombie for the host's init to collect."""
        if killed and cg is not None:
            cg.kill(exclude=frozenset({proc.pid}))
        if not killed or cg is not None:
            try:
                proc.wait(timeout=_GRACE_S)
            except subprocess.TimeoutExpired:
                pass
        self._kill(proc, cg, lease, mode)
        proc.wait()

    def _kill(self, proc: subprocess.Popen, cg, lease: UidLease, mode: str) -> None:
        try:
            os.killpg(proc.pid, signal.SIGKILL)
        except (ProcessLookupError, PermissionError):
            pass
        if cg is not None:
            cg.kill()
        if mode != "bwrap" and lease.dropped:  # fallback: setsid daemons left the group; the uid is the run's
            subprocess.run([self.python, "-I", "-S", "-c", "import os; os.kill(-1, 9)"], user=lease.uid,
                           group=lease.gid, extra_groups=[], env={}, cwd="/", stdout=subprocess.DEVNULL,
                           stderr=subprocess.DEVNULL, timeout=10)


def _fallback_limits(limits: Limits, lease: UidLease) -> Limits:
    """Without a user namespace or a uid of its own, ``RLIMIT_NPROC`` counts every process of our uid: allow
    the ones that exist now on top of the run's own budget, or the program could not fork at all."""
    if lease.dropped:
        return limits
    mine = 0
    for pid in os.listdir("/proc"):
        try:
            if pid.isdigit() and os.stat(f"/proc/{pid}").st_uid == lease.uid:
                mine += len(os.listdir(f"/proc/{pid}/task"))  # the limit counts threads
        except OSError:
            continue
    return dataclasses.replace(limits, max_procs=limits.max_procs + mine)


def _pump(proc: subprocess.Popen, stdin: bytes, channel_r: int | None, limits: Limits, deadline: float,
          killed: list[str]) -> tuple[_Stream, _Stream, _Stream | None]:
    """Feed stdin and collect capped outputs until EOF everywhere, the deadline, or a cap is exceeded."""
    out, err = _Stream(limits.output_bytes), _Stream(limits.output_bytes)
    chan = _Stream(limits.channel_bytes) if channel_r is not None else None
    readers = {proc.stdout.fileno(): out, proc.stderr.fileno(): err}
    if channel_r is not None:
        readers[channel_r] = chan
    sel = selectors.DefaultSelector()
    for fd in readers:
        os.set_blocking(fd, False)
        sel.register(fd, selectors.EVENT_READ)
    feed = _Feeder(proc, stdin, sel)
    exited_at = None
    try:
        while True:
            now = time.monotonic()
            if now >= deadline:
                killed.append("wall_time")  # after a setup failure, the first reason stays the reported one
                break
            if proc.poll() is not None:
                exited_at = exited_at or now
                if not sel.get_map() or now - exited_at > _GRACE_S:
                    break
            if not sel.get_map():  # outputs closed: wait for the exit (or a program that runs on)
                try:
                    proc.wait(timeout=min(deadline - now, 0.05))
                except subprocess.TimeoutExpired:
                    pass
                continue
            for key, _ in sel.select(timeout=min(deadline - now, 0.05)):
                if key.fd == feed.fd:
                    feed.step()
                elif _drain(sel, key.fd, readers[key.fd]):
                    killed.append("output_limit")
                    return out, err, chan
    finally:
        sel.close()
        if channel_r is not None:
            os.close(channel_r)
        feed.close()
    return out, err, chan


def _drain(sel: selectors.BaseSelector, fd: int, stream: _Stream) -> bool:
    """Read what is there into ``stream``; True when its cap was exceeded."""
    try:
        data = os.read(fd, 65536)
    except BlockingIOError:
        return False
    if not data:
        sel.unregister(fd)
        return False
    return stream.add(data)


class _Feeder:
    """Writes stdin in chunks as the pipe accepts them; a reader that went away gets no more."""

    def __init__(self, proc: subprocess.Popen, data: bytes, sel: selectors.BaseSelector):
        self.proc, self.data, self.sel, self.pos = proc, data, sel, 0
        self.fd = proc.stdin.fileno()
        if data:
            os.set_blocking(self.fd, False)
            sel.register(self.fd, selectors.EVENT_WRITE)
        else:
            self.close()

    def step(self) -> None:
        try:
            self.pos += os.write(self.fd, self.data[self.pos:self.pos + 65536])
        except BlockingIOError:
            return
        except OSError:  # EPIPE: the program closed stdin or exited
            self.pos = len(self.data)
        if self.pos >= len(self.data):
            self.sel.unregister(self.fd)
            self.close()

    def close(self) -> None:
        if not self.proc.stdin.closed:
            try:
                self.proc.stdin.close()
            except OSError:
                pass


_default: LocalSandbox | None = None
_default_lock = threading.Lock()


def default_sandbox() -> LocalSandbox:
    """One shared :class:`LocalSandbox` per process (detection runs once)."""
    global _default
    with _default_lock:
        if _default is None:
            _default = LocalSandbox()
        return _default

"""In-sandbox launcher: the first code that runs inside the sandbox, before the untrusted program.

Standalone on purpose (stdlib only, no rlvr import): the host copies this file into the sandbox and runs it
with the system interpreter as ``python3 -I -S -B launcher.py CONFIG`` (a ``marshal``-ed dict: unlike json or
runpy it costs no import). It then runs the program in the same process, so the program pays for one
interpreter start, not two.

Under bubblewrap it starts as uid 0 of a fresh user namespace (mapped to an unprivileged host uid) holding only
CAP_SYS_ADMIN and CAP_SETFCAP, which it needs for two mounts bubblewrap cannot do:

1. the scratch tmpfs with ``size=`` *and* ``nr_inodes=`` (bubblewrap's ``--size`` bounds bytes only; empty
   files are free of bytes and cost kernel memory);
2. a read-only bind of ``/proc/sys`` over the fresh procfs.

Then it never keeps those capabilities: it enters a nested user namespace in which its uid is the
unprivileged sandbox uid, drops the bounding, ambient, effective, permitted and inheritable capability sets,
and verifies they are empty. In both modes (bubblewrap and the fallback) it then sets ``no_new_privs``, the
resource limits, optionally ``PR_SET_DUMPABLE=0``, the seccomp filter, and closes every inherited file
descriptor except stdio and the result channel (moved to fd 3).

Any step that fails aborts with exit status 125 and a line starting ``rlvr-sandbox launcher:`` on stderr:
the program never runs with less protection than the host reported.
"""

import ctypes
import marshal
import os
import resource
import sys

SETUP_FAILED = 125
_MS_NOSUID, _MS_NODEV, _MS_NOEXEC, _MS_RDONLY = 0x2, 0x4, 0x8, 0x1
_MS_REMOUNT, _MS_BIND, _MS_REC = 0x20, 0x1000, 0x4000
_CLONE_NEWUSER = 0x10000000
_PR_SET_DUMPABLE, _PR_CAPBSET_DROP, _PR_SET_NO_NEW_PRIVS = 4, 24, 38
_PR_SET_SECCOMP, _SECCOMP_MODE_FILTER = 22, 2
_PR_CAP_AMBIENT, _PR_CAP_AMBIENT_CLEAR_ALL = 47, 4
_CAP_VERSION_3 = 0x20080522

_libc = ctypes.CDLL(None, use_errno=True)


def _check(ret, what):
    if ret != 0:
        err = ctypes.get_errno()
        raise OSError(err, "%s: %s" % (what, os.strerror(err)))


def _mount(src, target, fstype, flags, data):
    enc = lambda s: None if s is None else s.encode()  # noqa: E731
    _check(_libc.mount(enc(src), enc(target), enc(fstype), ctypes.c_ulong(flags), enc(data)),
           "mount %s" % target)


def _write(path, text):
    fd = os.open(path, os.O_WRONLY)
    try:
        os.write(fd, text.encode())
    finally:
        os.close(fd)


def _mounts(cfg):
    """Scratch tmpfs capped in bytes and inodes; /proc/sys read-only."""
    opts = "size=%d,nr_inodes=%d,mode=0755" % (cfg["scratch_bytes"], cfg["scratch_files"])
    _mount("tmpfs", cfg["scratch"], "tmpfs", _MS_NOSUID | _MS_NODEV, opts)
    _mount("/proc/sys", "/proc/sys", None, _MS_BIND | _MS_REC, None)
    _mount(None, "/proc/sys", None,
           _MS_BIND | _MS_REMOUNT | _MS_RDONLY | _MS_NOSUID | _MS_NODEV | _MS_NOEXEC, None)


class _CapHeader(ctypes.Structure):
    _fields_ = [("version", ctypes.c_uint32), ("pid", ctypes.c_int)]


class _CapData(ctypes.Structure):
    _fields_ = [("effective", ctypes.c_uint32), ("permitted", ctypes.c_uint32),
                ("inheritable", ctypes.c_uint32)]


def _become_sandbox_user(uid, gid):
    """Leave uid 0 for an unprivileged uid in a nested user namespace, then drop every capability."""
    _check(_libc.unshare(_CLONE_NEWUSER), "unshare(CLONE_NEWUSER)")
    _write("/proc/self/setgroups", "deny")
    _write("/proc/self/uid_map", "%d 0 1\n" % uid)
    _write("/proc/self/gid_map", "%d 0 1\n" % gid)
    with open("/proc/sys/kernel/cap_last_cap") as f:
        last = int(f.read())
    for cap in range(last + 1):  # bounding set first: dropping it needs CAP_SETPCAP, still held here
        _check(_libc.prctl(_PR_CAPBSET_DROP, cap, 0, 0, 0), "PR_CAPBSET_DROP")
    _libc.prctl(_PR_CAP_AMBIENT, _PR_CAP_AMBIENT_CLEAR_ALL, 0, 0, 0)
    _check(_libc.capset(ctypes.byref(_CapHeader(_CAP_VERSION_3, 0)), (_CapData * 2)()), "capset")
    if os.getuid() != uid or os.getgid() != gid:
        raise OSError(0, "uid/gid did not change")
    with open("/proc/self/status") as f:
        caps = [ln.split()[1] for ln in f if ln.startswith(("CapEff", "CapPrm", "CapInh", "CapBnd", "CapAmb"))]
    if len(caps) != 5 or any(int(c, 16) for c in caps):
        raise OSError(0, "capabilities still held: %s" % caps)


def _rlimits(limits):
    for name, value in limits.items():
        soft, hard = value if isinstance(value, list) else (value, value)
        resource.setrlimit(getattr(resource, "RLIMIT_" + name), (soft, hard))


class _SockFprog(ctypes.Structure):
    _fields_ = [("len", ctypes.c_ushort), ("filter", ctypes.c_void_p)]


def _seccomp(path):
    with open(path, "rb") as f:
        prog = f.read()
    buf = ctypes.create_string_buffer(prog, len(prog))
    fprog = _SockFprog(len(prog) // 8, ctypes.cast(buf, ctypes.c_void_p))
    _check(_libc.prctl(_PR_SET_SECCOMP, _SECCOMP_MODE_FILTER, ctypes.byref(fprog), 0, 0), "seccomp")


def _fds(channel_fd):
    """Only stdio and the channel (as fd 3) survive into the program."""
    keep = 3
    if channel_fd is not None:
        if channel_fd != 3:
            os.dup2(channel_fd, 3)
        keep = 4
    os.closerange(keep, 1 << 16)


def setup(cfg):
    """Every protection step, in the only order that works (mounts need capabilities, seccomp forbids them)."""
    if cfg.get("mode") == "bwrap":
        _mounts(cfg)
        _become_sandbox_user(cfg["uid"], cfg["gid"])
    _check(_libc.prctl(_PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0), "no_new_privs")
    _rlimits(cfg.get("rlimits", {}))
    if cfg.get("nondumpable"):
        _check(_libc.prctl(_PR_SET_DUMPABLE, 0, 0, 0, 0), "PR_SET_DUMPABLE")
    if cfg.get("seccomp"):
        _seccomp(cfg["seccomp"])
    _fds(cfg.get("channel_fd"))
    os.chdir(cfg["scratch"])


def main():
    try:
        with open(sys.argv[1], "rb") as f:
            cfg = marshal.load(f)
        setup(cfg)
        with open(cfg["main"], "rb") as f:
            code = compile(f.read(), cfg["main"], "exec")
    except Exception as e:  # fail closed: never run the program half-protected
        os.write(2, ("rlvr-sandbox launcher: %s: %s\n" % (type(e).__name__, e)).encode())
        os._exit(SETUP_FAILED)
    sys.argv = [cfg["main"]] + list(cfg.get("argv", []))
    sys.path.insert(0, cfg["box"])
    main_mod = sys.modules["__main__"]  # the program becomes __main__ with a namespace of its own
    for name in [k for k in main_mod.__dict__ if k not in ("__name__", "__builtins__", "__loader__", "__spec__")]:
        del main_mod.__dict__[name]
    main_mod.__file__ = cfg["main"]
    exec(code, main_mod.__dict__)


if __name__ == "__main__":
    main()

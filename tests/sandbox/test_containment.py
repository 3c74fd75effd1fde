"""Hostile programs under the bubblewrap sandbox: each attack is contained, and nothing outlives the run.

Every target is on this machine: the only network target is a loopback port the test itself opens.
"""

from __future__ import annotations

import json
import os
import socket
import uuid

import pytest

from rlvr.sandbox import Limits, MiB, Program
from rlvr.sandbox import cgroups as cg_mod
from rlvr.sandbox.seccomp import supported_arch
from tests.sandbox.conftest import kill_all, wait_gone

FAST = Limits(wall_s=10, cpu_s=5)


def run(sb, src: str, limits: Limits = FAST, **kw):
    return sb.run(Program(src, **kw), limits)


def test_runs_a_program_with_stdin_files_and_exit_code(bwrap_sandbox):
    src = "import sys, helper\nprint(helper.X, sys.stdin.read().upper(), sys.argv[1:])\nsys.exit(3)"
    res = run(bwrap_sandbox, src, files={"helper.py": "X = 41 + 1\n"}, stdin=b"hi", argv=("a",))
    assert res.exit_code == 3 and res.killed_reason is None and not res.weak
    assert res.stdout == b"42 HI ['a']\n"
    prot = res.protections
    assert prot.bwrap and prot.network_isolated and prot.seccomp and prot.scratch_file_cap and prot.uid_drop
    if cg_mod.detect() is not None:
        assert prot.cgroup_pids and prot.cgroup_memory
    assert bwrap_sandbox.protections() == prot


def test_inside_view_is_unprivileged_and_read_only(bwrap_sandbox):
    src = r'''
import json, os
def w(p):
    try:
        open(p, "w").close(); return "writable"
    except OSError as e:
        return e.errno
status = dict(l.split(":", 1) for l in open("/proc/self/status"))
print(json.dumps({"uid": os.getuid(), "gid": os.getgid(), "env": dict(os.environ),
    "caps": [status[k].strip() for k in ("CapEff", "CapPrm", "CapBnd", "CapAmb")],
    "nnp": status["NoNewPrivs"].strip(), "seccomp": status["Seccomp"].strip(),
    "writes": {p: w(p) for p in ["/proc/sys/kernel/core_pattern", "/dev/x", "/x", "/usr/x", "/box/main.py"]},
    "ls": sorted(os.listdir("/")), "cwd": os.getcwd(), "scratch": w("/tmp/ok")}))
'''
    out = json.loads(run(bwrap_sandbox, src).stdout)
    assert out["uid"] == out["gid"] == 65534
    assert out["caps"] == ["0000000000000000"] * 4 and out["nnp"] == "1" and out["seccomp"] == "2"
    assert set(out["env"]) <= {"PATH", "HOME", "LANG", "PWD"}
    assert all(v != "writable" for v in out["writes"].values()), out["writes"]
    assert out["cwd"] == "/tmp" and out["scratch"] == "writable"
    assert not {"root", "home", "work", "var", "opt", "srv"} & set(out["ls"])


def test_fork_bomb_is_contained(bwrap_sandbox):
    marker = uuid.uuid4().hex
    src = f"import os\nMARK = '{marker}'\nwhile True:\n    try:\n        os.fork()\n    except OSError:\n        pass"
    try:
        res = run(bwrap_sandbox, src, Limits(wall_s=1.5, cpu_s=5, max_procs=32))
        assert res.timed_out and res.killed_reason == "wall_time"
        assert wait_gone() == []
    finally:
        kill_all(wait_gone(timeout=0))


def test_process_count_is_capped(bwrap_sandbox):
    src = """
import os, time
ok = fail = 0
t = time.time()
while time.time() - t < 1 and fail < 50:
    try:
        if os.fork() == 0:
            time.sleep(30)
            os._exit(0)
        ok += 1
    except OSError:
        fail += 1
print(ok, fail)
"""
    res = run(bwrap_sandbox, src, Limits(wall_s=10, max_procs=16))
    ok, fail = map(int, res.stdout.split())
    assert ok < 16 and fail > 0
    assert wait_gone() == []  # the sleeping children died with the run


def test_memory_bomb_over_forked_children_is_capped(bwrap_sandbox):
    if not bwrap_sandbox.protections().cgroup_memory:
        pytest.skip("no writable memory cgroup: RLIMIT_AS alone cannot cap memory spread over children")
    src = ("import os, time\nfor i in range(8):\n    if os.fork() == 0:\n        b = bytearray(64 << 20)\n"
           "        for j in range(0, len(b), 4096): b[j] = 1\n        print('held', flush=True)\n"
           "        time.sleep(30)\n        os._exit(0)\ntime.sleep(1.5)")
    res = run(bwrap_sandbox, src, Limits(wall_s=10, memory_bytes=160 * MiB, address_space_bytes=1024 * MiB))
    # 8 x 64 MiB would be 512 MiB, and each child alone is within RLIMIT_AS: without the cgroup all 8 hold.
    # (Exactly how many hold before the kill depends on scheduling: a killed child frees its memory.)
    assert res.stdout.count(b"held") < 8
    assert res.killed_reason == "memory"
    assert res.peak_memory_bytes is not None and res.peak_memory_bytes <= 160 * MiB


def test_infinite_loop_hits_cpu_limit_and_sleep_hits_wall_clock(bwrap_sandbox):
    res = run(bwrap_sandbox, "while True: pass", Limits(wall_s=10, cpu_s=1))
    assert res.killed_reason == "cpu_time" and not res.timed_out
    res = run(bwrap_sandbox, "import time; time.sleep(60)", Limits(wall_s=1, cpu_s=5))
    assert res.timed_out and res.killed_reason == "wall_time" and res.wall_s < 5


def test_daemon_does_not_outlive_the_run(bwrap_sandbox):
    marker = uuid.uuid4().hex
    src = f'''
import os, sys, time
if os.fork() == 0:
    os.setsid()
    if os.fork() == 0:
        os.execv(sys.executable, [sys.executable, "-c", "import time; time.sleep(60)", "{marker}"])
    os._exit(0)
time.sleep(0.5)
print("parent exits")
'''
    try:
        res = run(bwrap_sandbox, src)
        assert res.stdout == b"parent exits\n" and res.exit_code == 0
        assert wait_gone(marker) == []
    finally:
        kill_all(wait_gone(marker, timeout=0))


def test_loopback_port_opened_outside_is_not_reachable(bwrap_sandbox):
    srv = socket.socket()
    srv.bind(("127.0.0.1", 0))
    srv.listen(1)
    srv.setblocking(False)
    port = srv.getsockname()[1]
    try:
        src = (f"import socket\ntry:\n    socket.create_connection(('127.0.0.1', {port}), timeout=2)\n"
               f"    print('connected')\nexcept OSError as e:\n    print('blocked', e.errno)")
        res = run(bwrap_sandbox, src)
        assert res.stdout.startswith(b"blocked")
        with pytest.raises(BlockingIOError):
            srv.accept()  # nothing ever arrived
    finally:
        srv.close()


def test_host_files_and_secrets_are_invisible(bwrap_sandbox, tmp_path, monkeypatch):
    token = uuid.uuid4().hex
    secret_file = tmp_path / "secret.txt"
    secret_file.write_text(token)
    monkeypatch.setenv("RLVR_TEST_SECRET", token)
    src = f'''
import os
for p in ["{secret_file}", "/root", "/etc/shadow", "{os.getcwd()}", "/proc/1/environ"]:
    try:
        print(p, open(p).read() if os.path.isfile(p) else os.listdir(p))
    except OSError as e:
        print(p, "denied", e.errno)
print(dict(os.environ))
'''
    res = run(bwrap_sandbox, src)
    assert token.encode() not in res.stdout + res.stderr
    assert res.stdout.count(b"denied") == 5, res.stdout


def test_writes_outside_the_sandbox_fail(bwrap_sandbox, tmp_path):
    """Host paths outside /tmp are refused; a host path under /tmp lands in the run's own scratch tmpfs."""
    in_repo = os.path.join(os.getcwd(), f"escape-{uuid.uuid4().hex}.txt")
    in_tmp = tmp_path / "escape.txt"
    src = f'''
import os
for p in ["{in_repo}", "/usr/escape", "/escape", "/etc/passwd", "/box/main.py", "/proc/sys/kernel/core_pattern",
          "{in_tmp}"]:
    try:
        os.makedirs(os.path.dirname(p), exist_ok=True)
        open(p, "w").write("x"); print("WROTE", p)
    except OSError as e:
        print("refused", p, e.errno)
'''
    try:
        res = run(bwrap_sandbox, src)
        for p in ["/usr/escape", "/escape", "/etc/passwd", "/box/main.py", "/proc/sys/kernel/core_pattern"]:
            assert f"refused {p} ".encode() in res.stdout, res.stdout
        # a checkout under /tmp (as CI's may be) is shadowed by the run's scratch tmpfs: the write lands there
        repo_refused = f"refused {in_repo} ".encode() in res.stdout
        assert repo_refused or in_repo.startswith("/tmp/"), res.stdout
        # what matters: nothing the program wrote reaches the host
        assert not os.path.exists(in_repo) and list(tmp_path.iterdir()) == []
    finally:
        if os.path.exists(in_repo):
            os.remove(in_repo)


def test_output_flood_is_capped_and_killed(bwrap_sandbox):
    res = run(bwrap_sandbox, "import sys\nwhile True: sys.stdout.write('x' * 65536)",
              Limits(wall_s=10, output_bytes=100_000))
    assert res.killed_reason == "output_limit" and res.stdout_truncated
    assert len(res.stdout) == 100_000 and res.wall_s < 5


def test_scratch_space_is_bounded_in_bytes_and_files(bwrap_sandbox):
    src = '''
import os
n = 0
try:
    while True:
        open("f%d" % n, "w").close(); n += 1
except OSError as e:
    print("files", n, e.errno)
for p, size in [("big", 8 << 20), ("/dev/shm/big", 2 << 20)]:
    try:
        with open(p, "wb") as f:
            f.write(b"x" * size)
        print("wrote", p)
    except OSError as e:
        print("full", p, e.errno)
'''
    lim = Limits(wall_s=20, scratch_files=200, scratch_bytes=4 * MiB, file_size_bytes=64 * MiB, shm_bytes=1 * MiB)
    out = run(bwrap_sandbox, src, lim).stdout.decode().split("\n")
    files = int(out[0].split()[1])
    assert 190 <= files < 200 and out[0].endswith(" 28")  # ENOSPC on inodes
    assert out[1] == "full big 28" and out[2] == "full /dev/shm/big 28"


def test_seccomp_denies_escape_syscalls(bwrap_sandbox):
    if supported_arch() is None:
        pytest.skip("no seccomp syscall table for this architecture")
    clone_nr = {"x86_64": 56, "aarch64": 220}[supported_arch()]
    src = f'''
import ctypes
libc = ctypes.CDLL(None, use_errno=True)
for name, call in [("ptrace", lambda: libc.ptrace(0, 0, 0, 0)), ("unshare", lambda: libc.unshare(0x10000000)),
                   ("mount", lambda: libc.mount(b"none", b"/tmp", b"tmpfs", 0, None)),
                   ("clone_newuser", lambda: libc.syscall({clone_nr}, 0x10000000 | 17, 0, 0, 0, 0))]:
    print(name, call(), ctypes.get_errno())
'''
    lines = run(bwrap_sandbox, src).stdout.decode().split("\n")[:4]
    assert all(ln.endswith(" -1 1") for ln in lines), lines  # EPERM


def test_child_cannot_read_nondumpable_parent(bwrap_sandbox):
    """What the code verifier relies on: a secret the main process read from stdin stays out of reach of a
    child it starts (no inherited fds, /proc/<parent> closed, ptrace denied)."""
    token = uuid.uuid4().hex
    child = r'''
import os
loot = []
for pid in [p for p in os.listdir("/proc") if p.isdigit()]:
    for what in ["environ", "cmdline", "mem", "fd/0", "fd/3"]:
        try:
            fd = os.open("/proc/%s/%s" % (pid, what), os.O_RDONLY | os.O_NONBLOCK)
            loot.append(os.read(fd, 4096))
        except OSError:
            pass
print(b"".join(loot).hex())
'''
    src = ("import os, sys, subprocess\nsecret = sys.stdin.read()\nos.dup2(os.open('/dev/null', os.O_RDONLY), 0)\n"
           f"out = subprocess.run([sys.executable, '-c', {child!r}], capture_output=True).stdout\n"
           "print(bytes.fromhex(out.decode().strip()).decode('latin-1'))")
    res = run(bwrap_sandbox, src, stdin=token.encode(), nondumpable=True, channel=True)
    assert res.exit_code == 0 and token.encode() not in res.stdout


def test_nothing_is_left_behind(bwrap_sandbox):
    sup = cg_mod.detect()
    run(bwrap_sandbox, "import os\nif os.fork() == 0:\n    import time; time.sleep(30)")
    assert wait_gone() == []
    if sup is not None:
        for parent in {sup.memory_parent, sup.pids_parent} - {None}:
            left = [d for d in os.listdir(parent) if d.startswith(f"rlvr-sbx-{os.getpid()}-")]
            assert left == []


def test_launcher_fails_closed(bwrap_sandbox, monkeypatch):
    """A protection step that cannot be applied stops the run before the program starts."""
    from rlvr.sandbox import bwrap

    real = bwrap.launcher_config
    monkeypatch.setattr(bwrap, "launcher_config", lambda *a, **k: {**real(*a, **k), "seccomp": "/nonexistent"})
    res = run(bwrap_sandbox, "print('program ran')")
    assert res.killed_reason == "setup_failed" and res.exit_code == 125 and b"program ran" not in res.stdout


def test_limits_must_be_positive():
    with pytest.raises(ValueError, match="scratch_files"):
        Limits(scratch_files=0)

"""A seccomp syscall filter, assembled as classic BPF in pure Python (no libseccomp, no compiled code).

What it protects: the sandboxed program cannot call the syscalls that matter for escaping or spying from
inside a namespace sandbox: ``ptrace`` and ``process_vm_readv/writev`` (reading or driving another process of
the same uid, e.g. the bubblewrap reaper or the test judge), ``mount``-family calls, ``unshare``/``setns`` and
``clone`` with namespace flags (new user namespaces would hand back capabilities), ``bpf``,
``perf_event_open``, ``userfaultfd``, ``io_uring_*``, keyrings, kernel modules, ``kexec``, ``reboot``,
``swapon``, ``open_by_handle_at`` (the classic container escape) and ``ioctl(TIOCSTI)`` (typing into the
caller's terminal). Denied calls fail with ``EPERM`` so ordinary programs see a normal error; ``clone3`` fails
with ``ENOSYS`` so libc falls back to ``clone``, whose flags we can inspect. A syscall made through a foreign
ABI (i386 ``int 0x80`` or x32 on x86_64) kills the process: our syscall numbers would not apply to it.

The program is a deny list on purpose: model-written code uses a wide range of ordinary syscalls
(threads, pipes, ``mmap``, sockets inside an empty network namespace) and an allow list would break it.

:func:`build_filter` returns the filter as bytes, the layout ``prctl(PR_SET_SECCOMP)`` and bubblewrap's
``--seccomp FD`` both take; the in-sandbox launcher installs it after its own mounts. Architectures other than
x86_64 and aarch64 get ``None`` and the run reports seccomp as inactive.
"""

from __future__ import annotations

import errno
import platform
import struct

__all__ = ["build_filter", "supported_arch", "DENIED_SYSCALLS"]

# Classic BPF opcodes (linux/filter.h) and seccomp return values (linux/seccomp.h).
_LD_W_ABS = 0x20  # BPF_LD | BPF_W | BPF_ABS
_JEQ_K = 0x15  # BPF_JMP | BPF_JEQ | BPF_K
_JGE_K = 0x35  # BPF_JMP | BPF_JGE | BPF_K
_JSET_K = 0x45  # BPF_JMP | BPF_JSET | BPF_K
_RET_K = 0x06  # BPF_RET | BPF_K
_RET_KILL_PROCESS = 0x80000000
_RET_ERRNO = 0x00050000
_RET_ALLOW = 0x7FFF0000
# Offsets in struct seccomp_data: int nr; u32 arch; u64 instruction_pointer; u64 args[6] (little endian).
_OFF_NR, _OFF_ARCH, _OFF_ARG0, _OFF_ARG1 = 0, 4, 16, 24
_X32_BIT = 0x40000000
_TIOCSTI = 0x5412
# CLONE_NEWNS | NEWCGROUP | NEWUTS | NEWIPC | NEWUSER | NEWPID | NEWNET (and NEWTIME, 0x80).
_CLONE_NS_FLAGS = 0x00020000 | 0x02000000 | 0x04000000 | 0x08000000 | 0x10000000 | 0x20000000 | 0x40000000 | 0x80

# name -> (x86_64 number, aarch64 number); None where the syscall does not exist on that architecture.
# Numbers are from the kernel's uapi headers (asm/unistd_64.h and asm-generic/unistd.h).
_TABLE: dict[str, tuple[int | None, int | None]] = {
    "ptrace": (101, 117), "process_vm_readv": (310, 270), "process_vm_writev": (311, 271),
    "mount": (165, 40), "umount2": (166, 39), "pivot_root": (155, 41), "chroot": (161, 51),
    "unshare": (272, 97), "setns": (308, 268), "open_tree": (428, 428), "move_mount": (429, 429),
    "fsopen": (430, 430), "fsconfig": (431, 431), "fsmount": (432, 432), "fspick": (433, 433),
    "mount_setattr": (442, 442), "keyctl": (250, 219), "add_key": (248, 217), "request_key": (249, 218),
    "bpf": (321, 280), "perf_event_open": (298, 241), "userfaultfd": (323, 282),
    "kexec_load": (246, 104), "kexec_file_load": (320, 294), "init_module": (175, 105),
    "finit_module": (313, 273), "delete_module": (176, 106), "io_uring_setup": (425, 425),
    "io_uring_enter": (426, 426), "io_uring_register": (427, 427), "open_by_handle_at": (304, 265),
    "name_to_handle_at": (303, 264), "swapon": (167, 224), "swapoff": (168, 225), "reboot": (169, 142),
    "acct": (163, 89), "quotactl": (179, 60), "syslog": (103, 116), "lookup_dcookie": (212, 18),
    "vhangup": (153, 58), "settimeofday": (164, 170), "clock_settime": (227, 112), "adjtimex": (159, 171),
    "fanotify_init": (300, 262), "kcmp": (312, 272), "pidfd_getfd": (438, 438),
    "process_madvise": (440, 440), "uselib": (134, None), "iopl": (172, None), "ioperm": (173, None),
}
DENIED_SYSCALLS = tuple(sorted(_TABLE))
# machine -> (AUDIT_ARCH value, column in _TABLE, (clone, clone3, ioctl) numbers).
_ARCH = {"x86_64": (0xC000003E, 0, (56, 435, 16)), "aarch64": (0xC00000B7, 1, (220, 435, 29))}


def supported_arch(machine: str | None = None) -> str | None:
    """``"x86_64"`` / ``"aarch64"`` when we have syscall numbers for this machine, else None."""
    m = (machine or platform.machine()).lower()
    m = {"amd64": "x86_64", "arm64": "aarch64"}.get(m, m)
    return m if m in _ARCH else None


def _ins(code: int, jt: int, jf: int, k: int) -> bytes:
    return struct.pack("<HBBI", code, jt, jf, k & 0xFFFFFFFF)


def build_filter(machine: str | None = None) -> bytes | None:
    """The filter program for this (or the named) architecture as raw ``struct sock_filter`` bytes."""
    arch = supported_arch(machine)
    if arch is None:
        return None
    audit_arch, col, (clone, clone3, ioctl) = _ARCH[arch]
    eperm, enosys = _RET_ERRNO | errno.EPERM, _RET_ERRNO | errno.ENOSYS
    prog = [_ins(_LD_W_ABS, 0, 0, _OFF_ARCH),
            _ins(_JEQ_K, 1, 0, audit_arch),  # foreign ABI: our numbers would be wrong for it
            _ins(_RET_K, 0, 0, _RET_KILL_PROCESS),
            _ins(_LD_W_ABS, 0, 0, _OFF_NR)]
    if arch == "x86_64":  # x32 syscalls share the arch value but set bit 30 of the number
        prog += [_ins(_JGE_K, 0, 1, _X32_BIT), _ins(_RET_K, 0, 0, _RET_KILL_PROCESS)]
    for name in DENIED_SYSCALLS:
        nr = _TABLE[name][col]
        if nr is not None:
            prog += [_ins(_JEQ_K, 0, 1, nr), _ins(_RET_K, 0, 0, eperm)]
    prog += [_ins(_JEQ_K, 0, 1, clone3), _ins(_RET_K, 0, 0, enosys)]
    # ioctl(fd, TIOCSTI, ...): compare the low 32 bits of the request argument.
    prog += [_ins(_JEQ_K, 0, 3, ioctl), _ins(_LD_W_ABS, 0, 0, _OFF_ARG1),
             _ins(_JEQ_K, 0, 1, _TIOCSTI), _ins(_RET_K, 0, 0, eperm)]
    # Anything after this point may have replaced the accumulator with an argument: reload nr first.
    prog += [_ins(_LD_W_ABS, 0, 0, _OFF_NR),
             _ins(_JEQ_K, 0, 3, clone), _ins(_LD_W_ABS, 0, 0, _OFF_ARG0),  # clone(flags, ...): flags low bits
             _ins(_JSET_K, 0, 1, _CLONE_NS_FLAGS), _ins(_RET_K, 0, 0, eperm),
             _ins(_RET_K, 0, 0, _RET_ALLOW)]
    return b"".join(prog)

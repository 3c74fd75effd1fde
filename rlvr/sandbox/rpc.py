"""The wire between the code verifier's judge and the solution process, and the solution side of it.

Standalone (stdlib only): shipped into the sandbox next to the judge as ``/box/rlvr_sandbox_rpc.py`` and
started as ``python3 -I -S -B rlvr_sandbox_rpc.py --serve /box/solution.py`` for the solution process.

Values cross as tagged JSON of plain data only (see :func:`encode`); the judge rebuilds them with
:func:`decode`, which accepts nothing else, so no object the solution made (with its own ``__eq__``,
``__bool__`` or ``__repr__``) ever exists in the judge. Frames are length-prefixed and capped (``MAX_MSG``);
every judge-side read and write has the current test's deadline.
"""

import json
import os
import select
import struct
import sys
import time
import types

__all__ = ["encode", "decode", "send", "recv", "serve", "Timeout", "Died", "MAX_MSG"]

MAX_MSG = 16 << 20
_TAGS = {"L": list, "T": tuple, "E": set, "Z": frozenset}


# ---- value encoding -------------------------------------------------------------------------------------
def encode(x, ref, depth=0):
    """Plain data as tagged JSON; anything else becomes a handle, ``["R", ref(x)]``."""
    if depth > 100:
        raise ValueError("value nested too deeply")
    if x is None:
        return ["N"]
    if isinstance(x, bool):
        return ["B", bool(x)]
    if isinstance(x, int):
        return ["I", hex(int(x))]
    if isinstance(x, float):
        return ["F", float(x).hex()]
    if isinstance(x, complex):
        return ["C", x.real.hex(), x.imag.hex()]
    if isinstance(x, str):
        return ["S", str.__str__(x)]
    if isinstance(x, (bytes, bytearray)):
        return ["Y", bytes(x).hex()]
    for tag, typ in (("L", list), ("T", tuple), ("Z", frozenset), ("E", set)):
        if isinstance(x, typ):
            return [tag, [encode(i, ref, depth + 1) for i in x]]
    if isinstance(x, dict):
        return ["D", [[encode(k, ref, depth + 1), encode(v, ref, depth + 1)] for k, v in x.items()]]
    return ["R", ref(x)]


def decode(o, remote, depth=0):
    """Judge side: rebuild fresh builtins from the encoding, rejecting anything malformed."""
    if depth > 100 or type(o) is not list or not o or type(o[0]) is not str:
        raise ValueError("malformed value from the solution")
    t, n = o[0], len(o)
    if t == "N" and n == 1:
        return None
    if t == "B" and n == 2 and type(o[1]) is bool:
        return o[1]
    if t in ("I", "F", "S", "Y", "C") and all(type(v) is str for v in o[1:]) and n == (3 if t == "C" else 2):
        if t == "I":
            return int(o[1], 16)
        if t == "F":
            return float.fromhex(o[1])
        if t == "C":
            return complex(float.fromhex(o[1]), float.fromhex(o[2]))
        return o[1] if t == "S" else bytes.fromhex(o[1])
    if t in _TAGS and n == 2 and type(o[1]) is list:
        return _TAGS[t](decode(i, remote, depth + 1) for i in o[1])
    if t == "D" and n == 2 and type(o[1]) is list:
        if not all(type(p) is list and len(p) == 2 for p in o[1]):
            raise ValueError("malformed dict from the solution")
        return {decode(k, remote, depth + 1): decode(v, remote, depth + 1) for k, v in o[1]}
    if t == "R" and n == 2 and type(o[1]) is int:
        return remote(o[1])
    raise ValueError("malformed value from the solution")


# ---- framing --------------------------------------------------------------------------------------------
class Timeout(BaseException):
    """A test ran out of time (BaseException: test code's ``except Exception`` must not swallow it)."""


class Died(BaseException):
    """The solution process exited or broke the protocol."""


def _io(fd, deadline, write):
    left = deadline - time.monotonic()
    if left <= 0:
        raise Timeout()
    r, w, _ = select.select([] if write else [fd], [fd] if write else [], [], left)
    if not (r or w):
        raise Timeout()


def send(fd, obj, deadline=None):
    data = json.dumps(obj).encode()
    buf = memoryview(struct.pack(">I", len(data)) + data)
    while buf:
        if deadline is not None:
            _io(fd, deadline, True)
        try:
            buf = buf[os.write(fd, buf):]
        except BlockingIOError:
            continue
        except OSError:
            raise Died("solution process closed the connection")


def recv(fd, deadline=None):
    def exact(n):
        out = b""
        while len(out) < n:
            if deadline is not None:
                _io(fd, deadline, False)
            try:
                chunk = os.read(fd, min(n - len(out), 1 << 20))
            except BlockingIOError:
                continue
            if not chunk:
                raise Died("solution process exited")
            out += chunk
        return out
    (n,) = struct.unpack(">I", exact(4))
    if n > MAX_MSG:
        raise Died("oversized message from the solution")
    try:
        return json.loads(exact(n))
    except (ValueError, RecursionError):
        raise Died("malformed message from the solution")


# ---- the solution side (--serve) ------------------------------------------------------------------------
def _keep(refs):
    def ref(x):
        refs.append(x)
        return len(refs) - 1
    return ref


def _handle(req, refs):
    op, rid = req[0], req[1]
    target = refs[rid]
    if op == "call":
        args = [_arg(a, refs) for a in req[2]]
        return target(*args, **{k: _arg(v, refs) for k, v in req[3]})
    if op == "getattr":
        return getattr(target, req[2])
    if op == "getitem":
        return target[_arg(req[2], refs)]
    if op == "len":
        return len(target)
    if op == "iter":
        return list(target)
    raise ValueError("unknown request %r" % (op,))


def _arg(o, refs):
    return decode(o, lambda i: refs[i])


def serve(path):
    """Load the solution as module ``solution`` and answer requests until stdin closes."""
    rfd, wfd = os.dup(0), os.dup(1)
    null = os.open(os.devnull, os.O_RDWR)
    for fd in (0, 1, 2):  # the solution's prints must not corrupt the protocol
        os.dup2(null, fd)
    sys.path.insert(0, os.path.dirname(path))
    sys.argv = [path]
    mod = types.ModuleType("solution")
    mod.__file__ = path
    sys.modules["solution"] = mod
    refs = []
    try:
        with open(path) as f:
            exec(compile(f.read(), path, "exec"), mod.__dict__)
        names = {}
        for k, v in list(mod.__dict__.items()):
            if not k.startswith("__"):
                names[k] = encode(v, _keep(refs))
    except BaseException as e:
        send(wfd, ["load_error", type(e).__name__, str(e)[:500]])
        os._exit(0)
    send(wfd, ["ready", names])
    while True:
        try:
            req = recv(rfd)
        except Died:
            os._exit(0)
        try:
            resp = ["ok", encode(_handle(req, refs), _keep(refs))]
        except BaseException as e:
            resp = ["err", type(e).__name__, str(e)[:500]]
        send(wfd, resp)


if __name__ == "__main__" and len(sys.argv) == 3 and sys.argv[1] == "--serve":
    serve(sys.argv[2])

"""The wire between the code verifier's judge and the solution process, and the solution side of it.

Standalone (stdlib only): shipped into the sandbox next to the judge as ``/box/rlvr_sandbox_rpc.py`` and
started as ``python3 -I -S -B rlvr_sandbox_rpc.py --serve /box/solution.py`` for the solution process.

Values cross as JSON of plain data only (see :func:`encode`); the judge rebuilds them with
:func:`decode`, which accepts nothing else, so no object the solution made (with its own ``__eq__``,
``__bool__`` or ``__repr__``) ever exists in the judge. Frames are length-prefixed and capped (``MAX_MSG``);
every judge-side read and write has the current test's deadline. At load, only small module globals are sent
by value (``small``): a big table stays behind as a handle instead of overflowing the greeting. Exceptions
come back as their nearest builtin class (``error_reply`` / ``rebuild_error``); what the solution prints is
kept (capped) for tests that read it (``capture``, pytest's ``capsys``).
"""

import builtins
import io
import json
import os
import re
import select
import struct
import sys
import time
import types

__all__ = ["encode", "decode", "small", "send", "recv", "serve", "error_reply", "rebuild_error", "Remote", "Timeout",
           "Died", "MAX_MSG"]

MAX_MSG = 16 << 20
# module globals shipped by value at load, in items + string bytes: each one, and all together
GLOBAL_BUDGET, GLOBALS_BUDGET = 1 << 16, 1 << 20
CAPTURE_CAP = 1 << 20  # bytes of the solution's stdout (and of its stderr) kept for tests that read them
_WORD = 1 << 62
_TYPING_NAMES = re.compile(r"\b(List|Dict|Set|FrozenSet|Tuple|Optional|Union|Any|Callable|Iterable|Iterator|"
                           r"Generator|Deque|DefaultDict|Sequence|Mapping)\b")
_BARE = (str, int, float, bool, type(None))  # exact types json.loads makes: they stand for themselves
_TAGS = {"L": list, "T": tuple, "E": set, "Z": frozenset}


# ---- value encoding -------------------------------------------------------------------------------------
def encode(x, ref, depth=0):
    """Plain data as JSON: None, bools, strings, floats and word-sized ints bare (a list of a million small
    ints costs a few MiB, not tens), the rest tagged; anything else becomes a handle, ``["R", ref(x)]``."""
    if depth > 100:
        raise ValueError("value nested too deeply")
    if x is None:
        return None
    if isinstance(x, bool):
        return bool(x)
    if isinstance(x, int):
        x = int.__int__(x)
        return x if -_WORD < x < _WORD else ["I", hex(x)]
    if isinstance(x, float):
        return float.__float__(x)
    if isinstance(x, complex):
        return ["C", x.real.hex(), x.imag.hex()]
    if isinstance(x, str):
        return str.__str__(x)
    if isinstance(x, (bytes, bytearray)):
        return ["Y", bytes(x).hex()]
    for tag, typ in (("L", list), ("T", tuple), ("Z", frozenset), ("E", set)):
        if isinstance(x, typ):  # exact bare scalars inline: the bulk of a big result, at C speed
            return [tag, [i if type(i) in _BARE and (type(i) is not int or -_WORD < i < _WORD) else
                          encode(i, ref, depth + 1) for i in x]]
    if isinstance(x, dict):
        return ["D", [[encode(k, ref, depth + 1), encode(v, ref, depth + 1)] for k, v in x.items()]]
    return ["R", ref(x)]


def small(x, limit):
    """The size (items + string bytes) of plain data ``x``, or -1 when it is not plain data or exceeds
    ``limit``: checked before shipping a module global by value, so a big table stays in the solution process
    as a handle instead of overflowing the greeting (and cyclic data stops at the limit)."""
    todo, size = [x], 0
    while todo:
        v = todo.pop()
        size += 1 + (len(v) if isinstance(v, (str, bytes, bytearray)) else 0)
        if size > limit:
            return -1
        if isinstance(v, dict):
            todo.extend(v.keys())
            todo.extend(v.values())
        elif isinstance(v, (list, tuple, set, frozenset)):
            todo.extend(v)
        elif not (v is None or isinstance(v, (bool, int, float, complex, str, bytes, bytearray))):
            return -1
    return size


def decode(o, remote, depth=0):
    """Judge side: rebuild fresh builtins from the encoding, rejecting anything malformed."""
    t = type(o)
    if o is None or t in (bool, int, float, str):  # what json.loads made: exact builtin types
        return o
    if depth > 100 or t is not list or not o or type(o[0]) is not str:
        raise ValueError("malformed value from the solution")
    t, n = o[0], len(o)
    if t in ("I", "Y", "C") and all(type(v) is str for v in o[1:]) and n == (3 if t == "C" else 2):
        if t == "I":
            return int(o[1], 16)
        if t == "C":
            return complex(float.fromhex(o[1]), float.fromhex(o[2]))
        return bytes.fromhex(o[1])
    if t in _TAGS and n == 2 and type(o[1]) is list:
        return _TAGS[t]([i if type(i) in _BARE else decode(i, remote, depth + 1) for i in o[1]])
    if t == "D" and n == 2 and type(o[1]) is list:
        if not all(type(p) is list and len(p) == 2 for p in o[1]):
            raise ValueError("malformed dict from the solution")
        return {decode(k, remote, depth + 1): decode(v, remote, depth + 1) for k, v in o[1]}
    if t == "R" and n == 2 and type(o[1]) is int:
        return remote(o[1])
    raise ValueError("malformed value from the solution")


# ---- the judge's view of a solution object ---------------------------------------------------------------
class Remote:
    """A solution-side object the judge can call, index, iterate, print or take and set attributes of, never
    compare (its ``==`` would be the solution's to decide): each operation is a request, ``srv.rpc``."""

    __slots__ = ("_rid", "_srv")

    def __init__(self, rid, srv):
        object.__setattr__(self, "_rid", rid)
        object.__setattr__(self, "_srv", srv)

    def __call__(self, *args, **kwargs):
        return self._srv.rpc(["call", self._rid, [self._srv.arg(a) for a in args],
                              [[k, self._srv.arg(v)] for k, v in kwargs.items()]])

    def __getattr__(self, name):
        if name.startswith("__"):
            raise AttributeError(name)
        return self._srv.rpc(["getattr", self._rid, name])

    def __setattr__(self, name, value):  # tests building linked lists and trees: node.next = ListNode(2)
        self._srv.rpc(["setattr", self._rid, name, self._srv.arg(value)])

    def __getitem__(self, key):
        return self._srv.rpc(["getitem", self._rid, self._srv.arg(key)])

    def __setitem__(self, key, value):
        self._srv.rpc(["setitem", self._rid, self._srv.arg(key), self._srv.arg(value)])

    def __len__(self):
        n = self._srv.rpc(["len", self._rid])
        if type(n) is not int:
            raise TypeError("len() of a solution object is not an int")
        return n

    def __iter__(self):
        return iter(self._srv.rpc(["iter", self._rid]))

    def __bool__(self):  # `assert solution_object` must not pass by default truthiness
        raise TypeError("a solution object has no truth value; return plain data")

    def __str__(self):
        return self._text("str")

    def __repr__(self):
        return self._text("repr")

    def _text(self, op):
        """The object's own ``str``/``repr`` (tests compare them), or a placeholder where it cannot say."""
        if not self._srv.broken and self._srv.proc is not None:
            try:
                text = self._srv.rpc([op, self._rid])
                if type(text) is str:
                    return text
            except BaseException:  # the failed call left the process broken: the test fails for that
                pass
        return "<solution object #%d>" % self._rid


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
    if op == "capture":  # what the solution printed since the last capture (pytest's capsys)
        return _captured()
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
    if op in ("str", "repr"):
        return str.__str__((str if op == "str" else repr)(target))
    if op == "setattr":
        return setattr(target, req[2], _arg(req[3], refs))
    if op == "setitem":
        target[_arg(req[2], refs)] = _arg(req[3], refs)
        return None
    raise ValueError("unknown request %r" % (op,))


def _arg(o, refs):
    return decode(o, lambda i: refs[i])


def error_reply(e):
    """An exception as ``["err", name, message, nearest builtin base]``: a ``class BadInput(ValueError)``
    still satisfies a test expecting ``ValueError``, and the message is ``str(e)`` unchanged."""
    base = next((c.__name__ for c in type(e).__mro__ if getattr(builtins, c.__name__, None) is c), "Exception")
    return ["err", type(e).__name__, str(e)[:500], base]


def rebuild_error(resp):
    """Judge side: a fresh builtin exception for an ``err`` reply (RuntimeError where no plain ``Exception``
    subclass fits, so a solution cannot raise ``SystemExit`` or ``KeyboardInterrupt`` into the tests)."""
    name, msg, base = resp[1], resp[2], resp[3] if len(resp) > 3 else resp[1]
    exc = getattr(builtins, base, None)
    if isinstance(exc, type) and issubclass(exc, Exception):
        try:
            return exc(msg)
        except Exception:
            pass  # e.g. UnicodeDecodeError, which needs five arguments
    return RuntimeError("%s: %s" % (name, msg))


class _Capped(io.RawIOBase):
    """The solution's stdout or stderr: the first ``CAPTURE_CAP`` bytes since the last capture are kept."""

    def __init__(self):
        super().__init__()
        self.data = bytearray()

    def writable(self):
        return True

    def write(self, b):
        room = CAPTURE_CAP - len(self.data)
        if room > 0:
            self.data += bytes(b[:room])
        return len(b)

    def take(self):
        out = self.data.decode("utf-8", "replace")
        self.data.clear()
        return out


_streams = []


def _captured():
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except Exception:
            pass
    return tuple(s.take() for s in _streams) if _streams else ("", "")


def _typing_builtins(src):
    """LeetCode-style code annotates with ``List``, ``Optional``... unimported, as its graders allow: make
    typing's names builtins (only for code that names one: importing typing costs a solution start 15 ms)."""
    if _TYPING_NAMES.search(src):
        import typing

        for name in typing.__all__:
            if not hasattr(builtins, name):
                setattr(builtins, name, getattr(typing, name))


def serve(path):
    """Load the solution as module ``solution`` and answer requests until stdin closes."""
    rfd, wfd = os.dup(0), os.dup(1)
    null = os.open(os.devnull, os.O_RDWR)
    for fd in (0, 1, 2):  # the solution's prints must not corrupt the protocol
        os.dup2(null, fd)
    _streams[:] = [_Capped(), _Capped()]
    sys.stdout, sys.stderr = (io.TextIOWrapper(s, encoding="utf-8", errors="replace", write_through=True)
                              for s in _streams)
    sys.path.insert(0, os.path.dirname(path))
    sys.argv = [path]
    mod = types.ModuleType("solution")
    mod.__file__ = path
    sys.modules["solution"] = mod
    refs = []
    try:
        with open(path, encoding="utf-8") as f:
            src = f.read()
        _typing_builtins(src)
        exec(compile(src, path, "exec"), mod.__dict__)
        names, left, ref = {}, GLOBALS_BUDGET, _keep(refs)
        for k, v in list(mod.__dict__.items()):
            if not k.startswith("__"):
                size = small(v, min(GLOBAL_BUDGET, left))
                left -= max(size, 0)
                names[k] = encode(v, ref) if size >= 0 else ["R", ref(v)]
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
            resp = error_reply(e)
        send(wfd, resp)


if __name__ == "__main__" and len(sys.argv) == 3 and sys.argv[1] == "--serve":
    serve(sys.argv[2])

"""The code verifier's judge: runs inside the sandbox as the main program, the solution in a child process.

Standalone (stdlib only; no rlvr import): the host copies it into the sandbox as ``/box/main.py``. Design, and why
each part is there (reward hacks listed in docs/verifiers.md, Code execution: reward hacks):

- **Two processes.** The judge (this process) holds the tests; the solution runs in a child,
  ``rlvr_sandbox_rpc.py --serve`` (``rpc.py`` on the host), which loads it as module ``solution``. Unit-test
  code runs *here*: patching ``unittest``, builtins or ``sys.exit`` in the solution's process changes nothing
  in the judge, and an early ``exit(0)`` / ``os._exit(0)`` only kills the child, which fails the test that
  was waiting for it (a solution that does not even load fails every test).
- **Values, not objects, cross over.** Call tests reach the solution through a small RPC: arguments and return
  values are re-encoded as plain data (None, bool, int, float, complex, str, bytes, list, tuple, dict, set,
  frozenset) and rebuilt here from that encoding, so an ``__eq__`` override cannot reach the judge. Anything
  else stays in the child as an opaque handle, which equals nothing but itself. ``==`` and ``!=`` in test
  code are rewritten to a type-strict comparison (``1 != 1.0 != True``) unless the job turns that off.
- **The tests never enter the solution's reach.** The job (tests, per-run secret) arrives on our stdin, which
  we drain before the child starts; the child inherits none of our descriptors, and the launcher makes this
  process non-dumpable, so ``/proc/<judge>/fd``, ``/mem`` and ``/environ`` are closed to the child (and
  ``ptrace`` is denied by seccomp). Stdin/stdout tests never send the expected output here at all: the
  child's output goes back to the host, which compares it.
- **Results the solution cannot forge.** Each record goes to fd 3 with an HMAC under the per-run secret and
  a sequence number; the last one carries the host's nonce and is written only after every test ran. The
  host rejects the whole run on any bad, missing, duplicated or reordered record. Printing "passed" or
  anything nonce-like to stdout achieves nothing: stdout is not read for results.
- **Harness limits are not the solution's.** Loading has its own budget (``load_timeout``); the job's
  ``budget`` ends the run with a report before the sandbox's wall clock would kill it; unittest and pytest
  forms run through ``forms.py``, here, after the solution's names are bound.
"""

import ast
import builtins
import hashlib
import hmac
import json
import os
import select
import signal
import subprocess
import sys
import time
import types

try:  # inside the sandbox the helper modules sit next to us in /box; on the host they are part of the package
    import rlvr_sandbox_forms as forms
    from rlvr_sandbox_rpc import Died, Remote, Timeout, decode, encode, rebuild_error, recv, send
except ImportError:
    from rlvr.sandbox import forms
    from rlvr.sandbox.rpc import Died, Remote, Timeout, decode, encode, rebuild_error, recv, send

RPC_FILE = "rlvr_sandbox_rpc.py"
_BOX = os.path.dirname(os.path.abspath(__file__))


# ---- the judge side -------------------------------------------------------------------------------------
def strict_eq(a, b):
    """``a == b`` with exact types all the way down (True != 1 != 1.0); handles equal only themselves. An
    object of any other type was made by the test code (``pytest.approx``, a ``Counter``, a helper class):
    its own ``==`` decides, as the test's author meant."""
    ta, tb = type(a), type(b)
    if ta not in _PLAIN or tb not in _PLAIN:
        return a == b
    if ta is not tb:
        return False
    if ta is Remote:
        return a is b
    if ta in (list, tuple):
        return len(a) == len(b) and all(strict_eq(x, y) for x, y in zip(a, b))
    if ta is dict:
        return ({(type(k), k) for k in a} == {(type(k), k) for k in b}
                and all(strict_eq(v, b[k]) for k, v in a.items()))
    if ta in (set, frozenset):
        return {(type(x), x) for x in a} == {(type(x), x) for x in b}
    return a == b


class _StrictCompare(ast.NodeTransformer):
    """``x == y`` -> ``__rlvr_eq__(x, y)``; ``x != y`` -> ``not __rlvr_eq__(x, y)`` (single comparisons)."""

    def visit_Compare(self, node):
        self.generic_visit(node)
        if len(node.ops) != 1 or not isinstance(node.ops[0], (ast.Eq, ast.NotEq)):
            return node
        call = ast.Call(ast.Name("__rlvr_eq__", ast.Load()), [node.left, node.comparators[0]], [])
        new = call if isinstance(node.ops[0], ast.Eq) else ast.UnaryOp(ast.Not(), call)
        return ast.copy_location(new, node)


def _compile(src, name, strict):
    tree = ast.parse(src, name)
    if strict:
        tree = ast.fix_missing_locations(_StrictCompare().visit(tree))
    return compile(tree, name, "exec")


class LoadFailed(Exception):
    """The solution (or the test setup bound to it) could not be loaded."""


_PLAIN = {type(None), bool, int, float, complex, str, bytes, list, tuple, dict, set, frozenset, Remote}


class Server:
    """One solution process; every call waits at most until the current test's deadline. A call cut short
    (timeout, death, garbage) leaves it ``broken`` for good, even where test code swallowed the exception
    (unittest records any exception as an error): its next answer could belong to the old call."""

    deadline = 0.0
    broken = ""

    def __init__(self, path, site):
        flags = ["-I", "-B"] + ([] if site else ["-S"])
        self.proc = subprocess.Popen([sys.executable] + flags + [os.path.join(_BOX, RPC_FILE), "--serve", path],
                                     stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,
                                     start_new_session=True)
        self.r, self.w = self.proc.stdout.fileno(), self.proc.stdin.fileno()
        os.set_blocking(self.r, False)
        os.set_blocking(self.w, False)
        try:
            self.names = self._greeting(recv(self.r, Server.deadline))
        except BaseException:
            self.kill()
            raise

    def _greeting(self, msg):
        if type(msg) is list and len(msg) == 3 and msg[0] == "load_error":
            raise RuntimeError("%s: %s" % (msg[1], msg[2]))
        if type(msg) is not list or len(msg) != 2 or msg[0] != "ready" or type(msg[1]) is not dict:
            raise Died("bad greeting from the solution")
        return {k: decode(v, self.remote) for k, v in msg[1].items() if type(k) is str}

    def remote(self, rid):
        return Remote(rid, self)

    def arg(self, x):
        """Judge -> solution: plain data and this process's handles only (passing a lambda is a test bug)."""
        return encode(x, self._rid_of)

    def _rid_of(self, x):
        if type(x) is not Remote:
            raise TypeError("cannot pass %s to the solution" % type(x).__name__)
        if x._srv is not self:
            raise Died("object from a restarted solution process")
        return x._rid

    def rpc(self, req):
        if self.proc is None or self.broken:
            raise Died("solution process is gone")
        try:
            send(self.w, req, Server.deadline)
            resp = recv(self.r, Server.deadline)
        except BaseException as e:
            self.broken = "timeout" if isinstance(e, Timeout) else "solution process died: %s" % e
            raise
        if type(resp) is list and len(resp) == 2 and resp[0] == "ok":
            return decode(resp[1], self.remote)
        if type(resp) is list and len(resp) in (3, 4) and resp[0] == "err" and all(type(v) is str for v in resp[1:]):
            raise rebuild_error(resp)
        raise Died("malformed response from the solution")

    def kill(self):
        if self.proc is not None:
            try:
                os.killpg(self.proc.pid, signal.SIGKILL)
            except OSError:
                pass
            self.proc.wait()
            self.proc.stdin.close()
            self.proc.stdout.close()
            self.proc = None


class Judge:
    """Runs a job's tests and reports each result, authenticated, on fd 3."""

    def __init__(self, job):
        self.job, self.seq = job, 0
        self.key = bytes.fromhex(job["secret"])
        self.timeout, self.load_timeout = float(job["timeout"]), float(job.get("load_timeout", job["timeout"]))
        self.end = time.monotonic() + float(job.get("budget", 1e9))  # report before the sandbox kills us
        self.path = os.path.join(_BOX, "solution.py")

    def deadline(self, seconds):
        if time.monotonic() >= self.end:
            raise LoadFailed("not run: the run's time budget (max_wall_s) is spent")
        return min(time.monotonic() + seconds, self.end)

    def emit(self, **rec):
        rec["seq"] = self.seq
        self.seq += 1
        line = json.dumps(rec, sort_keys=True)
        mac = hmac.new(self.key, line.encode(), hashlib.sha256).hexdigest()
        data = (line + "\t" + mac + "\n").encode()
        while data:
            data = data[os.write(3, data):]

    def _start(self):
        """A fresh solution process and a fresh test namespace (setup re-run) bound to it. Loading (the
        solution's top-level code, then the test setup) has its own time budget, not a test's."""
        Server.deadline = self.deadline(self.load_timeout)
        try:
            srv = Server(self.path, self.job.get("site", False))
        except Timeout:
            raise LoadFailed("solution did not load within %gs" % self.load_timeout)
        ns = {"__name__": "__tests__", "__builtins__": builtins,
              "__rlvr_eq__": strict_eq if self.job.get("strict", True) else (lambda a, b: a == b),
              "__rlvr_unittest__": forms.run_unittest,
              "__rlvr_pytest__": lambda owner, name, case: forms.run_pytest(ns, owner, name, case),
              "__rlvr_capture__": lambda: srv.rpc(["capture", 0]),
              "__rlvr_case__": lambda i: forms.call_case(srv.names, self.job["tests"][i]["case"], Remote)}
        # Solution names that shadow builtins (abs, len, all, sorted...) would let the solution answer the
        # test's own checks: tests get them only by importing them from `solution` explicitly.
        ns.update((k, v) for k, v in srv.names.items() if not hasattr(builtins, k))
        mod = types.ModuleType("solution")
        mod.__dict__.update(srv.names)
        sys.modules["solution"] = mod  # tests written as `from solution import f` bind the handles
        try:
            exec(self.setup, ns)
        except BaseException as e:
            srv.kill()
            if isinstance(e, Timeout):
                raise LoadFailed("test setup ran past the load budget (%gs)" % self.load_timeout)
            raise LoadFailed("test setup failed: %s: %s" % (type(e).__name__, e))
        return srv, ns

    def run_calls(self):
        self.setup = _compile(self.job.get("setup", ""), "<tests>", self.job.get("strict", True))
        tests = self.job["tests"]
        srv = ns = None
        load_error = None
        for i, t in enumerate(tests):
            ok, why, restart = False, "", False
            try:
                code = _compile(t["code"], "<test %d>" % i, self.job.get("strict", True))
                if load_error:
                    raise LoadFailed(load_error)
                if srv is None:
                    try:
                        srv, ns = self._start()
                    except BaseException as e:  # a solution that cannot even load fails every test
                        load_error = str(e) if isinstance(e, LoadFailed) else "solution did not load: %s" % (
                            str(e) or type(e).__name__)
                        raise LoadFailed(load_error)
                Server.deadline = self.deadline(self.timeout)
                signal.setitimer(signal.ITIMER_REAL, self.timeout + 0.5, 0.5)  # test code looping on its own
                try:
                    exec(code, ns)
                finally:
                    signal.setitimer(signal.ITIMER_REAL, 0)
                ok = True
            except AssertionError as e:
                why = "assertion failed" + (": %s" % e if str(e) else "")
            except Timeout:
                why, restart = "timeout", True
            except Died as e:
                why, restart = "solution process died: %s" % e, True
            except LoadFailed as e:
                why = str(e)
            except (forms.Skipped, forms.Errored) as e:
                why = str(e)
            except BaseException as e:
                why = "%s: %s" % (type(e).__name__, e)
            signal.setitimer(signal.ITIMER_REAL, 0)  # again: an alarm may have cut the first cancel short
            if srv is not None and srv.broken:  # even where the test code caught the timeout or death
                ok, why, restart = False, srv.broken, True
            if srv is not None and (restart or srv.proc.poll() is not None):
                srv.kill()  # a hung or dead solution is restarted for the next test
                srv = None
            self.emit(k="test", i=i, ok=ok, why=why[:300])
        if srv is not None:
            srv.kill()
        return len(tests)

    def run_stdio(self):
        cases = self.job["cases"]
        flags = ["-I", "-B"] + ([] if self.job.get("site") else ["-S"])
        for i, case in enumerate(cases):
            if time.monotonic() >= self.end:  # the run's budget is spent: the rest fail as timeouts
                self.emit(k="case", i=i, out="", rc=None, timeout=True, trunc=False, err="")
                continue
            p = subprocess.Popen([sys.executable] + flags + [self.path], stdin=subprocess.PIPE,
                                 stdout=subprocess.PIPE, stderr=subprocess.PIPE, start_new_session=True)
            out, err, timed_out = _pump(p, case["input"].encode(), int(case["cap"]),
                                        min(time.monotonic() + self.timeout, self.end))
            try:
                os.killpg(p.pid, signal.SIGKILL)  # children it left behind, too
            except OSError:
                pass
            rc = p.wait()
            self.emit(k="case", i=i, out=out.decode("utf-8", "replace"), rc=rc, timeout=timed_out,
                      trunc=len(out) > int(case["cap"]), err=err[-500:].decode("utf-8", "replace"))
        return len(cases)


def _pump(p, data, cap, deadline):
    """Feed ``data``, read stdout (to ``cap`` + 1 bytes) and stderr (tail) until exit or the deadline."""
    out, err = b"", b""
    fds = {p.stdout.fileno(): "o", p.stderr.fileno(): "e"}
    w = p.stdin.fileno()
    for fd in list(fds) + [w]:
        os.set_blocking(fd, False)
    pos = 0
    if not data:
        p.stdin.close()
        w = None
    while fds or w is not None:
        left = deadline - time.monotonic()
        if left <= 0:
            return out, err, True
        r, wr, _ = select.select(list(fds), [w] if w is not None else [], [], left)
        if wr:
            try:
                pos += os.write(w, data[pos:pos + 65536])
            except BlockingIOError:
                pass
            except OSError:
                pos = len(data)
            if pos >= len(data):
                p.stdin.close()
                w = None
        for fd in r:
            chunk = os.read(fd, 65536)
            if not chunk:
                del fds[fd]
            elif fds[fd] == "o":
                out += chunk[:max(cap + 1 - len(out), 0)]
                if len(out) > cap:
                    return out, err, False
            else:
                err = (err + chunk)[-4096:]
    try:
        p.wait(max(deadline - time.monotonic(), 0.01))
    except subprocess.TimeoutExpired:
        return out, err, True
    return out, err, False


def _alarm(signum, frame):
    raise Timeout()


def main():
    job = json.loads(sys.stdin.buffer.read())
    null = os.open(os.devnull, os.O_RDONLY)
    os.dup2(null, 0)  # drained and closed before any solution process exists
    signal.signal(signal.SIGALRM, _alarm)
    forms.install(strict_eq if job.get("strict", True) else None)
    judge = Judge(job)
    n = judge.run_calls() if job["kind"] == "call" else judge.run_stdio()
    judge.emit(k="done", n=n, nonce=job["nonce"])


if __name__ == "__main__":
    main()

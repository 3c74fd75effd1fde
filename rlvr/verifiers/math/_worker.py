"""A symbolic-comparison worker process: ``python -P _worker.py PARENT_PID SOFT_S MEM_MB BACKEND``.

Started by :mod:`.pool`, never imported. It loads this directory's modules under a private package
name, so the ``rlvr`` package (which imports torch) is never imported here. Protocol: one JSON request per
line on stdin (``{"id", "gold", "gpct", "pred", "ppct"}``), one JSON reply per line on the original
stdout (``{"id", "ok", "how"}``); anything else printed goes to stderr so it cannot corrupt replies.

Time: the comparison runs on this process's main thread under a ``SIGALRM`` interval timer (sub-second,
unlike math-verify's ``signal.alarm``), which ends pure-Python work with ``how="timeout"``; a computation
stuck inside C (a huge integer power) ignores it, and the parent kills the process at its deadline.
Death with the parent: ``PR_SET_PDEATHSIG`` (Linux), a parent-pid check, and end of input.
"""

import importlib
import json
import os
import signal
import sys
import types


class _SoftTimeout(BaseException):  # BaseException: math-verify's "except Exception" must not swallow it
    pass


def _die_with_parent(ppid: int) -> None:
    try:
        import ctypes

        ctypes.CDLL(None).prctl(1, signal.SIGKILL)  # PR_SET_PDEATHSIG: killed when the parent exits
    except (OSError, AttributeError):
        pass
    if os.getppid() != ppid:  # the parent died before prctl took effect
        os._exit(0)


def _limit_memory(mb: int) -> None:
    if mb > 0:
        try:
            import resource

            resource.setrlimit(resource.RLIMIT_AS, (mb << 20, mb << 20))
        except (ImportError, ValueError, OSError):
            pass


def _load():
    here = os.path.dirname(os.path.abspath(__file__))
    pkg = types.ModuleType("_rlvr_math")
    pkg.__path__ = [here]
    sys.modules["_rlvr_math"] = pkg
    return importlib.import_module("_rlvr_math.symbolic")


_WARM = (("(-3,3)", "|x|<3"), ("\\frac{\\sqrt2}{2}", "\\frac{1}{\\sqrt3}"), ("x^2+2x+1", "(x+1)^2"),
         ("\\sin 30^\\circ", "\\frac12"), ("y=2x+1", "2x-y+1=0"), ("\\pi", "3.14159265358979323846264338"))


def _warm_up(sym, backend: str) -> None:
    """Run a few comparisons before reporting ready: sympy's first solveset or evalf (and math-verify's
    first parse) cost a few hundred ms of one-off set-up, which must not count against a request's
    deadline."""
    for gold, pred in _WARM:
        try:
            sym.compare(gold, False, pred, False, "sympy")
        except Exception:
            pass
    if backend != "sympy":
        try:
            import math_verify

            math_verify.verify(math_verify.parse("$x^2+1$"), math_verify.parse("$1+x^2$"))
        except Exception:  # not installed (an optional extra), or failing: the request will say so
            pass


def _on_alarm(signum, frame):
    raise _SoftTimeout()


def _answer(sym, req: dict, soft: float, backend: str) -> dict:
    signal.setitimer(signal.ITIMER_REAL, soft)
    try:
        ok, how = sym.compare(req["gold"], req["gpct"], req["pred"], req["ppct"], backend)
    except _SoftTimeout:
        ok, how = False, "timeout"
    except RecursionError:
        ok, how = False, "too complex"
    except MemoryError:
        ok, how = False, "too large"
    except Exception as e:  # a bug on odd input must cost one pair, not the worker
        ok, how = False, f"error: {type(e).__name__}"
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
    return {"id": req["id"], "ok": bool(ok), "how": how}


def main() -> None:
    ppid, soft, mem_mb, backend = int(sys.argv[1]), float(sys.argv[2]), int(sys.argv[3]), sys.argv[4]
    _die_with_parent(ppid)
    out = os.fdopen(os.dup(1), "wb", buffering=0)
    os.dup2(2, 1)
    sys.stdout = sys.stderr
    _limit_memory(mem_mb)
    sys.setrecursionlimit(5000)
    sym = _load()
    _warm_up(sym, backend)
    signal.signal(signal.SIGALRM, _on_alarm)
    out.write(b'{"ready": true}\n')
    for line in sys.stdin.buffer:
        if os.getppid() != ppid:
            break
        try:
            req = json.loads(line)
            reply = _answer(sym, req, soft, backend)
        except _SoftTimeout:  # the timer fired between the comparison and its cancellation
            reply = {"id": req["id"], "ok": False, "how": "timeout"}
        except (ValueError, KeyError, TypeError):
            continue
        out.write(json.dumps(reply).encode() + b"\n")


if __name__ == "__main__":
    main()

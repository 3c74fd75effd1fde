"""The ``pytest`` that tests running in the judge import: the parts unit tests use, nothing else.

Standalone (stdlib only): shipped into the sandbox next to the judge as ``/box/rlvr_sandbox_pytest.py``; the
judge runs without site-packages, so ``import pytest`` in test code gets :func:`pytest_module`: ``raises``,
``approx``, ``mark.parametrize`` / ``skip`` / ``skipif`` / ``xfail`` (any other mark is recorded and
ignored), ``param``, ``fixture``, ``fail``, ``skip``, ``importorskip``, ``warns``, ``deprecated_call``.
Marks are kept on the test function for ``forms.py``, which runs the tests (:func:`marks`, :func:`cases`).
"""

import itertools
import re
import types
import warnings

try:
    from rlvr_sandbox_rpc import Died, Timeout
except ImportError:
    from rlvr.sandbox.rpc import Died, Timeout

HARNESS = (Timeout, Died)  # never caught on a test's behalf: they mean the solution process is unusable


class Skipped(Exception):
    """A test skipped itself (``pytest.skip``, ``skipif``, ``unittest.skip``): not a pass."""



class _Param:
    def __init__(self, values, marks):
        self.values, self.marks = values, marks


class _Mark:
    """``pytest.mark.NAME``, usable bare (``@mark.slow``) or called (``@mark.skipif(cond, reason=...)``)."""

    def __init__(self, name, args=(), kwargs=None):
        self.name, self.args, self.kwargs = name, args, kwargs or {}

    def __call__(self, *args, **kwargs):
        if len(args) == 1 and not kwargs and callable(args[0]):  # applied to a test (or class)
            target = args[0]
            target.__rlvr_marks__ = [self] + list(vars(target).get("__rlvr_marks__", []))
            return target
        return _Mark(self.name, args, kwargs)


class _MarkSpace:
    def __getattr__(self, name):
        return _Mark(name)


class _Raises:
    def __init__(self, expected, match):
        self.expected, self.match, self.value, self.type = expected, match, None, None

    def __enter__(self):
        return self

    def __exit__(self, et, ev, tb):
        if et is None:
            raise AssertionError("DID NOT RAISE %r" % (self.expected,))
        if issubclass(et, HARNESS) or not issubclass(et, self.expected):
            return False
        if self.match is not None and not re.search(self.match, str(ev)):
            raise AssertionError("exception %r does not match %r" % (str(ev)[:200], self.match))
        self.value, self.type = ev, et
        return True


def _raises(expected, *args, match=None, **kwargs):
    if not args:
        return _Raises(expected, match)
    with _Raises(expected, match) as info:
        args[0](*args[1:], **kwargs)
    return info


class _Approx:
    """``pytest.approx``: numbers (and lists, tuples, dicts of them) within rel 1e-6 / abs 1e-12."""

    __hash__ = None

    def __init__(self, expected, rel=None, abs=None, nan_ok=False):
        self.expected, self.rel, self.abs, self.nan_ok = expected, rel, abs, nan_ok

    def __eq__(self, got):
        return _close(got, self.expected, self)

    def __ne__(self, got):
        return not self == got

    def __repr__(self):
        return "approx(%r)" % (self.expected,)


def _close(got, want, ap):
    if isinstance(want, (list, tuple)):
        return type(got) in (list, tuple) and len(got) == len(want) and all(
            _close(g, w, ap) for g, w in zip(got, want))
    if isinstance(want, dict):
        return type(got) is dict and got.keys() == want.keys() and all(_close(got[k], want[k], ap) for k in want)
    num = (int, float, complex)
    if not (isinstance(want, num) and isinstance(got, num)) or isinstance(want, bool) or isinstance(got, bool):
        return got == want
    if got == want:
        return True
    if want != want or got != got:
        return ap.nan_ok and want != want and got != got
    rel = ap.rel if ap.rel is not None else (0.0 if ap.abs is not None else 1e-6)
    tol = max(rel * abs(want), ap.abs if ap.abs is not None else (0.0 if ap.rel is not None else 1e-12))
    return abs(got - want) <= tol


def _fixture(fn=None, **kwargs):
    if fn is None:
        return lambda f: _fixture(f, **kwargs)
    if "params" in kwargs:
        raise TypeError("parametrised fixtures are not supported")
    fn.__rlvr_fixture__ = kwargs.get("name") or fn.__name__
    fn.__rlvr_autouse__ = bool(kwargs.get("autouse"))
    return fn


def _skip(reason=""):
    raise Skipped("skipped: %s" % reason)


def _importorskip(name, *args, **kwargs):
    try:
        return __import__(name)
    except ImportError:
        raise Skipped("skipped: no module %s" % name)


class _Warns:
    def __init__(self, category, match=None):
        self.category, self.match = category, match

    def __enter__(self):
        self._cm = warnings.catch_warnings(record=True)
        self.list = self._cm.__enter__()
        warnings.simplefilter("always")
        return self.list

    def __exit__(self, et, ev, tb):
        self._cm.__exit__(et, ev, tb)
        if et is None and not any(issubclass(w.category, self.category) and
                                  (self.match is None or re.search(self.match, str(w.message))) for w in self.list):
            raise AssertionError("DID NOT WARN %r" % (self.category,))
        return False


def pytest_module():
    """The stand-in ``pytest`` module tests import."""
    m = types.ModuleType("pytest")
    m.raises, m.approx, m.fixture, m.mark = _raises, _Approx, _fixture, _MarkSpace()
    m.param = lambda *values, marks=(), id=None: _Param(values, marks)
    m.skip, m.importorskip, m.warns = _skip, _importorskip, _Warns
    m.deprecated_call = lambda: _Warns((DeprecationWarning, PendingDeprecationWarning))
    m.fail = _fail
    m.Skipped = Skipped
    return m


def _fail(reason="", pytrace=True):
    raise AssertionError(reason)


def marks(obj):
    return [m for m in getattr(obj, "__rlvr_marks__", []) if isinstance(m, _Mark)]


def cases(fn):
    """Every parameter set of ``fn``'s ``parametrize`` marks (their product), each a (kwargs, marks) pair."""
    axes = []
    for m in marks(fn):
        if m.name != "parametrize":
            continue
        names = m.args[0] if m.args else m.kwargs["argnames"]
        values = m.args[1] if len(m.args) > 1 else m.kwargs["argvalues"]
        names = [n.strip() for n in names.split(",")] if isinstance(names, str) else list(names)
        axis = []
        for v in values:
            if isinstance(v, _Param):
                vals, extra = v.values, v.marks if isinstance(v.marks, (list, tuple)) else [v.marks]
            else:
                vals, extra = ((v,) if len(names) == 1 else tuple(v)), []
            axis.append((dict(zip(names, vals)), list(extra)))
        axes.append(axis)
    out = []
    for combo in itertools.product(*axes):
        kwargs, extra = {}, []
        for kw, mk in combo:
            kwargs.update(kw)
            extra.extend(mk)
        out.append((kwargs, extra))
    return out

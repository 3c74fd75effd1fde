"""How the judge runs each form of test: unittest cases, pytest functions and classes, data call cases.

Standalone (stdlib only): shipped into the sandbox next to the judge as ``/box/rlvr_sandbox_forms.py``. Every
runner executes in the judge's process, never the solution's, so a solution that patches ``unittest``,
``pytest`` or ``assert`` in its own process changes nothing here. Each runner returns normally for a pass and
raises for anything else; a skip is a failure (a skipped test verified nothing).

Tests importing ``pytest`` get the stand-in of ``pytest_shim.py`` (the judge runs without site-packages).
"""

import sys

try:
    from rlvr_sandbox_pytest import HARNESS, Skipped, cases, marks, pytest_module
except ImportError:
    from rlvr.sandbox.pytest_shim import HARNESS, Skipped, cases, marks, pytest_module


_strict = {"eq": None, "patched": False}  # set by install(): the judge's type-strict equality, or None


class Errored(Exception):
    """A unittest test raised something other than an assertion failure (its message says what)."""


# ---- unittest ---------------------------------------------------------------------------------------------
def strict_unittest(strict_eq):
    """Make ``assertEqual`` / ``assertNotEqual`` as type-strict as ``==`` in test code (1 != 1.0 != True)."""
    import unittest

    orig_eq, orig_ne = unittest.TestCase.assertEqual, unittest.TestCase.assertNotEqual

    def assert_equal(self, first, second, msg=None):
        if not strict_eq(first, second) and first == second:
            self.fail(msg or "%r and %r differ in type" % (first, second))
        orig_eq(self, first, second, msg)

    def assert_not_equal(self, first, second, msg=None):
        if strict_eq(first, second):
            orig_ne(self, first, second, msg)

    unittest.TestCase.assertEqual = unittest.TestCase.assertEquals = assert_equal
    unittest.TestCase.assertNotEqual = assert_not_equal


def run_unittest(cls, name):
    """One ``TestCase`` method through unittest's own machinery (fixtures, ``subTest``, expected failures)."""
    import unittest

    if _strict["eq"] is not None and not _strict["patched"]:
        strict_unittest(_strict["eq"])
        _strict["patched"] = True
    result = unittest.TestResult()
    unittest.TestSuite([cls(name)]).run(result)
    for bad, exc in ((result.failures, AssertionError), (result.errors, Errored)):
        if bad:
            lines = [ln for ln in str(bad[0][1]).strip().splitlines() if ln.strip()]
            raise exc(lines[-1][-300:] if lines else "test failed")
    if result.unexpectedSuccesses:
        raise AssertionError("unexpected success of a test marked expectedFailure")
    if result.skipped:
        raise Skipped("skipped: %s" % result.skipped[0][1])
    if result.testsRun != 1:
        raise AssertionError("test did not run")


def run_pytest(ns, owner, name, case):
    """Test ``name`` (a function of the test module, or a method of class ``owner``), parameter set ``case``
    (None: all of them), with its fixtures resolved from the module."""
    raw = getattr(owner, name) if owner is not None else ns[name]
    sets = cases(raw)
    if case is not None:
        if case >= len(sets):
            raise AssertionError("parameter set %d does not exist" % case)
        sets = [sets[case]]
    for kwargs, set_marks in sets:
        _one(ns, owner, name, kwargs, marks(raw) + set_marks + (marks(owner) if owner is not None else []))


def _one(ns, owner, name, kwargs, test_marks):
    import inspect

    for m in test_marks:
        if m.name == "skip" or (m.name == "skipif" and m.args and m.args[0]):
            raise Skipped("skipped: %s" % m.kwargs.get("reason", ""))
    xfail = next((m for m in test_marks if m.name == "xfail" and (not m.args or m.args[0])), None)
    if owner is not None and hasattr(owner, "setup_class") and owner not in ns.setdefault("__rlvr_classes__", []):
        ns["__rlvr_classes__"].append(owner)  # once per class, as pytest does
        owner.setup_class()
    inst = owner() if owner is not None else None
    fn = getattr(inst, name) if inst is not None else ns[name]
    made = {None: []}  # this test's fixture values by name (each made once); None: their pending teardowns
    try:
        if inst is not None and hasattr(inst, "setup_method"):
            _hook(inst.setup_method, fn)
        for auto in [v.__rlvr_fixture__ for v in list(ns.values()) if getattr(v, "__rlvr_autouse__", False) is True]:
            _fixture_value(ns, auto, made, set())
        args = {p: kwargs[p] if p in kwargs else _fixture_value(ns, p, made, set())
                for p, spec in inspect.signature(fn).parameters.items()
                if p in kwargs or spec.default is inspect.Parameter.empty}
        res = fn(**args)
        if inspect.iscoroutine(res):
            import asyncio
            asyncio.run(res)
    except HARNESS:
        raise
    except Skipped:
        raise
    except BaseException:
        if xfail is None:
            raise
        return  # an expected failure
    finally:
        for gen in reversed(made[None]):
            next(gen, None)
        if inst is not None and hasattr(inst, "teardown_method"):
            _hook(inst.teardown_method, fn)
    if xfail is not None and xfail.kwargs.get("strict"):
        raise AssertionError("test marked xfail(strict=True) passed")


def _hook(method, fn):
    """``setup_method(self, method)``, or ``setup_method(self)``: pytest accepts both."""
    import inspect

    return method(fn) if inspect.signature(method).parameters else method()


def _fixture_value(ns, pname, made, seen):
    if pname not in made:
        made[pname] = _make_fixture(ns, pname, made, seen)
    return made[pname]


def _make_fixture(ns, pname, made, seen):
    import inspect

    if pname in seen:
        raise TypeError("fixture %r depends on itself" % pname)
    fx = next((v for v in ns.values() if getattr(v, "__rlvr_fixture__", None) == pname), None)
    if fx is None:
        if pname in ("capsys", "capfd"):
            return _CapSys(ns["__rlvr_capture__"])
        if pname in ("tmp_path", "tmpdir"):
            import pathlib
            import tempfile
            return pathlib.Path(tempfile.mkdtemp())
        raise TypeError("fixture %r not found" % pname)
    args = {p: _fixture_value(ns, p, made, seen | {pname}) for p, spec in
            inspect.signature(fx).parameters.items() if spec.default is inspect.Parameter.empty}
    value = fx(**args)
    if inspect.isgenerator(value):
        gen, value = value, next(value)
        made[None].append(gen)
    return value


class _CapSys:
    """``capsys``: what the solution printed (its process keeps its stdout and stderr for us)."""

    def __init__(self, capture):
        self.capture = capture
        capture()  # output from before the test is not the test's

    def readouterr(self):
        import collections

        out, err = self.capture()
        return collections.namedtuple("CaptureResult", "out err")(out, err)


# ---- data call cases (LiveCodeBench functional, APPS call-based) ------------------------------------------
def _json_eq(got, want):
    """Equality as the JSON that expected outputs are written in: tuples are lists, ints equal floats, bools and
    None only themselves."""
    if type(got) is tuple:
        got = list(got)
    if isinstance(got, bool) or isinstance(want, bool) or got is None or want is None:
        return type(got) is type(want) and got == want
    if type(got) in (int, float) and type(want) in (int, float):
        return got == want
    if type(got) is list and type(want) is list:
        return len(got) == len(want) and all(_json_eq(g, w) for g, w in zip(got, want))
    if type(got) is dict and type(want) is dict:
        return got.keys() == want.keys() and all(_json_eq(got[k], want[k]) for k in want)
    return type(got) in (str, int, float) and type(got) is type(want) and got == want


def call_case(names, case, remote_type):
    """Call the solution's ``case["fn"]`` (a method of ``Solution()`` when the solution has that class, as
    LiveCodeBench does) with ``case["args"]`` and compare with ``case["want"]`` (APPS: or its first item)."""
    fn, sol = case["fn"], names.get("Solution")
    target = None
    if type(sol) is remote_type:
        try:
            target = getattr(sol(), fn)
        except AttributeError:
            target = None
    if target is None:
        if fn not in names:
            raise AssertionError("the solution defines no %s" % fn)
        target = names[fn]
    got, want = target(*case["args"]), case["want"]
    if type(got) is remote_type:
        raise AssertionError("returned a solution object, not plain data")
    if _json_eq(got, want) or (case.get("how") == "apps" and type(want) is list and want and _json_eq(got, want[0])):
        return
    raise AssertionError("wrong answer: got %s" % repr(got)[:200])


def install(strict_eq):
    """Prepare this (the judge's) process: the pytest stand-in, and strict unittest equality if asked."""
    sys.modules["pytest"] = pytest_module()
    _strict["eq"] = strict_eq

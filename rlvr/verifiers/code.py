"""Code with unit tests: run the completion's code against the example's tests in the sandbox.

**The code** is the last fenced block tagged ``python`` / ``py`` / ``python3`` in the completion, else the
last untagged fenced block, else the whole completion.

**The tests** live in ``example.meta["tests"]`` (a JSON string of any form works too; compressed or pickled
dataset fields must be decoded first). Which form, and what one test is (parsed in ``rlvr/sandbox/code_tests.py``,
shared with the ``code_feedback`` environment, never run on the host, so the count is fixed before the
solution runs):

- *test code*, a string or ``{"code": ...}`` / ``{"test": ...}``, the rest of the module being setup:
  ``unittest.TestCase`` subclasses: each ``test*`` method (inherited ones in the file too) is a test, run by
  unittest itself (``setUp``/``setUpClass``, ``subTest``, ``expectedFailure``); pytest style: each top-level
  ``test*`` function and each ``test*`` method of a ``Test*`` class without ``__init__`` is a test, and each
  ``@pytest.mark.parametrize`` set a test of its own when its list is written out (else one test runs them
  all), with module-level ``@pytest.fixture`` functions (yield or return, autouse), ``capsys``, ``tmp_path``,
  ``pytest.raises`` / ``approx`` / ``param`` / ``skip`` / ``warns``; without either, HumanEval's ``def
  check(candidate)`` with the entry point (``meta["entry_point"]``, or ``{"code": ..., "entry_point":
  "add"}``) is one test, run as ``check(<the solution's add>)``; otherwise each top-level ``assert`` is a
  test. A top-level ``unittest.main()`` / ``pytest.main()`` is dropped; a skipped test is a failure (it
  verified nothing).
- *assert lists* (MBPP), each line a test: ``["assert add(1, 2) == 3", ...]``, ``{"asserts": [...],
  "setup": "import math"}`` or MBPP's own ``{"test_list": [...], "test_setup_code": ..., "test_imports":
  [...]}``.
- *call cases*, each one call of the function named by ``meta["entry_point"]`` / ``"fn_name"`` /
  ``"func_name"`` (or LiveCodeBench's ``meta["metadata"]["func_name"]``), as a method of ``Solution()``
  when the solution has that class: LiveCodeBench ``[{"input": "[1, 2]\\n3", "output": "[1, 2, 3]",
  "testtype": "functional"}, ...]`` (one JSON argument per input line) and APPS ``{"fn_name": "f", "inputs":
  [[args...], ...], "outputs": [...]}`` (an output may be wrapped in a one-item list). The result is compared
  as JSON: tuples equal lists, ints equal floats, bools and None only themselves.
- *stdin/stdout cases*: ``[{"input": "1 2\\n", "output": "3\\n"}, ...]`` (LiveCodeBench ``"testtype":
  "stdin"`` too), ``{"stdio": [...], "compare": "lines" | "tokens" | "exact"}``, APPS ``{"inputs": [...],
  "outputs": [...]}`` (or a whole APPS row, ``{"input_output": ...}``) and CodeContests ``{"input": [...],
  "output": [...]}`` (or a whole row: its ``public_tests``, ``private_tests`` and ``generated_tests``). The
  program's stdout is compared on the host, by default line by line with trailing whitespace and trailing
  blank lines ignored; a non-zero exit or a timeout fails the case.

Test code names the solution's functions and classes directly (``add(1, 2)``, ``Solution().two_sum(...)``)
or imports them (``from solution import add``). It runs in the judge process, the solution in another
(see ``rlvr/sandbox/judge.py``): only plain data (numbers, strings, bytes, lists, tuples, dicts, sets, None)
crosses between them, ``==`` / ``!=`` (and unittest's ``assertEqual``) compare type-strictly unless
``strict_types=False`` (an object the test made, such as ``pytest.approx`` or a ``Counter``, compares by its
own ``==``), and the judge reports through an HMAC-authenticated channel ending with the run's nonce. A
missing or tampered report, a solution that fails to load, zero tests, and an early ``exit(0)`` all score 0;
every 0 says why in ``info["reason"]`` and ``info["failures"]`` names the failing tests.

Time: each test (each stdio case: the whole program) gets ``timeout_s``; loading the solution's top-level
code and the test setup gets ``load_timeout_s`` of its own (call tests); the run as a whole ``max_wall_s``,
and tests the judge can no longer start in time fail as "not run" while the others keep their results.

What the call protocol implies for test authors: a solution object that is not plain data (a generator, an
instance, or a module global bigger than 64k items) reaches the tests as a handle that can be called,
indexed, iterated (materialised as a list), printed (its own ``str`` / ``repr``), asked for ``len``, given
and asked for attributes and items (``node.next = ListNode(2)``), but has no truth value and equals only
itself; tests can pass the solution plain data and such handles, not lambdas; a solution name that shadows
a builtin (``abs``, ``len``, ``sorted``...) is bound in the tests only when imported explicitly (``from
solution import sorted``), so a solution cannot redefine the helpers the tests check with. Solutions see
the standard library only unless ``python_site=True`` (and ``typing``'s names unimported, as LeetCode-style
graders allow); tests always see the standard library only (``pytest`` is a stand-in). What the solution
prints reaches ``capsys``; tests that patch ``sys.stdout``, ``input`` or other globals with ``unittest.mock``
patch the judge's process, not the solution's, and fail.

**Reward.** ``mode="all"`` (default): 1 only when every test passes. ``mode="fraction"``: the fraction that
pass. ``example.answer`` is a reference solution (``validate`` checks that it scores 1).
"""

from __future__ import annotations

import json
import os
from typing import Any, Literal

from rlvr.core.types import Example, Score
from rlvr.registry import Params
from rlvr.sandbox import Limits, LocalSandbox, MiB, Program, Sandbox, default_sandbox
from rlvr.sandbox.code_tests import TestSpec, parse_tests
from rlvr.sandbox.programs import UntrustedReport, extract_code, judge_files, read_report, same_output
from rlvr.verifiers.base import VERIFIERS, BaseVerifier

__all__ = ["CodeParams", "CodeVerifier", "TestSpec", "extract_code", "parse_tests", "read_report"]



class CodeParams(Params):
    mode: Literal["all", "fraction"] = "all"
    timeout_s: float = 5.0  # per test (per stdio case: the whole program)
    load_timeout_s: float = 20.0  # loading the solution (its top-level code) and the test setup, for call tests
    max_wall_s: float = 120.0  # the whole run
    memory_mb: int = 512
    max_procs: int = 64
    strict_types: bool = True
    compare: Literal["lines", "tokens", "exact"] = "lines"  # stdio default, unless the tests say otherwise
    python_site: bool = False  # let solutions import site-packages of the sandbox's interpreter
    require_bwrap: bool = False  # refuse (at build time) to run on the weak no-bubblewrap fallback


class CodeVerifier(BaseVerifier):
    """Runs the completion's code against ``example.meta["tests"]`` in the sandbox (see the module doc)."""

    name = "code"

    def __init__(self, params: CodeParams | None = None, sandbox: Sandbox | None = None):
        self.params = params or CodeParams()
        self._sandbox = sandbox

    @property
    def sandbox(self) -> Sandbox:
        return self._sandbox or default_sandbox()

    def _limits(self, spec: TestSpec) -> Limits:
        p = self.params
        wall = min(p.max_wall_s, 5.0 + (len(spec) + 1) * (p.timeout_s + 0.5) + 2 * p.load_timeout_s)
        # the report carries each stdio case's output (JSON-escaped: up to 6 bytes a byte) plus a line a test
        report = 1 * MiB + sum(6 * _case_cap(want) for _, want in spec.cases)
        return Limits(wall_s=wall, cpu_s=int(wall) + 1, memory_bytes=p.memory_mb * MiB,
                      address_space_bytes=max(1024, 2 * p.memory_mb) * MiB, max_procs=p.max_procs,
                      channel_bytes=report)

    def _job(self, spec: TestSpec, secret: bytes, nonce: str) -> dict:
        p, wall = self.params, self._limits(spec).wall_s
        job = {"secret": secret.hex(), "nonce": nonce, "kind": spec.kind, "timeout": p.timeout_s,
               "load_timeout": p.load_timeout_s, "strict": p.strict_types, "site": p.python_site,
               "budget": max(wall - 3.0, wall / 2)}  # the judge stops starting tests in time to report
        if spec.kind == "call":
            job.update(setup=spec.setup, tests=spec.tests)
        else:  # expected outputs stay here: the sandbox only learns how much output to keep
            job["cases"] = [{"input": i, "cap": _case_cap(o)} for i, o in spec.cases]
        return job

    def score(self, example: Example, text: str) -> Score:
        code = extract_code(text)
        if not code.strip():
            return _zero("no code in completion")
        try:
            spec = parse_tests(example.meta.get("tests"), _entry_point(example.meta))
        except (ValueError, SyntaxError, RecursionError) as e:
            return _zero(f"bad tests in example meta: {e}")
        if len(spec) == 0:
            return _zero("no tests: an empty suite is never a pass")
        secret, nonce = os.urandom(32), os.urandom(16).hex()
        judge, helpers = judge_files()
        program = Program(judge, files={"solution.py": code, **helpers},
                          stdin=json.dumps(self._job(spec, secret, nonce)).encode(), channel=True,
                          nondumpable=True, python_site=self.params.python_site)
        res = self.sandbox.run(program, self._limits(spec))
        info: dict[str, Any] = {"sandbox": {"protections": res.protections.active(), "weak": res.weak,
                                            "wall_s": round(res.wall_s, 3), "killed": res.killed_reason}}
        try:
            if res.channel_truncated:
                raise UntrustedReport("report over its size cap")
            recs = read_report(res.channel, secret, nonce, len(spec))
        except (UntrustedReport, ValueError) as e:
            info["stderr"] = res.stderr[-500:].decode("utf-8", "replace")
            return _zero(f"judge report rejected: {e}", info)
        if spec.kind == "call":
            results = [(bool(r.get("ok") is True), str(r.get("why", ""))) for r in recs]
            names = [str(t.get("name", i)) for i, t in enumerate(spec.tests)]
        else:
            how = spec.compare or self.params.compare
            results = [_case_result(r, want, how) for r, (_, want) in zip(recs, spec.cases)]
            names = [f"case {i}" for i in range(len(results))]
        return self._reward(results, names, info)

    def _reward(self, results: list[tuple[bool, str]], names: list[str], info: dict[str, Any]) -> Score:
        passed = sum(ok for ok, _ in results)
        frac = passed / len(results)
        failures = [f"{name}: {why or 'failed'}" for name, (ok, why) in zip(names, results) if not ok]
        info.update(passed=passed, total=len(results), failures=failures[:5])
        if failures:
            info["reason"] = f"{len(failures)} of {len(results)} tests failed; first: {failures[0]}"
        reward = frac if self.params.mode == "fraction" else float(passed == len(results))
        return Score(reward, {"correct": float(passed == len(results)), "pass_fraction": frac}, info)

    def validation_cases(self) -> list[tuple[Example, str, float]]:
        add = Example("code-add", "Write add(a, b).", "def add(a, b):\n    return a + b\n", task="code",
                      meta={"tests": ["assert add(1, 2) == 3", "assert add(-1, 1) == 0", "assert add(2, 2) == 4"]})
        echo = Example("code-sum", "Print the sum of two integers on one line.",
                       "print(sum(map(int, input().split())))", task="code",
                       meta={"tests": [{"input": "1 2\n", "output": "3\n"}, {"input": "5 -7\n", "output": "-2\n"}]})
        unit = Example("code-unittest", "Write add(a, b).", add.answer, task="code",
                       meta={"tests": "import unittest\nclass T(unittest.TestCase):\n    def test_add(self):\n"
                                      "        self.assertEqual(add(2, 3), 5)\n"})
        return [(add, "Here:\n```python\ndef add(a, b):\n    return a + b\n```", 1.0),
                (unit, unit.answer, 1.0),
                (unit, "def add(a, b):\n    return a * b\n", 0.0),
                (add, "```python\ndef add(a, b):\n    return a - b\n```", 0.0),
                (add, "```python\nimport os\nos._exit(0)\n```", 0.0),
                (echo, echo.answer, 1.0),
                (echo, "print(3)", 0.0)]


def _entry_point(meta: dict) -> str | None:
    """The function the tests call: HumanEval ``entry_point``, APPS ``fn_name``, LiveCodeBench ``func_name``
    (also inside its JSON ``metadata``)."""
    for key in ("entry_point", "fn_name", "func_name"):
        if isinstance(meta.get(key), str) and meta[key]:
            return meta[key]
    extra = meta.get("metadata")
    if isinstance(extra, str):
        try:
            extra = json.loads(extra)
        except json.JSONDecodeError:
            return None
    return extra.get("func_name") if isinstance(extra, dict) and isinstance(extra.get("func_name"), str) else None


def _case_cap(expected: str) -> int:
    """Output bytes worth keeping for one stdio case: more than twice the expected output is wrong anyway."""
    return 2 * len(expected.encode()) + 1024


def _case_result(rec: dict, want: str, how: str) -> tuple[bool, str]:
    if rec.get("timeout"):
        return False, "timeout"
    if rec.get("trunc"):
        return False, "output far longer than expected"
    if rec.get("rc") != 0:
        return False, f"exit status {rec.get('rc')}: {str(rec.get('err', ''))[-200:]}"
    if not same_output(str(rec.get("out", "")), want, how):
        return False, "wrong output"
    return True, ""


def _zero(reason: str, info: dict[str, Any] | None = None) -> Score:
    return Score(0.0, {"correct": 0.0, "pass_fraction": 0.0}, {**(info or {}), "reason": reason})


@VERIFIERS.register("code", CodeParams)
def _code(p: CodeParams) -> CodeVerifier:
    """Code with unit tests (assert, test-function or stdin/stdout), run in the local sandbox."""
    if p.require_bwrap:
        strict = LocalSandbox(use_bwrap=True)
        strict.mode()  # raises now, at config time, where bubblewrap cannot run
        return CodeVerifier(p, strict)
    return CodeVerifier(p)

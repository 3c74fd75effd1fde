"""Code with unit tests: run the completion's code against the example's tests in the sandbox.

**The code** is the last fenced block tagged ``python`` / ``py`` / ``python3`` in the completion, else the
last untagged fenced block, else the whole completion.

**The tests** live in ``example.meta["tests"]``, in one of these forms (a JSON string of any of them works too):

- assert lines, each one test: ``["assert add(1, 2) == 3", "assert add(-1, 1) == 0"]``, or
  ``{"asserts": [...], "setup": "import math"}`` (setup is test-side code run before the tests);
- test code (a string, or ``{"code": ...}``): every top-level ``test_*`` function is one test and the rest
  of the module is setup; without ``test_*`` functions, every top-level ``assert`` is one test and the other
  statements are setup; HumanEval style ``def check(candidate)`` with ``meta["entry_point"]`` (or
  ``{"code": ..., "entry_point": "add"}``) is one test, ``check(add)``;
- stdin/stdout cases: ``[{"input": "1 2\\n", "output": "3\\n"}, ...]`` or ``{"stdio": [...], "compare":
  "lines" | "tokens" | "exact"}``. The program's stdout is compared on the host, by default line by line
  with trailing whitespace and trailing blank lines ignored; a non-zero exit or a timeout fails the case.

Test code names the solution's functions and classes directly (``add(1, 2)``, ``Solution().two_sum(...)``)
or imports them (``from solution import add``). It runs in the judge process, the solution in another
(see ``rlvr/sandbox/judge.py``): only plain data (numbers, strings, bytes, lists, tuples, dicts, sets, None)
crosses between them, ``==`` / ``!=`` compare type-strictly unless ``strict_types=False``, and the judge
reports through an HMAC-authenticated channel ending with the run's nonce. A missing or tampered report, a
solution that fails to load, zero tests, and an early ``exit(0)`` all score 0.

What the call protocol implies for test authors: a solution object that is not plain data (a generator, an
instance) reaches the tests as a handle that can be called, indexed, iterated (materialised as a list), asked
for ``len`` or attributes, but has no truth value and equals only itself; tests can pass the solution plain
data and such handles, not lambdas; a solution name that shadows a builtin (``abs``, ``len``, ``sorted``...)
is bound in the tests only when imported explicitly (``from solution import sorted``), so a solution cannot
redefine the helpers the tests check with. Solutions see the standard library only unless
``python_site=True``.

**Reward.** ``mode="all"`` (default): 1 only when every test passes. ``mode="fraction"``: the fraction that
pass. ``example.answer`` is a reference solution (``validate`` checks that it scores 1).
"""

from __future__ import annotations

import ast
import hashlib
import hmac
import json
import os
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

from rlvr.core.types import Example, Score
from rlvr.registry import Params
from rlvr.sandbox import Limits, LocalSandbox, MiB, Program, Sandbox, default_sandbox
from rlvr.verifiers.base import VERIFIERS, BaseVerifier

__all__ = ["CodeParams", "CodeVerifier", "TestSpec", "extract_code", "parse_tests"]

_SANDBOX_DIR = Path(__file__).resolve().parent.parent / "sandbox"
_JUDGE_SRC = (_SANDBOX_DIR / "judge.py").read_text()
_RPC_SRC = (_SANDBOX_DIR / "rpc.py").read_text()
_FENCE = re.compile(r"```[ \t]*([A-Za-z0-9_+-]*)[^\n]*\n(.*?)```", re.S)


class CodeParams(Params):
    mode: Literal["all", "fraction"] = "all"
    timeout_s: float = 5.0  # per test (per stdio case), and for loading the solution
    max_wall_s: float = 120.0  # the whole run
    memory_mb: int = 512
    max_procs: int = 64
    strict_types: bool = True
    compare: Literal["lines", "tokens", "exact"] = "lines"  # stdio default, unless the tests say otherwise
    python_site: bool = False  # let solutions import site-packages of the sandbox's interpreter
    require_bwrap: bool = False  # refuse (at build time) to run on the weak no-bubblewrap fallback


def extract_code(text: str) -> str:
    """The last ```python block, else the last untagged ``` block, else the whole text."""
    blocks = _FENCE.findall(text)
    for want in (("python", "py", "python3"), ("",)):
        found = [body for lang, body in blocks if lang.lower() in want]
        if found:
            return found[-1]
    return text


@dataclass
class TestSpec:
    """Normalised tests: ``call`` (setup code + one snippet per test) or ``stdio`` (input, expected)."""

    kind: Literal["call", "stdio"]
    setup: str = ""
    tests: list[dict[str, str]] = field(default_factory=list)
    cases: list[tuple[str, str]] = field(default_factory=list)
    compare: str | None = None

    def __len__(self) -> int:
        return len(self.tests) if self.kind == "call" else len(self.cases)


def _from_code(code: str, entry_point: str | None) -> TestSpec:
    tree = ast.parse(code)
    funcs = [n.name for n in tree.body if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef))]
    tests = [n for n in funcs if n.startswith("test")]
    if tests:
        return TestSpec("call", code, [{"name": n, "code": f"{n}()"} for n in tests])
    if "check" in funcs and entry_point:
        return TestSpec("call", code, [{"name": "check", "code": f"check({entry_point})"}])
    setup = [ast.get_source_segment(code, n) or "" for n in tree.body if not isinstance(n, ast.Assert)]
    asserts = [ast.get_source_segment(code, n) or "" for n in tree.body if isinstance(n, ast.Assert)]
    return TestSpec("call", "\n".join(setup), [{"name": f"assert {i}", "code": a} for i, a in enumerate(asserts)])


def _stdio(cases: list, compare: str | None) -> TestSpec:
    out = []
    for c in cases:
        if not isinstance(c, dict) or not isinstance(c.get("input", ""), str) or not isinstance(c.get("output"), str):
            raise ValueError("stdio cases need string 'input' and 'output'")
        out.append((c.get("input", ""), c["output"]))
    return TestSpec("stdio", cases=out, compare=compare)


def parse_tests(tests: Any, entry_point: str | None = None) -> TestSpec:
    """``meta["tests"]`` in any documented form -> :class:`TestSpec` (ValueError when malformed)."""
    if isinstance(tests, str) and tests.lstrip()[:1] in ("[", "{"):
        try:
            tests = json.loads(tests)
        except json.JSONDecodeError:
            pass  # Python code that happens to start with a bracket
    if isinstance(tests, str):
        return _from_code(tests, entry_point)
    if isinstance(tests, dict):
        if "stdio" in tests:
            return _stdio(tests["stdio"], tests.get("compare"))
        if "asserts" in tests:
            spec = parse_tests(list(tests["asserts"]))
            spec.setup = tests.get("setup", "")
            return spec
        if "code" in tests:
            return _from_code(tests["code"], tests.get("entry_point", entry_point))
        raise ValueError(f"unknown tests dict keys {sorted(tests)}")
    if isinstance(tests, list) and all(isinstance(t, str) for t in tests):
        return TestSpec("call", "", [{"name": f"assert {i}", "code": t} for i, t in enumerate(tests)])
    if isinstance(tests, list) and all(isinstance(t, dict) for t in tests):
        return _stdio(tests, None)
    raise ValueError(f"unsupported tests of type {type(tests).__name__}")


def _same_output(got: str, want: str, how: str) -> bool:
    if how == "exact":
        return got == want
    if how == "tokens":
        return got.split() == want.split()
    norm = lambda s: [ln.rstrip() for ln in s.replace("\r\n", "\n").rstrip().split("\n")]  # noqa: E731
    return norm(got) == norm(want)


class _Untrusted(Exception):
    """The judge's report is missing, incomplete or tampered with."""


def read_report(channel: bytes, key: bytes, nonce: str, n: int) -> list[dict]:
    """The judge's per-test records, after checking every MAC, the sequence, the count and the nonce."""
    lines = channel.split(b"\n")
    if lines[-1] != b"":
        raise _Untrusted("report cut off")
    recs = []
    for seq, raw in enumerate(lines[:-1]):
        body, _, mac = raw.rpartition(b"\t")
        if not hmac.compare_digest(hmac.new(key, body, hashlib.sha256).hexdigest().encode(), mac):
            raise _Untrusted("report line with a bad MAC")
        rec = json.loads(body)
        if rec.get("seq") != seq:
            raise _Untrusted("report out of sequence")
        recs.append(rec)
    if not recs or recs[-1].get("k") != "done" or recs[-1].get("nonce") != nonce or recs[-1].get("n") != n:
        raise _Untrusted("no final record with the run's nonce: the judge did not finish")
    if [r.get("i") for r in recs[:-1]] != list(range(n)):
        raise _Untrusted("report does not cover every test exactly once")
    return recs[:-1]


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
        wall = min(p.max_wall_s, 5.0 + (len(spec) + 1) * (p.timeout_s + 0.5))
        # the report carries each stdio case's output (JSON-escaped: up to 6 bytes a byte) plus a line a test
        report = 1 * MiB + sum(6 * _case_cap(want) for _, want in spec.cases)
        return Limits(wall_s=wall, cpu_s=int(wall) + 1, memory_bytes=p.memory_mb * MiB,
                      address_space_bytes=max(1024, 2 * p.memory_mb) * MiB, max_procs=p.max_procs,
                      channel_bytes=report)

    def _job(self, spec: TestSpec, secret: bytes, nonce: str) -> dict:
        job = {"secret": secret.hex(), "nonce": nonce, "kind": spec.kind, "timeout": self.params.timeout_s,
               "strict": self.params.strict_types, "site": self.params.python_site}
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
            spec = parse_tests(example.meta.get("tests"), example.meta.get("entry_point"))
        except (ValueError, SyntaxError) as e:
            return _zero(f"bad tests in example meta: {e}")
        if len(spec) == 0:
            return _zero("no tests: an empty suite is never a pass")
        secret, nonce = os.urandom(32), os.urandom(16).hex()
        program = Program(_JUDGE_SRC, files={"solution.py": code, "rlvr_sandbox_rpc.py": _RPC_SRC},
                          stdin=json.dumps(self._job(spec, secret, nonce)).encode(), channel=True,
                          nondumpable=True, python_site=self.params.python_site)
        res = self.sandbox.run(program, self._limits(spec))
        info: dict[str, Any] = {"sandbox": {"protections": res.protections.active(), "weak": res.weak,
                                            "wall_s": round(res.wall_s, 3), "killed": res.killed_reason}}
        try:
            if res.channel_truncated:
                raise _Untrusted("report over its size cap")
            recs = read_report(res.channel, secret, nonce, len(spec))
        except (_Untrusted, ValueError) as e:
            info["stderr"] = res.stderr[-500:].decode("utf-8", "replace")
            return _zero(f"judge report rejected: {e}", info)
        if spec.kind == "call":
            results = [(bool(r.get("ok") is True), str(r.get("why", ""))) for r in recs]
        else:
            how = spec.compare or self.params.compare
            results = [_case_result(r, want, how) for r, (_, want) in zip(recs, spec.cases)]
        return self._reward(results, info)

    def _reward(self, results: list[tuple[bool, str]], info: dict[str, Any]) -> Score:
        passed = sum(ok for ok, _ in results)
        frac = passed / len(results)
        info.update(passed=passed, total=len(results),
                    failures=[f"test {i}: {why}" for i, (ok, why) in enumerate(results) if not ok][:5])
        reward = frac if self.params.mode == "fraction" else float(passed == len(results))
        return Score(reward, {"correct": float(passed == len(results)), "pass_fraction": frac}, info)

    def validation_cases(self) -> list[tuple[Example, str, float]]:
        add = Example("code-add", "Write add(a, b).", "def add(a, b):\n    return a + b\n", task="code",
                      meta={"tests": ["assert add(1, 2) == 3", "assert add(-1, 1) == 0", "assert add(2, 2) == 4"]})
        echo = Example("code-sum", "Print the sum of two integers on one line.",
                       "print(sum(map(int, input().split())))", task="code",
                       meta={"tests": [{"input": "1 2\n", "output": "3\n"}, {"input": "5 -7\n", "output": "-2\n"}]})
        return [(add, "Here:\n```python\ndef add(a, b):\n    return a + b\n```", 1.0),
                (add, "```python\ndef add(a, b):\n    return a - b\n```", 0.0),
                (add, "```python\nimport os\nos._exit(0)\n```", 0.0),
                (echo, echo.answer, 1.0),
                (echo, "print(3)", 0.0)]


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
    if not _same_output(str(rec.get("out", "")), want, how):
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

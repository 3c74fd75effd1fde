"""Code with execution feedback (``code_feedback``): MURPHY's setting (G6), one candidate program per turn.

**The episode.** The example carries unit tests in ``meta["tests"]`` (the function they call in
``meta["entry_point"]`` / ``"fn_name"`` / ``"func_name"`` where a form needs one). Each policy turn is a
candidate program, taken as the code verifier takes it: the last ```python block, else the last untagged
block, else the whole turn. It runs against every test in the sandbox through the code verifier's judge
(``rlvr/sandbox/judge.py``: the solution in its own process, results authenticated per run, per-test
``timeout_s``, ``load_timeout_s`` for loading, ``max_wall_s`` and ``memory_mb`` for the run; tests the
run has no time left for fail as "not run". Keep ``max_wall_s`` under the driver's ``step_timeout_s``, 30 s
by default, or a slow turn ends the episode as an environment failure). While tests
fail, the observation is a compact report of the first ``max_failures_shown`` failures: the test (its
source, or the stdin case's input), expected against got (an ``assert a == b`` test is rewritten to say
both), or the exception / exit status / time-out, cut to ``max_observation_chars``.

**Rewards.** The episode ends when every test passes (reward 1) or at the environment's own ``max_turns``
(reward: 1 only if all pass with ``reward="all"``, the fraction passing with ``reward="fraction"``); every
earlier turn's reward is 0. Keep ``rollout.multiturn.max_turns`` at least this ``max_turns``: an episode
the driver cuts first never gets its final reward (env reward 0; the task's verifier still scores it).
``info`` gives ``passed``, ``total``, ``pass_fraction``, ``failures`` (test names), ``reason`` and
``sandbox_s``.

**Failures.** A program that does not load fails every test and the observation says why (the syntax or
import error). A run the sandbox stopped (wall clock, memory, output flood) or whose report is missing or
tampered with (an early ``os._exit``) counts as no test passing, with the reason as the observation. A
sandbox that cannot start ends the episode with reward 0 and ``info["reason"]``. Malformed tests raise in
``reset`` (the driver ends that episode with the error).

**Test forms** (the code verifier's, read here since the environments sit below the verifiers):
assert lists (``["assert f(1) == 2", ...]``, ``{"asserts"|"test_list": [...], "setup"|"test_setup_code":
...}``); test code (top-level asserts, ``unittest.TestCase`` ``test*`` methods, pytest ``test*``
functions and ``Test*`` classes, HumanEval's ``check(candidate)``, whose body's asserts count as one test
each); call cases (LiveCodeBench functional ``[{"input", "output", "testtype": "functional"}]``, APPS
``{"fn_name", "inputs", "outputs"}``); stdin/stdout cases (``[{"input", "output"}]``, ``{"stdio": [...],
"compare": ...}``, APPS / CodeContests ``{"inputs"|"input": [...], "outputs"|"output": [...]}``).
"""

from __future__ import annotations

import ast
import hashlib
import hmac
import json
import os
import re
import time
from dataclasses import dataclass, field
from functools import lru_cache
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

from pydantic import Field

from rlvr.core.types import Example
from rlvr.envs.base import ENVIRONMENTS, Step
from rlvr.registry import Params

if TYPE_CHECKING:
    from rlvr.sandbox import Limits, Sandbox

__all__ = ["CodeFeedbackEnv", "CodeFeedbackParams", "extract_code", "parse_feedback_tests"]

_SANDBOX_DIR = Path(__file__).resolve().parent.parent / "sandbox"
_FENCE = re.compile(r"```[ \t]*([A-Za-z0-9_+-]*)[^\n]*\n(.*?)```", re.S)
_SETUP_KEYS = ("setup", "test_setup_code", "test_imports")


class CodeFeedbackParams(Params):
    reward: Literal["all", "fraction"] = Field("all", description="final reward: 1 only when every test "
                                                                  "passes, or the fraction that pass")
    max_turns: int = Field(4, ge=1, description="candidate programs per episode; the last one is scored")
    timeout_s: float = Field(5.0, gt=0, description="seconds per test (per stdin case: the whole program)")
    load_timeout_s: float = Field(10.0, gt=0, description="seconds to load the solution and the test setup")
    max_wall_s: float = Field(25.0, gt=0, description="seconds for one turn's whole test run (keep it under "
                                                      "rollout.multiturn.step_timeout_s)")
    memory_mb: int = Field(512, gt=0, description="memory of one turn's test run")
    max_procs: int = Field(64, gt=0, description="processes and threads of one turn's test run")
    strict_types: bool = Field(True, description="== in tests compares types too (1 != 1.0 != True)")
    compare: Literal["lines", "tokens", "exact"] = Field("lines", description="stdin/stdout comparison")
    python_site: bool = Field(False, description="let solutions import the sandbox interpreter's site-packages")
    max_failures_shown: int = Field(3, ge=1, description="failures described in an observation")
    max_observation_chars: int = Field(1500, gt=0, description="an observation is cut to this")


def extract_code(text: str) -> str:
    """The last ```python block, else the last untagged ``` block, else the whole text."""
    blocks = _FENCE.findall(text)
    for want in (("python", "py", "python3"), ("",)):
        found = [body for lang, body in blocks if lang.lower() in want]
        if found:
            return found[-1]
    return text


# ---- test forms -> a spec --------------------------------------------------------------------------------
@dataclass
class _Spec:
    kind: Literal["call", "stdio"]
    setup: str = ""
    tests: list[dict[str, Any]] = field(default_factory=list)  # name, code (run), show (reported)
    cases: list[tuple[str, str]] = field(default_factory=list)
    compare: str | None = None

    def __len__(self) -> int:
        return len(self.tests) if self.kind == "call" else len(self.cases)


def parse_feedback_tests(tests: Any, entry: str | None = None) -> _Spec:
    """``meta["tests"]`` in any form of the module doc -> a spec (ValueError when malformed or unsupported)."""
    if isinstance(tests, str) and tests.lstrip()[:1] in ("[", "{"):
        try:
            tests = json.loads(tests)
        except json.JSONDecodeError:
            pass
    if isinstance(tests, str):
        return _from_code(tests, entry)
    if isinstance(tests, list) and all(isinstance(t, str) for t in tests):
        return _asserts(tests, "")
    if isinstance(tests, list) and all(isinstance(t, dict) for t in tests):
        if {str(t.get("testtype", "stdin")) for t in tests} == {"functional"}:
            return _calls([([json.loads(x) for x in str(t["input"]).split("\n") if x.strip()],
                            json.loads(t["output"])) for t in tests], entry, "lcb")
        return _stdio(tests, None)
    if isinstance(tests, dict):
        entry = tests.get("entry_point") or tests.get("fn_name") or tests.get("func_name") or entry
        if "stdio" in tests:
            return _stdio(tests["stdio"], tests.get("compare"))
        for key in ("asserts", "test_list"):
            if key in tests:
                setup = ["\n".join(s) if isinstance(s, list) else str(s) for s in map(tests.get, _SETUP_KEYS) if s]
                return _asserts(list(tests[key]), "\n".join(setup))
        for key in ("code", "test"):
            if isinstance(tests.get(key), str):
                return _from_code(tests[key], entry)
        if "input_output" in tests:
            return parse_feedback_tests(tests["input_output"], entry)
        for ins, outs in (("inputs", "outputs"), ("input", "output")):
            if isinstance(tests.get(ins), list) and isinstance(tests.get(outs), list):
                if len(tests[ins]) != len(tests[outs]):
                    raise ValueError(f"{len(tests[ins])} {ins} but {len(tests[outs])} {outs}")
                if tests.get("fn_name"):
                    return _calls([(a if isinstance(a, list) else [a], w) for a, w in zip(tests[ins], tests[outs])],
                                  tests["fn_name"], "apps")
                text = lambda x: "\n".join(map(str, x)) if isinstance(x, list) else x  # noqa: E731
                return _stdio([{"input": text(i), "output": text(o)} for i, o in zip(tests[ins], tests[outs])],
                              tests.get("compare"))
    raise ValueError(f"unsupported tests of type {type(tests).__name__}")


def _asserts(lines: list, setup: str) -> _Spec:
    if not all(isinstance(t, str) for t in lines):
        raise ValueError("assert lists hold strings")
    return _Spec("call", setup, [{"name": f"test {i + 1}", "code": _explain(t), "show": t.strip()}
                                 for i, t in enumerate(lines)])


def _calls(cases: list, fn: Any, how: str) -> _Spec:
    if not isinstance(fn, str) or not fn.isidentifier():
        raise ValueError("call cases need the function's name (meta 'entry_point' / 'fn_name' / 'func_name')")
    return _Spec("call", "", [{"name": f"test {i + 1}", "code": f"__rlvr_case__({i})", "case":
                               {"fn": fn, "args": list(a), "want": w, "how": how},
                               "show": f"{fn}({', '.join(map(repr, a))}) == {w!r}"} for i, (a, w) in enumerate(cases)])


def _stdio(cases: Any, compare: str | None) -> _Spec:
    out = []
    for c in cases if isinstance(cases, list) else []:
        if not isinstance(c, dict) or not isinstance(c.get("input", ""), str) or not isinstance(c.get("output"), str):
            raise ValueError("stdio cases need string 'input' and 'output'")
        out.append((c.get("input", ""), c["output"]))
    return _Spec("stdio", cases=out, compare=compare)


def _explain(src: str) -> str:
    """``assert a == b`` -> code whose failure says "expected b, got a" (each side evaluated once)."""
    try:
        tree = ast.parse(src.strip())
    except SyntaxError:
        return src
    node = tree.body[0] if len(tree.body) == 1 else None
    if not (isinstance(node, ast.Assert) and node.msg is None and isinstance(node.test, ast.Compare)
            and len(node.test.ops) == 1 and isinstance(node.test.ops[0], ast.Eq)):
        return src
    got, want = ast.unparse(node.test.left), ast.unparse(node.test.comparators[0])
    return (f"__rlvr_got__ = ({got})\n__rlvr_want__ = ({want})\nassert __rlvr_got__ == __rlvr_want__, "
            f"'expected ' + repr(__rlvr_want__)[:200] + ', got ' + repr(__rlvr_got__)[:200]\n")


def _main_call(node: ast.stmt) -> bool:
    return isinstance(node, ast.Expr) and "main" in ast.dump(node) and any(
        isinstance(c, ast.Attribute) and c.attr == "main" and isinstance(c.value, ast.Name)
        and c.value.id in ("unittest", "pytest") for c in ast.walk(node))


def _from_code(code: str, entry: str | None) -> _Spec:
    tree, lines = ast.parse(code), code.splitlines(keepends=True)
    body = [n for n in tree.body if not _main_call(n)]
    src = lambda n: ast.get_source_segment(code, n) or ast.unparse(n)  # noqa: E731
    for n in tree.body:  # the setup: the module less its asserts and unittest.main() / pytest.main() calls
        if isinstance(n, ast.Assert) or _main_call(n):
            lines[n.lineno - 1: n.end_lineno] = ["\n"] * (n.end_lineno - n.lineno + 1)
    setup = "".join(lines)
    tests = []
    for n in body:
        bases = [b.id if isinstance(b, ast.Name) else getattr(b, "attr", "") for b in getattr(n, "bases", [])]
        methods = [m.name for m in getattr(n, "body", []) if isinstance(m, ast.FunctionDef) and m.name.startswith("test")]
        if isinstance(n, ast.ClassDef) and any(b.endswith("TestCase") for b in bases):
            tests += [{"name": f"{n.name}.{m}", "code": f"__rlvr_unittest__({n.name}, {m!r})"} for m in methods]
        elif isinstance(n, ast.ClassDef) and n.name.startswith("Test"):
            tests += [{"name": f"{n.name}.{m}", "code": f"__rlvr_pytest__({n.name}, {m!r}, None)"} for m in methods]
        elif isinstance(n, ast.FunctionDef) and n.name.startswith("test") and "fixture" not in ast.dump(n):
            tests.append({"name": n.name, "code": f"__rlvr_pytest__(None, {n.name!r}, None)"})
    if tests:
        return _Spec("call", setup, [{**t, "show": t["name"]} for t in tests])
    check = next((n for n in body if isinstance(n, ast.FunctionDef) and n.name == "check"), None)
    if check is not None and entry:
        if not entry.isidentifier():
            raise ValueError(f"bad entry point {entry!r}")
        setup += f"\nfrom solution import {entry} as candidate\n"
        stmts = [s for s in check.body if not (isinstance(s, ast.Expr) and isinstance(s.value, ast.Constant))]
        if stmts and all(isinstance(s, ast.Assert) for s in stmts):
            return _asserts([src(s) for s in stmts], setup)
        return _Spec("call", setup, [{"name": "check", "code": "check(candidate)", "show": f"check({entry})"}])
    return _asserts([src(n) for n in body if isinstance(n, ast.Assert)], setup)


# ---- running the tests ------------------------------------------------------------------------------------
@lru_cache(maxsize=1)
def _judge_files() -> tuple[str, dict[str, str]]:
    """The judge (the sandbox's main program) and its helpers, under the names it imports them by."""
    helpers = {"rlvr_sandbox_rpc.py": "rpc.py", "rlvr_sandbox_forms.py": "forms.py",
               "rlvr_sandbox_pytest.py": "pytest_shim.py"}
    return (_SANDBOX_DIR / "judge.py").read_text(), {k: (_SANDBOX_DIR / v).read_text() for k, v in helpers.items()}


class _Untrusted(Exception):
    pass


def _read_report(channel: bytes, key: bytes, nonce: str, n: int) -> list[dict]:
    """The judge's per-test records after checking every MAC, the sequence, the count and the nonce."""
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
        raise _Untrusted("the test run did not finish (no final record)")
    if [r.get("i") for r in recs[:-1]] != list(range(n)):
        raise _Untrusted("report does not cover every test exactly once")
    return recs[:-1]


def _same(got: str, want: str, how: str) -> bool:
    if how == "exact":
        return got == want
    if how == "tokens":
        return got.split() == want.split()
    norm = lambda s: [ln.rstrip() for ln in s.replace("\r\n", "\n").rstrip().split("\n")]  # noqa: E731
    return norm(got) == norm(want)


def _short(s: str, n: int = 160) -> str:
    return repr(s if len(s) <= n else s[:n] + "...")


class CodeFeedbackEnv:
    """One episode of candidate programs against ``meta["tests"]`` (see the module doc)."""

    def __init__(self, p: CodeFeedbackParams, sandbox: Sandbox | None = None):
        self.p, self.sandbox = p, sandbox
        self.spec: _Spec | None = None
        self.turns = 0

    def reset(self, example: Example, seed: int) -> str:
        meta = example.meta
        entry = next((meta[k] for k in ("entry_point", "fn_name", "func_name") if isinstance(meta.get(k), str)), None)
        self.spec, self.turns = parse_feedback_tests(meta.get("tests"), entry), 0
        if len(self.spec) == 0:
            raise ValueError("no tests in meta['tests']: an empty suite is never a pass")
        return ""  # the prompt states the task

    def step(self, action: str) -> Step:
        if self.spec is None:
            raise RuntimeError("step() before reset()")
        self.turns += 1
        code = extract_code(action)
        t0 = time.perf_counter()
        results, problem, fatal = self._run(code) if code.strip() else (None, "no code in the turn", False)
        info: dict[str, Any] = {"turn": self.turns, "sandbox_s": round(time.perf_counter() - t0, 3)}
        if fatal:
            return Step("", 0.0, True, {**info, "reason": problem})
        results = results or [(False, problem or "not run")] * len(self.spec)
        passed = sum(ok for ok, _ in results)
        names = [t["name"] for t in self.spec.tests] if self.spec.kind == "call" else \
            [f"case {i + 1}" for i in range(len(results))]
        failures = [n for n, (ok, _) in zip(names, results) if not ok]
        info.update(passed=passed, total=len(results), pass_fraction=passed / len(results), failures=failures[:10],
                    reason="all tests passed" if not failures else
                    (problem or f"{len(failures)} of {len(results)} tests failed; first: {failures[0]}"))
        if not failures or self.turns >= self.p.max_turns:
            reward = 1.0 if not failures else (passed / len(results) if self.p.reward == "fraction" else 0.0)
            return Step("All tests passed." if not failures else "", reward, True, info)
        return Step(self._report(results, names, problem), 0.0, False, info)

    def _limits(self) -> Limits:
        from rlvr.sandbox import Limits, MiB

        p, spec = self.p, self.spec
        wall = min(p.max_wall_s, 5.0 + (len(spec) + 1) * (p.timeout_s + 0.5) + 2 * p.load_timeout_s)
        report = 1 * MiB + sum(6 * (2 * len(w.encode()) + 1024) for _, w in spec.cases)
        return Limits(wall_s=wall, cpu_s=int(wall) + 1, memory_bytes=p.memory_mb * MiB,
                      address_space_bytes=max(1024, 2 * p.memory_mb) * MiB, max_procs=p.max_procs,
                      channel_bytes=report)

    def _run(self, code: str) -> tuple[list[tuple[bool, str]] | None, str | None, bool]:
        """Per-test ``(ok, detail)``, else None with why; True when the sandbox itself failed."""
        from rlvr.sandbox import Program, default_sandbox

        p, spec, limits = self.p, self.spec, self._limits()
        judge, helpers = _judge_files()
        secret, nonce = os.urandom(32), os.urandom(16).hex()
        job: dict[str, Any] = {"secret": secret.hex(), "nonce": nonce, "kind": spec.kind, "timeout": p.timeout_s,
                               "load_timeout": p.load_timeout_s, "strict": p.strict_types, "site": p.python_site,
                               "budget": max(limits.wall_s - 3.0, limits.wall_s / 2)}
        if spec.kind == "call":
            job.update(setup=spec.setup, tests=[{k: v for k, v in t.items() if k != "show"} for t in spec.tests])
        else:
            job["cases"] = [{"input": i, "cap": 2 * len(o.encode()) + 1024} for i, o in spec.cases]
        res = (self.sandbox or default_sandbox()).run(
            Program(judge, files={"solution.py": code, **helpers}, stdin=json.dumps(job).encode(), channel=True,
                    nondumpable=True, python_site=p.python_site), limits)
        if res.killed_reason == "setup_failed":
            return None, "sandbox failed to start: " + res.stderr.decode("utf-8", "replace")[-300:], True
        try:
            if res.channel_truncated:
                raise _Untrusted("report over its size cap")
            recs = _read_report(res.channel, secret, nonce, len(spec))
        except (_Untrusted, ValueError) as e:
            stopped = f"; the run was stopped ({res.killed_reason})" if res.killed_reason else ""
            return None, f"no test result: {e}{stopped}", False
        if spec.kind == "call":
            return [(r.get("ok") is True, str(r.get("why", ""))) for r in recs], None, False
        return [self._case(r, want) for r, (_, want) in zip(recs, spec.cases)], None, False

    def _case(self, rec: dict, want: str) -> tuple[bool, str]:
        if rec.get("timeout"):
            return False, f"timeout (ran past {self.p.timeout_s:g} s)"
        if rec.get("trunc"):
            return False, "printed far more output than expected"
        if rec.get("rc") != 0:
            return False, f"exit status {rec.get('rc')}: {str(rec.get('err', '')).strip()[-300:]}"
        got = str(rec.get("out", ""))
        if not _same(got, want, self.spec.compare or self.p.compare):
            return False, f"expected {_short(want)}, got {_short(got)}"
        return True, ""

    def _report(self, results: list[tuple[bool, str]], names: list[str], problem: str | None) -> str:
        bad = [(i, why) for i, (ok, why) in enumerate(results) if not ok]
        head = f"{len(bad)} of {len(results)} tests failed."
        if problem:
            return f"{head} {problem}"[: self.p.max_observation_chars]
        loads = {why for _, why in bad if "did not load" in why or "setup failed" in why}
        if len(loads) == 1 and len(bad) == len(results):
            return f"{head} The program failed to load: {loads.pop()}"[: self.p.max_observation_chars]
        lines = [head]
        for i, why in bad[: self.p.max_failures_shown]:
            if self.spec.kind == "call":
                show = self.spec.tests[i].get("show", names[i])
                lines.append(f"- {names[i]}{': ' + show[:300] if show != names[i] else ''}\n  {why or 'failed'}")
            else:
                lines.append(f"- {names[i]}: input {_short(self.spec.cases[i][0])}\n  {why}")
        if len(bad) > self.p.max_failures_shown:
            lines.append(f"[... {len(bad) - self.p.max_failures_shown} more failures]")
        text = "\n".join(lines)
        return text if len(text) <= self.p.max_observation_chars else text[: self.p.max_observation_chars - 12] + "\n[... cut]"


@ENVIRONMENTS.register("code_feedback", CodeFeedbackParams)
def _code_feedback(p: CodeFeedbackParams) -> CodeFeedbackEnv:
    """Candidate programs against unit tests, failures fed back; the last turn is scored (MURPHY)."""
    return CodeFeedbackEnv(p)

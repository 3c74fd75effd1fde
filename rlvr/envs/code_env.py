"""Code with execution feedback (``code_feedback``): MURPHY's setting (arXiv:2511.07833), one candidate
program per turn.

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
earlier turn's reward is 0. ``rollout.multiturn.max_turns`` below this ``max_turns`` is a config error
(an episode the driver cut first would never get its final reward).
``info`` gives ``passed``, ``total``, ``pass_fraction``, ``failures`` (test names), ``reason`` and
``sandbox_s``.

**Failures.** A program that does not load fails every test and the observation says why (the syntax or
import error). A run the sandbox stopped (wall clock, memory, output flood) or whose report is missing or
tampered with (an early ``os._exit``) counts as no test passing, with the reason as the observation. A
sandbox that cannot start ends the episode with reward 0 and ``info["reason"]``. Malformed tests raise in
``reset`` (the driver ends that episode with the error).

**Test forms** are the code verifier's, read by its parser (``rlvr/sandbox/code_tests.py``, below both;
the forms are listed in ``rlvr/verifiers/code.py``): assert lists (``["assert f(1) == 2", ...]``,
``{"asserts"|"test_list": [...], "setup"|"test_setup_code": ...}``); test code (top-level asserts,
``unittest.TestCase`` ``test*`` methods, inherited ones too, pytest ``test*`` functions and ``Test*``
classes, a test per written-out ``parametrize`` set, HumanEval's ``check(candidate)``, whose body's asserts
count as one test each here when it is only asserts); call cases (LiveCodeBench functional ``[{"input",
"output", "testtype": "functional"}]``, APPS ``{"fn_name", "inputs", "outputs"}``); stdin/stdout cases
(``[{"input", "output"}]``, ``{"stdio": [...], "compare": ...}``, APPS / CodeContests ``{"inputs"|"input":
[...], "outputs"|"output": [...]}``, whole APPS / CodeContests rows).
"""

from __future__ import annotations

import ast
import json
import os
import time
from typing import TYPE_CHECKING, Any, Literal

from pydantic import Field

from rlvr.core.types import Example
from rlvr.envs.base import ENVIRONMENTS, Step
from rlvr.registry import Params
from rlvr.sandbox.code_tests import TestSpec, parse_tests
from rlvr.sandbox.programs import UntrustedReport, extract_code, judge_files, read_report, same_output

if TYPE_CHECKING:
    from rlvr.sandbox import Limits, Sandbox

__all__ = ["CodeFeedbackEnv", "CodeFeedbackParams", "extract_code", "parse_feedback_tests"]

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


# ---- test forms -> a spec --------------------------------------------------------------------------------
def parse_feedback_tests(tests: Any, entry: str | None = None) -> TestSpec:
    """``meta["tests"]`` in any form of the module doc -> the code verifier's spec (``parse_tests``, ValueError
    when malformed or unsupported), made to explain failures: every test gets a ``show`` (its source or the
    call it makes), assert and call tests are named ``test 1``, ``test 2``... and an ``assert a == b`` says
    what it expected and what it got; HumanEval's ``check`` is one test per assert where its body is asserts."""
    spec = parse_tests(tests, entry)
    if spec.kind == "stdio":
        return spec
    if entry and [t["name"] for t in spec.tests] == ["check"]:
        return _check(spec, entry)
    return TestSpec("call", spec.setup, [_feedback_test(i, t) for i, t in enumerate(spec.tests)])


def _feedback_test(i: int, t: dict[str, Any]) -> dict[str, Any]:
    if "case" in t:  # a call case
        c = t["case"]
        call = f"{c['fn']}({', '.join(map(repr, c['args']))})"
        return {**t, "name": f"test {i + 1}", "show": f"{call} == {c['want']!r}"}
    if t["name"].startswith("assert "):  # parse_tests' name for an assert-list line or a top-level assert
        return {**t, "name": f"test {i + 1}", "code": _explain(t["code"]), "show": t["code"].strip()}
    return {**t, "show": t["name"]}  # a unittest / pytest test


def _check(spec: TestSpec, entry: str) -> TestSpec:
    """HumanEval's ``check(candidate)``: each assert of its body a test when the body is only asserts, else
    the one ``check`` test as the verifier runs it."""
    code = spec.setup
    check = [n for n in ast.parse(code).body if isinstance(n, ast.FunctionDef) and n.name == "check"][-1:]
    args = [a.arg for c in check for a in c.args.posonlyargs + c.args.args]
    stmts = [s for c in check for s in c.body if not (isinstance(s, ast.Expr) and isinstance(s.value, ast.Constant))]
    if len(args) != 1 or not stmts or not all(isinstance(s, ast.Assert) for s in stmts):
        return TestSpec("call", code, [{**spec.tests[0], "show": f"check({entry})"}])
    srcs = [ast.get_source_segment(code, s) or ast.unparse(s) for s in stmts]
    return TestSpec("call", code + f"\nfrom solution import {entry} as {args[0]}\n",
                    [{"name": f"test {i + 1}", "code": _explain(t), "show": t.strip()} for i, t in enumerate(srcs)])


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


# ---- running the tests ------------------------------------------------------------------------------------
def _short(s: str, n: int = 160) -> str:
    return repr(s if len(s) <= n else s[:n] + "...")


class CodeFeedbackEnv:
    """One episode of candidate programs against ``meta["tests"]`` (see the module doc)."""

    def __init__(self, p: CodeFeedbackParams, sandbox: Sandbox | None = None):
        self.p, self.sandbox = p, sandbox
        self.spec: TestSpec | None = None
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
        judge, helpers = judge_files()
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
                raise UntrustedReport("report over its size cap")
            recs = read_report(res.channel, secret, nonce, len(spec))
        except (UntrustedReport, ValueError) as e:
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
        if not same_output(got, want, self.spec.compare or self.p.compare):
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

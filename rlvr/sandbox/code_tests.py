"""The code tests' forms: ``example.meta["tests"]`` in whatever shape a dataset ships -> :class:`TestSpec`.

Every form is read here, on the host, by parsing (never running) the tests, so the number of tests is fixed
before the solution runs and the judge's report must account for each one. What each form becomes is
documented in ``rlvr/verifiers/code.py``; how the judge runs it, in ``rlvr/sandbox/forms.py``. It sits in
the sandbox package so that the code verifier and the ``code_feedback`` environment (``rlvr/envs/
code_env.py``, a layer below the verifiers) read tests alike.
"""

from __future__ import annotations

import ast
import json
from dataclasses import dataclass, field
from typing import Any, Literal

__all__ = ["TestSpec", "parse_tests"]

_SETUP_KEYS = ("setup", "test_setup_code", "test_imports")  # MBPP: test_setup_code, test_imports


@dataclass
class TestSpec:
    """Normalised tests: ``call`` (setup code + one snippet per test) or ``stdio`` (input, expected)."""

    __test__ = False  # not a pytest test class, whatever its name

    kind: Literal["call", "stdio"]
    setup: str = ""
    tests: list[dict[str, Any]] = field(default_factory=list)
    cases: list[tuple[str, str]] = field(default_factory=list)
    compare: str | None = None

    def __len__(self) -> int:
        return len(self.tests) if self.kind == "call" else len(self.cases)


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
        return _from_dict(tests, entry_point)
    if isinstance(tests, list) and all(isinstance(t, str) for t in tests):
        return _asserts(tests, "")
    if isinstance(tests, list) and all(isinstance(t, dict) for t in tests):
        kinds = {str(t.get("testtype", "stdin")) for t in tests}
        if kinds == {"functional"}:  # LiveCodeBench: one JSON value per input line, the output one JSON value
            return _calls([(_json_lines(t.get("input")), _json(t.get("output"))) for t in tests], entry_point, "lcb")
        if len(kinds) > 1:
            raise ValueError(f"mixed test types {sorted(kinds)}")
        return _stdio(tests, None)
    raise ValueError(f"unsupported tests of type {type(tests).__name__}")


def _from_dict(tests: dict, entry_point: str | None) -> TestSpec:
    entry = tests.get("entry_point") or tests.get("fn_name") or tests.get("func_name") or entry_point
    if "stdio" in tests:
        return _stdio(tests["stdio"], tests.get("compare"))
    for key in ("asserts", "test_list"):
        if key in tests:
            setup = [tests.get(k) for k in _SETUP_KEYS if tests.get(k)]
            return _asserts(list(tests[key]), "\n".join("\n".join(s) if isinstance(s, list) else str(s)
                                                        for s in setup))
    for key in ("code", "test"):
        if isinstance(tests.get(key), str):
            return _from_code(tests[key], entry)
    if "input_output" in tests:  # an APPS / TACO row
        return parse_tests(tests["input_output"], entry)
    suites = [tests[k] for k in ("public_tests", "private_tests", "generated_tests") if isinstance(tests.get(k), dict)]
    if suites:  # a CodeContests row: every suite's cases
        return _from_dict({"input": [i for t in suites for i in t.get("input", [])],
                           "output": [o for t in suites for o in t.get("output", [])]}, entry)
    for ins, outs in (("inputs", "outputs"), ("input", "output")):  # APPS / TACO, CodeContests
        if isinstance(tests.get(ins), list) and isinstance(tests.get(outs), list):
            if len(tests[ins]) != len(tests[outs]):
                raise ValueError(f"{len(tests[ins])} {ins} but {len(tests[outs])} {outs}")
            if tests.get("fn_name"):  # APPS call-based: a list of arguments per case
                args = [a if isinstance(a, list) else [a] for a in tests[ins]]
                return _calls(list(zip(args, tests[outs])), tests["fn_name"], "apps")
            cases = [{"input": _text(i), "output": _text(o)} for i, o in zip(tests[ins], tests[outs])]
            return _stdio(cases, tests.get("compare"))
    raise ValueError(f"unknown tests dict keys {sorted(tests)}")


def _text(x: Any) -> Any:
    """APPS gives some inputs and outputs as lists of lines."""
    return "\n".join(map(str, x)) if isinstance(x, list) else x


def _json(s: Any) -> Any:
    if not isinstance(s, str):
        raise ValueError("functional cases need string 'input' and 'output'")
    return json.loads(s)


def _json_lines(s: Any) -> list:
    if not isinstance(s, str):
        raise ValueError("functional cases need string 'input' and 'output'")
    return [json.loads(line) for line in s.strip().split("\n") if line.strip()]


def _calls(cases: list[tuple[list, Any]], fn: str | None, how: str) -> TestSpec:
    if not fn or not isinstance(fn, str) or not fn.isidentifier():
        raise ValueError("call cases need the function's name (meta 'entry_point' / 'fn_name' / 'func_name')")
    return TestSpec("call", "", [{"name": f"case {i}", "code": f"__rlvr_case__({i})",
                                  "case": {"fn": fn, "args": list(a), "want": w, "how": how}}
                                 for i, (a, w) in enumerate(cases)])


def _asserts(lines: list, setup: str) -> TestSpec:
    if not all(isinstance(t, str) for t in lines):
        raise ValueError("assert lists hold strings")
    return TestSpec("call", setup, [{"name": f"assert {i}", "code": t} for i, t in enumerate(lines)])


def _stdio(cases: list, compare: str | None) -> TestSpec:
    out = []
    for c in cases:
        if not isinstance(c, dict) or not isinstance(c.get("input", ""), str) or not isinstance(c.get("output"), str):
            raise ValueError("stdio cases need string 'input' and 'output'")
        out.append((c.get("input", ""), c["output"]))
    return TestSpec("stdio", cases=out, compare=compare)


# ---- test code ----------------------------------------------------------------------------------------------
def _from_code(code: str, entry_point: str | None) -> TestSpec:
    tree = ast.parse(code)
    setup = _without_main_calls(code, tree)
    tests = _unittest_tests(tree) + _pytest_tests(tree)
    if tests:
        return TestSpec("call", setup, tests)
    funcs = [n.name for n in tree.body if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef))]
    if "check" in funcs and entry_point:  # HumanEval; the candidate taken from the solution module explicitly,
        if not entry_point.isidentifier():  # so an entry point named like a builtin cannot test the builtin
            raise ValueError(f"bad entry point {entry_point!r}")
        return TestSpec("call", setup, [{"name": "check", "code": f"from solution import {entry_point} as "
                                                                  f"__rlvr_candidate__\ncheck(__rlvr_candidate__)"}])
    lines = code.splitlines(keepends=True)
    segs = [(n, _segment(code, lines, tree.body, k)) for k, n in enumerate(tree.body) if not _is_main_call(n)]
    return TestSpec("call", "".join(s for n, s in segs if not isinstance(n, ast.Assert)),
                    [{"name": f"assert {i}", "code": s} for i, s in
                     enumerate(s for n, s in segs if isinstance(n, ast.Assert))])


def _segment(code: str, lines: list[str], body: list[ast.stmt], k: int) -> str:
    """Top-level statement ``k``'s source, decorators included, as whole lines where it has its lines alone."""
    node = body[k]
    start = min([node.lineno] + [d.lineno for d in getattr(node, "decorator_list", [])])
    alone = (k == 0 or body[k - 1].end_lineno < start) and (k + 1 == len(body) or body[k + 1].lineno > node.end_lineno)
    if alone:
        return "".join(lines[start - 1:node.end_lineno]) + "\n"
    return (ast.get_source_segment(code, node) or "") + "\n"


def _is_main_call(node: ast.stmt) -> bool:
    """A top-level ``unittest.main()`` / ``pytest.main()`` (maybe in ``sys.exit(...)``): the runner's job."""
    return isinstance(node, ast.Expr) and any(
        isinstance(c, ast.Call) and isinstance(c.func, ast.Attribute) and c.func.attr == "main"
        and isinstance(c.func.value, ast.Name) and c.func.value.id in ("unittest", "pytest") for c in ast.walk(node))


def _without_main_calls(code: str, tree: ast.Module) -> str:
    lines = code.splitlines(keepends=True)
    for node in tree.body:
        if _is_main_call(node):
            for j in range(node.lineno - 1, node.end_lineno):
                lines[j] = "\n"
    return "".join(lines)


def _base_name(b: ast.expr) -> str:
    return b.id if isinstance(b, ast.Name) else b.attr if isinstance(b, ast.Attribute) else ""


def _unittest_tests(tree: ast.Module) -> list[dict[str, Any]]:
    """``test*`` methods (own and inherited in the file) of every ``TestCase`` subclass, as unittest finds them."""
    classes = {n.name: n for n in tree.body if isinstance(n, ast.ClassDef)}

    def is_case(c: ast.ClassDef, seen: frozenset = frozenset()) -> bool:
        return any(_base_name(b).endswith("TestCase") or (_base_name(b) in classes and _base_name(b) not in seen
                                                          and is_case(classes[_base_name(b)], seen | {c.name}))
                   for b in c.bases)

    out = []
    for c in classes.values():
        if is_case(c):
            for m in sorted(_methods(c, classes)):
                out.append({"name": f"{c.name}.{m}", "code": f"__rlvr_unittest__({c.name}, {m!r})"})
    return out


def _methods(c: ast.ClassDef, classes: dict[str, ast.ClassDef], seen: frozenset = frozenset()) -> dict[str, ast.AST]:
    found: dict[str, ast.AST] = {}
    for b in reversed(c.bases):
        if _base_name(b) in classes and _base_name(b) not in seen:
            found.update(_methods(classes[_base_name(b)], classes, seen | {c.name}))
    found.update({n.name: n for n in c.body if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef))
                  and n.name.startswith("test")})
    return found


def _pytest_tests(tree: ast.Module) -> list[dict[str, Any]]:
    """Top-level ``test*`` functions and ``test*`` methods of ``Test*`` classes (no ``__init__``, not a
    ``TestCase``); each ``parametrize`` set is a test of its own."""
    classes = {n.name: n for n in tree.body if isinstance(n, ast.ClassDef)}
    unit = {t["name"].split(".")[0] for t in _unittest_tests(tree)}
    out: list[dict[str, Any]] = []
    for n in tree.body:
        if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef)) and n.name.startswith("test") and not _fixture(n):
            out += _param_tests(n.name, "None", n.name, n)
        elif (isinstance(n, ast.ClassDef) and n.name.startswith("Test") and n.name not in unit
              and not any(isinstance(m, ast.FunctionDef) and m.name == "__init__" for m in n.body)):
            for m, fn in sorted(_methods(n, classes).items()):
                out += _param_tests(f"{n.name}.{m}", n.name, m, fn)
    return out


def _fixture(fn: ast.AST) -> bool:
    return any("fixture" in ast.dump(d) for d in getattr(fn, "decorator_list", []))


def _param_tests(label: str, owner: str, name: str, fn: ast.AST) -> list[dict[str, Any]]:
    count = _param_count(fn)
    if count is None:  # parameter sets not countable from the source: one test that runs them all
        return [{"name": label, "code": f"__rlvr_pytest__({owner}, {name!r}, None)"}]
    return [{"name": f"{label}[{i}]" if count > 1 else label, "code": f"__rlvr_pytest__({owner}, {name!r}, {i})"}
            for i in range(count)]


def _param_count(fn: ast.AST) -> int | None:
    """The product of the ``parametrize`` list lengths (1 without any), None when a list is not literal."""
    count = 1
    for d in getattr(fn, "decorator_list", []):
        if not (isinstance(d, ast.Call) and isinstance(d.func, ast.Attribute) and d.func.attr == "parametrize"):
            continue
        values = d.args[1] if len(d.args) > 1 else next((k.value for k in d.keywords if k.arg == "argvalues"), None)
        if not isinstance(values, (ast.List, ast.Tuple)) or any(isinstance(e, ast.Starred) for e in values.elts):
            return None
        count *= len(values.elts)
    return count

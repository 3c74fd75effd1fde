"""Every test form datasets ship (unittest, pytest, HumanEval ``check``, MBPP, APPS, CodeContests, LiveCodeBench):
correct solutions score 1, wrong ones 0 with the failing test named; and the harness's own limits (load time,
big globals, big results, a run's time budget) do not fail correct solutions."""

from __future__ import annotations

import json

import pytest

from rlvr.verifiers.code import CodeParams, CodeVerifier, parse_tests
from tests.sandbox.code_forms import ADD, APPS_CALL, FORMS, MBPP, PYTEST, SUB, UNITTEST, ex


@pytest.fixture(scope="module")
def frac(bwrap_sandbox):
    return CodeVerifier(CodeParams(mode="fraction", timeout_s=2.0), sandbox=bwrap_sandbox)


@pytest.fixture(scope="module")
def strict(bwrap_sandbox):
    return CodeVerifier(CodeParams(timeout_s=2.0), sandbox=bwrap_sandbox)


@pytest.mark.parametrize("form", sorted(FORMS))
def test_each_form_correct_scores_one_wrong_scores_zero_with_reason(form, strict, frac):
    tests, meta, good, bad, n = FORMS[form]
    assert len(parse_tests(tests, meta.get("func_name") or ("add" if "metadata" in meta else None))) == n
    s = strict(ex(tests, **meta), good)
    assert s.reward == 1.0 and s.info["passed"] == n and "reason" not in s.info, (form, s.info)
    s = strict(ex(tests, **meta), bad)
    assert s.reward == 0.0 and s.info["reason"].count("failed") >= 1 and s.info["failures"], (form, s.info)
    assert s.info["total"] == n


def test_partial_credit_and_failing_tests_named(frac):
    s = frac(ex(UNITTEST), SUB)  # a - b passes only test_raises (the inherited test runs in both classes)
    assert s.info["passed"] == 1 and s.reward == pytest.approx(1 / 6)
    assert any(f.startswith("TestAdd.test_pos: ") and "3" in f for f in s.info["failures"])
    s = frac(ex(PYTEST), SUB)  # right for b == 0 (the "zero" parameter set, test_autouse) and the TypeError test
    assert s.info["passed"] == 3 and s.reward == pytest.approx(3 / 9)
    assert "test_param[0]: assertion failed" in s.info["failures"][0]
    s = frac(ex(APPS_CALL), SUB)  # add(5, 0) == 5
    assert s.reward == pytest.approx(1 / 3) and "wrong answer: got -1" in s.info["failures"][0]


def test_test_forms_are_counted_from_the_source():
    spec = parse_tests("import unittest\nclass T(unittest.TestCase):\n    def test_a(self): pass\n"
                       "    def test_b(self): pass\nclass U(T):\n    def test_c(self): pass\nunittest.main()\n")
    assert [t["name"] for t in spec.tests] == ["T.test_a", "T.test_b", "U.test_a", "U.test_b", "U.test_c"]
    assert "unittest.main" not in spec.setup
    spec = parse_tests("import pytest\nCASES = [1, 2]\n@pytest.fixture\ndef test_data():\n    return 1\n"
                       "@pytest.mark.parametrize('x', CASES)\n@pytest.mark.parametrize('y', [1, 2, 3])\n"
                       "def test_xy(x, y): pass\n@pytest.mark.parametrize('z', [1, 2])\n"
                       "@pytest.mark.parametrize('w', [1, 2, 3])\ndef test_zw(z, w): pass\n")
    assert [t["name"] for t in spec.tests] == ["test_xy"] + [f"test_zw[{i}]" for i in range(6)]
    assert "@pytest.fixture" in spec.setup  # decorators stay with what they decorate
    spec = parse_tests("@deco\ndef helper(): pass\nassert helper() is None\n")
    assert spec.setup.startswith("@deco") and len(spec) == 1
    with pytest.raises(ValueError):
        parse_tests([{"input": "1", "output": "1", "testtype": "functional"}])  # no function name
    with pytest.raises(ValueError):
        parse_tests([{"input": "1", "output": "1", "testtype": "functional"}, {"input": "1", "output": "1"}], "f")
    with pytest.raises(ValueError):
        parse_tests({"inputs": ["1"], "outputs": []})
    row = {"public_tests": {"input": ["1\n"], "output": ["1\n"]},
           "private_tests": {"input": ["2\n"], "output": ["2\n"]},
           "generated_tests": {"input": [], "output": []}, "description": "..."}
    assert parse_tests(row).cases == [("1\n", "1\n"), ("2\n", "2\n")]  # a whole CodeContests row
    apps = parse_tests({"input_output": json.dumps(APPS_CALL), "question": "..."})
    assert apps.kind == "call" and len(apps) == 3 and apps.tests[1]["case"] == {
        "fn": "add", "args": [3, 4], "want": 7, "how": "apps"}
    mbpp_row = {"code": "def add(a, b):\n    return a + b", "test_list": ["assert add(1, 1) == 2"],
                "test_setup_code": ""}
    assert [t["code"] for t in parse_tests(mbpp_row).tests] == ["assert add(1, 1) == 2"]  # not the reference code


def test_skips_and_expected_failures(strict):
    tests = ("import unittest\nclass T(unittest.TestCase):\n    @unittest.skip('later')\n    def test_s(self):\n"
             "        pass\n    @unittest.expectedFailure\n    def test_x(self):\n        assert add(1, 1) == 3\n")
    s = strict(ex(tests), ADD)
    assert s.info["passed"] == 1 and "skipped" in s.info["failures"][0]  # a skip verified nothing
    tests = ("import pytest\n@pytest.mark.xfail\ndef test_x():\n    assert add(1, 1) == 3\n"
             "@pytest.mark.skipif(True, reason='r')\ndef test_s():\n    pass\ndef test_ok():\n    pytest.skip('no')\n")
    s = strict(ex(tests), ADD)
    assert s.info["passed"] == 1 and s.info["total"] == 3


def test_unittest_asserts_are_type_strict(bwrap_sandbox, strict):
    tests = ("import unittest\nclass T(unittest.TestCase):\n    def test_a(self):\n"
             "        self.assertEqual(add(1, 2), 3)\n")
    assert strict(ex(tests), "def add(a, b):\n    return float(a + b)\n").reward == 0.0
    lenient = CodeVerifier(CodeParams(strict_types=False), sandbox=bwrap_sandbox)
    assert lenient(ex(tests), "def add(a, b):\n    return float(a + b)\n").reward == 1.0
    counter = "from collections import Counter\nassert count('aab') == Counter(a=2, b=1)\n"  # test-made objects
    assert strict(ex(counter), "from collections import Counter\ndef count(s):\n    return Counter(s)\n").reward == 1.0


def test_exceptions_and_printed_output_reach_the_tests(strict):
    sol = ("class BadInput(ValueError):\n    pass\ndef parse(s):\n    if not s.isdigit():\n"
           "        raise BadInput('not a number: ' + s)\n    print('parsed', s)\n    return int(s)\n")
    tests = ("import pytest\nfrom solution import parse\ndef test_raises():\n"
             "    with pytest.raises(ValueError, match='number') as info:\n        parse('x')\n"
             "    assert str(info.value) == 'not a number: x'\n"
             "def test_prints(capsys):\n    assert parse('12') == 12\n    out, err = capsys.readouterr()\n"
             "    assert out == 'parsed 12\\n' and err == ''\n    assert capsys.readouterr().out == ''\n")
    s = strict(ex(tests), sol)
    assert s.reward == 1.0, s.info
    wrong = sol.replace("print('parsed', s)", "print('parsed', s + ' ')").replace("raise BadInput(", "raise KeyError(")
    s = strict(ex(tests), wrong)
    assert s.reward == 0.0 and len(s.info["failures"]) == 2, s.info


def test_solution_objects_can_be_built_printed_and_walked(strict):
    sol = ("class ListNode:\n    def __init__(self, val=0, next=None):\n        self.val, self.next = val, next\n"
           "class Point:\n    def __init__(self, x, y):\n        self.x, self.y = x, y\n"
           "    def __str__(self):\n        return f'({self.x}, {self.y})'\n"
           "    def __repr__(self):\n        return f'Point({self.x}, {self.y})'\n"
           "def reverse(head):\n    prev = None\n    while head:\n"
           "        head.next, prev, head = prev, head, head.next\n"
           "    return prev\n")
    tests = ("import unittest\nclass T(unittest.TestCase):\n    def test_list(self):\n"
             "        head = ListNode(1)\n        head.next = ListNode(2)\n        head.next.next = ListNode(3)\n"
             "        out, node = [], reverse(head)\n        while node is not None:\n"
             "            out.append(node.val)\n            node = node.next\n"
             "        self.assertEqual(out, [3, 2, 1])\n"
             "    def test_str(self):\n        p = Point(1, 2)\n        self.assertEqual(str(p), '(1, 2)')\n"
             "        self.assertEqual(f'{p}', '(1, 2)')\n        self.assertEqual(repr(p), 'Point(1, 2)')\n"
             "        p.x = 5\n        self.assertEqual(p.x, 5)\n")
    s = strict(ex(tests), sol)
    assert s.reward == 1.0, s.info
    s = strict(ex(tests), sol.replace("return prev", "return head").replace("({self.x}", "[{self.x}"))
    assert s.info["passed"] == 0 and len(s.info["failures"]) == 2, s.info


# ---- the harness's own limits -------------------------------------------------------------------------------
def test_slow_load_has_its_own_budget(bwrap_sandbox):
    v = CodeVerifier(CodeParams(timeout_s=0.5, load_timeout_s=5.0), sandbox=bwrap_sandbox)
    slow = "import time\ntime.sleep(1.5)\n" + ADD  # longer than a test's timeout, within the load budget
    for form in ("unittest", "mbpp"):
        assert v(ex(FORMS[form][0]), slow).reward == 1.0, form
    v = CodeVerifier(CodeParams(timeout_s=0.5, load_timeout_s=0.75), sandbox=bwrap_sandbox)
    s = v(ex(MBPP), slow)
    assert s.reward == 0.0 and "did not load within 0.75s" in s.info["reason"]


def test_big_globals_and_big_results_cross(bwrap_sandbox):
    frac = CodeVerifier(CodeParams(mode="fraction", timeout_s=10.0), sandbox=bwrap_sandbox)
    table = "TABLE = {i: i * i for i in range(10**6)}\nBIG = list(range(10**6))\ndef sq(x):\n    return TABLE[x]\n"
    tests = ["assert sq(1000) == 10**6", "from solution import TABLE\nassert TABLE[12] == 144 and len(TABLE) == 10**6",
             "assert BIG[-1] == 10**6 - 1", "assert SMALL == [1, 2, 3]"]
    s = frac(ex(tests), table + "SMALL = [1, 2, 3]\n")
    assert s.reward == 1.0, s.info
    s = frac(ex(["r = f()\nassert len(r) == 10**6 and r[7] == 7 and type(r) is list"]),
             "def f():\n    return list(range(10**6))\n")
    assert s.reward == 1.0, s.info


def test_run_budget_still_reports_partial_credit(bwrap_sandbox):
    v = CodeVerifier(CodeParams(mode="fraction", timeout_s=1.0, max_wall_s=6.0), sandbox=bwrap_sandbox)
    hangs = "import time\ndef add(a, b):\n    if a >= 2:\n        time.sleep(100)\n    return a + b\n"
    s = v(ex([f"assert add({i}, 0) == {i}" for i in range(10)]), hangs)
    assert s.reward == pytest.approx(0.2), s.info  # the judge reported in time; nothing was rejected
    assert any("time budget" in f for f in s.info["failures"]), s.info


def test_a_timeout_caught_by_unittest_does_not_desynchronise(frac):
    """unittest records any exception, the judge's timeout included; the solution process must still be
    replaced, or the late answer to the timed-out call would answer the next test's call."""
    late = "import time\ndef add(a, b):\n    if (a, b) == (1, 2):\n        time.sleep(2.5)\n    return a + b\n"
    s = frac(ex(UNITTEST), late)
    assert s.info["passed"] == 5 and s.info["failures"] == ["TestAdd.test_pos: timeout"], s.info

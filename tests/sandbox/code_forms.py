"""Shared by the code verifier's form and hostile tests: the same small task (``add``) in every test form
datasets ship, with a correct and a wrong solution for each."""

from __future__ import annotations

import json

from rlvr.core.types import Example

ADD = "def add(a, b):\n    return a + b\n"
SUB = "def add(a, b):\n    return a - b\n"  # right only where b == 0

UNITTEST = '''
import unittest
from solution import add


class Base(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.offset = 0

    def setUp(self):
        self.two = 2

    def test_inherited(self):
        self.assertEqual(add(self.two, 3 + self.offset), 5)


class TestAdd(Base):
    def test_pos(self):
        self.assertEqual(add(1, self.two), 3)

    def test_neg(self):
        self.assertTrue(add(-1, -2) == -3)

    def test_raises(self):
        with self.assertRaises(TypeError):
            add(1, "x")

    def test_sub(self):
        for i in range(1, 4):
            with self.subTest(i=i):
                self.assertEqual(add(i, i), 2 * i)

    def helper(self):
        raise AssertionError("not a test")


unittest.main()
'''

PYTEST = '''
import pytest
from solution import add


MADE = []


@pytest.fixture
def ten():
    MADE.append(10)
    yield 10


STATE = []


@pytest.fixture(autouse=True)
def fresh():
    STATE[:] = ["fresh"]
    yield
    STATE.append("torn down")


def test_autouse():
    assert STATE == ["fresh"] and add(2, 0) == 2


@pytest.mark.parametrize("a,b,c", [(1, 2, 3), (2, 2, 4), pytest.param(-5, 0, -5, id="zero")])
def test_param(a, b, c):
    assert add(a, b) == c


@pytest.fixture
def eleven(ten):
    return ten + 1


def test_fixture(ten, eleven):
    assert add(ten, 1) == eleven and MADE == [10]  # one value per test, shared by what depends on it


def test_approx():
    assert add(0.1, 0.2) == pytest.approx(0.3)
    assert add(0.1, 0.2) != 0.3


def test_raises():
    with pytest.raises(TypeError):
        add(1, "x")


class TestAddClass:
    @classmethod
    def setup_class(cls):
        cls.runs = []

    def setup_method(self):
        self.k = 7

    def test_k(self, tmp_path):
        (tmp_path / "n.txt").write_text("1")
        assert add(self.k, int((tmp_path / "n.txt").read_text())) == 8

    def test_class_state(self):
        self.runs.append(1)
        assert add(0, len(self.runs)) == 1
'''

HUMANEVAL = {"code": "METADATA = {'author': 'x'}\n\n\ndef check(candidate):\n    assert candidate(1, 2) == 3\n"
                     "    assert candidate(0, 5) == 5\n", "entry_point": "add"}
MBPP = {"test_list": ["assert add(1, 2) == 3", "assert math.isclose(add(0.5, 0.25), 0.75)"],
        "test_setup_code": "", "test_imports": ["import math"]}
APPS_CALL = {"fn_name": "add", "inputs": [[1, 2], [3, 4], [5, 0]], "outputs": [[3], 7, [5]]}
LCB_CALL = [{"input": "1\n2", "output": "3", "testtype": "functional"},
            {"input": "[1, 2]\n[3]", "output": "[1, 2, 3]", "testtype": "functional"}]
STDIO_SOL = "a, b = map(int, input().split())\nprint(a + b)\n"
STDIO_WRONG = "a, b = map(int, input().split())\nprint(a - b)\n"
APPS_STDIO = {"inputs": ["1 2\n", "3 4\n"], "outputs": ["3\n", "7\n"]}
CODECONTESTS = {"input": ["1 2\n", "30 4\n"], "output": ["3\n", "34\n"]}
LCB_STDIN = [{"input": "1 2\n", "output": "3\n", "testtype": "stdin"},
             {"input": "5 5\n", "output": "10", "testtype": "stdin"}]
# LeetCode style: typing's names used unimported
LCB_SOL = "class Solution:\n    def add(self, a: Union[int, List[int]], b) -> Any:\n        return a + b\n"

# form name -> (tests, extra meta, correct solution, wrong solution, number of tests)
FORMS = {
    "unittest": (UNITTEST, {}, ADD, SUB, 6),
    "pytest": (PYTEST, {}, ADD, SUB, 9),
    "humaneval": (HUMANEVAL, {}, ADD, SUB, 1),
    "mbpp": (MBPP, {}, ADD, SUB, 2),
    "apps_call": (APPS_CALL, {}, ADD, SUB, 3),
    "lcb_functional": (LCB_CALL, {"metadata": json.dumps({"func_name": "add"})}, LCB_SOL,
                       LCB_SOL.replace("a + b", "b + a"), 2),
    "lcb_functional_plain_fn": (LCB_CALL, {"func_name": "add"}, ADD, SUB, 2),
    "apps_stdio": (APPS_STDIO, {}, STDIO_SOL, STDIO_WRONG, 2),
    "codecontests": (CODECONTESTS, {}, STDIO_SOL, STDIO_WRONG, 2),
    "lcb_stdin": (LCB_STDIN, {}, STDIO_SOL, STDIO_WRONG, 2),
}


def ex(tests, **meta) -> Example:
    return Example("t", "p", "", task="code", meta={"tests": tests, **meta})

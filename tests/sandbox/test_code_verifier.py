"""The code-with-unit-tests verifier: correct code scores 1, wrong code 0, partial credit in fraction mode, and
none of the known reward hacks scores anything."""

from __future__ import annotations

import hashlib
import hmac
import json

import pytest

from rlvr.core.types import Example
from rlvr.verifiers.base import build_verifier
from rlvr.verifiers.code import CodeParams, CodeVerifier, extract_code, parse_tests, read_report

ADD_TESTS = ["assert add(1, 2) == 3", "assert add(-1, 5) == 4", "assert add(20, 22) == 42"]  # no 0, no None
ADD = Example("add", "Write add(a, b).", "def add(a, b):\n    return a + b\n", task="code", meta={"tests": ADD_TESTS})


@pytest.fixture(scope="module")
def verifier(bwrap_sandbox):
    return CodeVerifier(CodeParams(timeout_s=2.0), sandbox=bwrap_sandbox)


@pytest.fixture(scope="module")
def fraction(bwrap_sandbox):
    return CodeVerifier(CodeParams(mode="fraction", timeout_s=2.0), sandbox=bwrap_sandbox)


def test_validate(verifier):
    verifier.validate()


def test_correct_scores_one_wrong_scores_zero(verifier):
    assert verifier(ADD, "Sure:\n```python\ndef add(a, b):\n    return a + b\n```\nDone.").reward == 1.0
    assert verifier(ADD, "```python\ndef add(a, b):\n    return a * b\n```").reward == 0.0


def test_fraction_mode_gives_partial_credit(fraction, verifier):
    half = "def add(a, b):\n    return a + b if a < 20 else 0"  # passes the first two of three
    s = fraction(ADD, half)
    assert s.reward == pytest.approx(2 / 3) and s.components["correct"] == 0.0 and s.info["passed"] == 2
    assert verifier(ADD, half).reward == 0.0


HACKS = {
    "exit_at_import": "import sys\nsys.exit(0)",
    "os_exit_in_call": "import os\ndef add(a, b):\n    os._exit(0)",
    "eq_override": ("class Yes:\n    def __eq__(self, other): return True\n    def __ne__(self, other): return False\n"
                    "def add(a, b):\n    return Yes()"),
    "int_subclass_eq": "class Yes(int):\n    def __eq__(self, other): return True\ndef add(a, b):\n    return Yes(0)",
    "truthy_object": "def add(a, b):\n    return object()",
    "shadow_builtins": "def abs(x): return 0\ndef len(x): return 0\ndef all(x): return True\ndef add(a, b): return 0",
    "patch_unittest_and_builtins": ("import builtins, unittest\nbuiltins.AssertionError = Exception\n"
                                    "unittest.TestCase.assertEqual = lambda *a, **k: None\ndef add(a, b): return 0"),
    "print_fake_results": ("print('3 passed, 0 failed')\nprint('OK ' + 'ab' * 16)\n"
                           "def add(a, b):\n    print('PASSED', 'f' * 64)\n    return None"),
    "kill_the_judge": "import os\ndef add(a, b):\n    os.kill(os.getppid(), 9)",
    "write_result_fd": ("import os\nfor fd in range(3, 20):\n    try: os.write(fd, b'{}\\n')\n"
                        "    except OSError: pass\ndef add(a, b): return 0"),
    "syntax_error": "def add(a, b) return a + b",
    "conftest_and_sitecustomize": ("open('conftest.py', 'w').write('import os; os._exit(0)')\n"
                                   "open('sitecustomize.py', 'w').write('import os; os._exit(0)')\n"
                                   "def add(a, b): return a - b"),
    "exec_shell": "import os\ndef add(a, b):\n    os.execv('/bin/sh', ['sh', '-c', 'exit 0'])",
}


@pytest.mark.parametrize("name", sorted(HACKS))
def test_reward_hacks_score_zero(fraction, name):
    s = fraction(ADD, HACKS[name])
    assert s.reward == 0.0, (name, s.info)


def test_tests_cannot_be_read_by_the_solution(fraction):
    """The expected value appears only in the tests; a solution that searches every file and /proc for it
    (to hard-code it) finds nothing."""
    ex = Example("leak", "p", "", meta={"tests": ["assert add(1, 2) == 987654321987"]})
    snoop = '''
import os, re
def _scan():
    for root in ["/box", "/sbx", "/tmp", "/proc"]:
        for dirpath, dirs, files in os.walk(root):
            if dirpath.startswith("/proc/") and dirpath.count("/") > 3:
                dirs[:] = [d for d in dirs if d == "fd"]
            for f in files:
                try:
                    fd = os.open(os.path.join(dirpath, f), os.O_RDONLY | os.O_NONBLOCK)
                    m = re.search(rb"== (\\d{12})", os.read(fd, 1 << 20))
                    os.close(fd)
                    if m:
                        return int(m.group(1))
                except OSError:
                    pass
    return -1
def add(a, b):
    return _scan()
'''
    assert fraction(ex, snoop).reward == 0.0


def test_early_exit_and_zero_tests_are_failures(verifier):
    assert verifier(Example("none", "p", "", meta={"tests": []}), "def f(): pass").reward == 0.0
    no_tests = verifier(Example("none", "p", "", meta={"tests": "x = 1\n"}), "def f(): pass")
    assert no_tests.reward == 0.0 and "no tests" in no_tests.info["reason"]


def test_timeouts_fail_only_that_test(bwrap_sandbox):
    v = CodeVerifier(CodeParams(mode="fraction", timeout_s=0.5), sandbox=bwrap_sandbox)
    slow = "import time\ndef add(a, b):\n    if a == 1:\n        time.sleep(30)\n    return a + b"
    s = v(ADD, slow)
    assert s.reward == pytest.approx(2 / 3) and "timeout" in s.info["failures"][0]


def test_stdio_tests(fraction):
    ex = Example("io", "sum", "", meta={"tests": {"stdio": [{"input": "1 2\n", "output": "3\n"},
                                                           {"input": "10 -3\n", "output": "7"}]}})
    assert fraction(ex, "a, b = map(int, input().split())\nprint(a + b)   ").reward == 1.0
    assert fraction(ex, "print(3)").reward == 0.5
    assert fraction(ex, "import sys\nprint(3)\nsys.exit(1)").reward == 0.0  # non-zero exit fails the case
    assert fraction(ex, "import os\nos._exit(0)").reward == 0.0
    flood = fraction(ex, "while True:\n    print('3' * 4096)")  # capped by the judge, not buffered whole
    assert flood.reward == 0.0 and flood.info["sandbox"]["wall_s"] < 5


def test_test_formats(verifier):
    sol = ("class Solution:\n    def two_sum(self, nums, t):\n        seen = {}\n        for i, x in enumerate(nums):\n"
           "            if t - x in seen:\n                return [seen[t - x], i]\n            seen[x] = i\n"
           "def gen(n):\n    yield from range(n)\n"
           "def check_pos(x):\n    if x < 0:\n        raise ValueError('negative')\n    return True\n")
    formats = [
        {"code": "def test_two_sum():\n    assert Solution().two_sum([2, 7, 11], 9) == [0, 1]\n"
                 "def test_gen():\n    assert list(gen(3)) == [0, 1, 2]\n"},
        "from solution import check_pos\ntry:\n    check_pos(-1)\n    raised = False\nexcept ValueError:\n"
        "    raised = True\nassert raised\nassert check_pos(3) is True\n",
        {"code": "def check(candidate):\n    assert candidate(5) is True\n", "entry_point": "check_pos"},
        json.dumps({"asserts": ["assert math.isclose(len(list(gen(4))), 4)"], "setup": "import math"}),
    ]
    for tests in formats:
        s = verifier(Example("fmt", "p", "", meta={"tests": tests}), sol)
        assert s.reward == 1.0, (tests, s.info)


def test_type_strict_comparison(bwrap_sandbox, verifier):
    floaty = "def add(a, b):\n    return float(a + b)"
    assert verifier(ADD, floaty).reward == 0.0
    lenient = CodeVerifier(CodeParams(strict_types=False), sandbox=bwrap_sandbox)
    assert lenient(ADD, floaty).reward == 1.0
    one = Example("one", "p", "", meta={"tests": ["assert add(0, 1) == 1", "assert add(2, 2) != 4.0"]})
    boolish = "def add(a, b):\n    return True if a + b == 1 else a + b"
    assert verifier(one, boolish).reward == 0.0  # True is not 1 ...
    assert verifier(one, ADD.answer).reward == 1.0  # ... and 4 is not 4.0
    assert lenient(Example("one", "p", "", meta={"tests": ["assert add(0, 1) == 1"]}), boolish).reward == 1.0


def test_registered_and_works_on_the_fallback(fallback_sandbox):
    v = build_verifier("code", {"mode": "fraction", "timeout_s": 3})
    assert isinstance(v, CodeVerifier) and v.params.mode == "fraction"
    weak = CodeVerifier(sandbox=fallback_sandbox)
    s = weak(ADD, ADD.answer)
    assert s.reward == 1.0 and s.info["sandbox"]["weak"]
    assert weak(ADD, "import sys\nsys.exit(0)").reward == 0.0


def test_extract_code_and_parse_tests():
    text = "```python\nx = 1\n```\nthen\n```py\ndef f():\n    return 2\n```\n```text\nnot code\n```"
    assert extract_code(text) == "def f():\n    return 2\n"
    assert extract_code("```\nprint(1)\n```") == "print(1)\n"
    assert extract_code("def f(): pass") == "def f(): pass"
    spec = parse_tests("import math\nassert f(1) == 1\ny = 2\nassert f(y) == 2\n")
    assert spec.kind == "call" and len(spec) == 2 and "import math" in spec.setup and "y = 2" in spec.setup
    assert parse_tests([{"input": "", "output": "x"}]).kind == "stdio"
    with pytest.raises(ValueError):
        parse_tests(42)


def _line(key: bytes, rec: dict) -> bytes:
    body = json.dumps(rec, sort_keys=True).encode()
    return body + b"\t" + hmac.new(key, body, hashlib.sha256).hexdigest().encode() + b"\n"


def test_report_must_be_authentic_complete_and_in_order():
    key, nonce = b"k" * 32, "n0"
    good = [{"seq": 0, "k": "test", "i": 0, "ok": True}, {"seq": 1, "k": "done", "n": 1, "nonce": nonce}]
    assert read_report(b"".join(_line(key, r) for r in good), key, nonce, 1)[0]["ok"] is True
    forged = _line(b"x" * 32, good[0]) + _line(key, good[1])
    reordered = _line(key, good[1]) + _line(key, good[0])
    no_done = _line(key, good[0])
    wrong_nonce = _line(key, good[0]) + _line(key, {**good[1], "nonce": "other"})
    for bad in (forged, reordered, no_done, wrong_nonce, b"", _line(key, good[0])[:-1]):
        with pytest.raises(Exception):
            read_report(bad, key, nonce, 1)

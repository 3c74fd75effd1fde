"""Hostile solutions in every test form earn nothing: exits, patched unittest or pytest, fake pass markers,
SystemExit / KeyboardInterrupt / SkipTest, redefined ``check`` and harness names, ``__eq__`` overrides, killing
the judge, hanging, fake stdlib modules dropped for the judge to import."""

from __future__ import annotations

import pytest

from rlvr.verifiers.code import CodeParams, CodeVerifier
from tests.sandbox.code_forms import ADD, FORMS, SUB, STDIO_WRONG, ex


@pytest.fixture(scope="module")
def strict(bwrap_sandbox):
    return CodeVerifier(CodeParams(timeout_s=2.0), sandbox=bwrap_sandbox)


HOSTILE = {
    "exit0_at_import": "import sys\nsys.exit(0)\n" + SUB,
    "os_exit_in_call": "import os\ndef add(a, b):\n    os._exit(0)\n",
    "raise_systemexit": "def add(a, b):\n    raise SystemExit(0)\n",
    "raise_keyboardinterrupt": "def add(a, b):\n    raise KeyboardInterrupt\n",
    "raise_skiptest": "import unittest\ndef add(a, b):\n    raise unittest.SkipTest('skip me')\n",
    "patch_unittest": ("import unittest, builtins\nunittest.TestCase.run = lambda self, result=None: None\n"
                       "unittest.TestResult.wasSuccessful = lambda self: True\n"
                       "unittest.TestCase.assertEqual = lambda *a, **k: None\n"
                       "builtins.AssertionError = Exception\n" + SUB),
    "fake_pytest": ("import sys, types\nm = types.ModuleType('pytest')\nm.raises = lambda *a, **k: None\n"
                    "sys.modules['pytest'] = m\n" + SUB),
    "print_pass_markers": ("print('OK')\nprint('Ran 5 tests in 0.001s\\n\\nOK')\nprint('===== 7 passed =====')\n"
                           "def add(a, b):\n    print('.....\\nOK')\n    return None\n"),
    "redefine_check_and_tests": ("def check(candidate):\n    pass\ndef test_pos():\n    pass\n"
                                 "class TestAdd:\n    pass\n"
                                 "__rlvr_unittest__ = __rlvr_pytest__ = __rlvr_case__ = lambda *a: None\n" + SUB),
    "eq_override": ("class Yes(int):\n    def __eq__(self, o): return True\n    def __ne__(self, o): return False\n"
                    "    __hash__ = int.__hash__\ndef add(a, b):\n    return Yes(0)\n"),
    "object_return": "class Yes:\n    def __eq__(self, o): return True\ndef add(a, b):\n    return Yes()\n",
    "kill_judge": "import os, signal\ndef add(a, b):\n    os.kill(os.getppid(), signal.SIGKILL)\n",
    "hang": "import time\ndef add(a, b):\n    time.sleep(60)\n",
}


@pytest.fixture(scope="module")
def quick(bwrap_sandbox):
    return CodeVerifier(CodeParams(mode="fraction", timeout_s=0.5), sandbox=bwrap_sandbox)


_HONEST = {"unittest": 1 / 6, "pytest": 3 / 9, "humaneval": 0.0, "mbpp": 0.0, "apps_call": 1 / 3,
           "lcb_functional": 0.0}  # what SUB earns by itself (b == 0 cases, the TypeError tests)


@pytest.mark.parametrize("form", sorted(_HONEST))
@pytest.mark.parametrize("hack", sorted(HOSTILE))
def test_hostile_solutions_earn_nothing(form, hack, quick):
    tests, meta, *_ = FORMS[form]
    sol = HOSTILE[hack]
    if form == "lcb_functional":  # LiveCodeBench calls Solution().add when there is a Solution class
        sol += "\nclass Solution:\n    def add(self, a, b):\n        return add(a, b)\n"
    s = quick(ex(tests, **meta), sol)
    assert s.reward <= (_HONEST[form] if SUB in sol else 0.0) + 1e-9, (form, hack, s.info)
    assert s.components["correct"] == 0.0 and s.info.get("reason"), (form, hack, s.info)


def test_fake_stdlib_modules_do_not_reach_the_judge(strict):
    """The judge imports unittest, inspect, tempfile... lazily, after the solution ran: fake ones the solution
    drops wherever it can write must not be what it imports."""
    drop = ("import os, sys\nfor d in set([os.getcwd(), '/tmp', '/box', '/sbx'] + sys.path):\n"
            "    for name in ('unittest', 'inspect', 'collections', 'asyncio', 'pathlib', 'tempfile', 'typing',\n"
            "                 'difflib', 'pprint', 'traceback', 'linecache', 'pytest', 'rlvr_sandbox_forms'):\n"
            "        try:\n            with open(os.path.join(d, name + '.py'), 'w') as f:\n"
            "                f.write('import os\\nos._exit(0)\\n')\n        except OSError:\n            pass\n" + ADD)
    for form in ("unittest", "pytest"):
        s = strict(ex(FORMS[form][0]), drop)
        assert s.reward == 1.0, (form, s.info)


def test_entry_point_named_like_a_builtin_tests_the_solution(strict):
    tests = {"code": "def check(candidate):\n    assert candidate([3, 1, 2]) == [1, 2, 3]\n", "entry_point": "sorted"}
    assert strict(ex(tests), "def other():\n    pass\n").reward == 0.0  # not the builtin sorted
    assert strict(ex(tests), "def sorted(xs):\n    return __builtins__.sorted(xs) if False else list(range(1, 4))\n"
                  ).reward == 1.0


STDIO_HOSTILE = {
    "exit0_before_output": "import sys\nsys.exit(0)\n",
    "print_markers": "print('OK')\nprint('All tests passed')\n",
    "raise_systemexit_late": STDIO_WRONG + "raise SystemExit(0)\n",
    "os_exit_after_wrong": "import os\nprint(0)\nos._exit(0)\n",
    "read_nothing_hang": "import time\ntime.sleep(60)\n",
    "flood": "while True:\n    print('3' * 4096)\n",
}


@pytest.mark.parametrize("form", ["apps_stdio", "codecontests", "lcb_stdin"])
@pytest.mark.parametrize("hack", sorted(STDIO_HOSTILE))
def test_hostile_stdio_solutions_earn_nothing(form, hack, quick):
    s = quick(ex(FORMS[form][0]), STDIO_HOSTILE[hack])
    assert s.reward == 0.0 and s.info.get("reason"), (form, hack, s.info)

"""The ``code_feedback`` environment: test forms, candidate programs step by step with their failure
reports, the final reward in both modes, hostile programs ending their turn safely, failures of the
sandbox itself, and a scripted multi-turn rollout through the driver."""

import pytest

from rlvr.core.types import Example, GenerationRequest, SamplingParams
from rlvr.envs import ENVIRONMENTS, MultiTurnWrapper, env_factory
from rlvr.envs.code_env import CodeFeedbackEnv, CodeFeedbackParams, extract_code, parse_feedback_tests
from rlvr.models import char_tokenizer
from rlvr.sandbox import LocalSandbox, SandboxResult
from tests.test_multiturn import Scripted  # a policy that says given texts, one per turn

ADD = ["assert add(1, 2) == 3", "assert add(-1, 1) == 0", "assert add(2, 2) == 4"]


@pytest.fixture(scope="module")
def sandbox():
    sb = LocalSandbox(use_bwrap=None)
    if sb.mode() != "bwrap":
        pytest.skip("bubblewrap is missing or cannot create namespaces here (apt-get install -y bubblewrap)")
    return sb


def _env(sandbox, tests=ADD, meta=None, **kw):
    env = CodeFeedbackEnv(CodeFeedbackParams(**{"timeout_s": 1.0, **kw}), sandbox)
    assert env.reset(Example("c1", "Write add(a, b).", "", meta={"tests": tests, **(meta or {})}), seed=0) == ""
    return env


def _py(code):
    return f"Here you go:\n```python\n{code}\n```"


def test_test_forms_are_read_like_the_code_verifier():
    assert extract_code("```\nA\n```\n```python\nB\n```\n```\nC\n```") == "B\n" and extract_code("x = 1") == "x = 1"
    mbpp = parse_feedback_tests({"test_list": ["assert f(1) == 2"], "test_setup_code": "import math"})
    assert mbpp.kind == "call" and mbpp.setup == "import math" and mbpp.tests[0]["show"] == "assert f(1) == 2"
    he = parse_feedback_tests("def check(candidate):\n    '''doc'''\n    assert candidate(1) == 2\n"
                              "    assert candidate(2) == 4\n", "double")
    assert [t["show"] for t in he.tests] == ["assert candidate(1) == 2", "assert candidate(2) == 4"]
    assert "from solution import double as candidate" in he.setup
    unit = parse_feedback_tests("import unittest\nclass T(unittest.TestCase):\n    def test_a(self): pass\n"
                                "    def test_b(self): pass\nunittest.main()\n")
    assert [t["name"] for t in unit.tests] == ["T.test_a", "T.test_b"] and "unittest.main" not in unit.setup
    py = parse_feedback_tests("import pytest\n@pytest.fixture\ndef x():\n    return 1\ndef test_one(x):\n"
                              "    assert x == 1\nclass TestK:\n    def test_two(self): pass\n")
    assert [t["name"] for t in py.tests] == ["test_one", "TestK.test_two"] and "@pytest.fixture" in py.setup
    top = parse_feedback_tests("import math\nassert math.sqrt(f(4)) == 2\nassert f(0) == 0\n")
    assert len(top) == 2 and "import math" in top.setup and "assert" not in top.setup
    lcb = parse_feedback_tests('[{"input": "[1, 2]\\n3", "output": "[1, 2, 3]", "testtype": "functional"}]', "push")
    assert lcb.tests[0]["case"] == {"fn": "push", "args": [[1, 2], 3], "want": [1, 2, 3], "how": "lcb"}
    apps = parse_feedback_tests({"fn_name": "f", "inputs": [[1], [2]], "outputs": [[2], [4]]})
    assert len(apps) == 2 and apps.tests[1]["case"]["how"] == "apps"
    stdio = parse_feedback_tests({"inputs": ["1 2\n"], "outputs": ["3\n"]})
    assert stdio.kind == "stdio" and stdio.cases == [("1 2\n", "3\n")]
    assert parse_feedback_tests({"stdio": [{"input": "", "output": "x"}], "compare": "tokens"}).compare == "tokens"
    for bad in (42, [{"input": 1, "output": "x"}], {"inputs": [1], "outputs": []}, {"what": 1}):
        with pytest.raises(ValueError):
            parse_feedback_tests(bad)
    with pytest.raises(ValueError, match="no tests"):
        CodeFeedbackEnv(CodeFeedbackParams()).reset(Example("e", "p", "", meta={"tests": []}), 0)


def test_candidates_step_by_step_until_all_tests_pass(sandbox):
    env = _env(sandbox, max_turns=4)
    obs, reward, done, info = env.step(_py("def add(a, b):\n    return a * b"))  # only add(2, 2) holds
    assert (reward, done) == (0.0, False) and info["passed"] == 1 and info["total"] == 3
    assert info["failures"] == ["test 1", "test 2"] and info["reason"].startswith("2 of 3 tests failed")
    assert obs == ("2 of 3 tests failed.\n- test 1: assert add(1, 2) == 3\n  assertion failed: expected 3, got 2\n"
                   "- test 2: assert add(-1, 1) == 0\n  assertion failed: expected 0, got -1")
    obs, reward, done, info = env.step(_py("def add(a, b)\n    return a + b"))
    assert obs == "3 of 3 tests failed. The program failed to load: solution did not load: SyntaxError: " \
                  "expected ':' (solution.py, line 1)" and not done
    obs, reward, done, info = env.step(_py("def add(a, b):\n    return a + b"))
    assert (obs, reward, done) == ("All tests passed.", 1.0, True) and info["pass_fraction"] == 1.0
    assert info["turn"] == 3 and info["sandbox_s"] > 0


def test_the_last_turn_is_scored_all_or_fraction(sandbox):
    half = "def add(a, b):\n    return 0 if a == -1 else a * b"  # passes add(-1, 1) == 0 and add(2, 2) == 4
    for mode, want in (("all", 0.0), ("fraction", 2 / 3)):
        env = _env(sandbox, max_turns=2, reward=mode)
        assert env.step(_py("def add(a, b):\n    return None"))[1:3] == (0.0, False)
        obs, reward, done, info = env.step(_py(half))
        assert done and obs == "" and reward == pytest.approx(want) and info["failures"] == ["test 1"]


def test_stdio_cases_report_expected_and_got(sandbox):
    env = _env(sandbox, tests=[{"input": "1 2\n", "output": "3\n"}, {"input": "5 -7\n", "output": "-2\n"}])
    obs, reward, done, info = env.step("print(3)")  # no fence: the whole turn is the program
    assert info["passed"] == 1 and "- case 2: input '5 -7\\n'\n  expected '-2\\n', got '3\\n'" in obs
    obs, *_ = env.step("import sys\nsys.exit(3)")
    assert "exit status 3" in obs
    assert env.step("print(sum(map(int, input().split())))")[1:3] == (1.0, True)


def test_other_failures_name_the_exception_and_the_test(sandbox):
    env = _env(sandbox, tests="import unittest\nclass T(unittest.TestCase):\n    def test_add(self):\n"
                              "        self.assertEqual(add(2, 3), 5)\n", max_failures_shown=1)
    obs, *_ = env.step(_py("def add(a, b):\n    return a * b"))
    assert obs == "1 of 1 tests failed.\n- T.test_add\n  assertion failed: AssertionError: 6 != 5"
    env = _env(sandbox, max_failures_shown=1)
    obs, *_ = env.step(_py("def add(a, b):\n    return a / 0"))
    assert "ZeroDivisionError: division by zero" in obs and obs.endswith("[... 2 more failures]")


@pytest.mark.parametrize("code, expect", [
    ("def add(a, b):\n    while True:\n        pass", "timeout"),
    ("import os\nwhile True:\n    os.fork()", "The program failed to load"),
    ("print('x' * 10**8)\ndef add(a, b):\n    return a + b", None),
    ("import os\nos._exit(0)", "solution did not load: solution process exited"),
    ("print(open('/work/main/README.md').read())", "FileNotFoundError"),
    ("import socket\nsocket.create_connection(('1.1.1.1', 80), timeout=1)", "OSError"),
    ("def add(a, b):\n    return len(bytearray(8 * 1024**3))", "MemoryError"),
])
def test_hostile_programs_end_their_turn_safely(sandbox, code, expect):
    env = _env(sandbox, max_turns=3, max_observation_chars=600)
    obs, reward, done, info = env.step(_py(code))
    if expect is None:  # its flood went nowhere: the program still loads and passes
        assert (reward, done) == (1.0, True)
        return
    assert expect in obs and (reward, done) == (0.0, False) and info["passed"] == 0 and len(obs) <= 600
    assert env.step(_py("def add(a, b):\n    return a + b"))[1:3] == (1.0, True)  # the episode goes on


class _Fake:
    def __init__(self, res):
        self.res = res

    def run(self, program, limits=None):
        return self.res


def test_sandbox_failures_are_observations_or_end_the_episode():
    stopped = CodeFeedbackEnv(CodeFeedbackParams(), _Fake(SandboxResult(None, b"", b"", killed_reason="memory")))
    stopped.reset(Example("c", "p", "", meta={"tests": ADD}), 0)
    obs, reward, done, info = stopped.step(_py("def add(a, b):\n    return a + b"))
    assert (reward, done) == (0.0, False) and info["passed"] == 0
    assert obs == ("3 of 3 tests failed. no test result: the test run did not finish (no final record); "
                   "the run was stopped (memory)")
    broken = CodeFeedbackEnv(CodeFeedbackParams(), _Fake(SandboxResult(None, b"", b"no uid", killed_reason="setup_failed")))
    broken.reset(Example("c", "p", "", meta={"tests": ADD}), 0)
    obs, reward, done, info = broken.step(_py("def add(a, b):\n    return a + b"))
    assert (reward, done) == (0.0, True) and info["reason"].startswith("sandbox failed to start")
    forged = CodeFeedbackEnv(CodeFeedbackParams(), _Fake(SandboxResult(0, b"", b"", channel=b'{"k": "done"}\tabc\n')))
    forged.reset(Example("c", "p", "", meta={"tests": ADD}), 0)
    assert "bad MAC" in forged.step("x")[0]


def test_a_scripted_episode_through_the_driver():
    assert "code_feedback" in ENVIRONMENTS
    tok = char_tokenizer()
    turns = [_py("def add(a, b):\n    return a * b"), _py("def add(a, b):\n    return a + b")]
    drv = MultiTurnWrapper(Scripted(tok, turns), tok, env_factory("code_feedback", {"timeout_s": 2}), max_turns=4,
                          max_tokens=4000, step_timeout_s=60, max_observation_tokens=4000)
    c = drv.generate([GenerationRequest(Example("c", "add:", "", meta={"tests": ADD}), 1)],
                     SamplingParams(max_new_tokens=200))[0]
    assert c.turns == 2 and c.env_done and c.env_error is None and c.turn_rewards == [0.0, 1.0]
    assert c.env_reward == 1.0 and c.env_info["passed"] == 3
    (obs,) = [tok.decode(c.completion_ids[s.start: s.end]) for s in c.segments if s.source == "inserted"]
    assert obs.startswith("\n<obs>2 of 3 tests failed.") and "expected 3, got 2" in obs
    mask = c.mask()
    for s in c.segments:
        assert set(mask[s.start: s.end]) == ({0.0} if s.source == "inserted" else {1.0})
    assert "<obs>" not in c.text


def test_an_episode_bound_below_the_environments_own_turns_is_a_config_error():
    from rlvr.rollout.multiturn import MultiTurnConfig

    with pytest.raises(Exception, match=r"own max_turns=4, beyond rollout.multiturn.max_turns=2"):
        MultiTurnConfig(env="code_feedback", max_turns=2)
    assert MultiTurnConfig(env="code_feedback", max_turns=2, params={"max_turns": 2}).max_turns == 2
    assert MultiTurnConfig(env="code_feedback", max_turns=6).max_turns == 6

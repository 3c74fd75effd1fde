"""The ``python_tool`` environment: answer extraction and matching, tool calls step by step (state across
calls, tracebacks, malformed calls), hostile code ending its call safely, a scripted multi-turn rollout
through the driver, and a real two-step training run with the environment."""

import json

import pytest

from rlvr.core.types import Example, GenerationRequest, SamplingParams
from rlvr.envs import ENVIRONMENTS, MultiTurnWrapper, env_factory
from rlvr.envs.python_env import PythonToolEnv, PythonToolParams, answers_match, final_answer
from rlvr.models import char_tokenizer
from rlvr.sandbox import LocalSandbox, SandboxResult
from tests.test_multiturn import Scripted  # a policy that says given texts, one per turn


@pytest.fixture(scope="module")
def sandbox():
    sb = LocalSandbox(use_bwrap=None)
    if sb.mode() != "bwrap":
        pytest.skip("bubblewrap is missing or cannot create namespaces here (apt-get install -y bubblewrap)")
    return sb


def _env(sandbox, answer="42", **kw):
    env = PythonToolEnv(PythonToolParams(**kw), sandbox)
    assert env.reset(Example("m1", "What is 6*7?", answer), seed=0) == ""
    return env


def test_final_answers_are_extracted_and_compared_exactly():
    assert final_answer("so \\boxed{\\frac{1}{2}} and later \\boxed{x^{2}}") == "x^{2}"  # last box, braces kept
    assert final_answer("Work...\nAnswer: 17\n") == "17" and final_answer("**Final answer:** 3/4") == "3/4"
    assert final_answer("the answer is 5") is None and final_answer("\\boxed{12") is None  # unclosed box
    for got, gold in [("\\frac{1}{2}", "0.5"), ("$1,234$", "1234"), ("\\dfrac{6}{4}", "3/2"), ("-3.", "-3"),
                      ("x+1", " X + 1"), ("\\left(2\\right)", "2"), ("10\\%", "10\\%")]:
        assert answers_match(got, gold), (got, gold)
    for got, gold in [("0.333", "1/3"), ("2", "3"), ("", ""), ("1/2", "2/1"), ("x", "y")]:
        assert not answers_match(got, gold), (got, gold)


def test_tool_calls_step_by_step(sandbox):
    env = _env(sandbox)
    assert env.stop == ("</python>",)
    obs, reward, done, info = env.step("Let me compute.\n<python>\nx = 6\ndef f(y):\n    return x * y\n</python>")
    assert (obs, reward, done) == ("(no output)", 0.0, False) and info["calls"] == 1
    obs, *_ = env.step("<python>print('f ->', f(7))\nf(7) + 0.5</python>")  # earlier state; last value shown
    assert obs == "f -> 42\n42.5"
    obs, _, done, info = env.step("<python>```python\nimport math\nf(0) / math.prod([])\nz = 1 / (x - 6)\n```</python>")
    assert not done and info["errors"] == 1
    assert obs.startswith("Traceback") and obs.endswith("ZeroDivisionError: division by zero")
    assert '"<call 3>", line 3' in obs and "main.py" not in obs and "cells.json" not in obs  # its frames only
    obs, *_ = env.step("<python>print(z)</python>")  # the failed call left nothing behind
    assert "NameError: name 'z' is not defined" in obs
    obs, reward, done, info = env.step("I think it is about forty.")
    assert not done and reward == 0.0 and "\\boxed" in obs
    obs, reward, done, info = env.step("Therefore \\boxed{42}.")
    assert done and reward == 1.0 and info["answer"] == "42" and info["correct"] and info["calls"] == 4
    wrong = _env(sandbox)
    assert wrong.step("Answer: 41")[1:3] == (0.0, True)


def test_calls_are_stateless_without_persistent(sandbox):
    env = _env(sandbox, persistent=False)
    env.step("<python>x = 1</python>")
    assert "NameError" in env.step("<python>print(x)</python>").observation


def test_malformed_calls_are_observations(sandbox):
    env = _env(sandbox, max_calls=1)
    for action, why in [("<python>print(1)", "between <python> and </python>"),
                        ("print(1)</python>", "between <python> and </python>"),
                        ("<python>\n  \n</python>", "the code is empty")]:
        obs, reward, done, info = env.step(action)
        assert obs.startswith("Malformed tool call") and why in obs and (reward, done) == (0.0, False)
    assert env.step("<python>print(1)</python>").observation == "1"
    obs, _, done, info = env.step("<python>print(2)</python>")
    assert "1 tool calls are spent" in obs and not done and info["malformed"] == 4 and info["calls"] == 1


@pytest.mark.parametrize("code, expect, killed", [
    ("while True:\n    pass", "stopped: the code ran longer than 1 s", "wall_time"),
    ("import os\nwhile True:\n    os.fork()", "stopped|BlockingIOError", None),  # killed, or out of pids first
    ("print('x' * 10**7)", "stopped: the code printed too much output", "output_limit"),
    ("b = bytearray(4 * 1024**3)", "MemoryError", None),
    ("print(open('/work/main/README.md').read())", "FileNotFoundError", None),
    ("import socket\nsocket.create_connection(('1.1.1.1', 80), timeout=1)", "OSError", None),
])
def test_hostile_calls_end_safely_with_a_reason(sandbox, code, expect, killed):
    env = _env(sandbox, timeout_s=1.0, max_output_chars=200)
    obs, reward, done, info = env.step(f"<python>{code}</python>")
    assert any(e in obs for e in expect.split("|")) and (reward, done) == (0.0, False) and info["errors"] == 1
    assert killed is None or info["killed"] == killed
    assert len(obs) < 1200  # cut, however much was printed
    assert env.step("<python>print(6 * 7)</python>").observation == "42"  # the episode goes on


def test_the_sandbox_sees_no_host_files(sandbox):
    env = _env(sandbox)
    obs = env.step("<python>import os\nprint(sorted(os.listdir('/')))\nprint(open('/etc/passwd').read())</python>").observation
    assert "work" not in obs and "root" not in obs.splitlines()[0] and "sandbox:x:65534" in obs


class _Broken:
    def run(self, program, limits=None):
        return SandboxResult(None, b"", b"cannot start the sandbox: no uid", killed_reason="setup_failed")


def test_a_sandbox_that_cannot_start_ends_the_episode():
    env = _env(_Broken())
    obs, reward, done, info = env.step("<python>print(1)</python>")
    assert done and reward == 0.0 and "sandbox failed to start" in info["reason"]


def test_a_scripted_episode_through_the_driver():
    assert "python_tool" in ENVIRONMENTS
    tok = char_tokenizer()
    turns = ["<python>print(sum(range(1, 10)) - 3)</python>", "<python>print(1/0)</python>", "So \\boxed{42}"]
    drv = MultiTurnWrapper(Scripted(tok, turns), tok, env_factory("python_tool", {"timeout_s": 5}), max_turns=5,
                          max_tokens=4000, step_timeout_s=60)
    c = drv.generate([GenerationRequest(Example("m", "6*7=", "42"), 1)], SamplingParams(max_new_tokens=100))[0]
    assert c.turns == 3 and c.env_done and c.env_error is None and c.finish_reason == "stop"
    assert c.turn_rewards == [0.0, 0.0, 1.0] and c.env_reward == 1.0 and c.env_info["correct"]
    inserted = [tok.decode(c.completion_ids[s.start: s.end]) for s in c.segments if s.source == "inserted"]
    assert inserted[0] == "\n<obs>42</obs>\n" and "ZeroDivisionError" in inserted[1] and len(inserted) == 2
    mask = c.mask()
    for s in c.segments:
        assert set(mask[s.start: s.end]) == ({0.0} if s.source == "inserted" else {1.0})
    assert "<obs>" not in c.text and c.text.endswith("\\boxed{42}")  # the policy's own turns only


def test_two_training_steps_with_the_python_tool(tiny_cfg_overrides, tmp_path):
    from rlvr.config.run import load_config
    from rlvr.run.train import train

    cfg = load_config(overrides=tiny_cfg_overrides + [
        "train.steps=2", "sft.steps=0", "train.checkpoint_every=2", "rollout.multiturn.env=python_tool",
        "rollout.multiturn.max_turns=2", "rollout.multiturn.params.timeout_s=2", "rollout.multiturn.reward=sum",
        "rollout.multiturn.max_observation_tokens=32"])
    assert cfg.rollout.multiturn.env == "python_tool"
    train(cfg)
    lines = [json.loads(x) for x in (tmp_path / "run" / "metrics.jsonl").read_text().splitlines()]
    assert [m["step"] for m in lines] == [1, 2]
    for m in lines:
        assert m["engine/env/episodes"] == 16 and m["engine/env/errors"] == 0.0
        assert 1.0 <= m["engine/env/turns_mean"] <= 2.0 and m["reward"] == m["reward"]

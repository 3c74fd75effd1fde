"""Rewards as TRL users write them, and more: a list of reward functions with weights (each one's mean and spread
logged), conversational completions for message prompts, and the step and completion token ids as keywords."""

from __future__ import annotations

import json

import pytest

from rlvr.config.run import ConfigError, load_config
from rlvr.core.types import Example
from rlvr.run.setup import build_task
from tests import reward_fns
from tests.methods.helpers import run_recipe_steps, tiny_overrides


def _data(tmp_path, chat: bool = False):
    path = tmp_path / "d.jsonl"
    rows = [{"prompt": [{"role": "user", "content": f"say {w}"}] if chat else f"say {w}:", "answer": w}
            for w in ["ab", "cd", "ef", "gh"]]
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return path


def test_a_weighted_list_sums_and_names_each_reward(tmp_path):
    cfg = load_config(overrides=["task.name=jsonl", f"task.train_path={_data(tmp_path)}", "task.rewards=["
                                 "{fn: tests.reward_fns:shared_chars, weight: 1.0}, {fn: tests.reward_fns:short, "
                                 "weight: -0.5, name: brevity}, {fn: exact, weight: 2.0}]"])
    task = build_task(cfg)
    ex = Example("x", "say ab:", "ab")
    s = task.score_batch([ex, ex, ex], ["ab", "a", "xyz"])
    # shared_chars: 1, 0.5, 0; brevity (short): 1, 1, 0; exact: 1, 0, 0
    assert [x.reward for x in s] == pytest.approx([1 - 0.5 + 2, 0.5 - 0.5 + 0, 0.0])
    assert s[0].components["shared_chars"] == 1.0 and s[1].components["brevity"] == 1.0
    assert s[1].components["correct"] == 0.0 and s[0].components["correct"] == 1.0  # the first decides correctness


@pytest.fixture
def no_verifier(monkeypatch):
    """The tiny runs' settings without their task.verifier (a list of rewards replaces it)."""
    import tests.methods.helpers as helpers

    monkeypatch.setattr(helpers, "TINY", [x for x in helpers.TINY if not x.startswith("task.verifier=")])


def test_each_reward_is_logged_per_step(tmp_path, no_verifier):
    out = run_recipe_steps("grpo", tmp_path, steps=1, overrides=[
        "task.rewards=[{fn: tests.reward_fns:shared_chars}, {fn: tests.reward_fns:short, weight: 0.1}]"])
    m = out["metrics"][0]
    assert {"reward/shared_chars", "reward/shared_chars/std", "reward/short", "reward/short/std"} <= set(m)
    assert 0.0 <= m["reward/short"] <= 1.0


def test_single_reward_runs_log_no_per_reward_metrics(tmp_path):
    m = run_recipe_steps("grpo", tmp_path, steps=1)["metrics"][0]
    assert not any(k.startswith("reward/") for k in m)


@pytest.mark.parametrize("sets, message", [
    (["task.rewards=[{fn: exact}]", "task.verifier=math"], "not both"),
    (["task.rewards=[{fn: tests.reward_fns:short}, {fn: tests.reward_fns:short}]"], "share a name"),
    (["task.rewards=[{fn: tests.reward_fns:nosuch}]"], "has no attribute 'nosuch'"),
    (["task.rewards=[{fn: nosuchverifier}]"], "nosuchverifier"),
    (["task.rewards=[{fn: math, params: {bogus: 1}}]"], "bogus"),
    (["task.verifier=no_such_module:f"], "no module named 'no_such_module'"),
])
def test_bad_reward_lists_are_config_errors(tmp_path, sets, message):
    with pytest.raises(ConfigError, match=message):
        load_config(overrides=["task.name=jsonl", f"task.train_path={_data(tmp_path)}", *sets])


def test_functions_get_the_step_and_the_completion_token_ids(tmp_path):
    reward_fns.SEEN.clear()
    run_recipe_steps("grpo", tmp_path, steps=2, overrides=["task.verifier=tests.reward_fns:records"])
    calls = [c for c in reward_fns.SEEN if c["step"] is not None]
    assert {c["step"] for c in calls} == {0, 1}  # one number per call: the training step
    first = calls[0]
    assert all(isinstance(c, str) for c in first["completions"])  # text prompts: text completions
    assert all(isinstance(ids, list) and all(isinstance(t, int) for t in ids) for ids in first["completion_ids"])
    assert len(first["completion_ids"]) == len(first["completions"])


def test_message_prompts_get_completions_as_messages():
    """TRL's conversational form: a prompt that is a list of messages gets its completion as
    [{"role": "assistant", "content": text}]; a text prompt in the same batch gets text."""
    from rlvr.verifiers import from_callable

    reward_fns.SEEN.clear()
    v = from_callable(reward_fns.records)
    chat = Example("c", [{"role": "user", "content": "say ab"}], "ab", meta={"step": 3, "completion_ids": [5, 6]})
    plain = Example("p", "say ab:", "ab", meta={"step": 3, "completion_ids": [7]})
    scores = v.score_batch([chat, plain], ["ab", "cd"])
    assert [s.reward for s in scores] == [1.0, 1.0]
    seen = reward_fns.SEEN[-1]
    assert seen["completions"] == [[{"role": "assistant", "content": "ab"}], "cd"]
    assert seen["step"] == 3 and seen["completion_ids"] == [[5, 6], [7]]

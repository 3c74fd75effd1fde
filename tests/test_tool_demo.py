"""The tool-use demo (``rlvr train --recipe tool_demo``): the ``lookup`` environment turn by turn, the task's
verifier agreeing with the environment, SFT targets matching what the driver inserts, a short real run of
the recipe, and (slow) the demo's learning target."""

import json
import math
import time

import pytest

from rlvr.config.run import load_config
from rlvr.core.types import Completion, Example, GenerationRequest, SamplingParams
from rlvr.envs import ENVIRONMENTS, MultiTurnWrapper, env_factory, episode_seed
from rlvr.envs.lookup_env import parse_turn
from rlvr.models import char_tokenizer
from rlvr.tasks import TASKS
from rlvr.tasks.lookup import LookupTaskParams, LookupVerifier, transcript
from rlvr.run.train import train

EX = Example("QX#0", "key QX?\n", "482", task="lookup", meta={"key": "QX", "value": "482"})


def _env(**params):
    env = env_factory("lookup", params)()
    env.reset(EX, seed=0)
    return env


def test_correct_episode_step_by_step():
    env = _env()
    assert env.stop == ("\n",)
    obs, reward, done, info = env.step("get QX\n")
    assert (obs, reward, done) == ("QX=482", 0.0, False) and info["calls"] == 1
    obs, reward, done, info = env.step("482")
    assert (obs, reward, done) == ("", 1.0, True) and info["correct"] and info["answer"] == "482"


def test_malformed_calls_and_wrong_answer():
    env = _env()
    for turn in ("", "hello", "get", "get QX 482", "48 2"):  # not a call, not an answer: the episode goes on
        assert env.step(turn)[:3] == ("error: unknown command", 0.0, False)
    assert env.step("get QY")[:3] == ("error: unknown key QY", 0.0, False)
    obs, reward, done, info = env.step("481\n")
    assert (reward, done, info["correct"]) == (0.0, True, False)
    assert (info["malformed"], info["calls"], info["bad_calls"]) == (5, 1, 1)


def test_value_comes_from_the_episode_seed_without_one_in_the_example():
    bare = Example("e", "key AB?\n", "")
    values = []
    for k in range(20):
        env = env_factory("lookup", {"value_digits": 4})()
        env.reset(bare, episode_seed(7, bare.id, k))
        obs = env.step("get AB")[0]
        assert obs.startswith("AB=") and len(obs) == 7
        values.append(obs[3:])
    assert len(set(values)) > 15  # different episodes, different values
    again = env_factory("lookup", {"value_digits": 4})()
    again.reset(bare, episode_seed(7, bare.id, 3))
    assert again.step("get AB")[0] == f"AB={values[3]}"  # an episode replays exactly
    forced = []
    for s in range(10):  # from_seed ignores the example's value
        env = env_factory("lookup", {"from_seed": True})()
        env.reset(EX, s)
        forced.append(env.step("get QX")[0])
    assert len(set(forced)) > 5


def test_task_splits_hold_out_keys_and_never_fix_a_value_per_prompt():
    task = TASKS.get("lookup").fn(LookupTaskParams())
    train_, eval_, sft = task.examples("train"), task.examples("eval"), task.examples("sft")
    assert len(eval_) == 200 and len(train_) == (26 ** 2 - 200) * 8 == len(sft)
    assert not {e.meta["key"] for e in eval_} & {e.meta["key"] for e in train_}
    by_prompt = {}
    for e in train_:
        by_prompt.setdefault(e.prompt, set()).add(e.answer)
    assert sum(len(v) > 1 for v in by_prompt.values()) > 0.9 * len(by_prompt)  # one prompt, many values
    skipped = sum(parse_turn(e.target)[0] == "answer" for e in sft) / len(sft)
    assert 0.45 < skipped < 0.55  # teacher_skip 0.5: half the targets guess without the tool
    LookupVerifier().validate()


def test_verifier_verdict_is_the_environment_reward():
    """Scripted episodes of every kind: the verifier on the policy's turns (joined as the driver joins them)
    gives exactly the environment's episode reward."""
    scripts = [["get QX\n", "482"], ["get QX\n", "481\n"], ["482"], ["111"], ["get QY\n", "get QX\n", "482"],
               ["hm\n", "get QX 482\n", "482\n"], ["get QX\n", "get QX\n", "get QX\n"], ["get QX4", "4824"],
               ["\n", "", "482"]]
    for turns in scripts:
        env = _env()
        total, used = 0.0, []
        for t in turns[:3]:
            used.append(t)
            _, r, done, _ = env.step(t)
            total += r
            if done:
                break
        assert LookupVerifier()(EX, "\n".join(used)).reward == total, turns


class Teacher:
    """An engine that writes the correct turns: the call, then the value it read in the observation."""

    def __init__(self, tok):
        self.tokenizer = tok

    def generate(self, requests, sampling):
        out = []
        for i, r in enumerate(requests):
            seen = self.tokenizer.decode(list(r.prefix_ids))
            turn = f"get {r.example.meta['key']}\n" if not seen else seen.rstrip("\n").rpartition("=")[2]
            new = self.tokenizer(turn, add_special_tokens=False)["input_ids"]
            if seen:
                new = new + [self.tokenizer.eos_token_id]
            ids = list(r.prefix_ids) + new
            out.append(Completion(r.example.id, [], ids, [0.0] * len(ids), "stop", turn, group=i))
        return out


def test_sft_targets_are_the_episodes_the_driver_builds():
    cfg = load_config(recipe="tool_demo")
    mt = cfg.rollout.multiturn
    assert mt.observation_template == cfg.task.params.observation_template
    tok = char_tokenizer()
    engine = MultiTurnWrapper(Teacher(tok), tok, env_factory(mt.env, mt.params), max_turns=mt.max_turns,
                             max_tokens=mt.max_tokens, turn_tokens=mt.turn_tokens,
                             observation_template=mt.observation_template)
    sft = [e for e in TASKS.get("lookup").fn(cfg.task.params).examples("sft")[:40]
           if parse_turn(e.target)[0] != "answer"]  # the teacher's episodes that call the tool
    comps = engine.generate([GenerationRequest(e, 1) for e in sft], SamplingParams(max_new_tokens=8, seed=0))
    for e, c in zip(sft, comps):
        assert c.transcript == e.target == transcript(e.meta["key"], e.answer)
        assert c.env_reward == 1.0 and c.turns == 2 and len(c) <= mt.max_tokens
        assert [s.source for s in c.segments] == ["sampled", "inserted", "sampled"]


def test_recipe_runs_two_steps_with_multiturn_eval(tmp_path):
    small = ["model.tiny.hidden_size=32", "model.tiny.intermediate_size=64", "model.tiny.num_layers=1",
             "sft.steps=20", "train.steps=2", "train.eval_every=0", "rollout.prompts_per_step=4",
             "rollout.group_size=4", "eval.num_examples=8", "eval.samples=2", f"out={tmp_path / 'run'}"]
    cfg = load_config(recipe="tool_demo", overrides=small)
    assert cfg.rollout.multiturn.env == "lookup" and cfg.algorithm.advantage.name == "turn_grpo"
    summary = train(cfg)
    assert summary["steps"] == 2
    for key in ("eval_before", "eval_after"):
        assert 0.0 <= summary[key]["accuracy"] <= 1.0 and summary[key]["num_examples"] == 8
    metrics = [json.loads(line) for line in (tmp_path / "run" / "metrics.jsonl").read_text().splitlines()]
    steps = [m for m in metrics if "reward" in m]
    assert len(steps) == 2 and all(m["engine/env/episodes"] == 16 for m in steps)
    assert all(math.isfinite(v) for m in steps for v in m.values() if isinstance(v, float))
    ev = json.loads((tmp_path / "run" / "eval" / "step_000000.json").read_text())
    assert len(ev["per_prompt"]) == 8  # evaluation ran episodes and scored them with the task's verifier
    assert "lookup" in ENVIRONMENTS.names()


@pytest.mark.slow
def test_tool_demo_learns(tmp_path):
    t0 = time.perf_counter()
    summary = train(load_config(recipe="tool_demo", overrides=[f"out={tmp_path / 'tool_demo'}"]))
    elapsed = time.perf_counter() - t0
    before, after = summary["eval_before"]["accuracy"], summary["eval_after"]["accuracy"]
    assert after - before >= 0.20, (before, after)
    assert elapsed < 600, elapsed

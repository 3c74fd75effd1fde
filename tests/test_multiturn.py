"""Multi-turn rollouts: the environment contract, the driver over the real hf engine (token in, token
out; episodes of different lengths; behaviour log-probs the trainer reproduces), failures, the issue
tracker as a multi-turn tool environment, and the engine-wrapper / config wiring."""

import json
import time
from types import SimpleNamespace

import pytest
import torch

from rlvr.core.batch import build_batch
from rlvr.core.types import Completion, Example, GenerationRequest, SamplingParams
from rlvr.envs import ENVIRONMENTS, EpisodeCompletion, MultiTurnWrapper, Step, env_factory, env_scores
from rlvr.rollout.multiturn import MultiTurnConfig
from rlvr.envs.render import ObservationRenderer
from rlvr.rollout.multiturn import build_multiturn
from rlvr.models import TinyModelConfig, build_tiny_model, char_tokenizer
from rlvr.models.logprobs import completion_logprobs
from rlvr.engines.hf import HFEngine
from rlvr.verifiers.toolcall import ToolEnvVerifier


@pytest.fixture(scope="module")
def hf():
    tok = char_tokenizer()
    model = build_tiny_model(TinyModelConfig(hidden_size=32, intermediate_size=64, num_layers=1,
                                             max_positions=256), tok, seed=3)
    return HFEngine(model, tok, batch_size=64)


@pytest.fixture(scope="module", params=["hf", "native"])
def engine(request, hf):
    """Each engine the driver runs over: transformers generate, and rlvr's own decoder on the same model."""
    if request.param == "hf":
        return hf
    from rlvr.engines.native import NativeEngine

    return NativeEngine(hf.model, hf.tokenizer, batch_size=64)


class Recorder:
    """An engine that records, for every call, each request's prefix and the ids and log-probs it sampled."""

    def __init__(self, inner):
        self.inner, self.calls = inner, []

    def sync_weights(self):
        self.inner.sync_weights()

    def generate(self, requests, sampling):
        out = self.inner.generate(requests, sampling)
        self.calls.append([(tuple(r.prefix_ids), c.completion_ids[len(r.prefix_ids):], c.logprobs[len(r.prefix_ids):])
                           for r, c in zip(requests, out)])
        return out


class Countdown:
    """Ends after ``meta["steps"]`` steps with reward 1; each observation names the step. Counts instances."""

    made = 0

    def __init__(self):
        Countdown.made += 1
        self.left, self.seed = None, None

    def reset(self, example, seed):
        self.left, self.seed, self.i = example.meta["steps"], seed, 0
        return ""

    def step(self, action):
        self.i += 1
        self.left -= 1
        if self.left == 0:
            return Step("", 1.0, True, {"seed": self.seed})
        return ("step %d" % self.i, 0.25, False, None)  # a plain 4-tuple is accepted too


def _examples(*steps):
    return [Example(f"e{i}", f"{i}+{i}=", str(2 * i), meta={"steps": s}) for i, s in enumerate(steps)]


def _driver(hf, env=Countdown, **kw):
    rec = Recorder(hf)
    return MultiTurnWrapper(rec, hf.tokenizer, env, **kw), rec


def test_token_in_token_out_over_episodes_of_different_lengths(engine):
    hf = engine
    drv, rec = _driver(hf, max_turns=4)
    reqs = [GenerationRequest(ex, 2) for ex in _examples(1, 3, 2)]
    out = drv.generate(reqs, SamplingParams(temperature=1.0, max_new_tokens=4, seed=7))
    assert [c.group for c in out] == [0, 0, 1, 1, 2, 2] and all(isinstance(c, EpisodeCompletion) for c in out)
    assert [c.turns for c in out] == [1, 1, 3, 3, 2, 2] and all(c.env_done and c.finish_reason == "stop" for c in out)
    assert [len(call) for call in rec.calls] == [6, 4, 2]  # finished episodes drop out of later engine calls
    plain = ObservationRenderer(hf.tokenizer)
    retokenised_differs = False
    for row, c in enumerate(out):
        # replay the engine calls that belonged to this episode: each continued exactly the episode so far
        sampled_calls = []
        for t, call in enumerate(rec.calls):
            alive = [k for k, e in enumerate(out) if e.turns > t]  # the episodes in engine call t, in order
            if row not in alive:
                break
            prefix, ids, lps = call[alive.index(row)]
            assert list(prefix) == c.completion_ids[: len(prefix)]
            sampled_calls.append((ids, lps))
        assert len(sampled_calls) == c.turns
        spans = [(s.source, c.completion_ids[s.start: s.end], s) for s in c.segments]
        assert [s.start for s in c.segments] == [0] + [s.end for s in c.segments[:-1]]
        assert c.segments[-1].end == len(c.completion_ids)
        sampled = [ids for src, ids, _ in spans if src == "sampled"]
        assert sampled == [ids for ids, _ in sampled_calls if ids]  # trained tokens == sampled tokens, exactly
        inserted = [ids for src, ids, _ in spans if src == "inserted"]
        assert inserted == [plain.plain(f"step {i}") for i in range(1, c.turns)]  # observations, encoded once
        mask = c.mask()
        for src, _, s in spans:
            assert set(mask[s.start: s.end]) == ({0.0} if src == "inserted" else {1.0})
        lps = iter(lp for _, lp_list in sampled_calls for lp in lp_list)
        for src, ids, s in spans:
            want = [next(lps) for _ in ids] if src == "sampled" else [0.0] * len(ids)
            assert c.logprobs[s.start: s.end] == want
        assert c.transcript == hf.tokenizer.decode(c.completion_ids, skip_special_tokens=True)
        assert c.text == "\n".join(hf.tokenizer.decode(ids, skip_special_tokens=True) for ids in sampled)
        if hf.tokenizer(c.transcript, add_special_tokens=False)["input_ids"] != c.completion_ids:
            retokenised_differs = True  # e.g. a sampled <eos>/<pad>/<unk> mid-episode vanishes from the text
    assert retokenised_differs, "expected some episode whose text does not re-tokenise to its ids"
    assert [c.turn_rewards for c in out[2:4]] == [[0.25, 0.25, 1.0]] * 2 and out[2].env_reward == 1.5
    m = drv.metrics()
    assert m["env/episodes"] == 6 and m["env/errors"] == 0 and m["env/turns_mean"] == pytest.approx(2.0)
    assert m["env/seconds"] >= 0 and drv.metrics() == {}  # reported since the last call


def test_behaviour_logprobs_match_the_trainer_on_sampled_spans(engine):
    hf = engine
    drv, _ = _driver(hf, max_turns=3)
    out = drv.generate([GenerationRequest(ex, 2) for ex in _examples(3, 1)],
                       SamplingParams(temperature=0.8, max_new_tokens=5, seed=2))
    batch = build_batch(out, [0.0] * len(out), hf.tokenizer.pad_token_id)
    with torch.no_grad():
        trainer, _ = completion_logprobs(hf.model, batch, 0.8)
    assert batch.completion_mask.sum() == sum(sum(c.mask()) for c in out)
    for i, c in enumerate(out):
        sampled = [j for s in c.segments if s.source == "sampled" for j in range(s.start, s.end)]
        assert sampled and all(batch.completion_mask[i, j] == 1 for j in sampled)
        got, want = trainer[i, sampled], torch.tensor([c.logprobs[j] for j in sampled])
        assert torch.allclose(got, want, atol=1e-5), (got - want).abs().max()
        inserted = [j for s in c.segments if s.source == "inserted" for j in range(s.start, s.end)]
        assert all(batch.completion_mask[i, j] == 0 for j in inserted)


def test_episodes_are_isolated_and_seeded(hf):
    Countdown.made = 0
    drv, _ = _driver(hf, max_turns=1)
    sp = SamplingParams(max_new_tokens=2, seed=5)
    a = drv.generate([GenerationRequest(_examples(1)[0], 3)], sp)
    assert Countdown.made == 3  # one environment per episode
    seeds = [c.env_info["seed"] for c in a]
    assert len(set(seeds)) == 3
    b = drv.generate([GenerationRequest(_examples(1)[0], 3)], sp)
    assert [c.env_info["seed"] for c in b] == seeds and [c.completion_ids for c in b] == [c.completion_ids for c in a]


class Breaks(Countdown):
    """Raises at step 2 of example ``e1``."""

    def step(self, action):
        if self.i == 1 and self.left == 2:
            raise ValueError("backend went away")
        return super().step(action)


class Hangs(Countdown):
    def step(self, action):
        time.sleep(0.5)
        return super().step(action)


def test_an_environment_that_raises_mid_episode_ends_only_that_episode(hf):
    drv, rec = _driver(hf, env=Breaks, max_turns=4)
    out = drv.generate([GenerationRequest(ex, 1) for ex in _examples(2, 3, 1)],
                       SamplingParams(max_new_tokens=3, seed=1))
    broken = out[1]
    assert broken.env_error == "step 2: ValueError: backend went away" and broken.env_reward == 0.0
    assert broken.turns == 2 and broken.turn_rewards == [0.25] and broken.finish_reason == "length"
    assert [c.env_error for c in (out[0], out[2])] == [None, None] and out[0].env_reward == 1.25
    assert [len(call) for call in rec.calls] == [3, 2]  # the broken episode took no third turn
    assert env_scores(out, [0.9, 0.9, 0.9], "sum", 0.5) == [0.9 + 0.5 * 1.25, 0.0, 0.9 + 0.5]
    assert env_scores(out, [0.9, 0.9, 0.9], "env") == [1.25, 0.0, 1.0]
    m = drv.metrics()
    assert m["env/errors"] == 1 and m["env/episodes"] == 3


def test_a_hung_environment_times_out(hf):
    drv, _ = _driver(hf, env=Hangs, max_turns=2, step_timeout_s=0.05)
    t0 = time.perf_counter()
    out = drv.generate([GenerationRequest(_examples(2)[0], 2)], SamplingParams(max_new_tokens=2, seed=1))
    assert time.perf_counter() - t0 < 0.45
    assert all(c.env_error.startswith("step 1: EnvTimeout") and c.env_reward == 0.0 for c in out)


class NoReset(Countdown):
    def reset(self, example, seed):
        raise OSError("no sandbox")


class Slow(Countdown):
    def step(self, action):
        time.sleep(0.1)
        return super().step(action)


def test_a_failed_reset_gives_an_empty_episode_that_still_batches(hf):
    drv, rec = _driver(hf, env=NoReset)
    out = drv.generate([GenerationRequest(_examples(2)[0], 2)], SamplingParams(max_new_tokens=2, seed=1))
    assert rec.calls == [] and all(c.env_error == "reset: OSError: no sandbox" and c.turns == 0 for c in out)
    assert out[0].prompt_ids == hf.generate([GenerationRequest(_examples(2)[0], 1)], SamplingParams())[0].prompt_ids
    batch = build_batch(out, [0.0, 0.0], hf.tokenizer.pad_token_id)
    assert batch.completion_mask.sum() == 0 and drv.metrics()["env/errors"] == 2


def test_env_workers_run_one_turns_steps_side_by_side(hf):
    drv, _ = _driver(hf, env=Slow, max_turns=1, env_workers=4)
    drv.generate([GenerationRequest(_examples(1)[0], 4)], SamplingParams(max_new_tokens=2, seed=1))
    assert drv.metrics()["env/seconds"] < 0.3  # four 0.1 s steps at once, not one after another


def test_max_tokens_bounds_an_episode_observations_included(hf):
    drv, _ = _driver(hf, max_turns=10, max_tokens=20)
    out = drv.generate([GenerationRequest(_examples(9)[0], 3)], SamplingParams(max_new_tokens=6, seed=4))
    for c in out:
        assert len(c.completion_ids) <= 20 and c.finish_reason == "length" and not c.env_done


def test_chat_observations_close_the_turn_once(hf):
    tok = char_tokenizer()
    tok.chat_template = ("{% for m in messages %}[{{ m.role }}]{{ m.content }}<eos>\n{% endfor %}"
                         "{% if add_generation_prompt %}[assistant]{% endif %}")
    r = ObservationRenderer(tok)
    assert tok.decode(r.chat("hi", last_token=tok.eos_token_id)) == "\n[user]hi<eos>\n[assistant]"
    assert tok.decode(r.chat("hi", last_token=None)) == "<eos>\n[user]hi<eos>\n[assistant]"  # cut turn closed
    engine = HFEngine(hf.model, tok, chat_template=True)  # the same vocabulary, prompts through the template
    drv = MultiTurnWrapper(engine, tok, Countdown, max_turns=3, chat_template=True)
    out = drv.generate([GenerationRequest(ex, 2) for ex in _examples(3)], SamplingParams(max_new_tokens=3, seed=3))
    for c in out:
        assert tok.decode(c.prompt_ids).startswith("[user]0+0=<eos>") and c.turns == 3
        segs = c.segments
        for i, s in enumerate(segs):
            if s.source == "inserted":
                prev = segs[i - 1]
                closed = c.completion_ids[prev.end - 1] == tok.eos_token_id
                assert c.completion_ids[s.start: s.end] == r.chat(f"step {i // 2 + 1}",
                                                                 tok.eos_token_id if closed else None)


# ---- the issue tracker as a multi-turn tool environment --------------------------------------------------

class Scripted:
    """A policy that says the given texts, one per turn (token ids encoded here, as an engine samples them)."""

    def __init__(self, tokenizer, turns):
        self.tok, self.turns, self.t = tokenizer, turns, 0

    def sync_weights(self):
        return None

    def generate(self, requests, sampling):
        out = []
        for i, r in enumerate(requests):
            new = self.tok(self.turns[self.t], add_special_tokens=False)["input_ids"]
            out.append(Completion(r.example.id, [5], list(r.prefix_ids) + new,
                                  list(r.prefix_logprobs) + [-1.0] * len(new), "stop", "", group=i))
        self.t += 1
        return out


def _call(name, **arguments):
    return "<tool_call>" + json.dumps({"name": name, "arguments": arguments}) + "</tool_call>"


def test_issue_tracker_episode_runs_calls_turn_by_turn():
    tok = char_tokenizer()
    seed = {"projects": ["ENG"], "issues": [{"project": "ENG", "summary": "Login fails", "issuetype": "Bug"}]}
    checks = [{"collection": "issues", "where": {"key": "ENG-1", "fields.status.name": "In Progress"}},
              {"collection": "issues",
               "where": {"key": "ENG-1", "fields.comment.comments": {"$contains": {"body": "ok"}}}}]
    ex = Example("t1", "Start ENG-1 and comment ok", "", meta={"initial_state": seed, "checks": checks})
    turns = [_call("jira_get_transitions", issue_key="ENG-1"), "<tool_call>{not json</tool_call>",
             _call("jira_transition_issue", issue_key="ENG-1", transition={"name": "Start Progress"}),
             _call("jira_add_comment", issue_key="ENG-9", body="ok"), "Done: ENG-1 is in progress."]
    drv = MultiTurnWrapper(Scripted(tok, turns), tok, env_factory("issue_tracker"), max_turns=8, max_tokens=4000)
    c = drv.generate([GenerationRequest(ex, 1)], SamplingParams(max_new_tokens=200))[0]
    assert c.turns == 5 and c.env_done and c.env_error is None
    obs = [json.loads(tok.decode(c.completion_ids[s.start: s.end])[len("\n<obs>"): -len("</obs>\n")])
           for s in c.segments if s.source == "inserted"]
    assert obs[0] == [{"ok": True, "result": {"transitions": [{"name": "Start Progress", "to": "In Progress"}]}}]
    assert obs[1][0]["ok"] is False and "malformed" in obs[1][0]["error"]  # an observation, not a crash
    assert obs[2][0]["result"]["status"] == "In Progress"
    assert obs[3] == [{"ok": False, "error": "issue ENG-9 does not exist"}]
    assert c.turn_rewards == [0.0, 0.0, 0.0, 0.0, 0.5] and c.env_reward == 0.5  # one of two checks holds
    assert c.env_info["failed"] == 1 and c.env_info["malformed"] == 1
    # the verifier replaying the policy's text reaches the same state (its malformed call costs 0.1 there)
    assert "<obs>" not in c.text and "<obs>" in c.transcript
    score = ToolEnvVerifier().score(ex, c.text)
    assert score.components["checks"] == 0.5 and score.components["n_malformed"] == 1.0 and score.reward == 0.4


def test_issue_tracker_turns_stop_at_the_end_of_a_call():
    env = env_factory("issue_tracker")()
    assert env.stop == ("</tool_call>",) and env_factory("issue_tracker", {"one_call_per_turn": False})().stop == ()
    env.reset(Example("x", "p", "", meta={}), 0)
    assert env.step('<tool_call>{"name": "jira_get_issue"')[2] is False  # a call cut short is malformed, not final


# ---- registry, config and wrapper wiring ------------------------------------------------------------------

def test_config_section_validates_and_builds_the_wrapper(hf):
    assert "issue_tracker" in ENVIRONMENTS
    with pytest.raises(Exception, match="unknown environment 'nope'"):
        MultiTurnConfig(env="nope")
    with pytest.raises(Exception, match="max_calls_per_turn"):
        MultiTurnConfig(env="issue_tracker", params={"max_calls_per_turn": 0})
    assert build_multiturn(hf, hf.model, hf.tokenizer, SimpleNamespace(multiturn=MultiTurnConfig())) is None
    assert build_multiturn(hf, hf.model, hf.tokenizer, SimpleNamespace()) is None
    w = build_multiturn(hf, hf.model, hf.tokenizer,
                        SimpleNamespace(multiturn=MultiTurnConfig(env="issue_tracker", max_turns=3)))
    assert isinstance(w, MultiTurnWrapper) and w.inner is hf and w.name == "multiturn" and w.max_turns == 3
    assert MultiTurnConfig(max_turns=3, max_observation_tokens=10).completion_bound(8) == 3 * 8 + 2 * 10
    assert MultiTurnConfig(max_tokens=50).completion_bound(8) == 50


def test_a_training_step_through_the_loop_on_episodes(tiny_cfg_overrides, monkeypatch):
    """The driver as the loop's engine: episodes are scored by the task's verifier, batched and trained on,
    and the driver's metrics reach the step's metrics through the engine-wrapper channel."""
    from rlvr.config.run import load_config
    from rlvr.models.loading import load_model
    from rlvr.train.loop import rl_step
    from rlvr.run.train import build_components, build_task

    cfg = load_config(overrides=tiny_cfg_overrides + ["sft.steps=0", "algorithm.minibatches=1"])
    model, tok = load_model(cfg.model, seed=0)
    c = build_components(cfg, model, tok, build_task(cfg))
    steps = {}

    class TwoSteps(Countdown):
        def reset(self, example, seed):
            steps[example.id] = 2
            return super().reset(Example(example.id, example.prompt, example.answer, meta={"steps": 2}), seed)

    drv = MultiTurnWrapper(c.engine, tok, TwoSteps, max_turns=3)
    monkeypatch.setattr(c, "engine", drv)
    before = {k: v.clone() for k, v in model.state_dict().items()}
    m = rl_step(cfg, c, 0)
    assert steps and m["engine/env/turns_mean"] == 2.0 and m["engine/env/errors"] == 0.0
    assert m["completion_length"] > cfg.rollout.max_new_tokens  # two turns and an observation per episode
    assert any(not torch.equal(before[k], v) for k, v in model.state_dict().items()) or m["reward_std"] == 0.0


def test_evaluation_runs_episodes_too_without_touching_the_training_driver(tiny_cfg_overrides, tmp_path):
    """A multi-turn run is evaluated as it is trained (episodes, not single turns), through fresh evaluation
    wrappers: the training driver's metrics count training episodes only."""
    from rlvr.config.run import load_config
    from rlvr.run.train import train

    resets = []

    class TwoSteps(Countdown):
        def reset(self, example, seed):
            resets.append(example.id)
            return super().reset(Example(example.id, example.prompt, example.answer, meta={"steps": 2}), seed)

    ENVIRONMENTS.register("_t_eval_turns")(lambda p: TwoSteps())
    try:
        summary = train(load_config(overrides=tiny_cfg_overrides + [
            "rollout.multiturn.env=_t_eval_turns", "rollout.multiturn.max_turns=2", "rollout.multiturn.max_tokens=40",
            "train.steps=1", "sft.steps=0", "task.num_eval=5", "eval.samples=1", "eval.temperature=0"]))
    finally:
        ENVIRONMENTS.unregister("_t_eval_turns")
    train_episodes = 4 * 4  # prompts_per_step x group_size
    assert len(resets) == train_episodes + 2 * 5  # evaluation before and after: 5 greedy episodes each
    m = json.loads((tmp_path / "run" / "metrics.jsonl").read_text().splitlines()[0])
    assert m["engine/env/episodes"] == train_episodes and m["engine/env/turns_mean"] == 2.0
    assert summary["eval_after"]["mean_length"] > 4  # two turns and an observation, not one 4-token turn


def test_tool_error_rate_counts_steps_whose_info_flags_a_bad_call(hf):
    class Clumsy(Countdown):
        """Its first step of each episode is a bad tool call."""

        def step(self, action):
            out = super().step(action)
            obs, reward, done, info = out if isinstance(out, tuple) else tuple(out)
            return Step(obs, reward, done, {**(info or {}), "tool_error": self.i == 1})

    drv, _ = _driver(hf, Clumsy, max_turns=4)
    drv.generate([GenerationRequest(ex, 2) for ex in _examples(1, 3)], SamplingParams(max_new_tokens=3, seed=0))
    m = drv.metrics()
    # episodes of 1 and 3 steps, two of each: 8 steps, of which the 4 first steps are errors
    assert m["env/tool_error_rate"] == pytest.approx(4 / 8)


class Secret(Countdown):
    """Draws a secret digit at reset that only its info reveals, at the episode's end."""

    def reset(self, example, seed):
        super().reset(Example(example.id, example.prompt, example.answer, meta={"steps": 1}), seed)
        self.secret = str(seed % 10)
        return ""

    def step(self, action):
        out = super().step(action)
        return Step(out.observation, out.reward, out.done, {"secret": self.secret}) if out.done else out


def test_a_verifier_reads_what_only_the_environment_knows(jsonl_cfg_overrides, tmp_path, monkeypatch):
    """Training and evaluation both score an episode against an example whose meta holds the environment's
    last info and reward: a reward function that checks the secret the environment drew sees it."""
    from rlvr.config.run import load_config
    from rlvr.run.train import train

    seen = []

    def reward(prompts, completions, env_info=None, env_reward=None, **kw):
        if env_info is None:  # the pre-run check of the gold answers has no episode behind it
            return [1.0] * len(completions)
        seen.extend((i["secret"], r) for i, r in zip(env_info, env_reward))
        return [float(i["secret"] in c) for c, i in zip(completions, env_info)]

    import tests.reward_fns as fns

    monkeypatch.setattr(fns, "secret_reward", reward, raising=False)
    data = tmp_path / "d.jsonl"
    data.write_text("".join(json.dumps({"prompt": f"q{i}:", "answer": "x"}) + "\n" for i in range(6)))
    ENVIRONMENTS.register("_t_secret")(lambda p: Secret())
    try:
        train(load_config(overrides=jsonl_cfg_overrides + [
            f"task.train_path={data}", "task.eval_fraction=0.34",
            "task.verifier=tests.reward_fns:secret_reward", "rollout.prompts_per_step=2",
            "rollout.multiturn.env=_t_secret", "rollout.multiturn.max_turns=1", "train.steps=1", "sft.steps=0",
            "eval.samples=1"]))
    finally:
        ENVIRONMENTS.unregister("_t_secret")
    train_and_eval = 2 * 4 + 2 * 2  # one step of 2 x 4 episodes; 2 eval prompts, before and after
    assert len(seen) >= train_and_eval and all(s.isdigit() and r == 1.0 for s, r in seen)
    assert len({s for s, _ in seen}) > 1  # the secrets differ by episode seed: read per episode, not shared

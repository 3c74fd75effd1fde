"""ICPO (arXiv:2510.26519): in-context demonstrations for guided rows, the annealed bonus, expert-region rejection
and the mixed-policy objective.

The hand-worked oracles (the linear bonus hits 0 at T; a wrong guided row is never kept; 4 on-policy zeros and
1 kept guided success give every member a non-zero advantage); the shaped loss and its gradient by hand; no
guided row is ppo_clip with the dual clip exactly; the demonstration prompt text, the pool (never the
question's own example, seeded draws, a demonstrations file with bad lines reported, checkpointed state);
the wrapper's guided rows under demonstrations keep the plain prompt; the recipe trains; config errors."""

import json
import math
import random

import pytest
import torch

from rlvr.algorithms.registry import ADVANTAGES, OBJECTIVES, AdvantageInputs, ObjectiveInputs, TransformInputs
from rlvr.algorithms.transforms.icpo import (ICPOBonusParams, RejectGuidedParams, bonus_decay, icpo_bonus,
                                             reject_guided)
from rlvr.config.run import ConfigError, load_config
from rlvr.core.types import Example, GenerationRequest, SamplingParams
from rlvr.models import TinyModelConfig, build_tiny_model, char_tokenizer
from rlvr.engines import HFEngine
from rlvr.models.prompts import encode_prompt
from rlvr.rollout.demos import DemoPool, icl_example, load_demos
from rlvr.rollout.guidance import GuidanceConfig, GuidedCompletion, GuidanceWrapper
from tests.methods.helpers import run_recipe_steps
from tests.methods.seed_support import BINARY

ICPO = OBJECTIVES.get("icpo")
PPO = OBJECTIVES.get("ppo_clip")


def _tinputs(rewards, guided, correct=None, adv=None, step=0, total=10, old_logp=None):
    n = len(rewards)
    mask = torch.ones(n, 3)
    extras = {"guided": torch.tensor(guided, dtype=torch.float32)[:, None] * mask}
    if old_logp is not None:
        extras["old_logp"] = old_logp
    comps = {} if correct is None else {"correct": torch.tensor(correct, dtype=torch.float64)}
    return TransformInputs(torch.tensor(rewards, dtype=torch.float64), torch.zeros(n, dtype=torch.long), mask,
                           advantages=adv, components=comps, extras=extras, step=step, total_steps=total)


# ---- the bonus and the rejection ----------------------------------------------------------------------------

def test_the_linear_bonus_anneals_to_zero_and_goes_to_correct_guided_rows_only():
    p = ICPOBonusParams(beta=0.5, anneal_steps=400)
    assert [bonus_decay(t, p, 10) for t in (0, 100, 400, 600)] == [1.0, 0.75, 0.0, 0.0]
    assert bonus_decay(5, ICPOBonusParams(), 10) == 0.5  # T defaults to train.steps
    cos = ICPOBonusParams(schedule="cosine", anneal_steps=4)
    assert [round(bonus_decay(t, cos, 1), 6) for t in (0, 2, 4, 9)] == [1.0, 0.5, 0.0, 0.0]
    assert bonus_decay(12, ICPOBonusParams(schedule="exp", alpha=12.0), 1) == pytest.approx(math.exp(-1))
    # rows: on-policy correct, guided correct, guided wrong, on-policy wrong
    r, m = icpo_bonus(_tinputs([1.0, 1.0, 0.0, 0.0], [0, 1, 1, 0], step=100, total=400), p)
    assert r.tolist() == [1.0, 1.375, 0.0, 0.0] and m == {"bonus": 0.375, "bonus_rows": 1.0}
    # correctness is the score component when there is one (a partial reward is not "correct")
    r, _ = icpo_bonus(_tinputs([0.9, 0.9], [1, 1], correct=[1.0, 0.0]), ICPOBonusParams(beta=1.0))
    assert r.tolist() == [1.9, 0.9]


def test_a_wrong_guided_row_is_never_kept_and_a_kept_success_lifts_the_group():
    grpo = ADVANTAGES.get("grpo")
    rewards = torch.tensor([0.0, 0.0, 0.0, 0.0, 1.0, 0.0], dtype=torch.float64)
    guided = [0, 0, 0, 0, 1, 1]  # 4 on-policy zeros, a guided success, a guided failure
    adv = grpo.fn(AdvantageInputs(rewards, torch.zeros(6, dtype=torch.long)), grpo.params())
    adv_t = adv[:, None].expand(6, 3).float()
    out, m = reject_guided(_tinputs(rewards.tolist(), guided, adv=adv_t), RejectGuidedParams())
    assert (out[:5] != 0).all() and (out[5] == 0).all() and m == {"rejected_frac": 0.5}
    assert torch.equal(out[:5], adv_t[:5])
    # with a likelihood floor a correct but unlikely guided row goes too
    lp = torch.tensor([[-0.1] * 3] * 4 + [[-5.0] * 3, [-0.1] * 3])
    out, _ = reject_guided(_tinputs(rewards.tolist(), guided, adv=adv_t, old_logp=lp),
                           RejectGuidedParams(min_mean_logp=-2.0))
    assert (out[4:] == 0).all() and (out[:4] != 0).all()


# ---- the objective ----------------------------------------------------------------------------------------------

def _oinputs(logp, old, adv, guided):
    mask = torch.ones_like(old)
    return ObjectiveInputs(logp, old, adv, mask, extras={"guided": guided[:, None] * mask})


def test_guided_rows_take_the_shaped_probability_loss_and_its_gradient():
    logp = torch.tensor([[math.log(0.3)], [math.log(0.05)]], requires_grad=True)
    old = torch.tensor([[-9.0], [-9.0]])  # never read on guided rows
    adv = torch.tensor([[2.0], [-1.0]])
    loss, m = ICPO.fn(_oinputs(logp, old, adv, torch.ones(2)), ICPO.params())
    assert loss.detach()[:, 0].tolist() == pytest.approx([-2.0 * 0.3 / 0.4, 1.0 * 0.05 / 0.15])
    loss.sum().backward()
    # d/dlogp [-A p / (p + g)] = -A g p / (p + g)^2
    assert logp.grad[:, 0].tolist() == pytest.approx([-2.0 * 0.1 * 0.3 / 0.16, 1.0 * 0.1 * 0.05 / 0.0225])
    assert m["shaped_prob"][:, 0].tolist() == pytest.approx([0.75, 1 / 3])


def test_without_guided_rows_it_is_ppo_clip_with_the_dual_clip():
    g = torch.Generator().manual_seed(1)
    old = -torch.rand(5, 4, generator=g)
    logp = (old + 0.5 * torch.randn(5, 4, generator=g)).requires_grad_(True)
    adv = torch.randn(5, 4, generator=g)
    want, _ = PPO.fn(ObjectiveInputs(logp, old, adv, torch.ones_like(old)), PPO.params(dual_clip=3.0))
    got, _ = ICPO.fn(_oinputs(logp, old, adv, torch.zeros(5)), ICPO.params())
    assert torch.equal(got, want)
    mixed, _ = ICPO.fn(_oinputs(logp, old, adv, torch.tensor([0.0, 1, 0, 0, 1])), ICPO.params())
    assert torch.equal(mixed[[0, 2, 3]], want[[0, 2, 3]]) and not torch.allclose(mixed[[1, 4]], want[[1, 4]])


# ---- demonstrations ---------------------------------------------------------------------------------------------

def test_the_demonstration_prompt_text():
    ex = Example("q", "What is 2+3?", "5")
    out = icl_example(ex, [("1+1?", "2"), ("2+2?", "4")], "Question: {prompt}\nAnswer: {target}", "\n\n\n",
                      "Question: {prompt}\nAnswer:")
    assert out.prompt == "Question: 1+1?\nAnswer: 2\n\n\nQuestion: 2+2?\nAnswer: 4\n\n\nQuestion: What is 2+3?\nAnswer:"
    chat = Example("c", [{"role": "system", "content": "be brief"}, {"role": "user", "content": "3*3?"}], "9")
    out = icl_example(chat, [("1+1?", "2")], "Q: {prompt} A: {target}", " | ", "Q: {prompt} A:")
    assert out.prompt == [{"role": "system", "content": "be brief"}, {"role": "user", "content": "Q: 1+1? A: 2 | Q: 3*3? A:"}]
    assert chat.prompt[1]["content"] == "3*3?"  # the example is not changed in place


def test_the_pool_never_offers_the_questions_own_example_and_draws_are_seeded():
    pool = DemoPool(None, pool_size=3)
    exs = [Example(f"e{i}", f"p{i}", f"a{i}", target=None if i % 2 else f"sol{i}") for i in range(5)]
    pool.see(exs[:2] + exs[:1])
    assert [r[0] for r in pool.rows] == ["e0", "e1"] and pool.rows[0][2] == "sol0" and pool.rows[1][2] == "a1"
    for seed in range(20):
        assert pool.draw(1, "e0", random.Random(seed)) == [("p1", "a1")]
    assert pool.draw(5, "e9", random.Random(0)) in ([("p0", "sol0"), ("p1", "a1")], [("p1", "a1"), ("p0", "sol0")])
    pool.see(exs[2:])  # over pool_size: the oldest go
    assert [r[0] for r in pool.rows] == ["e2", "e3", "e4"]
    assert pool.draw(2, "e3", random.Random(7)) == pool.draw(2, "e3", random.Random(7))
    other = DemoPool(None)
    other.load_state_dict(json.loads(json.dumps(pool.state_dict())))
    assert other.rows == pool.rows and other.draw(2, "x", random.Random(1)) == pool.draw(2, "x", random.Random(1))


def test_a_demonstrations_file_is_read_and_bad_lines_are_reported(tmp_path):
    good = tmp_path / "demos.jsonl"
    good.write_text(json.dumps({"prompt": "1+1?", "solution": "2"}) + "\n\n"
                    + json.dumps({"id": "x", "prompt": [{"role": "user", "content": "2+2?"}], "target": "4"}) + "\n")
    assert load_demos(good) == [("demo-1", "1+1?", "2"), ("x", "2+2?", "4")]
    pool = DemoPool(str(good))
    pool.see([Example("new", "p", "a")])  # a fixed file is not extended
    assert len(pool.rows) == 2 and pool.state_dict() == {}
    bad = tmp_path / "bad.jsonl"
    bad.write_text(json.dumps({"prompt": "ok", "answer": 3}) + "\n{nope\n" + json.dumps({"prompt": 5, "answer": "x"})
                   + "\n" + json.dumps({"question": "no prompt"}) + "\n")
    with pytest.raises(ValueError, match=r"line 2: not JSON.*line 3: needs.*line 4: needs"):
        load_demos(bad)
    with pytest.raises(ValueError, match="no such file"):
        load_demos(tmp_path / "missing.jsonl")


def test_guided_rows_are_sampled_under_demonstrations_and_keep_the_plain_prompt():
    tok = char_tokenizer()
    model = build_tiny_model(TinyModelConfig(hidden_size=32, intermediate_size=64, num_layers=1), tok, seed=0)

    class Recording:
        def __init__(self, inner):
            self.inner, self.seen = inner, []

        def sync_weights(self):
            pass

        def generate(self, requests, sampling):
            self.seen += [r.example.prompt for r in requests]
            return self.inner.generate(requests, sampling)

    rec = Recording(HFEngine(model, tok, batch_size=8))
    cfg = GuidanceConfig(fraction=0.25, hint="", demos=1)
    eng = GuidanceWrapper(rec, tok, cfg.fraction, cfg.hint, cfg=cfg)
    reqs = [GenerationRequest(Example("a", "12+3=", "15", target="15."), 4),
            GenerationRequest(Example("b", "7+1=", "8", target="8."), 4)]
    out = eng.generate(reqs, SamplingParams(max_new_tokens=3, seed=0))
    # each request's one guided rollout saw the other example as its demonstration
    assert sorted(p for p in rec.seen if "Question" in p) == [
        "Question: 12+3=\nAnswer: 15.\n\n\nQuestion: 7+1=\nAnswer:",
        "Question: 7+1=\nAnswer: 8.\n\n\nQuestion: 12+3=\nAnswer:"]
    guided = [c for c in out if isinstance(c, GuidedCompletion)]
    assert len(guided) == 2
    for c in out:
        assert c.prompt_ids == encode_prompt(tok, reqs[c.group].example.prompt)
    assert eng.state_dict()["demos"]["rows"] == [["a", "12+3=", "15."], ["b", "7+1=", "8."]]


# ---- the recipe and config errors ------------------------------------------------------------------------------

def test_the_recipe_trains_two_steps(tmp_path):
    out = run_recipe_steps("icpo", tmp_path, overrides=BINARY + ["rollout.group_size=4"])
    for m in out["metrics"]:
        assert all(math.isfinite(v) for v in m.values() if isinstance(v, float)), m
        assert m["engine/guided_frac"] == 0.25 and 0 < m["guided_frac"] < 1
    assert out["metrics"][0]["reward_transform/icpo_bonus/bonus"] == 1.0
    assert out["metrics"][1]["reward_transform/icpo_bonus/bonus"] == 0.5
    assert any(not torch.equal(out["before"][k], out["after"][k]) for k in out["before"])


@pytest.mark.parametrize("bad, match", [
    (["algorithm.correction.name=tis"], "use correction none with icpo"),
    (["rollout.guidance.demos=-1"], "demos"),
])
def test_bad_settings_are_config_errors(bad, match):
    with pytest.raises(ConfigError, match=match):
        load_config(recipe="icpo", overrides=bad)

"""OC-GRPO (docs/methods.md, `oc_grpo`; RECONSTRUCTED): guided rollouts and the off-context ratio.

A hand-worked oracle; no guided row (an empty hint) == GRPO's ppo_clip; unguided rows never read the behaviour
log-probs; the guidance wrapper keeps the hint-free prompt while the behaviour log-probs are the guided context's;
two real recipe steps.
"""

import math
from dataclasses import replace

import pytest
import torch

from rlvr.algorithms.registry import OBJECTIVES, ObjectiveInputs
from rlvr.config.run import ConfigError, load_config
from rlvr.core.batch import build_batch
from rlvr.core.types import Example, GenerationRequest, SamplingParams
from rlvr.models import TinyModelConfig, build_tiny_model, char_tokenizer, completion_logprobs
from rlvr.engines import HFEngine
from rlvr.models.prompts import encode_prompt
from rlvr.rollout.guidance import GuidedCompletion, GuidanceWrapper, guided_count, guided_rows
from tests.methods.helpers import run_recipe_steps
from tests.methods.seed_support import BINARY

OC = OBJECTIVES.get("oc_grpo")
PPO = OBJECTIVES.get("ppo_clip")
REQS = [GenerationRequest(Example("a", "12+3=", "15"), 4), GenerationRequest(Example("b", "7+100=", "107"), 3)]


def inputs(logp, old, behaviour, adv, guided):
    mask = torch.ones_like(old)
    return ObjectiveInputs(logp, old, adv, mask, behaviour_logp=behaviour,
                           extras={"guided": guided[:, None] * mask})


def test_oracle_c12_off_context_ratio_and_clipping():
    logp = torch.full((2, 1), -2.0, requires_grad=True)
    old = torch.full((2, 1), -1.9)  # unused on guided rows
    adv = torch.tensor([[-1.0], [1.0]])
    loss, m = OC.fn(inputs(logp, old, torch.full((2, 1), -0.5), adv, torch.ones(2)), OC.params())
    assert math.isclose(float(m["ratio"][0, 0]), math.exp(-1.5), rel_tol=1e-6)
    assert math.isclose(math.exp(-1.5), 0.22313, rel_tol=1e-4)
    assert math.isclose(float(loss.detach()[0, 0]), 0.8, rel_tol=1e-6)  # A < 0: clipped at 1 - eps, constant
    assert math.isclose(float(loss.detach()[1, 0]), -math.exp(-1.5), rel_tol=1e-6)  # A > 0: inside, gradient flows
    loss.sum().backward()
    assert logp.grad[0, 0] == 0.0 and math.isclose(float(logp.grad[1, 0]), -math.exp(-1.5), rel_tol=1e-6)


def test_no_guided_row_is_ppo_clip_and_unguided_rows_ignore_behaviour():
    g = torch.Generator().manual_seed(0)
    old = -torch.rand(6, 5, generator=g)
    logp = (old + 0.3 * torch.randn(6, 5, generator=g)).requires_grad_(True)
    adv = torch.randn(6, 5, generator=g)
    behaviour = old - 2.0 * torch.rand(6, 5, generator=g)
    want, _ = PPO.fn(ObjectiveInputs(logp, old, adv, torch.ones_like(old)), PPO.params())
    got, _ = OC.fn(inputs(logp, old, behaviour, adv, torch.zeros(6)), OC.params())
    assert torch.equal(got, want)
    guided = torch.tensor([1.0, 0, 0, 1, 0, 0])
    mixed, _ = OC.fn(inputs(logp, old, behaviour, adv, guided), OC.params())
    assert torch.equal(mixed[guided == 0], want[guided == 0])
    assert not torch.allclose(mixed[guided == 1], want[guided == 1])
    same, _ = OC.fn(inputs(logp, old, old.clone(), adv, guided), OC.params())  # h empty: rho~ == rho
    assert torch.equal(same, want)
    with pytest.raises(ValueError, match="no behaviour log-probs"):
        OC.fn(inputs(logp, old, None, adv, guided), OC.params())


@pytest.fixture(scope="module")
def tiny():
    tok = char_tokenizer()
    model = build_tiny_model(TinyModelConfig(hidden_size=32, intermediate_size=64, num_layers=1), tok, seed=0)
    return HFEngine(model, tok, batch_size=4), tok


def test_empty_hint_gives_the_plain_engines_completions(tiny):
    engine, tok = tiny
    sampling = SamplingParams(max_new_tokens=5, seed=3)
    plain = engine.generate(REQS, sampling)
    guided = GuidanceWrapper(engine, tok, 0.5, "").generate(REQS, sampling)
    assert [c.completion_ids for c in guided] == [c.completion_ids for c in plain]
    assert [c.logprobs for c in guided] == [c.logprobs for c in plain]
    assert [c.group for c in guided] == [c.group for c in plain]
    assert sum(isinstance(c, GuidedCompletion) for c in guided) == guided_count(4, 0.5) + guided_count(3, 0.5)


def test_guided_rows_keep_the_plain_prompt_and_the_guided_behaviour_logprobs(tiny):
    engine, tok = tiny
    wrapper = GuidanceWrapper(engine, tok, 0.5, " ans {answer};")
    out = wrapper.generate(REQS, SamplingParams(max_new_tokens=5, seed=4))
    assert [c.group for c in out] == [0] * 4 + [1] * 3
    flags = [isinstance(c, GuidedCompletion) for c in out]
    assert flags == [False, False, True, True, False, True, True]  # round(0.5 * 4) = 2, round(0.5 * 3) = 2
    for c, req in zip(out, [REQS[0]] * 4 + [REQS[1]] * 3):
        assert c.prompt_ids == encode_prompt(tok, req.example.prompt)
    guided = [c for c in out if isinstance(c, GuidedCompletion)]
    hinted = [replace(c, prompt_ids=encode_prompt(tok, f"{REQS[c.group].example.prompt} ans {REQS[c.group].example.answer};"))
              for c in guided]
    with torch.no_grad():
        under_hint, _ = completion_logprobs(engine.model, build_batch(hinted, [0.0] * len(hinted), tok.pad_token_id))
        plain_batch = build_batch(guided, [0.0] * len(guided), tok.pad_token_id)
        under_plain, _ = completion_logprobs(engine.model, plain_batch)
    m = plain_batch.completion_mask > 0
    assert torch.allclose(plain_batch.behaviour_logp[m], under_hint[m], atol=1e-4)
    assert (plain_batch.behaviour_logp[m] - under_plain[m]).abs().max() > 1e-3
    rows = guided_rows([replace(c, group=9) for c in out], torch.ones(7, 2))  # the flag survives replace()
    assert rows[:, 0].tolist() == [float(f) for f in flags]
    assert wrapper.metrics() == {"guided_frac": 4 / 7} and wrapper.metrics() == {}


def test_engine_correction_is_rejected():
    with pytest.raises(ConfigError, match="use correction none with oc_grpo"):
        load_config(recipe="oc_grpo", overrides=["algorithm.correction.name=tis"])


def test_recipe_trains_two_steps(tmp_path):
    out = run_recipe_steps("oc_grpo", tmp_path, overrides=BINARY)
    for m in out["metrics"]:
        assert all(math.isfinite(v) for v in m.values() if isinstance(v, float)), m
        assert m["engine/guided_frac"] == 0.25 and 0 < m["guided_frac"] < 1
    assert any(not torch.equal(out["before"][k], out["after"][k]) for k in out["before"])

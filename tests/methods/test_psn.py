"""PSN-RLVR (arXiv:2602.02555): parameter-space noise on rollouts, truncated IS, and the RECONSTRUCTED noise scheduler.

A hand-worked TIS oracle; bit-exact weight restore; behaviour log-probs taken under the perturbed weights (what TIS
divides by); the scheduler's multiplicative rule by hand; evaluation never perturbed; two real recipe steps; an
uninterrupted-vs-resumed run with identical weights and noise state.
"""

import json
import math

import pytest
import torch

from rlvr.algorithms.registry import CORRECTIONS, CorrectionInputs
from rlvr.config.run import load_config
from rlvr.rollout.param_noise import ParamNoiseConfig
from rlvr.core.batch import build_batch
from rlvr.core.types import Example, GenerationRequest, SamplingParams
from rlvr.models import TinyModelConfig, build_tiny_model, char_tokenizer, completion_logprobs
from rlvr.engines import HFEngine
from rlvr.rollout.param_noise import NoiseSchedule, ParamNoiseWrapper, perturbed
from rlvr.rollout.wrappers import base_engine, wrap_engine
from tests.methods.helpers import run_recipe_steps
from tests.methods.seed_support import BINARY, train_and_resume

REQS = [GenerationRequest(Example("a", "12+3=", "15"), 3), GenerationRequest(Example("b", "7+100=", "107"), 3)]


@pytest.fixture(scope="module")
def tiny():
    tok = char_tokenizer()
    return build_tiny_model(TinyModelConfig(hidden_size=32, intermediate_size=64, num_layers=1), tok, seed=0), tok


def weights(model):
    return {k: v.detach().clone() for k, v in model.state_dict().items()}


def test_tis_oracle_c13_truncates_at_two_and_is_detached():
    old = torch.log(torch.tensor([[0.5, 1.5, 3.0]])).requires_grad_(True)
    inp = CorrectionInputs(old, torch.zeros(1, 3), torch.ones(1, 3))
    w, _ = CORRECTIONS.get("tis").fn(inp, CORRECTIONS.get("tis").params(cap=2.0))
    assert torch.allclose(w, torch.tensor([[0.5, 1.5, 2.0]]), atol=1e-6)
    assert not w.requires_grad


def test_perturbation_is_seeded_and_restore_is_bit_exact(tiny):
    model, _ = tiny
    before = weights(model)
    with perturbed(model, 0.01, seed=5):
        inside = weights(model)
    assert all(torch.equal(before[k], v) for k, v in weights(model).items())
    assert all(not torch.equal(before[k], inside[k]) for k in before if before[k].is_floating_point())
    with perturbed(model, 0.01, seed=5):
        again = weights(model)
    assert all(torch.equal(inside[k], again[k]) for k in inside)
    with pytest.raises(RuntimeError):
        with perturbed(model, 0.01, seed=6):
            raise RuntimeError("generation failed")
    assert all(torch.equal(before[k], v) for k, v in weights(model).items())


def test_behaviour_logprobs_are_the_perturbed_policys(tiny):
    model, tok = tiny
    cfg = ParamNoiseConfig(sigma=0.05)
    eng = ParamNoiseWrapper(HFEngine(model, tok), model, cfg)
    sampling = SamplingParams(temperature=1.0, max_new_tokens=5, seed=11)
    before = weights(model)
    out = eng.generate(REQS, sampling)
    assert all(torch.equal(before[k], v) for k, v in weights(model).items())
    batch = build_batch(out, [0.0] * len(out), tok.pad_token_id)
    seed = (11 * 2_654_435_761 + 97) % (2**31 - 1)
    with torch.no_grad():
        clean, _ = completion_logprobs(model, batch)
        with perturbed(model, 0.05, seed):
            noisy, _ = completion_logprobs(model, batch)
    m = batch.completion_mask > 0
    assert torch.allclose(batch.behaviour_logp[m], noisy[m], atol=1e-4)
    assert (batch.behaviour_logp[m] - clean[m]).abs().max() > 1e-3  # the noise did change the policy


def test_scheduler_rule_by_hand():
    cfg = ParamNoiseConfig(sigma=0.01, adaptive=True, diversity_target=0.75, certainty_floor=0.5, factor=2.0,
                           sigma_min=0.004, sigma_max=0.03)
    s = NoiseSchedule(cfg)
    steps = [(0.5, 0.9, 0.02), (0.5, 0.9, 0.03), (1.0, 0.9, 0.015), (0.5, 0.1, 0.0075), (None, 0.2, 0.004),
             (None, None, 0.008)]
    for d, c, want in steps:
        s.observe(d, c)
        assert math.isclose(s.sigma, want, rel_tol=1e-12), (d, c, s.sigma)
    fixed = NoiseSchedule(ParamNoiseConfig(sigma=0.01))
    fixed.observe(0.1, 0.9)
    assert fixed.sigma == 0.01 and fixed.calls == 1
    restored = NoiseSchedule(cfg)
    restored.load_state_dict(json.loads(json.dumps(s.state_dict())))
    assert restored.state_dict() == s.state_dict()


def test_evaluation_uses_the_unwrapped_engine(tiny):
    model, tok = tiny
    cfg = load_config(recipe="psn_rlvr")
    plain = HFEngine(model, tok)
    wrapped = wrap_engine(plain, model, tok, cfg.rollout)
    assert isinstance(wrapped, ParamNoiseWrapper) and base_engine(wrapped) is plain
    other = build_tiny_model(TinyModelConfig(hidden_size=32, intermediate_size=64, num_layers=1), tok, seed=1)
    with pytest.raises(ValueError, match="param_noise perturbs the trainer's module"):
        wrap_engine(HFEngine(other, tok), model, tok, cfg.rollout)


def test_recipe_trains_two_steps(tmp_path):
    out = run_recipe_steps("psn_rlvr", tmp_path, overrides=BINARY)
    for m in out["metrics"]:
        assert all(math.isfinite(v) for v in m.values() if isinstance(v, float)), m
        assert m["engine/param_noise/sigma"] > 0 and "is/trunc_frac" in m and "is/ratio" in m
        assert 1e-6 < m["logp_mismatch"]  # the engine sampled from theta~, the trainer scores theta
    assert out["c"].engine.schedule.calls == 2
    assert any(not torch.equal(out["before"][k], out["after"][k]) for k in out["before"])


@pytest.mark.slow
def test_resume_matches_uninterrupted(tmp_path):
    # a scheduler that moves every call, so a lost state would change sigma and hence the rollouts
    out = train_and_resume("psn_rlvr", tmp_path, ["rollout.param_noise.factor=1.5"])
    a, b = out["weights"]
    assert all(torch.equal(a[k], b[k]) for k in a)
    states = [json.loads((tmp_path / run / "checkpoints" / "step_000004" / "state.json").read_text())["engine"]
              for run in ("run", "part")]
    assert states[0] == states[1] and states[0]["param_noise"]["calls"] == 4
    assert states[0]["param_noise"]["sigma"] != 0.001

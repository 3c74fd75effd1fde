"""OSFT (arXiv:2510.18814): the exact expected gradient pi - q on a categorical policy, the objective through
the update against a hand-written -mean logp, ``algorithm.train_temperature``, and the recipe's steps."""

from dataclasses import replace

import pytest
import torch

from rlvr.algorithms.objectives.osft import OSFTParams, osft
from rlvr.algorithms.registry import ObjectiveInputs
from rlvr.config.run import ConfigError, load_config
from rlvr.core.batch import build_batch
from rlvr.core.types import Completion
from rlvr.models import TinyModelConfig, build_tiny_model, char_tokenizer
from rlvr.models.logprobs import completion_logprobs
from rlvr.train.loop import settings
from rlvr.train.update import update_policy

from tests.methods.helpers import run_recipe_steps
from tests.methods.seed_support import BINARY

Z = torch.tensor([2.0, 1.0, 0.0], dtype=torch.float64)


def expected_grad(z: torch.Tensor, tau_s: float, tau_t: float = 1.0) -> torch.Tensor:
    """E_{y ~ softmax(z / tau_s)}[d osft(y) / dz], exactly: every token enumerated through the objective."""
    q = torch.softmax(z / tau_s, -1)
    total = torch.zeros_like(z)
    for y in range(z.numel()):
        zz = z.clone().requires_grad_(True)
        logp = torch.log_softmax(zz / tau_t, -1)[y].reshape(1, 1)
        inp = ObjectiveInputs(logp, logp.detach(), torch.randn(1, 1, dtype=z.dtype), torch.ones(1, 1, dtype=z.dtype))
        loss, _ = osft(inp, OSFTParams())
        (g,) = torch.autograd.grad(loss.sum(), zz)
        total += q[y] * g
    return total


def test_oracle_expected_gradient_is_pi_minus_q():
    pi, q = torch.softmax(Z, -1), torch.softmax(Z / 0.6, -1)
    assert torch.allclose(pi, torch.tensor([0.6652, 0.2447, 0.0900], dtype=torch.float64), atol=1e-4)
    assert torch.allclose(q, torch.tensor([0.8166, 0.1542, 0.0291], dtype=torch.float64), atol=1e-4)
    g = expected_grad(Z, 0.6)
    assert torch.allclose(g, pi - q, atol=1e-12)
    stepped = torch.softmax(Z - 0.5 * g, -1)  # one exact-expectation descent step sharpens toward q
    assert stepped[0] > pi[0] and stepped[2] < pi[2]
    assert torch.allclose(expected_grad(Z, 1.0), torch.zeros(3, dtype=torch.float64), atol=1e-12)


def test_loss_is_minus_logp_and_ignores_advantages():
    g = torch.Generator().manual_seed(0)
    logp = -torch.rand(3, 5, generator=g)
    mask = torch.ones(3, 5)
    a, _ = osft(ObjectiveInputs(logp, logp, torch.randn(3, 5, generator=g), mask), OSFTParams())
    b, m = osft(ObjectiveInputs(logp, logp + 1, torch.zeros(3, 5), mask), OSFTParams())
    assert torch.equal(a, -logp) and torch.equal(a, b) and torch.equal(m["nll"], -logp)


def _setup():
    tok = char_tokenizer()
    model = build_tiny_model(TinyModelConfig(hidden_size=32, intermediate_size=64, num_layers=1), tok, seed=0)
    g = torch.Generator().manual_seed(0)
    comps = []
    for i in range(8):
        p = torch.randint(3, 60, (int(torch.randint(2, 6, (1,), generator=g)),), generator=g).tolist()
        c = torch.randint(3, 60, (int(torch.randint(1, 7, (1,), generator=g)),), generator=g).tolist()
        comps.append(Completion(str(i), p, c, None, "stop", "", i))
    batch = build_batch(comps, [1, 0, 0, 1, 0, 0, 0, 1], tok.pad_token_id)
    return model, replace(batch, advantages=torch.randn(8, generator=g)[:, None] * batch.completion_mask)


def _update_grads(overrides):
    model, batch = _setup()
    cfg = load_config(overrides=["algorithm.objective.name=osft", "algorithm.minibatches=1", "rollout.group_size=1",
                                 "optim.max_grad_norm=null", "train.micro_batch_size=3", *overrides])
    opt = torch.optim.SGD(model.parameters(), lr=0.0)
    update_policy(model, opt, torch.optim.lr_scheduler.LambdaLR(opt, lambda i: 1.0), batch, settings(cfg))
    return model, batch, [p.grad.clone() for p in model.parameters()]


def _hand_grads(model, batch, temperature):
    model.zero_grad()
    logp, _ = completion_logprobs(model, batch, temperature)
    m = batch.completion_mask
    (-(logp * m).sum() / m.sum()).backward()
    return [p.grad.clone() for p in model.parameters()]


@pytest.mark.parametrize("over,tau", [([], 1.0), (["rollout.temperature=0.6"], 0.6),
                                      (["rollout.temperature=0.6", "algorithm.train_temperature=1.0"], 1.0)])
def test_update_equals_minus_mean_logp_at_the_train_temperature(over, tau):
    model, batch, grads = _update_grads(over)
    for a, b in zip(grads, _hand_grads(model, batch, tau)):
        assert torch.allclose(a, b, atol=1e-6)
    if over:  # the other temperature gives another gradient: the temperature is really the one used
        other = _hand_grads(model, batch, 1.6 - tau)
        assert any(not torch.allclose(a, b, atol=1e-4) for a, b in zip(grads, other))


def test_train_temperature_defaults_to_the_rollout_temperature():
    for t in (0.3, 1.0, 1.7):
        cfg = load_config(overrides=[f"rollout.temperature={t}"])
        assert cfg.algorithm.train_temperature is None and settings(cfg).temperature == t
    cfg = load_config(overrides=["rollout.temperature=0.6", "algorithm.train_temperature=1.3"])
    assert settings(cfg, 0.0, 3).temperature == 1.3
    for bad in ("0", "-1"):
        with pytest.raises(ConfigError, match="train_temperature"):
            load_config(overrides=[f"algorithm.train_temperature={bad}"])


def test_recipe_values():
    cfg = load_config(recipe="osft")
    assert cfg.rollout.group_size == 1 and cfg.rollout.temperature == 0.6
    assert cfg.algorithm.train_temperature == 1.0 and settings(cfg).temperature == 1.0
    assert cfg.algorithm.objective.name == "osft" and cfg.algorithm.aggregation.name == "token_mean"
    assert cfg.algorithm.kl.coef == 0.0
    from rlvr.run.preflight import check_group_size

    assert check_group_size(cfg).startswith("warning")  # groups of one run (a warning, not a refusal)


@pytest.mark.parametrize("tau_t,gap", [(0.6, False), (1.0, True)])
def test_logp_mismatch_reflects_the_temperature_gap(tmp_path, tau_t, gap):
    """The engine's log-probs are at tau_s, the trainer's at tau_t: the metric shows the gap (by design)."""
    out = run_recipe_steps("osft", tmp_path, steps=1, overrides=BINARY + [
        "rollout.group_size=1", "algorithm.minibatches=1", f"algorithm.train_temperature={tau_t}"])
    m = out["metrics"][0]
    assert (m["logp_mismatch"] > 1e-2) if gap else (m["logp_mismatch"] < 1e-4), m["logp_mismatch"]
    assert m["grad_norm"] > 0 and m["nll"] > 0

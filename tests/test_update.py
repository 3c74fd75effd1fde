"""The update step: micro-batch invariance, when old/reference log-probs are computed, KL in the loss."""

from dataclasses import replace

import pytest
import torch

import rlvr.train.loop as loop_mod
import rlvr.models.logprobs as logprobs_mod
from rlvr.config.run import load_config
from rlvr.core.batch import build_batch
from rlvr.core.types import Completion
from rlvr.models import TinyModelConfig, build_tiny_model, char_tokenizer
from rlvr.train.loop import settings
from rlvr.train.update import update_policy


def _setup(seed=0):
    tok = char_tokenizer()
    model = build_tiny_model(TinyModelConfig(hidden_size=32, intermediate_size=64, num_layers=1), tok, seed=seed)
    g = torch.Generator().manual_seed(seed)
    comps = []
    for i in range(8):
        p = torch.randint(3, 60, (int(torch.randint(2, 6, (1,), generator=g)),), generator=g).tolist()
        c = torch.randint(3, 60, (int(torch.randint(1, 7, (1,), generator=g)),), generator=g).tolist()
        comps.append(Completion(str(i // 4), p, c, None, "stop", "", i // 4))
    batch = build_batch(comps, [1, 0, 0, 1, 0, 0, 0, 1], tok.pad_token_id)
    adv = torch.randn(8, generator=g)[:, None] * batch.completion_mask
    return model, tok, replace(batch, advantages=adv)


def _grads_after_update(micro, **over):
    model, _, batch = _setup()
    cfg = load_config(overrides=[f"train.micro_batch_size={micro}", "optim.max_grad_norm=null",
                                 "algorithm.minibatches=1"] +
                      [f"{k}={v}" for k, v in over.items()])
    batch = _with_extras(batch, OBJECTIVES.get(cfg.algorithm.objective.name).needs)
    opt = torch.optim.SGD(model.parameters(), lr=0.0)
    sched = torch.optim.lr_scheduler.LambdaLR(opt, lambda i: 1.0)
    update_policy(model, opt, sched, batch, settings(cfg))
    return [p.grad.clone() for p in model.parameters()]


def _with_extras(batch, needs):
    """The extra tensors an objective reads, attached as the loop would (fixed values stand in for passes)."""
    g = torch.Generator().manual_seed(1)
    mask = batch.completion_mask
    if "ref_logp" in needs:
        batch = replace(batch, ref_logp=-4 * torch.rand(mask.shape, generator=g) * mask)
    if "segment_end" in needs:  # a sub-sentence ends every third token
        batch = replace(batch, extras={**batch.extras, "segment_end": (torch.arange(mask.shape[1]) % 3 == 2) * mask})
    return batch


from rlvr.algorithms import AGGREGATIONS, OBJECTIVES


@pytest.mark.parametrize("agg", AGGREGATIONS.names())
@pytest.mark.parametrize("obj", OBJECTIVES.names())
def test_one_batch_of_8_equals_two_of_4(agg, obj):
    """Gradient accumulation invariance for every registered aggregation x objective pair."""
    over = {"algorithm.aggregation.name": agg, "algorithm.objective.name": obj}
    a = _grads_after_update(8, **over)
    b = _grads_after_update(4, **over)
    c = _grads_after_update(3, **over)
    assert any(float(x.abs().max()) > 0 for x in a)  # a real gradient, so the comparison means something
    for x, y, z in zip(a, b, c):
        assert torch.allclose(x, y, atol=1e-6) and torch.allclose(x, z, atol=1e-6)


def test_on_policy_gradient_is_reinforce():
    """mu = 1: ratio is 1, so the gradient equals -sum(A * grad logp) / num_tokens."""
    from rlvr.models.logprobs import completion_logprobs

    model, _, batch = _setup()
    grads = _grads_after_update(8)
    model.zero_grad()
    logp, _ = completion_logprobs(model, batch)
    (-(batch.advantages * logp * batch.completion_mask).sum() / batch.completion_mask.sum()).backward()
    for g, p in zip(grads, model.parameters()):
        assert torch.allclose(g, p.grad, atol=1e-6)


@pytest.mark.parametrize("over,old_calls", [(["algorithm.minibatches=1"], 0),
                                            (["algorithm.minibatches=1", "algorithm.epochs=2"], 1),
                                            (["algorithm.minibatches=2"], 1)])
def test_old_logprobs_only_when_needed(tiny_cfg_overrides, monkeypatch, over, old_calls):
    calls = []
    real = logprobs_mod.batch_logprobs  # what the step's producer of old log-probs calls
    monkeypatch.setattr(logprobs_mod, "batch_logprobs", lambda m, b, **s: calls.append(1) or real(m, b, **s))
    from rlvr.run.train import train
    train(load_config(overrides=tiny_cfg_overrides + ["train.steps=1", "sft.steps=0"] + over))
    assert len(calls) == old_calls


def test_kl_loads_reference_and_enters_the_loss(jsonl_cfg_overrides, tmp_path):
    from rlvr.run.train import train
    summary = train(load_config(overrides=jsonl_cfg_overrides + ["algorithm.kl.coef=0.1"]))
    assert (tmp_path / "run" / "reference" / "model.safetensors").is_file()
    assert summary["final_metrics"]["kl"] > 0


def test_kl_term_gradient_matches_naive():
    """loss = token_mean(ppo + coef * k3): the update's gradient equals the hand-written one."""
    from rlvr.algorithms.kl import k3
    from rlvr.models.logprobs import completion_logprobs

    model, _, batch = _setup()
    ref = torch.randn_like(batch.completion_mask) * 0.1 - 3.0
    batch = replace(batch, ref_logp=ref * batch.completion_mask)
    cfg = load_config(overrides=["optim.max_grad_norm=null", "algorithm.kl.coef=0.5", "algorithm.minibatches=1"])
    opt = torch.optim.SGD(model.parameters(), lr=0.0)
    sched = torch.optim.lr_scheduler.LambdaLR(opt, lambda i: 1.0)
    metrics = update_policy(model, opt, sched, batch, settings(cfg))
    got = [p.grad.clone() for p in model.parameters()]
    model.zero_grad()
    logp, _ = completion_logprobs(model, batch)
    m = batch.completion_mask
    d = batch.ref_logp - logp
    ratio = torch.exp(logp - logp.detach())  # 1, with the gradient of logp
    naive = (-batch.advantages * ratio + 0.5 * (d.exp() - 1 - d)) * m
    (naive.sum() / m.sum()).backward()
    for g, p in zip(got, model.parameters()):
        assert torch.allclose(g, p.grad, atol=1e-6)
    assert metrics["kl"] == pytest.approx(float((k3(logp.detach(), batch.ref_logp) * m).sum() / m.sum()), rel=1e-5)

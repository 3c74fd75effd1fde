"""Memory and precision controls of the update: micro-batches by a token budget, activation checkpointing,
autocast. The first two must not change the gradient; autocast changes rounding only."""

from dataclasses import replace

import pytest
import torch

from rlvr.algorithms import AGGREGATIONS
from rlvr.config.run import load_config
from rlvr.core.batch import build_batch
from rlvr.core.types import Completion
from rlvr.models import TinyModelConfig, build_tiny_model, char_tokenizer
from rlvr.train.loop import settings
from rlvr.models.logprobs import batch_logprobs, pass_args
from rlvr.train.update import update_policy


def _batch(n=12, seed=0):
    tok = char_tokenizer()
    g = torch.Generator().manual_seed(seed)
    comps = []
    for i in range(n):  # lengths vary a lot, so a token budget packs rows very unevenly
        p = torch.randint(3, 60, (int(torch.randint(2, 9, (1,), generator=g)),), generator=g).tolist()
        c = torch.randint(3, 60, (int(torch.randint(1, 15, (1,), generator=g)),), generator=g).tolist()
        comps.append(Completion(str(i // 4), p, c, None, "stop", "", i // 4))
    batch = build_batch(comps, [float(i % 3 == 0) for i in range(n)], tok.pad_token_id)
    adv = torch.randn(n, generator=g)[:, None] * batch.completion_mask
    return tok, replace(batch, advantages=adv)


def _grads(*over):
    tok, batch = _batch()
    model = build_tiny_model(TinyModelConfig(hidden_size=32, intermediate_size=64, num_layers=2), tok, seed=0)
    cfg = load_config(overrides=["optim.max_grad_norm=null", *over])
    opt = torch.optim.SGD(model.parameters(), lr=0.0)
    saved = []  # tensors autograd keeps for backward: what activation checkpointing cuts

    def pack(t):
        saved.append(t.numel())
        return t

    with torch.autograd.graph.saved_tensors_hooks(pack, lambda t: t):
        metrics = update_policy(model, opt, torch.optim.lr_scheduler.LambdaLR(opt, lambda i: 1.0), batch,
                                settings(cfg))
    return [p.grad.clone() for p in model.parameters()], {**metrics, "saved_numel": sum(saved)}


def _plan(batch, size, whole, tokens):
    return [r.tolist() for r in batch.micro_batch_rows(size, whole, tokens)]


@pytest.mark.parametrize("whole", [False, True])
def test_token_budget_plan_covers_every_row_once_within_the_budget(whole):
    _, batch = _batch(n=16, seed=3)
    prompt = batch.attention_mask[:, : batch.prompt_len].sum(1)
    for budget in (1, 20, 37, 64, 500):
        plan = _plan(batch, 6, whole, budget)
        assert sorted(i for rows in plan for i in rows) == list(range(16))  # every row once
        assert [i for rows in plan for i in rows] == list(range(16))  # consecutive (groups are consecutive here)
        for rows in plan:
            idx = torch.tensor(rows)
            cost = len(rows) * int(prompt[idx].max() + batch.lengths[idx].max())
            groups = batch.group_index[idx].unique()
            single = len(rows) == 1 or (whole and len(groups) == 1)
            assert len(rows) <= 6 or (whole and len(groups) == 1)
            assert cost <= budget or single  # over the budget only when one row (one group) alone is
            if whole:  # groups never split
                for g in groups:
                    assert set(torch.nonzero(batch.group_index == g).flatten().tolist()) <= set(rows)
            trimmed = batch.select(idx).trim()
            assert trimmed.input_ids.shape[1] * len(rows) == cost  # the cost is the trimmed micro-batch's size
    assert len(_plan(batch, 6, whole, 10**6)) == len(_plan(batch, 6, whole, None))  # no budget: rows only


@pytest.mark.parametrize("agg", AGGREGATIONS.names())
def test_token_budget_leaves_the_gradient_unchanged(agg):
    ref, _ = _grads(f"algorithm.aggregation.name={agg}", "train.micro_batch_size=64")
    for budget in (30, 90):
        got, _ = _grads(f"algorithm.aggregation.name={agg}", "train.micro_batch_size=64",
                        f"train.micro_batch_tokens={budget}")
        assert any(float(g.abs().max()) > 0 for g in ref)
        for a, b in zip(ref, got):
            assert torch.allclose(a, b, atol=1e-6)


def test_activation_checkpointing_leaves_the_gradient_unchanged():
    ref, m_ref = _grads("train.micro_batch_size=5")
    got, m_got = _grads("train.micro_batch_size=5", "train.activation_checkpointing=true")
    for a, b in zip(ref, got):
        assert torch.allclose(a, b, atol=1e-6)
    assert m_ref["loss"] == pytest.approx(m_got["loss"], abs=1e-6)
    assert m_got["saved_numel"] < 0.5 * m_ref["saved_numel"]  # layer activations recomputed, not stored


def test_bfloat16_autocast_rounds_but_keeps_float32_weights():
    ref, m_ref = _grads("train.micro_batch_size=5")
    got, m_got = _grads("train.micro_batch_size=5", "train.autocast=bfloat16")
    assert all(g.dtype == torch.float32 for g in got)  # fp32 master weights and gradients
    num = sum(float((a - b).norm() ** 2) for a, b in zip(ref, got)) ** 0.5
    den = sum(float(a.norm() ** 2) for a in ref) ** 0.5
    assert 0 < num / den < 0.05  # bf16 rounding: close to the fp32 gradient, not equal to it
    assert m_got["loss"] == pytest.approx(m_ref["loss"], rel=0.05, abs=1e-3)


def test_autocast_old_logprobs_match_the_update_forward():
    """Old log-probs under autocast come from the same precision as the update's, so the first ratio is 1."""
    tok, batch = _batch()
    model = build_tiny_model(TinyModelConfig(hidden_size=32, intermediate_size=64, num_layers=2), tok, seed=0)
    s = settings(load_config(overrides=["train.autocast=bfloat16", "train.micro_batch_tokens=60"]))
    a = batch_logprobs(model, batch, **pass_args(s))
    b = batch_logprobs(model, batch, **pass_args(replace(s, micro_batch_tokens=None, micro_batch_size=64)))
    fp32 = batch_logprobs(model, batch, **pass_args(replace(s, autocast=None)))
    mask = batch.completion_mask.bool()
    assert float((a - fp32)[mask].abs().max()) > 1e-4  # autocast really ran
    assert float((a - b)[mask].abs().max()) < 2e-2  # the split changes bf16 rounding only

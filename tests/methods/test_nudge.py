"""NudgeRL (arXiv:2605.15726): the context rollouts' draws and bookkeeping, the inter/intra-context advantage (a
hand-worked oracle), the distillation term over the plain prompts (golden values and the update's gradient against
a hand-written loss), config checks, and a run of the recipe."""

import random
from collections import Counter
from dataclasses import replace

import pytest
import torch

from rlvr.algorithms.advantages.nudge import NudgeParams, nudge
from rlvr.algorithms.loss_terms.base import LossTermParams
from rlvr.algorithms.loss_terms.context_distill import context_distill
from rlvr.algorithms.registry import AdvantageInputs, ObjectiveInputs
from rlvr.config.run import ConfigError, load_config
from rlvr.core.batch import build_batch
from rlvr.core.types import Completion, Example, GenerationRequest, SamplingParams
from rlvr.models import TinyModelConfig, build_tiny_model, char_tokenizer
from rlvr.models.logprobs import completion_logprobs
from rlvr.rollout.contexts import (ContextCompletion, ContextsWrapper, ContextsConfig, context_rows, draw_counts,
                                   plain_context_of, with_plain_context)
from rlvr.train.loop import settings
from rlvr.train.update import update_policy


def _adv(rewards, contexts, groups=None, **p):
    n = len(rewards)
    ctx = torch.tensor(contexts, dtype=torch.float32)[:, None].expand(n, 3).contiguous()
    inp = AdvantageInputs(torch.tensor(rewards, dtype=torch.float64),
                          torch.tensor(groups or [0] * n), mask=torch.ones(n, 3), extras={"context_index": ctx})
    return nudge(inp, NudgeParams(**p))


def test_the_methods_oracle():
    """dropout [1, 0], hint 1 [1, 1, 0], hint 2 [0, 0, 0], lambda 1.1."""
    a = _adv([1, 0, 1, 1, 0, 0, 0, 0], [0, 0, 1, 1, 1, 2, 2, 2], lam=1.1)
    raw = torch.tensor([0.625, -0.375, 0.65417, 0.65417, -0.34583, -0.4125, -0.4125, -0.4125], dtype=torch.float64)
    want = (raw - raw.mean()) / (raw.std(unbiased=False) + 1e-5)
    assert torch.allclose(a, want, atol=1e-4)
    assert a.tolist() == pytest.approx([1.2509, -0.7406, 1.3090, 1.3090, -0.6825, -0.8153, -0.8153, -0.8153], abs=2e-4)


def test_without_contexts_and_lambda_1_it_is_the_standardised_group_mean_baseline():
    r = [1.0, 0.0, 0.0, 1.0, 1.0, 0.5]
    a = _adv(r, [0] * 6, groups=[0, 0, 0, 1, 1, 1], lam=1.0)
    for rows in ([0, 1, 2], [3, 4, 5]):
        x = torch.tensor([r[i] for i in rows], dtype=torch.float64)
        want = (x - x.mean()) / (x.std(unbiased=False) + 1e-5)
        assert torch.allclose(a[rows], want)
    # lambda = 1 with contexts: (r - m_c) + (m_c - m) = r - m as well
    b = _adv([1, 0, 1, 1], [1, 1, 2, 2], lam=1.0)
    x = torch.tensor([1.0, 0.0, 1.0, 1.0], dtype=torch.float64)
    assert torch.allclose(b, (x - x.mean()) / (x.std(unbiased=False) + 1e-5))
    assert _adv([1, 1, 1, 1], [0, 1, 1, 2]).abs().max() == 0  # a constant problem has no signal


def test_draw_counts_follow_the_binomial():
    assert draw_counts(2, 4, 0.0, random.Random(0)) == [0, 4, 4]
    assert draw_counts(2, 4, 1.0, random.Random(0)) == [8, 0, 0]
    rng = random.Random(1)
    trials = [draw_counts(1, 4, 0.25, rng) for _ in range(4000)]
    assert all(sum(t) == 4 for t in trials)
    seen = Counter(t[0] for t in trials)  # dropped ~ Binomial(4, 0.25): 0.316, 0.422, 0.211, 0.047, 0.004
    expected = [0.31640625, 0.421875, 0.2109375, 0.046875, 0.00390625]
    chi2 = sum((seen[k] - 4000 * p) ** 2 / (4000 * p) for k, p in enumerate(expected))
    assert chi2 < 18.5  # 4 degrees of freedom, p = 0.001


class Recording:
    """Returns one completion per requested sample, its text the prompt it was asked with."""

    def __init__(self, tok):
        self.tok, self.requests = tok, []

    def sync_weights(self):
        pass

    def generate(self, requests, sampling):
        self.requests.append(list(requests))
        out = []
        for j, r in enumerate(requests):
            ids = self.tok.encode(r.example.prompt, add_special_tokens=False)
            for _ in range(r.n):
                out.append(Completion(r.example.id, ids, [5, 6], [-1.0, -1.0], "stop", "ok", group=j))
        return out


def test_the_engine_samples_under_each_context_and_keeps_both_prompts():
    tok = char_tokenizer()
    cfg = ContextsConfig(num_contexts=2, per_context=4, p_dropout=0.5, fallback=["guess"], template="{prompt}|{context}")
    inner = Recording(tok)
    eng = ContextsWrapper(inner, tok, cfg)
    reqs = [GenerationRequest(Example("a", "Q1", "1", meta={"hints": ["alg", "draw", "spare"]}), 8),
            GenerationRequest(Example("b", "Q2", "2"), 8)]
    out = eng.generate(reqs, SamplingParams(seed=3))
    assert [sum(c.group == g for c in out) for g in (0, 1)] == [8, 8]
    prompts = {r.example.prompt for r in inner.requests[0]}
    assert prompts <= {"Q1", "Q1|alg", "Q1|draw", "Q2", "Q2|guess"}  # the third hint is beyond num_contexts
    for c in out:
        if isinstance(c, ContextCompletion):
            hint = {1: "alg", 2: "draw"}[c.context] if c.example_id == "a" else "guess"
            base = "Q1" if c.example_id == "a" else "Q2"
            assert c.prompt_ids == tok.encode(f"{base}|{hint}", add_special_tokens=False)
            assert c.plain_prompt_ids == tok.encode(base, add_special_tokens=False)
        else:
            assert getattr(c, "context", 0) == 0
    assert max(getattr(c, "context", 0) for c in out if c.example_id == "b") <= 1  # one fallback context
    again = ContextsWrapper(Recording(tok), tok, cfg).generate(reqs, SamplingParams(seed=3))
    assert [getattr(c, "context", 0) for c in again] == [getattr(c, "context", 0) for c in out]  # seeded
    draws = {tuple(getattr(c, "context", 0) for c in ContextsWrapper(Recording(tok), tok, cfg).generate(
        reqs, SamplingParams(seed=s))) for s in range(12)}
    assert len(draws) > 1  # the draws change with the step's seed
    assert 0 < eng.metrics()["context_frac"] < 1
    mask = torch.ones(len(out), 2)
    rows = context_rows(out, mask)
    assert rows[:, 0].tolist() == [float(getattr(c, "context", 0)) for c in out]


def _batch():
    tok = char_tokenizer()
    plain = [tok.encode(p, add_special_tokens=False) for p in ("3+4=", "1+1=")]
    hinted = [tok.encode(p, add_special_tokens=False) for p in ("3+4= think", "1+1= count up")]
    comps = [ContextCompletion("a", hinted[0], [10, 11, 12], None, "stop", "", 0, context=1,
                               plain_prompt_ids=plain[0]),
             Completion("a", plain[0], [13, 14], None, "stop", "", 0),
             ContextCompletion("b", hinted[1], [15], None, "stop", "", 1, context=2, plain_prompt_ids=plain[1]),
             Completion("b", plain[1], [16, 17, 18], None, "stop", "", 1)]
    batch = build_batch(comps, [1.0, 0.0, 1.0, 0.0], tok.pad_token_id)
    batch = with_plain_context(batch, comps, tok.pad_token_id)
    adv = torch.tensor([[0.8], [-0.6], [1.5], [-0.4]]) * batch.completion_mask
    extras = {"context_index": context_rows(comps, batch.completion_mask)}
    return tok, comps, replace(batch, advantages=adv, extras=extras)


def test_the_plain_context_batch_holds_the_same_completions_after_the_plain_prompts():
    tok, comps, batch = _batch()
    ctx = plain_context_of(batch)
    assert torch.equal(ctx.completion_mask, batch.completion_mask)
    assert torch.equal(ctx.completion_ids * ctx.completion_mask.long(), batch.completion_ids * batch.completion_mask.long())
    sub = batch.select(torch.tensor([0, 2])).trim()
    assert plain_context_of(sub).size == 2 and torch.equal(plain_context_of(sub).completion_mask, sub.completion_mask)
    assert plain_context_of(with_plain_context(build_batch(comps[1:2], [0.0], 0), comps[1:2], 0)) is None


def test_context_distill_golden_values():
    mask = torch.tensor([[1.0, 1.0, 0.0], [1.0, 1.0, 1.0]])
    plain = torch.tensor([[-2.0, -1.0, -9.0], [-1.0, -1.0, -1.0]], requires_grad=True)
    adv = torch.tensor([[0.5], [2.0]]) * mask
    x = ObjectiveInputs(plain.detach(), plain.detach(), adv, mask,
                        extras={"context_logp": plain, "context_index": torch.tensor([[1.0, 1, 0], [0, 0, 0]])})
    loss, m = context_distill(x, LossTermParams())
    assert loss.detach().tolist() == [[0.5, 0.25, 0.0], [0.0, 0.0, 0.0]]  # -A logp / |y| on the context row only
    loss.sum().backward()
    assert plain.grad.tolist() == [[-0.25, -0.25, 0.0], [0.0, 0.0, 0.0]]


def test_update_gradient_equals_the_hand_written_loss():
    """token_mean(-A logp(y | x1) + 0.1 * (-A logp(y | x0) / |y|) on context rows), at ratio 1."""
    tok, comps, batch = _batch()
    model = build_tiny_model(TinyModelConfig(hidden_size=32, intermediate_size=64, num_layers=1), tok, seed=1)
    cfg = load_config(overrides=["train.micro_batch_size=4", "algorithm.minibatches=1", "optim.max_grad_norm=null",
                                 "algorithm.loss_terms=[{name: context_distill, weight: 0.1}]"])
    opt = torch.optim.SGD(model.parameters(), lr=0.0)
    sched = torch.optim.lr_scheduler.LambdaLR(opt, lambda i: 1.0)
    metrics = update_policy(model, opt, sched, batch, settings(cfg))
    got = [p.grad.clone() for p in model.parameters()]
    model.zero_grad()
    mask, adv = batch.completion_mask, batch.advantages
    lp1, _ = completion_logprobs(model, batch)
    lp0, _ = completion_logprobs(model, plain_context_of(batch))
    under = torch.tensor([1.0, 0.0, 1.0, 0.0])[:, None] * mask
    per_tok = -adv * lp1 + 0.1 * (-adv * lp0 * under / mask.sum(-1, keepdim=True))
    ((per_tok * mask).sum() / mask.sum()).backward()
    for g, p in zip(got, model.parameters()):
        assert torch.allclose(g, p.grad, atol=1e-6)
    assert metrics["loss_term/context_distill_weight"] == pytest.approx(0.1)
    # micro-batches of one row give the same gradient
    model2 = build_tiny_model(TinyModelConfig(hidden_size=32, intermediate_size=64, num_layers=1), tok, seed=1)
    opt2 = torch.optim.SGD(model2.parameters(), lr=0.0)
    cfg1 = load_config(overrides=["train.micro_batch_size=1", "algorithm.minibatches=1", "optim.max_grad_norm=null",
                                  "algorithm.loss_terms=[{name: context_distill, weight: 0.1}]"])
    update_policy(model2, opt2, torch.optim.lr_scheduler.LambdaLR(opt2, lambda i: 1.0), batch, settings(cfg1))
    for g, p in zip(got, model2.parameters()):
        assert torch.allclose(g, p.grad, atol=1e-6)


def test_a_batch_without_contexts_is_a_clear_error():
    tok, comps, batch = _batch()
    model = build_tiny_model(TinyModelConfig(hidden_size=32, intermediate_size=64, num_layers=1), tok, seed=1)
    cfg = load_config(overrides=["algorithm.minibatches=1", "algorithm.loss_terms=[{name: context_distill}]"])
    opt = torch.optim.SGD(model.parameters(), lr=0.0)
    with pytest.raises(ValueError, match="needs completions sampled under a context"):
        update_policy(model, opt, torch.optim.lr_scheduler.LambdaLR(opt, lambda i: 1.0), replace(batch, side=()),
                      settings(cfg))


def test_config_checks():
    with pytest.raises(ConfigError, match="group_size = num_contexts x per_context"):
        load_config(overrides=["rollout.group_size=6", "rollout.contexts.num_contexts=2"])
    with pytest.raises(ConfigError, match="no rollout.guidance"):
        load_config(overrides=["rollout.group_size=8", "rollout.contexts.num_contexts=2",
                               "rollout.guidance.fraction=0.5"])
    from rlvr.distributed.world import DistributedSetupError, World, check_world

    # under torchrun the plain-prompt forward runs inside the micro-batch's DDP forward (tests/test_distributed.py)
    cfg = load_config(recipe="nudge_rl", overrides=["rollout.prompts_per_step=4"])
    check_world(cfg, World(0, 2))
    with pytest.raises(DistributedSetupError, match="not divisible"):
        check_world(cfg, World(0, 3))


def test_the_recipe_trains_and_reports_its_metrics(tiny_cfg_overrides):
    from rlvr.run.train import train

    over = [o for o in tiny_cfg_overrides if not o.startswith("rollout.group_size")]
    summary = train(load_config(recipe="nudge_rl", overrides=over + ["train.steps=2", "sft.steps=0"]))
    final = summary["final_metrics"]
    assert 0 < final["engine/context_frac"] < 1
    assert "loss_term/context_distill" in final and final["loss_term/context_distill_weight"] == pytest.approx(0.1)

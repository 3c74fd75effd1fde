"""Loss terms (algorithm.loss_terms): golden values, the update's gradient against a hand-written loss,
micro-batch invariance, schedules, needs, and the defining effect of each term on a tiny model."""

from dataclasses import replace

import pytest
import torch

from rlvr.algorithms.loss_terms.base import LossTermParams, term_weight
from rlvr.algorithms.loss_terms.self_distill import SelfDistillParams, self_distill
from rlvr.algorithms.loss_terms.sft import SFTTermParams, selected_rows, sft
from rlvr.algorithms.registry import LOSS_TERMS, ObjectiveInputs
from rlvr.config.run import ConfigError, algorithm_needs, load_config
from rlvr.core.batch import build_batch
from rlvr.core.types import Completion
from rlvr.models import TinyModelConfig, build_tiny_model, char_tokenizer
from rlvr.models.logprobs import completion_logprobs
from rlvr.train.loop import settings
from rlvr.train.update import update_policy

MASK = torch.tensor([[1.0, 1.0, 0.0], [1.0, 1.0, 1.0], [1.0, 0.0, 0.0], [1.0, 1.0, 1.0]])


def _inputs(logp, rewards=(1.0, 0.0, 0.5, 0.25), adv=None, extras=None):
    adv = torch.tensor([[0.5], [-0.5], [0.0], [2.0]]) * MASK if adv is None else adv
    return ObjectiveInputs(logp, logp.detach(), adv, MASK, rewards=torch.tensor(rewards, dtype=torch.float64),
                           group_index=torch.tensor([0, 0, 1, 1]), extras=extras or {})


def test_sft_term_is_the_nll_of_the_selected_rows():
    logp = torch.tensor([[-1.0, -2.0, -9.0], [-0.5, -0.5, -0.5], [-3.0, -9.0, -9.0], [-1.0, -1.0, -4.0]])
    loss, m = sft(_inputs(logp), SFTTermParams())  # correct: reward >= 0.5 -> rows 0 and 2
    want = torch.tensor([[1.0, 2.0, 0.0], [0.0, 0.0, 0.0], [3.0, 0.0, 0.0], [0.0, 0.0, 0.0]])
    assert torch.equal(loss, want)
    assert torch.equal(m["selected"], torch.tensor([[1.0, 1, 0], [0, 0, 0], [1, 0, 0], [0, 0, 0]]))
    assert selected_rows(_inputs(logp), SFTTermParams(threshold=0.25)).tolist() == [1, 0, 1, 1]
    assert selected_rows(_inputs(logp), SFTTermParams(select="positive_advantage")).tolist() == [1, 0, 0, 1]
    assert selected_rows(_inputs(logp), SFTTermParams(select="all")).tolist() == [1, 1, 1, 1]
    # padding never enters, whatever log-prob sits there
    assert float(sft(_inputs(logp), SFTTermParams(select="all"))[0][MASK == 0].abs().sum()) == 0.0


def test_self_distill_golden_values_and_zero_at_the_teacher():
    logp = torch.tensor([[-1.0, -2.0, 0.0], [-1.0, -1.0, -1.0], [-2.0, 0.0, 0.0], [-1.0, -3.0, -1.0]])
    teacher = torch.tensor([[-2.0, -2.0, -5.0], [-1.0, -0.5, -3.0], [-1.0, 0.0, 0.0], [-1.0, -1.0, -1.0]])
    x = _inputs(logp.clone().requires_grad_(True), extras={"teacher_logp": teacher})
    k2, m = self_distill(x, SelfDistillParams())
    d = (logp - teacher) * MASK
    assert torch.allclose(k2, 0.5 * d**2)  # e.g. l=-1, l_T=-2: 0.5
    assert float(k2[0, 0].detach()) == 0.5 and torch.equal(m["teacher_gap"] * MASK, d)
    k1, _ = self_distill(x, SelfDistillParams(estimator="k1"))
    assert torch.allclose(k1, d)
    k3, _ = self_distill(x, SelfDistillParams(estimator="k3"))
    assert float(k3[0, 0].detach()) == pytest.approx(torch.exp(torch.tensor(-1.0)).item() - 1 + 1)  # e^(l_T-l) - (l_T-l) - 1
    # k2's gradient is (l - l_T) on each token: the reverse-KL score-function gradient; none reaches the teacher
    k2.sum().backward()
    assert torch.allclose(x.logp.grad, d)
    at_teacher = _inputs(teacher.clone().requires_grad_(True), extras={"teacher_logp": teacher})
    z, _ = self_distill(at_teacher, SelfDistillParams())
    z.sum().backward()
    assert float(z.detach().abs().sum()) == 0.0 and float(at_teacher.logp.grad.abs().sum()) == 0.0


@pytest.mark.parametrize("p,expect", [
    (LossTermParams(weight=0.3), {0: 0.3, 7: 0.3, 1000: 0.3}),
    (LossTermParams(weight=1.0, final=0.0, anneal_steps=10), {0: 1.0, 5: 0.5, 10: 0.0, 50: 0.0}),
    (LossTermParams(weight=0.0, final=2.0, anneal_steps=4, start_step=2), {0: 0.0, 1: 0.0, 2: 0.0, 4: 1.0, 9: 2.0}),
])
def test_weight_schedules(p, expect):
    assert {s: term_weight(p, s) for s in expect} == pytest.approx(expect)


def test_bad_term_config_is_a_clear_error():
    with pytest.raises(ConfigError, match="unknown loss term 'nope'; valid names: .*self_distill, sft"):
        load_config(overrides=["algorithm.loss_terms=[{name: nope}]"])
    with pytest.raises(ConfigError, match="final needs anneal_steps"):
        load_config(overrides=["algorithm.loss_terms=[{name: sft, final: 0}]"])
    with pytest.raises(ConfigError, match="weight"):
        load_config(overrides=["algorithm.loss_terms=[{name: sft, weight: -1}]"])
    with pytest.raises(ConfigError, match="select"):
        load_config(overrides=["algorithm.loss_terms=[{name: sft, select: best}]"])


def test_needs_follow_the_terms_schedule():
    cfg = load_config(overrides=["algorithm.loss_terms=[{name: self_distill, final: 0, anneal_steps: 10}]"])
    assert "teacher_logp" in algorithm_needs(cfg, 0) and "teacher_logp" not in algorithm_needs(cfg, 10)
    assert LOSS_TERMS.get("self_distill").needs == {"teacher_logp"}


def _setup(seed=0, n=8):
    tok = char_tokenizer()
    model = build_tiny_model(TinyModelConfig(hidden_size=32, intermediate_size=64, num_layers=1), tok, seed=seed)
    g = torch.Generator().manual_seed(seed)
    comps = []
    for i in range(n):
        p = torch.randint(3, 60, (int(torch.randint(2, 6, (1,), generator=g)),), generator=g).tolist()
        c = torch.randint(3, 60, (int(torch.randint(1, 7, (1,), generator=g)),), generator=g).tolist()
        comps.append(Completion(str(i // 4), p, c, None, "stop", "", i // 4))
    batch = build_batch(comps, [1, 0, 0, 1, 0, 0, 0, 1][:n], tok.pad_token_id)
    adv = torch.randn(n, generator=g)[:, None] * batch.completion_mask
    teacher = (-3 * torch.rand(batch.completion_mask.shape, generator=g)) * batch.completion_mask
    return model, replace(batch, advantages=adv, extras={"teacher_logp": teacher})


TERMS = "[{name: sft, weight: 0.7}, {name: self_distill, weight: 0.3}]"


def _grads(micro, terms=TERMS, step=0, agg="token_mean"):
    model, batch = _setup()
    cfg = load_config(overrides=[f"train.micro_batch_size={micro}", "optim.max_grad_norm=null",
                                 "algorithm.minibatches=1", f"algorithm.aggregation.name={agg}",
                                 f"algorithm.loss_terms={terms}"])
    opt = torch.optim.SGD(model.parameters(), lr=0.0)
    sched = torch.optim.lr_scheduler.LambdaLR(opt, lambda i: 1.0)
    metrics = update_policy(model, opt, sched, batch, replace(settings(cfg), step=step))
    return [p.grad.clone() for p in model.parameters()], metrics, model, batch


def test_update_gradient_equals_the_hand_written_loss():
    """token_mean(ppo + 0.7 sft + 0.3 k2(logp, teacher)) at ratio 1, written out by hand."""
    grads, metrics, _, _ = _grads(8)
    model, batch = _setup()
    mask, adv, teacher = batch.completion_mask, batch.advantages, batch.extras["teacher_logp"]
    logp, _ = completion_logprobs(model, batch)
    correct = torch.tensor([1.0, 0, 0, 1, 0, 0, 0, 1])[:, None]
    per_tok = -adv * logp + 0.7 * (-logp * correct) + 0.3 * 0.5 * (logp - teacher) ** 2
    ((per_tok * mask).sum() / mask.sum()).backward()
    for g, p in zip(grads, model.parameters()):
        assert torch.allclose(g, p.grad, atol=1e-6)
    assert metrics["loss_term/sft_weight"] == pytest.approx(0.7)
    assert metrics["loss_term/self_distill"] > 0 and metrics["loss_term/sft"] > 0
    assert metrics["loss_term/sft/selected"] == pytest.approx(float((correct * mask).sum() / mask.sum()))


@pytest.mark.parametrize("agg", ["token_mean", "seq_mean_token_mean", "seq_mean_token_sum_norm"])
def test_terms_keep_micro_batch_invariance(agg):
    a, *_ = _grads(8, agg=agg)
    b, *_ = _grads(3, agg=agg)
    assert any(float(x.abs().max()) > 0 for x in a)
    for x, y in zip(a, b):
        assert torch.allclose(x, y, atol=1e-6)


def test_a_term_at_weight_zero_changes_nothing():
    off = "[{name: sft, weight: 1.0, final: 0.0, anneal_steps: 2}]"
    with_term, m, *_ = _grads(8, terms=off, step=2)
    without, *_ = _grads(8, terms="[]")
    assert all(torch.equal(x, y) for x, y in zip(with_term, without))
    assert not any(k.startswith("loss_term/") for k in m)


def test_sft_term_alone_raises_the_likelihood_of_the_selected_completions_only():
    """The defining effect: with zero advantages, a few steps of the sft term raise the log-likelihood of
    the correct completions and move the others less."""
    model, batch = _setup()
    batch = replace(batch, advantages=torch.zeros_like(batch.completion_mask))
    cfg = load_config(overrides=["train.micro_batch_size=8", "algorithm.minibatches=1", "optim.max_grad_norm=null",
                                 "algorithm.loss_terms=[{name: sft}]"])
    mask = batch.completion_mask
    before = (completion_logprobs(model, batch)[0].detach() * mask).sum(-1)
    opt = torch.optim.Adam(model.parameters(), lr=3e-3)
    sched = torch.optim.lr_scheduler.LambdaLR(opt, lambda i: 1.0)
    for _ in range(10):
        update_policy(model, opt, sched, batch, settings(cfg))
    gain = (completion_logprobs(model, batch)[0].detach() * mask).sum(-1) - before
    chosen = torch.tensor([1, 0, 0, 1, 0, 0, 0, 1], dtype=torch.bool)
    assert bool((gain[chosen] > 0.5).all()), gain
    assert float(gain[chosen].mean()) > float(gain[~chosen].mean()) + 0.5, gain


def test_self_distill_alone_moves_the_policy_toward_the_teacher():
    model, batch = _setup()
    batch = replace(batch, advantages=torch.zeros_like(batch.completion_mask))
    cfg = load_config(overrides=["train.micro_batch_size=8", "algorithm.minibatches=1", "optim.max_grad_norm=null",
                                 "algorithm.loss_terms=[{name: self_distill}]"])
    mask, teacher = batch.completion_mask, batch.extras["teacher_logp"]

    def gap():
        return float((((completion_logprobs(model, batch)[0].detach() - teacher) * mask) ** 2).sum())

    start = gap()
    opt = torch.optim.Adam(model.parameters(), lr=3e-3)
    sched = torch.optim.lr_scheduler.LambdaLR(opt, lambda i: 1.0)
    for _ in range(15):
        update_policy(model, opt, sched, batch, settings(cfg))
    assert gap() < 0.5 * start


def test_a_run_with_loss_terms_trains_and_logs_them(tiny_cfg_overrides):
    from rlvr.run.train import train

    summary = train(load_config(overrides=tiny_cfg_overrides + [
        "train.steps=2", "sft.steps=0", "algorithm.loss_terms=[{name: sft, select: all}, {name: self_distill}]"]))
    final = summary["final_metrics"]
    assert final["loss_term/sft/selected"] == pytest.approx(1.0)
    assert final["loss_term/self_distill_weight"] == 1.0 and final["loss_term/sft"] > 0

"""Contrastive and classification objectives over a group: ConSPO, REAL, f-GRPO, all RECONSTRUCTED. Hand-worked
oracles from each method's definition (sources in docs/methods.md), the promised gradient properties, naive loops,
and each recipe on the tiny model."""

import math

import pytest
import torch

from rlvr.algorithms.objectives.conspo import ConSPOParams
from rlvr.algorithms.objectives.f_grpo import FGRPOParams
from rlvr.algorithms.objectives.real import REALParams
from rlvr.algorithms.registry import OBJECTIVES, ObjectiveInputs
from rlvr.config.run import load_config, needs_reference
from tests.methods.helpers import recipe_trains
from tests.methods.seed_support import BINARY

F64 = torch.float64


def call(name, params, logp, old, mask, group_index, rewards=None, adv=None, **kw):
    adv = torch.zeros_like(old) if adv is None else adv
    inp = ObjectiveInputs(logp, old, adv, mask, rewards=rewards, group_index=group_index, **kw)
    return OBJECTIVES.get(name).fn(inp, params)


def one_token(values, old_value=-1.0):
    old = torch.full((len(values), 1), old_value, dtype=F64)
    logp = torch.tensor(values, dtype=F64)[:, None].requires_grad_(True)
    return logp, old, torch.ones_like(old)


PARITY = BINARY[0]  # a binary reward with both labels in most groups


def random_group_batch(seed, n=8, t=6):
    g = torch.Generator().manual_seed(seed)
    mask = (torch.rand(n, t, generator=g) > 0.3).double()
    mask[:, 0] = 1
    old = -torch.rand(n, t, generator=g, dtype=F64) * 2
    logp = (old + 0.3 * torch.randn(n, t, generator=g, dtype=F64))
    logp[mask == 0], old[mask == 0] = 1e3, -1e3  # padding never reaches a result
    return logp.requires_grad_(True), old, mask


def seq(x, mask, i, mean=True):
    vals = [x[i, t] for t in range(x.shape[1]) if mask[i, t] > 0]
    return sum(vals) / len(vals) if mean else sum(vals)


# --- ConSPO ----------------------------------------------------------------------------------------

def test_conspo_oracle_and_gradient_weights():
    logp, old, mask = one_token([-0.5, -0.4, -1.0])
    r, gi = torch.tensor([1.0, 0.0, 0.0], dtype=F64), torch.zeros(3, dtype=torch.long)
    loss, _ = call("conspo", ConSPOParams(margin_max=0.0), logp, old, mask, gi, r)
    assert float(loss.detach()) == pytest.approx(0.99758, abs=1e-5)
    denom = math.exp(-0.5) + math.exp(-0.4) + math.exp(-1.0)
    p_pos = math.exp(-0.5) / denom
    assert p_pos == pytest.approx(0.36877, abs=1e-5)
    g = torch.autograd.grad(loss, logp)[0][:, 0].tolist()
    # positives pushed up by (1 - p)/tau, negatives down by their softmax share
    assert g == pytest.approx([-(1 - p_pos), math.exp(-0.4) / denom, math.exp(-1.0) / denom])
    loss_m, m = call("conspo", ConSPOParams(margin_max=0.1, margin_schedule="constant"), logp, old, mask, gi, r)
    assert float(loss_m.detach()) == pytest.approx(1.06185, abs=1e-5) and float(m["margin"][0, 0]) == 0.1


def test_conspo_margin_schedule_and_monotonicity():
    logp, old, mask = one_token([-0.5, -0.4, -1.0, -0.2])
    r, gi = torch.tensor([1.0, 0.0, 0.0, 1.0], dtype=F64), torch.zeros(4, dtype=torch.long)
    losses = []
    for step in (0, 3, 6, 10):
        loss, m = call("conspo", ConSPOParams(margin_max=0.4), logp, old, mask, gi, r, step=step, total_steps=10)
        assert float(m["margin"][0, 0]) == pytest.approx(0.4 * step / 10)
        losses.append(float(loss.detach()))
    assert losses == sorted(losses) and losses[0] < losses[-1]  # a larger margin always raises the loss


def test_conspo_one_sided_groups_add_zero_but_count_in_the_mean():
    logp, old, mask = one_token([-0.5, -0.4, -1.0, -0.3, -0.7])
    r = torch.tensor([1.0, 0.0, 0.0, 1.0, 1.0], dtype=F64)
    gi = torch.tensor([0, 0, 0, 1, 1])  # group 1 has no negative
    both, _ = call("conspo", ConSPOParams(margin_max=0.0), logp, old, mask, gi, r)
    alone, _ = call("conspo", ConSPOParams(margin_max=0.0), logp[:3], old[:3], mask[:3], gi[:3], r[:3])
    assert float(both.detach()) == pytest.approx(float(alone.detach()) / 2)
    assert not torch.autograd.grad(both, logp)[0][3:].any()


def test_conspo_matches_a_naive_loop_with_length_normalised_scores():
    logp, old, mask = random_group_batch(0)
    r = torch.tensor([1, 0, 1, 0, 0, 1, 0, 0], dtype=F64)
    gi = torch.tensor([0, 0, 0, 0, 1, 1, 1, 1])
    p = ConSPOParams(tau=0.5, margin_max=0.2, margin_schedule="constant")
    loss, _ = call("conspo", p, logp, old, mask, gi, r)
    naive = 0.0
    for grp in ([0, 1, 2, 3], [4, 5, 6, 7]):
        pos = [i for i in grp if r[i] > 0.5]
        neg = [i for i in grp if r[i] <= 0.5]
        terms = []
        for i in pos:
            x = torch.exp((seq(logp, mask, i) - 0.2) / 0.5)
            terms.append(-torch.log(x / (x + sum(torch.exp(seq(logp, mask, j) / 0.5) for j in neg))))
        naive = naive + sum(terms) / len(terms)
    naive = naive / 2
    assert float(loss.detach()) == pytest.approx(float(naive.detach()), rel=1e-10)
    assert torch.allclose(torch.autograd.grad(loss, logp)[0], torch.autograd.grad(naive, logp)[0], atol=1e-12)


def test_conspo_recipe_trains(tmp_path):
    recipe_trains("conspo", tmp_path, ("loss", "grad_norm", "margin"), [PARITY])


# --- REAL ------------------------------------------------------------------------------------------

def test_real_oracles_at_the_old_policy():
    logp, old, mask = one_token([-1.0, -1.0])
    r, gi = torch.tensor([1.0, 0.0], dtype=F64), torch.zeros(2, dtype=torch.long)
    loss, _ = call("real", REALParams(variant="bce"), logp, old, mask, gi, r)
    assert float(loss.detach()) == pytest.approx(math.log(2))
    assert torch.autograd.grad(loss, logp)[0][:, 0].tolist() == pytest.approx([-0.5 / 2, 0.5 / 2])  # (1/2 - r)/B
    loss, _ = call("real", REALParams(), logp, old, mask, gi, r)
    assert float(loss.detach()) == pytest.approx(1.38629, abs=1e-5)
    assert torch.autograd.grad(loss, logp)[0][:, 0].tolist() == pytest.approx([-0.5, 0.5])


def test_real_anchor_gradient_weights_are_bounded_and_monotone():
    g = torch.Generator().manual_seed(1)
    z = 3 * torch.randn(10, generator=g, dtype=F64)
    old = torch.zeros(10, 1, dtype=F64)
    logp = z[:, None].clone().requires_grad_(True)
    r = torch.tensor([1, 1, 1, 1, 0, 0, 0, 0, 0, 0], dtype=F64)
    loss, _ = call("real", REALParams(), logp, old, torch.ones_like(old), torch.zeros(10, dtype=torch.long), r)
    grad = torch.autograd.grad(loss, logp)[0][:, 0]
    assert ((grad[:4] < 0) & (grad[:4] > -1)).all() and ((grad[4:] > 0) & (grad[4:] < 1)).all()
    # a better-separated positive (larger z) is pushed less; a higher-scoring negative is pushed more
    pos, neg = z[:4].argsort(), z[4:].argsort()
    assert (grad[:4][pos].diff() > 0).all() and (grad[4:][neg].diff() > 0).all()


def test_real_matches_a_naive_loop_on_random_tensors():
    logp, old, mask = random_group_batch(2)
    r = torch.tensor([1, 0, 0, 1, 0, 0, 0, 1], dtype=F64)
    gi = torch.tensor([0, 0, 0, 0, 1, 1, 1, 1])
    for variant in ("anchor", "bce"):
        loss, _ = call("real", REALParams(variant=variant), logp, old, mask, gi, r)
        z = [seq(logp - old, mask, i) for i in range(8)]
        if variant == "bce":
            naive = sum(-(r[i] * torch.log(torch.sigmoid(z[i])) + (1 - r[i]) * torch.log(torch.sigmoid(-z[i])))
                        for i in range(8)) / 8
        else:
            naive = 0.0
            for grp in ([0, 1, 2, 3], [4, 5, 6, 7]):
                naive = naive + torch.log(1 + sum(torch.exp(z[j]) for j in grp if r[j] == 0))
                naive = naive + torch.log(1 + sum(torch.exp(-z[j]) for j in grp if r[j] == 1))
            naive = naive / 2
        assert float(loss.detach()) == pytest.approx(float(naive.detach()), rel=1e-10)
        assert torch.allclose(torch.autograd.grad(loss, logp)[0], torch.autograd.grad(naive, logp)[0], atol=1e-12)


def test_real_recipe_trains(tmp_path):
    recipe_trains("real", tmp_path, ("loss", "grad_norm", "score"), [PARITY])


# --- f-GRPO ----------------------------------------------------------------------------------------

def test_f_grpo_oracle_kl_and_pearson():
    ref = torch.zeros(2, 1, dtype=F64)
    logp = torch.tensor([[0.5], [0.2]], dtype=F64, requires_grad=True)
    adv = torch.tensor([[1.0], [-1.0]], dtype=F64)
    gi = torch.zeros(2, dtype=torch.long)
    loss, m = call("f_grpo", FGRPOParams(beta=1.0), logp, ref, torch.ones_like(ref), gi, adv=adv, ref_logp=ref)
    assert float(loss.detach()) == pytest.approx(-0.05067, abs=1e-5)
    assert torch.autograd.grad(loss, logp)[0][:, 0].tolist() == pytest.approx([-1.0, 0.44933], abs=1e-5)
    assert m["critic"][:, 0].tolist() == pytest.approx([0.5, 0.2])
    loss, _ = call("f_grpo", FGRPOParams(beta=1.0, divergence="pearson"), logp, ref, torch.ones_like(ref), gi,
                   adv=adv, ref_logp=ref)
    assert float(loss.detach()) == pytest.approx(-(0.5 - (0.2 + 0.04 / 4)))
    assert torch.autograd.grad(loss, logp)[0][:, 0].tolist() == pytest.approx([-1.0, 1.1])  # f*'(t) = 1 + t/2


def test_f_grpo_matches_a_naive_loop_with_advantage_weights():
    logp, old, mask = random_group_batch(3)
    ref = old + 0.1
    g = torch.Generator().manual_seed(5)
    adv = torch.randn(8, 1, generator=g, dtype=F64).expand(8, 6).clone()
    adv[3] = 0.0  # neither side
    gi = torch.tensor([0, 0, 0, 0, 1, 1, 1, 1])
    loss, _ = call("f_grpo", FGRPOParams(beta=0.3), logp, old, mask, gi, adv=adv, ref_logp=ref)
    naive = 0.0
    for grp in ([0, 1, 2, 3], [4, 5, 6, 7]):
        t = {i: 0.3 * seq(logp - ref, mask, i, mean=False) for i in grp}
        a = {i: float(adv[i, 0]) for i in grp}
        pos, neg = [i for i in grp if a[i] > 0], [i for i in grp if a[i] < 0]
        if pos:
            naive = naive - sum(a[i] * t[i] for i in pos) / sum(a[i] for i in pos)
        if neg:
            naive = naive + sum(-a[i] * torch.exp(t[i] - 1) for i in neg) / sum(-a[i] for i in neg)
    naive = naive / 2
    assert float(loss.detach()) == pytest.approx(float(naive.detach()), rel=1e-10)
    assert torch.allclose(torch.autograd.grad(loss, logp)[0], torch.autograd.grad(naive, logp)[0], atol=1e-12)


def test_f_grpo_needs_reference_log_probs():
    logp, old, mask = one_token([-1.0, -2.0])
    with pytest.raises(ValueError, match="reference log-probs"):
        call("f_grpo", FGRPOParams(), logp, old, mask, torch.zeros(2, dtype=torch.long))
    assert needs_reference(load_config(recipe="f_grpo_div"))  # loaded even though kl.coef is 0


def test_f_grpo_recipe_trains(tmp_path):
    out = recipe_trains("f_grpo_div", tmp_path, ("loss", "grad_norm", "critic", "kl"))
    assert out["cfg"].algorithm.kl.coef == 0.0 and out["c"].ref_model is not None

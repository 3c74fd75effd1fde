"""Group-level objectives: WAPO, PACS, TPO and MCPO's hinge-KL (reconstructed). Hand-worked oracles from each
method's definition (sources in docs/methods.md), naive loops, micro-batch invariance of the normalisers, and each
recipe on the tiny model."""

import math

import pytest
import torch

from rlvr.algorithms.objectives.mcpo import MCPOParams
from rlvr.algorithms.objectives.pacs import PACSParams, balanced_weights
from rlvr.algorithms.objectives.ppo_clip import PPOClipParams
from rlvr.algorithms.objectives.tpo import TPOParams
from rlvr.algorithms.objectives.wapo import WAPOParams
from rlvr.algorithms.registry import OBJECTIVES, AggregationInputs, ObjectiveInputs
from tests.methods.helpers import recipe_trains
from tests.methods.seed_support import BINARY

F64 = torch.float64


def call(name, params, logp, old, adv, mask, group_index, rewards=None, **kw):
    inp = ObjectiveInputs(logp, old, adv, mask, rewards=rewards, group_index=group_index, **kw)
    return OBJECTIVES.get(name).fn(inp, params)


PARITY = BINARY[0]  # a binary reward with both labels in most groups


# --- WAPO ------------------------------------------------------------------------------------------

def wapo_batch(rho=1.0):
    """r = [1, 0, 0, 0] with Dr. GRPO advantages; the winner has 2 tokens, the others 3."""
    mask = torch.tensor([[1, 1, 0], [1, 1, 1], [1, 1, 1], [1, 1, 1]], dtype=F64)
    adv = torch.tensor([0.75, -0.25, -0.25, -0.25], dtype=F64)[:, None] * mask
    old = torch.full_like(mask, -1.0)
    logp = (old + math.log(rho)).requires_grad_(True)
    return logp, old, adv, mask, torch.zeros(4, dtype=torch.long)


def test_wapo_oracle_only_the_winner_counts():
    logp, old, adv, mask, gi = wapo_batch()
    loss, m = call("wapo", WAPOParams(max_len=10), logp, old, adv, mask, gi)
    assert float(loss.detach()) == pytest.approx(-(2 * 0.75) / (4 * 10) / 1)  # -0.0375
    g = torch.autograd.grad(loss, logp)[0]
    assert g[0, :2].tolist() == pytest.approx([-0.75 / 40] * 2) and not g[1:].any()
    assert m["kept"].tolist() == [[1, 1, 1], [0, 0, 0], [0, 0, 0], [0, 0, 0]]


def test_wapo_constant_group_gives_zero_and_the_cap_freezes_the_winner():
    logp, old, _, mask, gi = wapo_batch()
    loss, _ = call("wapo", WAPOParams(max_len=10), logp, old, torch.zeros_like(mask), mask, gi)
    assert float(loss.detach()) == 0.0 and not torch.autograd.grad(loss, logp)[0].any()
    logp, old, adv, mask, gi = wapo_batch(rho=12.0)
    loss, m = call("wapo", WAPOParams(max_len=10, clip_eps=9.0), logp, old, adv, mask, gi)
    assert float(loss.detach()) == pytest.approx(-(2 * 10 * 0.75) / 40)  # the term is -10 A: capped
    assert not torch.autograd.grad(loss, logp)[0].any()
    assert m["clip_frac"][0, :2].tolist() == [1.0, 1.0]


def test_wapo_divides_by_the_groups_with_a_winner_across_micro_batches():
    # three groups: two with a winner, one constant; one call over the minibatch vs one call per group
    g = torch.Generator().manual_seed(0)
    mask = (torch.rand(9, 5, generator=g) > 0.3).double()
    mask[:, 0] = 1
    rewards = torch.tensor([1, 0, 0, 0.5, 1, 0, 1, 1, 1], dtype=F64)
    gi = torch.tensor([0, 0, 0, 1, 1, 1, 2, 2, 2])
    adv = torch.tensor([2 / 3, -1 / 3, -1 / 3, 0, 0.5, -0.5, 0, 0, 0], dtype=F64)[:, None] * mask
    old = -torch.rand(9, 5, generator=g, dtype=F64)
    logp = (old + 0.3 * torch.randn(9, 5, generator=g, dtype=F64)).requires_grad_(True)
    p = WAPOParams(max_len=7)
    whole = AggregationInputs(mask, gi, adv, None)
    full, _ = call("wapo", p, logp, old, adv, mask, gi, rewards)
    parts = sum(call("wapo", p, logp[r], old[r], adv[r], mask[r], gi[r], rewards[r], minibatch=whole)[0]
                for r in (slice(0, 3), slice(3, 6), slice(6, 9)))
    assert float(full.detach()) == pytest.approx(float(parts.detach()), rel=1e-12)
    g_full = torch.autograd.grad(full, logp)[0]
    assert torch.allclose(g_full, torch.autograd.grad(parts, logp)[0], atol=1e-15)
    # naive: sum over winners' tokens of -min(rho A, min(rho, 10) A) / (3 * 7), over 2 groups with a winner
    expect = 0.0
    for i in range(9):
        if adv[i, 0] > 0:
            for t in range(5):
                if mask[i, t] > 0:
                    rho = math.exp(float(logp[i, t].detach() - old[i, t]))
                    expect += -min(rho, 10.0) * float(adv[i, t]) / (3 * 7) / 2
    assert float(full.detach()) == pytest.approx(expect, rel=1e-12)


def test_wapo_without_importance_sampling_is_reinforce_on_winners():
    logp, old, adv, mask, gi = wapo_batch(rho=3.0)
    loss, _ = call("wapo", WAPOParams(max_len=10, importance_sampling=False), logp, old, adv, mask, gi)
    assert torch.autograd.grad(loss, logp)[0][0, :2].tolist() == pytest.approx([-0.75 / 40] * 2)


def test_wapo_recipe_trains(tmp_path):
    out = recipe_trains("wapo", tmp_path, ("loss", "grad_norm", "kept"), [PARITY])
    alg = out["cfg"].algorithm
    assert (alg.advantage.name, alg.objective.name) == ("dr_grpo", "wapo")


# --- PACS ------------------------------------------------------------------------------------------

def single_tokens(psi, rewards, groups=None):
    """One-token completions whose log-ratio is psi (so psi = sum_t (logp - old_logp) with beta 1)."""
    old = torch.full((len(psi), 1), -2.0, dtype=F64)
    logp = (old + torch.tensor(psi, dtype=F64)[:, None]).requires_grad_(True)
    gi = torch.zeros(len(psi), dtype=torch.long) if groups is None else torch.tensor(groups)
    return logp, old, torch.zeros_like(old), torch.ones_like(old), gi, torch.tensor(rewards, dtype=F64)


def test_pacs_oracle_at_the_old_policy():
    logp, old, adv, mask, gi, r = single_tokens([0.0] * 4, [1, 0, 0, 0])
    assert balanced_weights(r, gi).tolist() == pytest.approx([2, 2 / 3, 2 / 3, 2 / 3])
    loss, _ = call("pacs", PACSParams(centring="none"), logp, old, adv, mask, gi, r)
    assert float(loss.detach()) == pytest.approx(math.log(2))  # mean(w) ln 2, mean(w) = 1
    g = torch.autograd.grad(loss, logp)[0][:, 0]
    assert g.tolist() == pytest.approx([-0.25, 1 / 12, 1 / 12, 1 / 12])  # w (sigmoid(0) - r) / 4
    loss, _ = call("pacs", PACSParams(), logp, old, adv, mask, gi, r)  # RLOO: d psi^_i / d psi_j = -1/3
    assert torch.autograd.grad(loss, logp)[0][:, 0].tolist() == pytest.approx([-1 / 3, 1 / 9, 1 / 9, 1 / 9])


def test_pacs_rloo_centring_oracle_and_weight_rules():
    logp, old, adv, mask, gi, r = single_tokens([0.4, 0, 0, 0], [1, 0, 0, 0])
    _, m = call("pacs", PACSParams(), logp, old, adv, mask, gi, r)
    assert m["score"][:, 0].tolist() == pytest.approx([0.4, -0.4 / 3, -0.4 / 3, -0.4 / 3])
    two = torch.tensor([0, 0, 0, 0, 1, 1, 1, 1])
    w = balanced_weights(torch.tensor([1, 1, 1, 1, 1, 0.5, 0, 0], dtype=F64), two)
    assert w.tolist() == pytest.approx([1, 1, 1, 1, 4 / 3, 4 / 3, 2 / 3, 2 / 3])  # one class; three classes


def test_pacs_matches_a_naive_loop_on_random_tensors():
    g = torch.Generator().manual_seed(1)
    mask = (torch.rand(8, 6, generator=g) > 0.3).double()
    mask[:, 0] = 1
    old = -torch.rand(8, 6, generator=g, dtype=F64) * 2
    logp = (old + 0.3 * torch.randn(8, 6, generator=g, dtype=F64)).requires_grad_(True)
    gi = torch.tensor([0, 0, 0, 0, 1, 1, 1, 1])
    r = torch.tensor([1, 0, 1, 1, 0, 0, 0, 1], dtype=F64)
    for centring in ("rloo", "grpo", "none"):
        loss, _ = call("pacs", PACSParams(beta=2.0, centring=centring), logp, old, torch.zeros_like(old),
                       mask, gi, r, n_rows=8)
        psi = [2.0 * sum(logp[i, t] - old[i, t] for t in range(6) if mask[i, t] > 0) for i in range(8)]
        naive = 0.0
        for i in range(8):
            grp = [j for j in range(8) if gi[j] == gi[i]]
            mean = sum(psi[j] for j in grp) / len(grp)
            if centring == "rloo":
                x = psi[i] - sum(psi[j] for j in grp if j != i) / (len(grp) - 1)
            elif centring == "grpo":
                std = torch.sqrt(sum((psi[j] - mean) ** 2 for j in grp) / (len(grp) - 1))
                x = (psi[i] - mean) / (std + 1e-6)
            else:
                x = psi[i]
            n_same = sum(1 for j in grp if r[j] == r[i])
            w = len(grp) / (2 * n_same)
            naive = naive + w * -(r[i] * torch.log(torch.sigmoid(x)) + (1 - r[i]) * torch.log(1 - torch.sigmoid(x)))
        naive = naive / 8
        assert float(loss.detach()) == pytest.approx(float(naive.detach()), rel=1e-10)
        ga = torch.autograd.grad(loss, logp)[0]
        gb = torch.autograd.grad(naive, logp)[0]
        assert torch.allclose(ga, gb, atol=1e-12), centring


def test_pacs_rejects_rewards_outside_zero_one():
    logp, old, adv, mask, gi, _ = single_tokens([0.0] * 2, [1, 0])
    with pytest.raises(ValueError, match=r"labels in \[0, 1\]"):
        call("pacs", PACSParams(), logp, old, adv, mask, gi, torch.tensor([1.0, -0.5], dtype=F64))


def test_pacs_recipe_trains(tmp_path):
    recipe_trains("pacs", tmp_path, ("loss", "grad_norm", "score", "weight"), [PARITY])


# --- TPO -------------------------------------------------------------------------------------------

def test_tpo_oracles():
    logp, old, adv, mask, gi, r = single_tokens([0.0, 0.0], [1, 0])
    loss, m = call("tpo", TPOParams(), logp, old, adv, mask, gi, r)
    assert m["target"][:, 0].tolist() == pytest.approx([0.88080, 0.11920], abs=1e-5)
    assert float(loss.detach()) == pytest.approx(math.log(2))
    assert torch.autograd.grad(loss, logp)[0][:, 0].tolist() == pytest.approx([-0.38080, 0.38080], abs=1e-5)
    logp, old, adv, mask, gi, r = single_tokens([0.0] * 4, [1, 0, 0, 0])
    _, m = call("tpo", TPOParams(), logp, old, adv, mask, gi, r)
    assert m["target"][:, 0].tolist() == pytest.approx([0.77044] + [0.07652] * 3, abs=1e-5)


def test_tpo_equal_rewards_give_no_gradient_at_the_old_policy_and_anchor_matters():
    logp, old, adv, mask, gi, _ = single_tokens([0.0] * 3, [0.7] * 3)
    old = old + torch.tensor([[0.0], [-1.0], [-2.0]], dtype=F64)
    logp = old.clone().requires_grad_(True)
    loss, _ = call("tpo", TPOParams(), logp, old, adv, mask, gi, torch.full((3,), 0.7, dtype=F64))
    assert torch.autograd.grad(loss, logp)[0].abs().max() < 1e-12
    _, m = call("tpo", TPOParams(anchor=False), logp, old, adv, mask, gi, torch.full((3,), 0.7, dtype=F64))
    assert m["target"][:, 0].tolist() == pytest.approx([1 / 3] * 3)  # no anchor: softmax(0)
    beh = old - torch.tensor([[0.0], [0.0], [5.0]], dtype=F64)  # the engine's log-probs take precedence
    _, m = call("tpo", TPOParams(), logp, old, adv, mask, gi, torch.full((3,), 0.7, dtype=F64), behaviour_logp=beh)
    assert float(m["target"][2, 0]) < 0.01


def test_tpo_matches_a_naive_loop_and_splits_by_group():
    g = torch.Generator().manual_seed(2)
    mask = (torch.rand(6, 5, generator=g) > 0.3).double()
    mask[:, 0] = 1
    old = -torch.rand(6, 5, generator=g, dtype=F64)
    logp = (old + 0.2 * torch.randn(6, 5, generator=g, dtype=F64)).requires_grad_(True)
    gi, r = torch.tensor([3, 3, 3, 7, 7, 7]), torch.tensor([1, 0, 0.5, 0, 0, 1], dtype=F64)
    p = TPOParams(eta=0.5)
    full, _ = call("tpo", p, logp, old, torch.zeros_like(old), mask, gi, r)
    parts = sum(call("tpo", p, logp[s], old[s], torch.zeros_like(old[s]), mask[s], gi[s], r[s], n_groups=2)[0]
                for s in (slice(0, 3), slice(3, 6)))
    naive = 0.0
    for grp in ([0, 1, 2], [3, 4, 5]):
        ell = [sum(logp[i, t] for t in range(5) if mask[i, t] > 0) for i in grp]
        ell_old = [sum(float(old[i, t]) for t in range(5) if mask[i, t] > 0) for i in grp]
        rs = [float(r[i]) for i in grp]
        mu = sum(rs) / 3
        sd = math.sqrt(sum((x - mu) ** 2 for x in rs) / 3)
        tilt = [math.exp(o + (x - mu) / sd / 0.5) for o, x in zip(ell_old, rs)]
        log_norm = torch.logsumexp(torch.stack(ell), 0)
        for e, q in zip(ell, tilt):
            naive = naive - q / sum(tilt) * (e - log_norm)
    naive = naive / 2
    for x in (full, parts):
        assert float(x.detach()) == pytest.approx(float(naive.detach()), rel=1e-10)
        assert torch.allclose(torch.autograd.grad(x, logp, retain_graph=True)[0],
                              torch.autograd.grad(naive, logp, retain_graph=True)[0], atol=1e-12)


def test_tpo_recipe_trains(tmp_path):
    recipe_trains("tpo", tmp_path, ("loss", "grad_norm", "target", "policy"))


# --- MCPO hinge-KL ---------------------------------------------------------------------------------

def mcpo_batch(drift):
    """Two groups of two one-token completions, all with log-ratio ``drift``: group 0 mastered, group 1 not."""
    old = torch.full((4, 1), -1.0, dtype=F64)
    logp = (old + drift).requires_grad_(True)
    return logp, old, torch.zeros_like(old), torch.ones_like(old), torch.tensor([0, 0, 1, 1]), \
        torch.tensor([1, 1, 1, 0], dtype=F64)


def test_mcpo_hinge_is_zero_below_delta_and_only_on_mastered_groups():
    # rho - 1 - log rho = 0.01 at rho = 1.14817; delta 0.02: no hinge, gradient = ppo_clip's (A = 0: none)
    small = math.log(1.14817)  # the upper KL3 bound for delta 0.01 (rlvr/algorithms/clip/kl3.py)
    logp, old, adv, mask, gi, r = mcpo_batch(small)
    loss, m = call("mcpo", MCPOParams(hinge_delta=0.02), logp, old, adv, mask, gi, r)
    rho = math.exp(small)
    assert rho - 1 - small == pytest.approx(0.01, abs=1e-5)
    assert not loss.detach().any() and not torch.autograd.grad(loss.sum(), logp)[0].any()
    big = 0.5
    logp, old, adv, mask, gi, r = mcpo_batch(big)
    loss, m = call("mcpo", MCPOParams(hinge_coef=2.0, hinge_delta=0.02), logp, old, adv, mask, gi, r)
    kl = math.exp(big) - 1 - big
    assert loss[:, 0].tolist() == pytest.approx([2 * (kl - 0.02)] * 2 + [0.0, 0.0])
    grad = torch.autograd.grad(loss.sum(), logp)[0][:, 0]
    assert grad.tolist() == pytest.approx([2 * (math.exp(big) - 1)] * 2 + [0.0, 0.0])  # d(rho - 1 - log rho)
    assert m["mastered"][:, 0].tolist() == [1, 1, 0, 0] and m["hinge_frac"][:, 0].tolist() == [1, 1, 0, 0]


def test_mcpo_is_ppo_clip_plus_the_hinge_on_random_tensors():
    g = torch.Generator().manual_seed(4)
    old = -torch.rand(8, 5, generator=g, dtype=F64)
    logp = (old + 0.4 * torch.randn(8, 5, generator=g, dtype=F64)).requires_grad_(True)
    adv = torch.randn(8, 1, generator=g, dtype=F64).expand(8, 5).clone()
    mask = torch.ones_like(old)
    gi, r = torch.tensor([0, 0, 1, 1, 2, 2, 3, 3]), torch.tensor([1, 1, 0, 1, 1, 1, 0, 0], dtype=F64)
    p = MCPOParams(clip_low=0.2, clip_high=0.28, hinge_coef=0.5, hinge_delta=0.01)
    loss, _ = call("mcpo", p, logp, old, adv, mask, gi, r)
    base, _ = call("ppo_clip", PPOClipParams(clip_low=0.2, clip_high=0.28), logp, old, adv, mask, gi, r)
    lr = (logp - old).detach()
    hinge = torch.zeros_like(old)
    for i in (0, 1, 4, 5):  # mastered groups 0 and 2
        for t in range(5):
            kl = math.exp(float(lr[i, t])) - 1 - float(lr[i, t])
            hinge[i, t] = 0.5 * max(0.0, kl - 0.01)
    assert torch.allclose(loss.detach(), base.detach() + hinge, atol=1e-14) and hinge.any()


def test_mcpo_recipe_uses_both_halves_and_trains(tmp_path):
    out = recipe_trains("mcpo", tmp_path, ("loss", "grad_norm", "hinge_frac", "mastered"), [PARITY])
    alg = out["cfg"].algorithm
    assert alg.objective.name == "mcpo" and [t.name for t in alg.advantage_transforms] == ["mcpo_weight"]

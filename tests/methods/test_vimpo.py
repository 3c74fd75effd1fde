"""VIMPO (arXiv:2606.20008, RECONSTRUCTED): policy-implied values, the critic-free per-token advantage and the
value loss.

A hand-worked oracle, the defining property (pi_theta = pi_ref gives V_t = r everywhere), equality with a naive
per-row loop, the value-loss gradient against its hand-derived form (V0hat detached), and two real recipe steps on
the tiny model.
"""

import math
import random

import pytest
import torch

from rlvr.algorithms.registry import ADVANTAGES, OBJECTIVES, AdvantageInputs, ObjectiveInputs
from rlvr.algorithms.advantages.vimpo import implied_values
from rlvr.config.run import ConfigError, load_config
from tests.methods.helpers import run_recipe_steps
from tests.methods.seed_support import BINARY


def adv(rewards, groups, log_ratio, mask, **kw):
    entry = ADVANTAGES.get("vimpo")
    old = torch.as_tensor(log_ratio, dtype=torch.float32)
    extras = {"old_logp": old - 1.0, "ref_logp": torch.full_like(old, -1.0)}
    inp = AdvantageInputs(torch.tensor(rewards, dtype=torch.float64), torch.tensor(groups),
                          mask=torch.as_tensor(mask, dtype=torch.float32), extras=extras)
    return entry.fn(inp, entry.params(**kw))


def test_implied_values_oracle_c14():
    v = implied_values(torch.tensor([1.0]), torch.tensor([[0.5, -0.2, 0.1]]), torch.ones(1, 3), 0.1)
    assert torch.allclose(v, torch.tensor([[0.96, 1.01, 0.99]], dtype=torch.float64), atol=1e-12)
    steps = torch.cat([v[0, 1:] - v[0, :-1], (1.0 - v[0, -1:])])  # V_{t+1} - V_t, with V_T = r
    assert torch.allclose(steps, torch.tensor([0.05, -0.02, 0.01], dtype=torch.float64), atol=1e-12)


def test_advantage_oracle_two_row_group():
    # row 0: the oracle's values [0.96, 1.01, 0.99]; row 1: r = 0, log-ratios 0 -> V = 0; mean V_0 = 0.48
    a = adv([1.0, 0.0], [0, 0], [[0.5, -0.2, 0.1], [0.0, 0.0, 0.0]], torch.ones(2, 3), beta=0.1)
    assert torch.allclose(a, torch.tensor([[0.48, 0.53, 0.51], [-0.48, -0.48, -0.48]]), atol=1e-6)
    b = adv([1.0, 0.0], [0, 0], [[0.5, -0.2, 0.1], [0.0, 0.0, 0.0]], torch.ones(2, 3), beta=0.1,
            baseline="implied_state")
    assert torch.allclose(b, torch.tensor([[0.48] * 3, [-0.48] * 3]), atol=1e-6)


def ragged(seed, n_groups=6, max_size=5, t=5):
    rng = random.Random(seed)
    rewards, groups, lens = [], [], []
    for g in range(n_groups):
        for _ in range(rng.randint(1, max_size)):
            rewards.append(float(rng.random() < 0.5))
            groups.append(g)
            lens.append(rng.randint(1, t))
    mask = (torch.arange(t)[None, :] < torch.tensor(lens)[:, None]).float()
    lr = torch.randn(len(rewards), t, generator=torch.Generator().manual_seed(seed))
    return rewards, groups, lr, mask


@pytest.mark.parametrize("seed", [0, 1])
def test_reference_policy_gives_values_equal_to_the_reward_and_dr_grpo_advantages(seed):
    rewards, groups, lr, mask = ragged(seed)
    v = implied_values(torch.tensor(rewards), torch.zeros_like(lr), mask, 0.1)
    assert torch.equal(v, torch.tensor(rewards, dtype=torch.float64)[:, None] * mask)
    dr = ADVANTAGES.get("dr_grpo").fn(AdvantageInputs(torch.tensor(rewards, dtype=torch.float64),
                                                      torch.tensor(groups)), None)
    for baseline in ("group_start", "implied_state"):
        a = adv(rewards, groups, torch.zeros_like(lr), mask, baseline=baseline)
        assert torch.allclose(a, dr[:, None] * mask, atol=1e-6)


@pytest.mark.parametrize("seed", [2, 3])
def test_advantage_matches_naive_loop(seed):
    rewards, groups, lr, mask = ragged(seed)
    beta = 0.3
    a = adv(rewards, groups, lr, mask, beta=beta)
    b = adv(rewards, groups, lr, mask, beta=beta, baseline="implied_state")
    n, t = mask.shape
    vals = [[rewards[i] - beta * sum(float(lr[i, k]) for k in range(s, t) if mask[i, k]) for s in range(t)]
            for i in range(n)]
    for i in range(n):
        members = [j for j in range(n) if groups[j] == groups[i]]
        v0hat = 0.0 if len(members) == 1 else sum(vals[j][0] for j in members) / len(members)
        for s in range(t):
            want = (vals[i][s] - v0hat) * float(mask[i, s])
            assert math.isclose(float(a[i, s]), want, abs_tol=1e-5)
            assert math.isclose(float(b[i, s]), (vals[i][0] - v0hat) * float(mask[i, s]), abs_tol=1e-5)


def objective_inputs(logp, ref, old, rewards, groups, mask, advantages):
    return ObjectiveInputs(logp, old, advantages, mask, rewards=torch.tensor(rewards, dtype=torch.float64),
                           group_index=torch.tensor(groups), ref_logp=ref)


def test_value_loss_value_and_gradient_match_hand_derivation():
    rewards, groups, lr, mask = ragged(4)
    n, t = mask.shape
    g = torch.Generator().manual_seed(9)
    ref = -torch.rand(n, t, generator=g) - 0.5
    old = ref + 0.1 * torch.randn(n, t, generator=g)
    logp = old.clone().requires_grad_(True)  # ratio 1: the actor term is -A, its gradient -A per token
    advantages = torch.randn(n, t, generator=g) * mask
    beta, coef = 0.2, 0.7
    entry = OBJECTIVES.get("vimpo")
    loss, metrics = entry.fn(objective_inputs(logp, ref, old, rewards, groups, mask, advantages),
                             entry.params(beta=beta, value_coef=coef))
    (loss * mask).sum().backward()
    u = [rewards[i] - beta * float(((old - ref) * mask)[i].sum()) for i in range(n)]
    for i in range(n):
        members = [j for j in range(n) if groups[j] == groups[i]]
        resid = u[i] - sum(u[j] for j in members) / len(members)
        assert math.isclose(float(metrics["value_loss"][i, 0]), resid ** 2, abs_tol=1e-5)
        if len(members) == 1:
            assert resid == 0.0  # a group of one implies nothing to agree with
        L = int(mask[i].sum())
        for s in range(L):
            # d/dlogp_{i,s} of [ sum_t' (-A_t' rho_t') + L * coef * (u_i - sg[V0hat])^2 ]
            want = -float(advantages[i, s]) + L * coef * 2 * resid * (-beta)
            assert math.isclose(float(logp.grad[i, s]), want, rel_tol=1e-4, abs_tol=1e-5)


def test_value_coef_zero_is_ppo_clip():
    rewards, groups, lr, mask = ragged(5)
    old = -torch.rand(mask.shape)
    logp = old + 0.3 * torch.randn(mask.shape)
    a = torch.randn(mask.shape) * mask
    vimpo = OBJECTIVES.get("vimpo")
    ppo = OBJECTIVES.get("ppo_clip")
    inp = objective_inputs(logp, old - 0.2, old, rewards, groups, mask, a)
    l1, _ = vimpo.fn(inp, vimpo.params(value_coef=0.0))
    l2, _ = ppo.fn(inp, ppo.params())
    assert torch.equal(l1 * mask, l2 * mask)


def test_betas_must_agree_and_reference_is_loaded():
    with pytest.raises(ConfigError, match="differs from the vimpo advantage's beta"):
        load_config(recipe="vimpo", overrides=["algorithm.objective.beta=0.2"])
    from rlvr.config.run import needs_reference

    cfg = load_config(recipe="vimpo")
    assert needs_reference(cfg) and cfg.algorithm.kl.coef == 0.0


def test_recipe_trains_two_steps(tmp_path):
    out = run_recipe_steps("vimpo", tmp_path, overrides=BINARY)
    assert out["c"].ref_model is not None
    for m in out["metrics"]:
        assert all(math.isfinite(v) for v in m.values() if isinstance(v, float)), m
        assert "value_loss" in m and "implied_v0" in m
    assert any(not torch.equal(out["before"][k], out["after"][k]) for k in out["before"])

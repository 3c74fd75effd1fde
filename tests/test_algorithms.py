"""Golden values worked out from the definitions of GRPO (arXiv:2402.03300), PPO clip, the loss aggregation modes
and the k1/k2/k3 KL estimators, naive-loop equivalence, invariances."""

import math

import pytest
import torch

from rlvr.algorithms import (ADVANTAGES, AGGREGATIONS, KL_ESTIMATORS, OBJECTIVES, AdvantageInputs,
                             AggregationInputs, ObjectiveInputs, aggregate)
from rlvr.algorithms.aggregation.basic import TokenSumNormParams
from rlvr.algorithms.advantages.grpo import GRPOAdvantageParams
from rlvr.algorithms.objectives.ppo_clip import PPOClipParams
from rlvr.registry import Params, Registry, RegistryError


def grpo(rewards, groups=None, **kw):
    r = torch.tensor(rewards, dtype=torch.float64)
    g = torch.zeros(len(rewards), dtype=torch.long) if groups is None else torch.tensor(groups)
    return ADVANTAGES.get("grpo").fn(AdvantageInputs(r, g), GRPOAdvantageParams(**kw))


# --- GRPO advantages -----------------------------------------------------------------------------

def test_grpo_unbiased_std_oracle():
    assert torch.allclose(grpo([1, 0, 0, 0], eps=0.0), torch.tensor([1.5, -0.5, -0.5, -0.5]))


def test_grpo_population_std_oracle():
    a = grpo([1, 0, 0, 0], std="population", eps=0.0)
    assert torch.allclose(a, torch.tensor([1.7321, -0.5774, -0.5774, -0.5774]), atol=1e-4)
    assert abs(float(a.sum())) < 1e-6


def test_grpo_without_std_is_dr_grpo_advantage():
    assert torch.allclose(grpo([1, 0, 0, 0], std="none"), torch.tensor([0.75, -0.25, -0.25, -0.25]))


@pytest.mark.parametrize("rewards", [[1, 1, 1, 1], [0, 0, 0, 0], [0.7, 0.7, 0.7, 0.7], [0.1] * 3])
def test_grpo_constant_group_gives_exactly_zero(rewards):
    # float32 statistics give ~1e-2 here for 0.7; ours must be exactly 0
    assert torch.equal(grpo(rewards, eps=1e-9), torch.zeros(len(rewards)))


def test_grpo_single_completion_group_convention():
    assert torch.allclose(grpo([0.3, 1.0, 0.0], groups=[0, 1, 1]), torch.tensor([0.3, 0.7071, -0.7071]), atol=1e-3)


def test_grpo_ragged_groups_match_per_group_computation():
    rewards = [1, 0, 0, 1, 1, 0, 0.5, 0.25, 1.0]
    groups = [5, 5, 5, 2, 2, 9, 9, 9, 9]
    a = grpo(rewards, groups=groups)
    for g in set(groups):
        idx = [i for i, x in enumerate(groups) if x == g]
        sub = grpo([rewards[i] for i in idx])
        assert torch.allclose(a[idx], sub)


def test_grpo_is_invariant_to_group_affine_reward_transform():
    base = grpo([1, 0, 0, 1, 0], eps=0.0)
    assert torch.allclose(grpo([3 * x + 7 for x in [1, 0, 0, 1, 0]], eps=0.0), base, atol=1e-6)


# --- PPO clip ------------------------------------------------------------------------------------

def ppo(ratio, adv, **kw):
    logp = torch.tensor([[math.log(r) for r in ratio]], dtype=torch.float64, requires_grad=True)
    old = torch.zeros_like(logp)
    a = torch.tensor([adv], dtype=torch.float64)
    loss, m = OBJECTIVES.get("ppo_clip").fn(ObjectiveInputs(logp, old, a, torch.ones_like(a)), PPOClipParams(**kw))
    grads = torch.autograd.grad(loss.sum(), logp)[0]
    return loss.detach()[0].tolist(), grads[0].tolist(), m


def test_ppo_clip_asymmetric_and_dual_oracle():
    loss, grad, m = ppo([1.25, 1.30, 0.79, 5.0], [1, 1, -1, -1], clip_low=0.2, clip_high=0.28, dual_clip=3.0)
    assert loss == pytest.approx([-1.25, -1.28, 0.8, 3.0])
    # inside the range the gradient is -A * rho; clipped and dual-clipped tokens get none
    assert grad == pytest.approx([-1.25, 0.0, 0.0, 0.0])
    assert m["clip_frac"][0].tolist() == [0.0, 1.0, 1.0, 0.0]
    assert m["dual_clip_frac"][0].tolist() == [0.0, 0.0, 0.0, 1.0]


def test_ppo_clip_grpo_oracle_symmetric():
    loss, grad, _ = ppo([1.5, 0.5, 1.5], [1, -1, -1], clip_low=0.2, clip_high=0.2)
    assert [-x for x in loss] == pytest.approx([1.2, -0.8, -1.5])  # objective terms
    assert grad == pytest.approx([0.0, 0.0, 1.5])  # PPO never clips the wrong-direction side


def test_ppo_clip_matches_naive_loop():
    torch.manual_seed(0)
    n, t = 6, 7
    logp, old = torch.randn(n, t) * 0.3 - 1, torch.randn(n, t) * 0.3 - 1
    adv, mask = torch.randn(n, t), (torch.rand(n, t) > 0.3).float()
    p = PPOClipParams(clip_low=0.15, clip_high=0.3, dual_clip=2.5)
    loss, _ = OBJECTIVES.get("ppo_clip").fn(ObjectiveInputs(logp, old, adv, mask), p)
    for i in range(n):
        for j in range(t):
            r = math.exp(float(logp[i, j] - old[i, j]))
            a = float(adv[i, j])
            clipped = min(max(r, 1 - 0.15), 1 + 0.3)
            want = -min(r * a, clipped * a)
            if a < 0:
                want = min(want, -a * 2.5)
            assert float(loss[i, j]) == pytest.approx(want, rel=1e-5, abs=1e-6)


def test_ppo_clip_rejects_bad_dual_clip():
    with pytest.raises(ValueError, match="dual_clip"):
        PPOClipParams(dual_clip=0.9)


# --- aggregation ---------------------------------------------------------------------------------

def agg(name, params, loss, mask, groups=None, adv=None):
    g = torch.arange(mask.shape[0]) if groups is None else groups
    coef = AGGREGATIONS.get(name).fn(AggregationInputs(mask, g, adv), params)
    return aggregate(coef, loss, mask)


def _two_responses():
    loss = torch.tensor([[1.0, 0, 0], [0.0, 0.0, 0.0]])
    mask = torch.tensor([[1.0, 0, 0], [1.0, 1.0, 1.0]])
    return loss, mask


@pytest.mark.parametrize("name,params,want", [
    ("token_mean", Params(), 0.25),
    ("seq_mean_token_mean", Params(), 0.5),
    ("seq_mean_token_sum_norm", TokenSumNormParams(max_len=4), 0.125),
    ("seq_mean_token_sum", Params(), 0.5),
])
def test_aggregation_oracle(name, params, want):
    assert float(agg(name, params, *_two_responses())) == pytest.approx(want)


def _naive_aggregate(name, loss, mask, max_len=9):
    rows = [[float(loss[i, t]) for t in range(loss.shape[1]) if mask[i, t]] for i in range(loss.shape[0])]
    rows = [r for r in rows if r]  # an empty row is not a completion
    b, tokens = len(rows), sum(len(r) for r in rows)
    if name == "token_mean":
        return sum(sum(r) for r in rows) / tokens
    if name == "seq_mean_token_mean":
        return sum(sum(r) / len(r) for r in rows) / b
    if name == "seq_mean_token_sum":
        return sum(sum(r) for r in rows) / b
    return sum(sum(r) for r in rows) / (b * max_len)


AGG_CASES = [("token_mean", Params()), ("seq_mean_token_mean", Params()), ("seq_mean_token_sum", Params()),
             ("seq_mean_token_sum_norm", TokenSumNormParams(max_len=9))]


@pytest.mark.parametrize("name,params", AGG_CASES)
@pytest.mark.parametrize("empty", [(), (2, 5)])
def test_aggregation_matches_naive_loop(name, params, empty):
    torch.manual_seed(1)
    loss = torch.randn(8, 9)
    mask = (torch.rand(8, 9) > 0.4).float()
    mask[:, 0] = 1
    mask[list(empty)] = 0  # rows the overlong filter emptied
    assert float(agg(name, params, loss, mask)) == pytest.approx(_naive_aggregate(name, loss, mask), rel=1e-5)


@pytest.mark.parametrize("name,params", AGG_CASES)
def test_aggregation_coefficients_split_over_micro_batches(name, params):
    torch.manual_seed(1)
    loss = torch.randn(8, 9)
    mask = (torch.rand(8, 9) > 0.4).float()
    mask[:, 0] = 1
    coef = AGGREGATIONS.get(name).fn(AggregationInputs(mask, torch.arange(8)), params)
    whole = aggregate(coef, loss, mask)
    parts = sum(aggregate(coef[i: i + 3], loss[i: i + 3], mask[i: i + 3]) for i in (0, 3, 6))
    assert float(parts) == pytest.approx(float(whole), rel=1e-6)


def test_dr_grpo_norm_ignores_extra_padding():
    loss, mask = _two_responses()
    p = TokenSumNormParams(max_len=4)
    padded = torch.cat([loss, torch.zeros(2, 5)], 1), torch.cat([mask, torch.zeros(2, 5)], 1)
    assert float(agg("seq_mean_token_sum_norm", p, *padded)) == pytest.approx(
        float(agg("seq_mean_token_sum_norm", p, loss, mask)))


# --- KL ------------------------------------------------------------------------------------------

@pytest.mark.parametrize("logp,ref,want", [
    (-1.0, -2.0, {"k1": 1.0, "k2": 0.5, "k3": math.exp(-1)}),
    (-2.0, -2.0, {"k1": 0.0, "k2": 0.0, "k3": 0.0}),
    (-2.0, -1.0, {"k1": -1.0, "k2": 0.5, "k3": math.e - 2}),
])
def test_kl_oracle(logp, ref, want):
    for name, value in want.items():
        out = KL_ESTIMATORS.get(name).fn(torch.tensor([[logp]]), torch.tensor([[ref]]))
        assert float(out) == pytest.approx(value, abs=1e-6)


def test_k3_is_nonnegative_and_unbiased_for_kl():
    torch.manual_seed(0)
    # close enough that no sample reaches the [-10, 10] clamp, which would bias the estimate
    p = torch.softmax(0.5 * torch.randn(5), 0)
    q = torch.softmax(0.5 * torch.randn(5), 0)
    samples = torch.multinomial(p, 200_000, replacement=True)
    est = KL_ESTIMATORS.get("k3").fn(p.log()[samples], q.log()[samples])
    assert float(est.min()) >= 0
    assert float(est.mean()) == pytest.approx(float((p * (p / q).log()).sum()), rel=0.03)


# --- registries ----------------------------------------------------------------------------------

def test_registry_rejects_duplicates_and_lists_valid_names():
    reg = Registry("widget")
    reg.register("a")(lambda: None)
    with pytest.raises(RegistryError, match="already registered"):
        reg.register("a")(lambda: None)
    with pytest.raises(RegistryError, match="valid names: a"):
        reg.get("b")

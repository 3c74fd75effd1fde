"""Delta L and Balanced aggregation, the k3+ KL estimator and the KL coefficient schedules.

Golden values worked out from the definitions (sources in docs/methods.md: `delta_l`, `balanced`, `k3+`,
`accuracy_conditioned`), equality with naive Python loops on random ragged batches, micro-batch and padding
invariance, and config validation.
"""

import math
import random

import pytest
import torch

from rlvr.algorithms import AGGREGATIONS, KL_ESTIMATORS, AggregationInputs, aggregate
from rlvr.algorithms.aggregation.balanced import BalancedParams
from rlvr.algorithms.aggregation.basic import TokenSumNormParams
from rlvr.algorithms.aggregation.delta_l import DeltaLParams
from rlvr.algorithms.kl_schedules import (KL_SCHEDULES, AccuracyConditionedParams, AdaptiveParams,
                                          AnnealParams)
from rlvr.config.run import ConfigError, load_config
from rlvr.registry import Params


def coefs(name, params, mask, groups=None, adv=None):
    g = torch.arange(mask.shape[0]) if groups is None else groups
    return AGGREGATIONS.get(name).fn(AggregationInputs(mask, g, adv), params)


def agg(name, params, loss, mask, groups=None, adv=None):
    return float(aggregate(coefs(name, params, mask, groups, adv), loss, mask))


def _mask(lengths, width=None):
    width = width or max(lengths)
    return (torch.arange(width)[None, :] < torch.tensor(lengths)[:, None]).float()


def _random_batch(seed, n=11, t=9, token_adv=False):
    """Random losses, a mask with ragged lengths (some empty), ragged groups, advantages with zeros."""
    g = torch.Generator().manual_seed(seed)
    rng = random.Random(seed)
    lengths = [rng.randint(0, t) for _ in range(n)]
    lengths[0] = t  # at least one full-width row
    mask = _mask(lengths, t)
    groups = torch.tensor(sorted(rng.randint(0, 3) for _ in range(n))) * 7  # ragged, non-contiguous ids
    groups = groups[torch.randperm(n, generator=g)]  # rows of a group need not be adjacent
    seq_adv = torch.tensor([rng.choice([-1.5, -0.3, 0.0, 0.4, 2.0]) for _ in range(n)])
    adv = seq_adv[:, None].expand(n, t).clone()
    if token_adv:
        adv = adv + 0.2 * torch.randn(n, t, generator=g)
    loss = torch.randn(n, t, generator=g)
    return loss, mask, groups, adv


# --- Delta L normalisation -----------------------------------------------------------------------

@pytest.mark.parametrize("alpha,x", [(1.0, [0.8, 0.2]), (0.75, [0.73880, 0.26120]), (0.5, [2 / 3, 1 / 3])])
def test_delta_l_oracle(alpha, x):
    mask = _mask([100, 400])
    p = DeltaLParams(alpha=alpha, max_len=512)
    for i in range(2):  # one unit of loss on a single token of response i isolates x_i / max_len
        loss = torch.zeros_like(mask)
        loss[i, 0] = 1.0
        assert agg("delta_l", p, loss, mask) * 512 == pytest.approx(x[i], abs=1e-5)
    assert float(coefs("delta_l", p, mask).sum()) * 512 == pytest.approx(1.0, abs=1e-6)  # unbiasedness


def test_delta_l_equal_lengths_is_dr_grpo():
    loss, mask, _, _ = _random_batch(3)
    mask = torch.ones_like(mask)
    want = agg("seq_mean_token_sum_norm", TokenSumNormParams(max_len=16), loss, mask)
    for alpha in (0.5, 1.0):
        assert agg("delta_l", DeltaLParams(alpha=alpha, max_len=16), loss, mask) == pytest.approx(want, rel=1e-6)


def _naive_delta_l(loss, mask, alpha, max_len):
    rows = [[float(loss[i, t]) for t in range(loss.shape[1]) if mask[i, t]] for i in range(loss.shape[0])]
    norm = sum(len(r) ** -alpha for r in rows if r)
    return sum((len(r) ** -alpha / norm) * sum(r) for r in rows if r) / max_len


@pytest.mark.parametrize("seed", range(4))
def test_delta_l_matches_naive_loop(seed):
    loss, mask, groups, adv = _random_batch(seed)
    alpha = 0.25 + 0.25 * seed
    got = agg("delta_l", DeltaLParams(alpha=alpha, max_len=12), loss, mask, groups, adv)
    assert got == pytest.approx(_naive_delta_l(loss, mask, alpha, 12), rel=1e-5, abs=1e-7)


def test_delta_l_empty_rows_take_no_weight():
    mask = _mask([0, 2, 2])
    c = coefs("delta_l", DeltaLParams(max_len=1), mask)
    assert torch.isfinite(c).all()
    assert c.tolist() == pytest.approx([0.0, 0.5, 0.5])


def test_delta_l_params_validate():
    with pytest.raises(ValueError):
        DeltaLParams(alpha=-1.0, max_len=8)
    assert DeltaLParams(alpha=1.0).max_len is None  # unset: the run's rollout.max_new_tokens, never padded width


def test_delta_l_default_constant_is_the_completion_limit():
    mask = _mask([2, 5])
    groups = torch.zeros(2, dtype=torch.long)
    explicit = AGGREGATIONS.get("delta_l").fn(AggregationInputs(mask, groups), DeltaLParams(max_len=16))
    default = AGGREGATIONS.get("delta_l").fn(AggregationInputs(mask, groups, max_new_tokens=16), DeltaLParams())
    assert torch.equal(explicit, default)
    padded = torch.cat([mask, torch.zeros(2, 30)], 1)  # the tensor's width plays no part
    assert torch.equal(AGGREGATIONS.get("delta_l").fn(AggregationInputs(padded, groups, max_new_tokens=16),
                                                      DeltaLParams()), default)
    with pytest.raises(ValueError, match="max_len"):
        AGGREGATIONS.get("delta_l").fn(AggregationInputs(mask, groups), DeltaLParams())


# --- Balanced aggregation ------------------------------------------------------------------------

def _ba_pair(a, b, adv):
    loss = torch.tensor([[a, 0.0, 0.0], [b, b, b]])
    mask = _mask([1, 3])
    advantages = torch.tensor(adv)[:, None].expand(2, 3)
    return loss, mask, torch.zeros(2, dtype=torch.long), advantages


@pytest.mark.parametrize("scope", ["group", "batch"])
@pytest.mark.parametrize("a,b", [(1.0, 0.0), (0.0, 1.0), (2.0, 5.0)])
def test_balanced_oracle_positive_and_negative(scope, a, b):
    # one positive of length 1, one negative of length 3: (a + b) / 2, where token-mean gives (a + 3b) / 4
    assert agg("balanced", BalancedParams(scope=scope), *_ba_pair(a, b, [1.0, -1.0])) == pytest.approx((a + b) / 2)


@pytest.mark.parametrize("a,b", [(1.0, 0.0), (0.0, 1.0), (2.0, 5.0)])
def test_balanced_oracle_one_sign_is_token_mean(a, b):
    batch = _ba_pair(a, b, [0.5, 2.0])
    assert agg("balanced", BalancedParams(), *batch) == pytest.approx((a + 3 * b) / 4)
    assert agg("balanced", BalancedParams(), *batch) == pytest.approx(agg("token_mean", Params(), *batch))


def test_balanced_excludes_zero_advantage_responses_and_groups():
    loss, mask, groups, adv = _ba_pair(2.0, 5.0, [1.0, -1.0])
    # a zero-advantage row in the same group and a whole zero-advantage group, both with large losses
    loss = torch.cat([loss, torch.full((2, 3), 100.0)])
    mask = torch.cat([mask, torch.ones(2, 3)])
    groups = torch.tensor([0, 0, 0, 1])
    adv = torch.cat([adv, torch.zeros(2, 3)])
    for scope in ("group", "batch"):
        assert agg("balanced", BalancedParams(scope=scope), loss, mask, groups, adv) == pytest.approx(3.5)


def test_balanced_averages_groups_and_batch_scope_differs():
    # group 0: +len1 (loss 1), -len3 (loss 0); group 1: two positives of length 2 with loss 4
    loss = torch.tensor([[1.0, 0, 0], [0.0, 0, 0], [4.0, 4, 0], [4.0, 4, 0]])
    mask = _mask([1, 3, 2, 2])
    adv = torch.tensor([1.0, -1.0, 1.0, 1.0])[:, None].expand(4, 3)
    groups = torch.tensor([0, 0, 1, 1])
    assert agg("balanced", BalancedParams(scope="group"), loss, mask, groups, adv) == pytest.approx((0.5 + 4) / 2)
    # batch: P = {len 1, 2, 2} token mean (1 + 16) / 5, N token mean 0; mixed 3 : 1
    assert agg("balanced", BalancedParams(scope="batch"), loss, mask, groups, adv) == pytest.approx(0.75 * 17 / 5)


def test_balanced_all_zero_advantages_gives_zero_loss():
    loss, mask, groups, adv = _random_batch(0)
    c = coefs("balanced", BalancedParams(), mask, groups, torch.zeros_like(adv))
    assert torch.equal(c, torch.zeros(mask.shape[0]))


def test_balanced_requires_advantages():
    with pytest.raises(ValueError, match="advantages"):
        coefs("balanced", BalancedParams(), _mask([1, 2]))


def _naive_balanced(loss, mask, groups, adv, scope):
    n, t = loss.shape
    scopes = {}
    for i in range(n):
        toks = [float(loss[i, j]) for j in range(t) if mask[i, j]]
        a = [float(adv[i, j]) for j in range(t) if mask[i, j]]
        mean_a = sum(a) / len(a) if a else 0.0
        key = int(groups[i]) if scope == "group" else 0
        bucket = scopes.setdefault(key, {"P": [], "N": []})
        if mean_a > 0:
            bucket["P"].append(toks)
        elif mean_a < 0:
            bucket["N"].append(toks)
    values = []
    for b in scopes.values():
        if not b["P"] and not b["N"]:
            continue
        total = 0.0
        for subset in (b["P"], b["N"]):
            ntok = sum(len(r) for r in subset)
            if subset and ntok:
                total += len(subset) * sum(sum(r) for r in subset) / ntok
        values.append(total / (len(b["P"]) + len(b["N"])))
    return sum(values) / len(values) if values else 0.0


@pytest.mark.parametrize("scope", ["group", "batch"])
@pytest.mark.parametrize("seed,token_adv", [(0, False), (1, False), (2, True), (3, True)])
def test_balanced_matches_naive_loop(scope, seed, token_adv):
    loss, mask, groups, adv = _random_batch(seed, token_adv=token_adv)
    got = agg("balanced", BalancedParams(scope=scope), loss, mask, groups, adv)
    assert got == pytest.approx(_naive_balanced(loss, mask, groups, adv, scope), rel=1e-5, abs=1e-7)


# --- shared: micro-batch and padding invariance --------------------------------------------------

AGG_CASES = [("delta_l", DeltaLParams(alpha=0.75, max_len=9)), ("balanced", BalancedParams(scope="group")),
             ("balanced", BalancedParams(scope="batch"))]


@pytest.mark.parametrize("name,params", AGG_CASES)
@pytest.mark.parametrize("cuts", [(0, 4, 11), (0, 3, 7, 11)])
def test_coefficients_split_over_micro_batches(name, params, cuts):
    loss, mask, groups, adv = _random_batch(5)
    c = coefs(name, params, mask, groups, adv)
    whole = float(aggregate(c, loss, mask))
    parts = [slice(a, b) for a, b in zip(cuts, cuts[1:])]
    # each micro-batch trimmed to its own longest row, as RolloutBatch.trim does
    total = 0.0
    for s in parts:
        w = int(mask[s].sum(-1).max())
        total += float(aggregate(c[s], loss[s, :w], mask[s, :w]))
    assert total == pytest.approx(whole, rel=1e-6, abs=1e-7)
    # computing the coefficients per micro-batch instead would be wrong: the whole batch is required
    assert sum(agg(name, params, loss[s], mask[s], groups[s], adv[s]) for s in parts) != pytest.approx(whole)


@pytest.mark.parametrize("name,params", AGG_CASES)
def test_extra_padding_columns_change_nothing(name, params):
    loss, mask, groups, adv = _random_batch(6)
    pad = lambda x, v: torch.cat([x, torch.full((x.shape[0], 5), v)], 1)  # noqa: E731
    got = agg(name, params, pad(loss, 3.0), pad(mask, 0.0), groups, pad(adv, 7.0))
    assert got == pytest.approx(agg(name, params, loss, mask, groups, adv), rel=1e-6)


@pytest.mark.parametrize("overrides,field,value", [
    (["algorithm.aggregation.name=delta_l", "algorithm.aggregation.max_len=8"], "max_len", 8),
    (["algorithm.aggregation.name=delta_l", "algorithm.aggregation.max_len=8",
      "algorithm.aggregation.alpha=0.75"], "alpha", 0.75),
    (["algorithm.aggregation.name=balanced"], "scope", "group"),
    (["algorithm.aggregation.name=balanced", "algorithm.aggregation.scope=batch"], "scope", "batch"),
])
def test_aggregations_validate_in_config(overrides, field, value):
    cfg = load_config(overrides=overrides)
    assert cfg.algorithm.aggregation.name == overrides[0].split("=")[1]
    assert getattr(cfg.algorithm.aggregation.params, field) == value


@pytest.mark.parametrize("overrides,needle", [
    (["algorithm.aggregation.name=delta_l", "algorithm.aggregation.max_len=0"], "max_len"),
    (["algorithm.aggregation.name=delta_l", "algorithm.aggregation.max_len=8", "algorithm.aggregation.alpha=-1"],
     "alpha"),
    (["algorithm.aggregation.name=balanced", "algorithm.aggregation.scope=prompt"], "scope"),
])
def test_bad_aggregation_config_is_rejected(overrides, needle):
    with pytest.raises(ConfigError, match=needle):
        load_config(overrides=overrides)


# --- k3+ -----------------------------------------------------------------------------------------

@pytest.mark.parametrize("logp,ref,want", [(-1.0, -2.0, math.exp(-1)), (-2.0, -2.0, 0.0), (-2.0, -1.0, math.e - 2)])
def test_k3_plus_oracle_values(logp, ref, want):
    out = KL_ESTIMATORS.get("k3+").fn(torch.tensor([[logp]]), torch.tensor([[ref]]))
    assert float(out) == pytest.approx(want, abs=1e-6)


def _value_and_grad(name, logp, ref):
    x = logp.clone().requires_grad_(True)
    out = KL_ESTIMATORS.get(name).fn(x, ref)
    (g,) = torch.autograd.grad(out.sum(), x)
    return out.detach(), g


def test_k3_plus_has_k3_value_and_k2_gradient():
    torch.manual_seed(0)
    logp, ref = torch.randn(4, 6, dtype=torch.float64) - 1, torch.randn(4, 6, dtype=torch.float64) - 1
    v_plus, g_plus = _value_and_grad("k3+", logp, ref)
    v3, g3 = _value_and_grad("k3", logp, ref)
    _, g2 = _value_and_grad("k2", logp, ref)
    assert torch.equal(v_plus, v3)
    assert torch.allclose(g_plus, g2) and torch.allclose(g2, logp - ref)  # d(k2)/d logp = -d
    assert not torch.allclose(g_plus, g3)


def test_k3_plus_validates_in_config():
    assert load_config(overrides=["algorithm.kl.estimator=k3+"]).algorithm.kl.estimator == "k3+"


# --- KL coefficient schedules --------------------------------------------------------------------

def sched(name, step, params=Params(), total=100, base=0.1, stats=None):
    return KL_SCHEDULES.get(name).fn(step, total, base, stats or {}, params)


def test_schedule_registry_names():
    assert KL_SCHEDULES.names() == ["accuracy_conditioned", "adaptive", "constant", "cosine", "linear"]


@pytest.mark.parametrize("step,want", [(0, 0.1), (37, 0.1), (100, 0.1)])
def test_constant_schedule(step, want):
    assert sched("constant", step) == pytest.approx(want)


@pytest.mark.parametrize("step,want", [(0, 0.1), (25, 0.085), (50, 0.07), (100, 0.04), (150, 0.04)])
def test_linear_schedule(step, want):
    assert sched("linear", step, AnnealParams(final=0.04)) == pytest.approx(want)


@pytest.mark.parametrize("step,want", [(0, 0.1), (25, 0.0853553), (50, 0.05), (75, 0.0146447), (100, 0.0)])
def test_cosine_schedule(step, want):
    assert sched("cosine", step, AnnealParams(final=0.0)) == pytest.approx(want, abs=1e-7)


@pytest.mark.parametrize("acc,want", [(0.2, 0.00190), (0.5, 0.02), (0.8, 0.03810)])
def test_accuracy_conditioned_oracle(acc, want):
    p = AccuracyConditionedParams(beta_min=0.0, beta_max=0.04, sharpness=10.0, midpoint=0.5)
    assert sched("accuracy_conditioned", 3, p, stats={"accuracy": acc}) == pytest.approx(want, abs=1e-5)
    # beta_max defaults to the configured coefficient
    assert sched("accuracy_conditioned", 3, AccuracyConditionedParams(), base=0.04,
                 stats={"accuracy": acc}) == pytest.approx(want, abs=1e-5)


def test_accuracy_conditioned_is_monotone_and_needs_accuracy():
    p = AccuracyConditionedParams()
    values = [sched("accuracy_conditioned", 0, p, stats={"accuracy": a / 20}) for a in range(21)]
    assert all(x <= y for x, y in zip(values, values[1:])) and values[-1] > values[0]
    with pytest.raises(KeyError, match="accuracy"):
        sched("accuracy_conditioned", 0, p)


@pytest.mark.parametrize("kl,coef,want", [
    (0.15, 0.05, 0.05 * 1.02),   # error 0.5 clipped to 0.2, gain 1/10
    (0.09, 0.05, 0.05 * 0.99),   # error -0.1
    (0.0, 0.05, 0.05 * 0.98),    # error -1 clipped to -0.2
    (0.1, 0.05, 0.05),           # on target: unchanged
])
def test_adaptive_controller_golden(kl, coef, want):
    p = AdaptiveParams(target=0.1, horizon=10.0)
    assert sched("adaptive", 5, p, stats={"kl": kl, "coef": coef}) == pytest.approx(want)


def test_adaptive_controller_gain_and_clip_follow_params():
    p = AdaptiveParams(target=0.2, horizon=40.0, max_error=0.5)
    # error 0.3 / 0.2 - 1 = 0.5 (at the clip), gain 1/40
    assert sched("adaptive", 1, p, stats={"kl": 0.3, "coef": 0.1}) == pytest.approx(0.1 * (1 + 0.5 / 40))
    assert sched("adaptive", 1, p, stats={"kl": 5.0, "coef": 0.1}) == pytest.approx(0.1 * (1 + 0.5 / 40))


def test_adaptive_controller_starts_from_base_and_caller_keeps_state():
    p = AdaptiveParams(target=0.1, horizon=10.0)
    coef = sched("adaptive", 0, p, base=0.2, stats={"kl": 1.0})  # no state yet: starts from base
    assert coef == pytest.approx(0.2 * 1.02)
    for step in range(1, 4):  # the caller feeds the returned coefficient back
        coef = sched("adaptive", step, p, base=0.2, stats={"kl": 1.0, "coef": coef})
    assert coef == pytest.approx(0.2 * 1.02 ** 4)
    with pytest.raises(KeyError, match="kl"):
        sched("adaptive", 0, p)


def test_schedule_params_validate():
    with pytest.raises(ValueError):
        AdaptiveParams(target=0.0)
    with pytest.raises(ValueError):
        AccuracyConditionedParams(midpoint=1.5)
    with pytest.raises(ValueError):
        AnnealParams(final=-0.1)

"""Advantage estimators from the papers in docs/methods.md: ngrpo, dgpo (DGAE), a_grae, lampo, and fixed_baseline
(the REINFORCE baseline the verifier-noise corrections need).

Hand-worked oracles from each method's definition (sources in docs/methods.md), each method's defining property,
equality with a naive per-group Python loop on random ragged groups, and two real steps of each recipe on the tiny
model.
"""

import math
import random
import statistics

import pytest
import torch

from rlvr.algorithms import ADVANTAGES, AdvantageInputs
from tests.methods.helpers import run_recipe_steps
from tests.methods.seed_support import BINARY


def adv(name, rewards, groups=None, correct=None, old_logp=None, lengths=None, **kw):
    r = torch.tensor(rewards, dtype=torch.float64)
    g = torch.zeros(len(rewards), dtype=torch.long) if groups is None else torch.tensor(groups)
    lens = torch.ones(len(rewards), dtype=torch.long) if lengths is None else torch.tensor(lengths)
    mask = (torch.arange(int(lens.max()))[None, :] < lens[:, None]).float()
    comps = {} if correct is None else {"correct": torch.tensor(correct, dtype=torch.float64)}
    extras = {} if old_logp is None else {"old_logp": old_logp}
    entry = ADVANTAGES.get(name)
    return entry.fn(AdvantageInputs(r, g, lens, mask, comps, extras), entry.params(**kw))


def t(x):
    return torch.tensor(x, dtype=torch.float32)


def ragged(seed, binary=True, max_size=6, n_groups=7):
    rng = random.Random(seed)
    rewards, groups = [], []
    for gi in range(n_groups):
        for _ in range(rng.randint(1, max_size)):
            rewards.append(float(rng.random() < 0.5) if binary else rng.random())
            groups.append(gi)
    return rewards, groups


def by_group(rewards, groups):
    out = {}
    for i, g in enumerate(groups):
        out.setdefault(g, []).append(i)
    return out


# --- NGRPO ---------------------------------------------------------------------------------------

def test_ngrpo_oracle_b8():
    assert torch.allclose(adv("ngrpo", [0, 0, 0, 0]), t([-0.44721] * 4), atol=1e-5)
    assert torch.allclose(adv("ngrpo", [1, 0, 0, 0]), t([1.09544, -0.73030, -0.73030, -0.73030]), atol=1e-5)
    assert torch.equal(adv("ngrpo", [1, 1, 1, 1]), torch.zeros(4))


def test_ngrpo_all_wrong_groups_get_negative_advantages_where_grpo_gives_zero():
    r, g = [0, 0, 0, 1, 0, 1, 1, 1], [0, 0, 0, 1, 1, 2, 2, 2]
    a, base = adv("ngrpo", r, g), adv("grpo", r, g)
    assert torch.equal(base[:3], torch.zeros(3)) and (a[:3] < 0).all()
    assert torch.equal(a[5:], torch.zeros(3))  # all correct: still 0


def test_ngrpo_matches_naive_loop():
    for seed in range(5):
        r, g = ragged(seed, binary=seed % 2 == 0)
        want = [0.0] * len(r)
        for idx in by_group(r, g).values():
            vals = [r[i] for i in idx] + [1.0]
            mu, sd = statistics.mean(vals), statistics.stdev(vals)
            for i in idx:
                want[i] = 0.0 if all(r[j] == 1.0 for j in idx) else (r[i] - mu) / (sd + 1e-6)
        assert torch.allclose(adv("ngrpo", r, g), t(want), atol=1e-5), seed


# --- DGPO / DGAE ---------------------------------------------------------------------------------

def test_dgae_oracle_b9():
    f = 1 / (1 + 1e-4 / 1.5)
    assert torch.allclose(adv("dgpo", [1, 0, 0, 0]), t([2.0 * f, -2 / 3 * f, -2 / 3 * f, -2 / 3 * f]), atol=1e-6)
    assert torch.allclose(adv("dgpo", [1, 1, 1, 0]), t([2 / 3 * f, 2 / 3 * f, 2 / 3 * f, -2.0 * f]), atol=1e-6)


def test_dgae_total_absolute_advantage_is_the_group_size():
    r, g = ragged(11, binary=False)
    a = adv("dgpo", r, g, eps=0.0)
    for idx in by_group(r, g).values():
        total = float(a[idx].abs().sum())
        assert total == pytest.approx(len(idx) if len(set(r[i] for i in idx)) > 1 else 0.0, rel=1e-6)


def test_dgae_matches_naive_loop():
    for seed in range(5):
        r, g = ragged(seed, binary=seed % 2 == 1)
        want = [0.0] * len(r)
        for idx in by_group(r, g).values():
            vals = [r[i] for i in idx]
            mu = sum(vals) / len(vals)
            mad = sum(abs(v - mu) for v in vals)
            for i in idx:
                want[i] = 0.0 if max(vals) == min(vals) else len(vals) * (r[i] - mu) / (mad + 1e-4)
        assert torch.allclose(adv("dgpo", r, g), t(want), atol=1e-5), seed


# --- A-GRAE --------------------------------------------------------------------------------------

def test_a_grae_oracle_b10():
    # [1,1,1,0] and [1,0,0,0] together: group accuracies 0.75 and 0.25, pbar = 0.5
    a = adv("a_grae", [1, 1, 1, 0, 1, 0, 0, 0], [0, 0, 0, 0, 1, 1, 1, 1])
    assert torch.allclose(a, t([0.53867, 0.53867, 0.53867, -3.23202, 0.75, -0.5, -0.5, -0.5]), atol=1e-4)
    assert torch.allclose(adv("a_grae", [1, 1, 0, 0]), t([0.52269, 0.52269, -1.04538, -1.04538]), atol=1e-4)


def test_a_grae_damps_positives_only_while_the_batch_is_weak():
    # group accuracies 0.25 and 0, pbar = 0.125: positives scaled by min(1, pbar / alpha), negatives untouched
    r, g = [1, 0, 0, 0, 0, 0, 0, 0], [0, 0, 0, 0, 1, 1, 1, 1]
    weak = adv("a_grae", r, g, alpha=1.0)  # x 0.125
    half = adv("a_grae", r, g, alpha=0.25)  # x 0.5
    undamped = adv("a_grae", r, g, alpha=0.125)  # x 1
    assert float(weak[0]) == pytest.approx(0.125 * float(undamped[0]), rel=1e-6)
    assert float(half[0]) == pytest.approx(0.5 * float(undamped[0]), rel=1e-6)
    assert torch.equal(weak[1:], undamped[1:]) and (weak[1:4] < 0).all()
    assert torch.equal(weak[4:], torch.zeros(4))  # an all-wrong group stays 0


def test_a_grae_reads_correctness_not_the_training_reward():
    # a format bonus in the reward must not move the difficulty estimate: correctness [1,0,0,0] in both
    plain = adv("a_grae", [1, 0, 0, 0], correct=[1, 0, 0, 0])
    shifted = adv("a_grae", [1.5, 0.5, 0.5, 0.5], correct=[1, 0, 0, 0])
    assert torch.allclose(plain, shifted, atol=1e-6)
    with pytest.raises(ValueError, match="'correct' score component or binary"):
        adv("a_grae", [0.5, 0.2])


def test_a_grae_matches_naive_loop():
    for seed in range(5):
        r, g = ragged(seed)
        groups = by_group(r, g)
        mus = {k: sum(r[i] for i in idx) / len(idx) for k, idx in groups.items()}
        pbar = sum(mus.values()) / len(mus)
        want = [0.0] * len(r)
        for k, idx in groups.items():
            vals = [r[i] for i in idx]
            mu = mus[k]
            for i in idx:
                if len(idx) == 1:
                    a0 = r[i]
                elif max(vals) == min(vals):
                    a0 = 0.0
                else:
                    a0 = (r[i] - mu) / (statistics.stdev(vals) + 1e-6)
                if mu in (0.0, 1.0):
                    continue
                x = (1 - pbar) * 0.5 * a0 / (1 - math.sqrt(mu) + 1e-6) + pbar * 0.5 * a0 / (math.sqrt(mu) + 1e-6)
                want[i] = x * min(1.0, pbar / 0.5) if x > 0 else x
        assert torch.allclose(adv("a_grae", r, g, alpha=0.5), t(want), atol=1e-5), seed


# --- LamPO ---------------------------------------------------------------------------------------

def _logp(lengths, seed):
    gen = torch.Generator().manual_seed(seed)
    t_max = max(lengths)
    mask = (torch.arange(t_max)[None, :] < torch.tensor(lengths)[:, None]).float()
    return -torch.rand(len(lengths), t_max, generator=gen, dtype=torch.float64) * 3 * mask


def test_lampo_oracle_c4_kappa_zero_is_rloo():
    lp = _logp([2, 3, 1, 4], 0)
    a = adv("lampo", [1, 0, 0, 0], old_logp=lp, lengths=[2, 3, 1, 4], kappa=0.0)
    assert torch.allclose(a, t([1, -1 / 3, -1 / 3, -1 / 3]), atol=1e-6)
    r, g = ragged(3, binary=False)
    lens = [1 + i % 4 for i in range(len(r))]
    got = adv("lampo", r, g, old_logp=_logp(lens, 1), lengths=lens, kappa=0.0)
    want = adv("rloo", r, g)
    singletons = [i for idx in by_group(r, g).values() if len(idx) == 1 for i in idx]
    assert torch.allclose(got, want, atol=1e-6) and all(got[i] == 0 for i in singletons)


def test_lampo_up_weights_pairs_the_policy_misorders_and_sums_to_zero():
    lens = [3, 3, 3]
    lp = torch.tensor([[-2.0] * 3, [-0.1] * 3, [-1.0] * 3], dtype=torch.float64)  # policy prefers the wrong row 1
    a = adv("lampo", [1, 0, 0], old_logp=lp, lengths=lens, kappa=2.0)
    rloo = adv("rloo", [1, 0, 0])
    assert a[0] > rloo[0] and abs(float(a.sum())) < 1e-6
    assert a[1] < a[2] < 0  # the confidently wrong row is pushed down harder


def test_lampo_matches_naive_loop():
    for seed in range(4):
        r, g = ragged(seed, binary=seed % 2 == 0)
        lens = [1 + (7 * i) % 5 for i in range(len(r))]
        lp = _logp(lens, seed)
        s = [float(lp[i, : lens[i]].mean()) for i in range(len(r))]
        want = [0.0] * len(r)
        for idx in by_group(r, g).values():
            for i in idx:
                if len(idx) < 2:
                    continue
                total = 0.0
                for j in idx:
                    if j != i:
                        d = r[i] - r[j]
                        sign = (d > 0) - (d < 0)
                        total += 2 / (1 + math.exp(-1.5 * (s[j] - s[i]) * sign)) * d
                want[i] = total / (len(idx) - 1)
        assert torch.allclose(adv("lampo", r, g, old_logp=lp, lengths=lens, kappa=1.5), t(want), atol=1e-5), seed


# --- fixed baseline ------------------------------------------------------------------------------

def test_fixed_baseline_is_reward_minus_constant():
    assert torch.allclose(adv("fixed_baseline", [1, 0, 0.5], [0, 0, 1], baseline=0.25), t([0.75, -0.25, 0.25]))


# --- real steps ----------------------------------------------------------------------------------

@pytest.mark.parametrize("recipe", ["ngrpo", "dgpo", "a_grae", "lampo"])
def test_recipe_trains_two_steps(recipe, tmp_path):
    out = run_recipe_steps(recipe, tmp_path, overrides=BINARY)
    assert len(out["metrics"]) == 2
    for m in out["metrics"]:
        assert all(math.isfinite(v) for v in m.values() if isinstance(v, float)), m
    assert any(not torch.equal(out["before"][k], out["after"][k]) for k in out["before"])
    if recipe == "dgpo":
        assert "advantage_transform/dqw/weight_max" in out["metrics"][0]

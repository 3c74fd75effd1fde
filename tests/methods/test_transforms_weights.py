"""Advantage transforms from the papers in docs/methods.md: dqw, ha_dw (stateful), focal, pair_weight, mcpo_weight.

Hand-worked oracles from each method's definition (sources in docs/methods.md), each method's defining property,
equality with a naive per-group Python loop on random ragged groups, two real steps of each recipe, and a resume
test for the stateful HA-DW.
"""

import math
import random

import pytest
import torch

from rlvr.algorithms.registry import ADVANTAGE_TRANSFORMS, TransformInputs, call
from tests.methods.helpers import run_recipe_steps
from tests.methods.seed_support import BINARY, train_and_resume


def transform(name, rewards, groups, adv=None, correct=None, lengths=None, state=None, **kw):
    r = torch.tensor(rewards, dtype=torch.float64)
    g = torch.tensor(groups)
    lens = torch.ones(len(rewards), dtype=torch.long) if lengths is None else torch.tensor(lengths)
    mask = (torch.arange(int(lens.max()))[None, :] < lens[:, None]).float()
    a = torch.ones(len(rewards)) if adv is None else torch.as_tensor(adv, dtype=torch.float32)
    a = a[:, None] * mask if a.dim() == 1 else a
    comps = {} if correct is None else {"correct": torch.tensor(correct, dtype=torch.float64)}
    entry = ADVANTAGE_TRANSFORMS.get(name)
    params = entry.params(**kw)
    if entry.state is not None and state is None:
        state = entry.state(params)
    out, metrics = call(entry, TransformInputs(r, g, mask, a, comps), params, state)
    return out, metrics, state


def ragged(seed, n_groups=7, max_size=6):
    rng = random.Random(seed)
    rewards, groups, adv = [], [], []
    for gi in range(n_groups):
        for _ in range(rng.randint(1, max_size)):
            rewards.append(float(rng.random() < 0.5))
            groups.append(gi)
            adv.append(rng.uniform(-2, 2))
    return rewards, groups, adv


def by_group(groups):
    out = {}
    for i, g in enumerate(groups):
        out.setdefault(g, []).append(i)
    return out


def rates(rewards, groups):
    return [sum(rewards[j] for j in by_group(groups)[g]) / len(by_group(groups)[g]) for g in groups]


# --- DQW -----------------------------------------------------------------------------------------

def test_dqw_oracle_b9_and_constant_groups_keep_weight_one():
    r = [1, 0, 0, 0, 1, 1, 1, 0, 0, 0, 0, 0]
    out, m, _ = transform("dqw", r, [0] * 4 + [1] * 4 + [2] * 4, temperature=2.0)
    w = out[:, 0]
    assert torch.allclose(w[:8], torch.tensor([1.12435] * 4 + [0.87565] * 4), atol=1e-5)
    assert torch.equal(w[8:], torch.ones(4))  # all wrong: not a valid group, weight 1
    assert float(w[[0, 4]].mean()) == pytest.approx(1.0)  # weights average 1 over valid groups


def test_dqw_token_rescale_divides_by_the_valid_token_share():
    r, g, lens = [1, 0, 0, 0], [0, 0, 1, 1], [2, 3, 4, 1]  # group 1 is constant: 5 of 10 tokens are valid
    plain, _, _ = transform("dqw", r, g, lengths=lens)
    scaled, _, _ = transform("dqw", r, g, lengths=lens, token_rescale=True)
    assert torch.allclose(scaled, plain * 2.0)


def test_dqw_matches_naive_loop():
    for seed in range(5):
        r, g, a = ragged(seed)
        groups = by_group(g)
        valid = [k for k, idx in groups.items() if len({r[i] for i in idx}) > 1]
        p = {k: sum(r[i] for i in groups[k]) / len(groups[k]) for k in groups}
        z = sum(math.exp(-p[k] / 0.7) for k in valid)
        lam = {k: (len(valid) * math.exp(-p[k] / 0.7) / z if k in valid else 1.0) for k in groups}
        out, _, _ = transform("dqw", r, g, adv=a, temperature=0.7)
        assert torch.allclose(out[:, 0], torch.tensor([lam[gi] * x for gi, x in zip(g, a)]), atol=1e-5), seed


# --- HA-DW ---------------------------------------------------------------------------------------

def test_ha_dw_oracle_b11():
    # anchor 0.5, group [1,0,0,0] (p = 0.25), GRPO advantages [1.5, -0.5, -0.5, -0.5]
    out, _, _ = transform("ha_dw", [1, 0, 0, 0], [0] * 4, adv=[1.5, -0.5, -0.5, -0.5], anchor_init=0.5)
    assert torch.allclose(out[:, 0], torch.tensor([1.92604, -0.38940, -0.38940, -0.38940]), atol=1e-5)
    same, _, _ = transform("ha_dw", [1, 1, 0, 0], [0] * 4, adv=[1, 1, -1, -1], anchor_init=0.5)
    assert torch.allclose(same[:, 0], torch.tensor([1.0, 1.0, -1.0, -1.0]))  # p_q == C: unchanged


def test_ha_dw_direction():
    # hard prompt (p < C): positives grow, negatives shrink; easy prompt (p > C): the reverse
    r = [1, 0, 0, 0, 1, 1, 1, 0]
    a = [1.0, -1.0, -1.0, -1.0, 1.0, 1.0, 1.0, -1.0]
    out, _, _ = transform("ha_dw", r, [0] * 4 + [1] * 4, adv=a, anchor_init=0.5)
    w = out[:, 0]
    assert w[0] > 1 and -1 < w[1] < 0  # hard
    assert 0 < w[4] < 1 and w[7] < -1  # easy


def test_ha_dw_anchor_follows_history():
    # W = 2, eta = 0.1, C_0 = 0.5. Batch accuracies 0.25, 0.75, 1.0:
    #   y=0.25: window [0.25], sigma 0 -> C = 0.5
    #   y=0.75: window [0.25, 0.75], sigma 0.25, eta_t 0.025 -> C = 0.975*0.5 + 0.025*0.75 = 0.50625
    #   y=1.00: window [0.75, 1.0], sigma 0.125, eta_t 0.0125 -> C = 0.9875*0.50625 + 0.0125 = 0.5124219
    state, anchors = None, []
    for r in ([1, 0, 0, 0], [1, 1, 1, 0], [1, 1, 1, 1]):
        out, m, state = transform("ha_dw", r, [0] * 4, state=state, anchor_init=0.5, window=2, eta=0.1)
        anchors.append(m["anchor"])
    assert anchors == pytest.approx([0.5, 0.50625, 0.51242188], abs=1e-8)
    assert state.state_dict() == {"anchor": pytest.approx(0.51242188), "window": [0.75, 1.0]}
    # the second call measured d_q from the previous anchor (0.5): p = 0.75 -> positives x e^-0.25
    out, _, _ = transform("ha_dw", [1, 1, 1, 0], [0] * 4, adv=[1, 1, 1, -1], anchor_init=0.5)
    assert float(out[0, 0]) == pytest.approx(math.exp(-0.25), rel=1e-6)


def test_ha_dw_matches_naive_loop():
    for seed in range(5):
        r, g, a = ragged(seed)
        out, m, _ = transform("ha_dw", r, g, adv=a, anchor_init=0.4, lambda_scale=1.3, sharpness=0.7)
        p = rates(r, g)
        want = [1.3 * math.exp(-0.7 * ((x > 0) - (x < 0)) * (p[i] - 0.4)) * x for i, x in enumerate(a)]
        assert torch.allclose(out[:, 0], torch.tensor(want, dtype=torch.float32), atol=1e-5), seed


# --- focal ---------------------------------------------------------------------------------------

def test_focal_oracle_b12():
    r = [1, 0, 0, 0, 1, 1, 1, 0, 1, 1, 1, 1]
    g = [0] * 4 + [1] * 4 + [2] * 4
    w2 = transform("focal", r, g, gamma=2.0)[0][:, 0]
    assert torch.allclose(w2, torch.tensor([0.5625] * 4 + [0.0625] * 4 + [0.0] * 4))
    w1 = transform("focal", r, g, gamma=1.0)[0][:, 0]
    assert torch.allclose(w1[4:8], torch.tensor([0.25] * 4))


def test_focal_gamma_zero_is_identity_and_correctness_comes_from_the_component():
    a = torch.randn(5)
    out, _, _ = transform("focal", [0.3, 0.7, 0.1, 0.9, 0.5], [0, 0, 1, 1, 1], adv=a, gamma=0.0)
    assert torch.equal(out[:, 0], a)
    # non-binary rewards with a 'correct' component: the component sets mu_hat (2 of 4 correct -> g = 0.5)
    out, _, _ = transform("focal", [0.3, 0.7, 0.1, 0.9], [0] * 4, correct=[1, 0, 0, 1], gamma=1.0)
    assert torch.allclose(out[:, 0], torch.full((4,), 0.5))


def test_focal_matches_naive_loop():
    for seed in range(5):
        r, g, a = ragged(seed)
        p = rates(r, g)
        out, _, _ = transform("focal", r, g, adv=a, gamma=1.5)
        assert torch.allclose(out[:, 0], torch.tensor([(1 - p[i]) ** 1.5 * x for i, x in enumerate(a)]),
                              atol=1e-6), seed


# --- pair weighting ------------------------------------------------------------------------------

def test_pair_weight_oracle():
    # p = 0.25 and 0.5: raw 1/(0.25*0.75) = 16/3 and 4, mean 14/3 -> [8/7, 6/7]; an all-wrong group: 1
    r = [1, 0, 0, 0, 1, 1, 0, 0, 0, 0]
    out, _, _ = transform("pair_weight", r, [0] * 4 + [1] * 4 + [2] * 2)
    assert torch.allclose(out[:, 0], torch.tensor([8 / 7] * 4 + [6 / 7] * 4 + [1.0] * 2), atol=1e-6)


def test_pair_weight_treats_a_mirrored_pair_alike_and_favours_rare_outcomes():
    # 1 success in 8 and 1 failure in 8 (the pairing oracle's q+ and q-): equal weights
    r = [1] + [0] * 7 + [0] + [1] * 7
    out, _, _ = transform("pair_weight", r, [0] * 8 + [1] * 8)
    assert torch.allclose(out[:, 0], torch.ones(16))
    # a rarer success outweighs a balanced group
    out, _, _ = transform("pair_weight", [1] + [0] * 7 + [1] * 4 + [0] * 4, [0] * 8 + [1] * 8)
    assert out[0, 0] > 1 > out[8, 0]


def test_pair_weight_matches_naive_loop():
    for seed in range(5):
        r, g, a = ragged(seed)
        groups = by_group(g)
        p = {k: sum(r[i] for i in idx) / len(idx) for k, idx in groups.items()}
        raw = {k: 1 / (v * (1 - v)) if 0 < v < 1 else 1.0 for k, v in p.items()}
        mixed = [raw[k] for k in groups if 0 < p[k] < 1]
        norm = sum(mixed) / len(mixed) if mixed else 1.0
        lam = {k: raw[k] / norm if 0 < p[k] < 1 else 1.0 for k in groups}
        out, _, _ = transform("pair_weight", r, g, adv=a)
        assert torch.allclose(out[:, 0], torch.tensor([lam[gi] * x for gi, x in zip(g, a)]), atol=1e-5), seed


# --- MCPO weighting ------------------------------------------------------------------------------

def test_mcpo_weight_oracle_c2():
    r = [1] * 5 + [0] * 3 + [1] * 6 + [0] * 2 + [1] * 7 + [0] + [1] * 4 + [0] * 4 + [1] * 8
    g = [i // 8 for i in range(40)]
    w = transform("mcpo_weight", r, g)[0][:, 0]
    want = [1.03280] * 8 + [1.15470] * 8 + [1.51186] * 8 + [1.0] * 8 + [1.0] * 8  # p = .625 .75 .875 .5 1
    assert torch.allclose(w, torch.tensor(want), atol=1e-5)


def test_mcpo_weight_matches_naive_loop():
    for seed in range(5):
        r, g, a = ragged(seed)
        p = rates(r, g)
        want = [math.sqrt(0.25 / (p[i] * (1 - p[i]))) * x if 0.5 < p[i] < 1 else x for i, x in enumerate(a)]
        out, _, _ = transform("mcpo_weight", r, g, adv=a)
        assert torch.allclose(out[:, 0], torch.tensor(want, dtype=torch.float32), atol=1e-5), seed


def test_weights_apply_per_token_to_token_level_advantages():
    a = torch.randn(4, 3)
    out, _, _ = transform("mcpo_weight", [1, 1, 1, 0], [0] * 4, adv=a, lengths=[3, 3, 3, 3])
    assert torch.allclose(out, a * 1.15470, atol=1e-5)


# --- real steps ----------------------------------------------------------------------------------

@pytest.mark.parametrize("recipe,name", [("ha_dw", "ha_dw"), ("f_grpo", "focal"), ("pair_weight", "pair_weight"),
                                         ("mcpo", "mcpo_weight")])  # dgpo/dqw: test_advantages_seed.py
def test_recipe_trains_two_steps(recipe, name, tmp_path):
    out = run_recipe_steps(recipe, tmp_path, overrides=BINARY)
    for m in out["metrics"]:
        assert all(math.isfinite(v) for v in m.values() if isinstance(v, float)), m
        assert any(k.startswith(f"advantage_transform/{name}/") for k in m)
    assert any(not torch.equal(out["before"][k], out["after"][k]) for k in out["before"])


@pytest.mark.slow
def test_ha_dw_resume_matches_uninterrupted(tmp_path):
    out = train_and_resume("ha_dw", tmp_path)
    a, b = out["weights"]
    assert all(torch.equal(a[k], b[k]) for k in a)
    full, part = (s["algorithm.advantage_transforms.0"] for s in out["state4"])
    assert part == full
    # the resumed run continued the window it restored (a fresh state would hold 2 accuracies, not 4)
    assert len(full["window"]) == 4 and len(out["state2"]["algorithm.advantage_transforms.0"]["window"]) == 2

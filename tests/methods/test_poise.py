"""POISE (arXiv:2605.07579, RECONSTRUCTED): cross-rollout probe baseline.

The defining property (a rollout's baseline does not depend on its own features), the pairing, the probe's
SGD against a naive loop, the probe learning a separable reward online, two real recipe steps and an
uninterrupted-vs-resumed run with identical weights and probe state.
"""

import json
import math

import pytest
import torch

from rlvr.algorithms.advantages.poise import cross_baseline, probe_features
from rlvr.algorithms.registry import ADVANTAGES, AdvantageInputs, call
from tests.methods.helpers import run_recipe_steps
from tests.methods.seed_support import BINARY, train_and_resume

ENTRY = ADVANTAGES.get("poise")


def run(rewards, groups, hidden, entropy, mask, state=None, **kw):
    p = ENTRY.params(**kw)
    state = ENTRY.state(p) if state is None else state
    inp = AdvantageInputs(torch.tensor(rewards, dtype=torch.float64), torch.tensor(groups), mask=mask,
                          extras={"hidden": hidden, "entropy": entropy})
    return call(ENTRY, inp, p, state), state


def batch(seed, n=8, h=6, t=4):
    g = torch.Generator().manual_seed(seed)
    return torch.randn(n, h, generator=g), torch.rand(n, t, generator=g) * 3, torch.ones(n, t)


def trained_state(seed=0):
    hidden, entropy, mask = batch(seed)
    _, state = run([1, 0, 1, 0, 1, 1, 0, 0], [0, 0, 1, 1, 2, 2, 3, 3], hidden, entropy, mask)
    return state


def test_pairing_leave_one_out_and_singletons():
    pred = torch.tensor([0.1, 0.2, 0.3, 0.4, 0.5, 0.9], dtype=torch.float64)
    groups = torch.tensor([0, 0, 0, 0, 0, 1])
    pair = cross_baseline(pred, groups, "pair", "own")
    assert torch.allclose(pair, torch.tensor([0.2, 0.1, 0.4, 0.3, 0.4, 0.9], dtype=torch.float64))
    loo = cross_baseline(pred, groups, "leave_one_out", "none")
    assert torch.allclose(loo[:5], (pred[:5].sum() - pred[:5]) / 4) and loo[5] == 0.0


@pytest.mark.parametrize("partner", ["pair", "leave_one_out"])
def test_baseline_does_not_depend_on_the_rollouts_own_features(partner):
    hidden, entropy, mask = batch(1)
    rewards, groups = [1, 0, 0, 1, 1, 0, 1, 0], [0, 0, 0, 1, 1, 1, 2, 2]
    base = json.loads(json.dumps(trained_state().state_dict()))  # a probe with nonzero weights
    fresh = lambda: ENTRY.state(ENTRY.params()).__class__(json.loads(json.dumps(base)))  # noqa: E731
    a, _ = run(rewards, groups, hidden, entropy, mask, fresh(), partner=partner)
    for i in range(8):
        h2, e2 = hidden.clone(), entropy.clone()
        h2[i] += 5 * torch.randn(6)
        e2[i] = e2[i].flip(0) * 2
        b, _ = run(rewards, groups, h2, e2, mask, fresh(), partner=partner)
        assert b[i] == a[i]  # b_i unchanged: it never reads o_i's features
        others = [j for j in range(8) if j != i and groups[j] == groups[i]]
        if partner == "pair" and i in (2, 5):  # the odd row of a group of 3 borrows a prediction, lends none
            assert all(b[j] == a[j] for j in others)
        else:
            assert any(b[j] != a[j] for j in others)  # the rows it serves as partner for do change


def test_probe_sgd_matches_naive_loop_and_heldout_bce_is_measured_before_training():
    hidden, entropy, mask = batch(2)
    rewards, groups = [1, 0, 1, 1, 0, 0, 1, 0], [0, 0, 1, 1, 2, 2, 3, 3]
    a, state = run(rewards, groups, hidden, entropy, mask, lr=0.3, sgd_steps=3, l2=0.01)
    assert math.isclose(state["heldout_bce"], math.log(2), rel_tol=1e-12)  # zero weights predict 1/2
    assert torch.allclose(a, torch.tensor(rewards) - 0.5)
    phi = probe_features(hidden, entropy, mask).tolist()
    w, c = [0.0] * len(phi[0]), 0.0
    for _ in range(3):
        p = [1 / (1 + math.exp(-(sum(wk * xk for wk, xk in zip(w, x)) + c))) for x in phi]
        err = [pi - yi for pi, yi in zip(p, rewards)]
        gw = [sum(err[i] * phi[i][k] for i in range(8)) / 8 + 0.01 * w[k] for k in range(len(w))]
        c -= 0.3 * sum(err) / 8
        w = [wk - 0.3 * gk for wk, gk in zip(w, gw)]
    assert all(math.isclose(x, y, abs_tol=1e-10) for x, y in zip(state["w"], w))
    assert math.isclose(state["c"], c, abs_tol=1e-12) and state["updates"] == 1
    json.dumps(state.state_dict())


def test_probe_learns_a_reward_written_in_the_hidden_state():
    g = torch.Generator().manual_seed(3)
    state = None
    for step in range(30):
        hidden = torch.randn(16, 8, generator=g)
        rewards = (hidden[:, 0] > 0).double().tolist()
        _, state = run(rewards, [i // 2 for i in range(16)], hidden, torch.ones(16, 3), torch.ones(16, 3), state)
        if step == 0:
            first = state["heldout_bce"]
    assert state["heldout_bce"] < 0.5 * first


def test_entropy_features_ignore_padding():
    hidden = torch.randn(2, 4)
    mask = torch.tensor([[1.0, 1.0, 0.0], [1.0, 1.0, 1.0]])
    ent = torch.tensor([[1.0, 3.0, 99.0], [1.0, 3.0, 2.0]])
    phi = probe_features(hidden, ent, mask)
    assert torch.allclose(phi[0, 4:], torch.tensor([2.0, 1.0, 3.0], dtype=torch.float64))


def test_recipe_trains_two_steps(tmp_path):
    out = run_recipe_steps("poise", tmp_path, overrides=BINARY + ["rollout.group_size=2"])
    for m in out["metrics"]:
        assert all(math.isfinite(v) for v in m.values() if isinstance(v, float)), m
    state = out["c"].algo_state.get("algorithm.advantage")
    assert state["updates"] == 2 and len(state["w"]) == 32 + 3
    assert any(not torch.equal(out["before"][k], out["after"][k]) for k in out["before"])


@pytest.mark.slow
def test_resume_matches_uninterrupted(tmp_path):
    out = train_and_resume("poise", tmp_path, ["rollout.group_size=2"])
    a, b = out["weights"]
    assert all(torch.equal(a[k], b[k]) for k in a)
    full, part = (s["algorithm.advantage"] for s in out["state4"])
    assert part == full and full["updates"] == 4 and out["state2"]["algorithm.advantage"]["updates"] == 2

"""KL3 clipping (ATR-GRPO, arXiv:2602.05494; docs/methods.md, `kl3`): the bounds' oracle, w - 1 - log w == delta at
both, composition with ppo_clip / gspo / gspo_token (gradient exactly 0 outside the bounds), the atr_grpo recipe on
the tiny model."""

import math

import pytest
import torch

from rlvr.algorithms.clip.kl3 import KL3Params, kl3_bounds
from rlvr.algorithms.objectives.gspo import GSPOParams
from rlvr.algorithms.objectives.ppo_clip import PPOClipParams
from rlvr.algorithms.registry import CLIP_RULES, OBJECTIVES, ObjectiveInputs
from rlvr.config.run import ConfigError, load_config
from tests.methods.helpers import run_recipe_steps

ORACLE = {0.01: (0.86517, 1.14817), 0.02: (0.81311, 1.21355), 0.05: (0.71619, 1.35040), 0.1: (0.61682, 1.51622)}


def kl3_rule(delta):
    entry = CLIP_RULES.get("kl3")
    return lambda ci: entry.fn(ci, KL3Params(delta=delta))


def run(name, params, logp, old, adv, clip=None):
    mask = torch.ones_like(old)
    return OBJECTIVES.get(name).fn(ObjectiveInputs(logp, old, adv, mask, clip=clip), params)


@pytest.mark.parametrize("delta", sorted(ORACLE))
def test_bounds_oracle_and_both_roots_of_the_constraint(delta):
    low, high = kl3_bounds(delta)
    assert (low, high) == pytest.approx(ORACLE[delta], abs=1e-5)
    for w in (low, high):
        assert abs(w - 1.0 - math.log(w) - delta) < 1e-12
    assert high - 1.0 > 1.0 - low  # KL3 leaves more room to grow a probability than to shrink it


def test_bounds_widen_with_delta():
    bounds = [kl3_bounds(d) for d in (0.001, 0.01, 0.1, 1.0)]
    assert all(a[0] > b[0] and a[1] < b[1] for a, b in zip(bounds, bounds[1:]))


def token_grid(low, high):
    """Ratios just inside and just outside each bound, and 1."""
    return [low * 0.9, low * 1.01, 1.0, high * 0.99, high * 1.1]


@pytest.mark.parametrize("sign", [1.0, -1.0])
def test_ppo_clip_gradient_is_zero_exactly_outside_the_bounds(sign):
    low, high = kl3_bounds(0.05)
    ratios = torch.tensor([token_grid(low, high)], dtype=torch.float64)
    old = torch.full_like(ratios, -1.0)
    logp = (old + ratios.log()).requires_grad_(True)
    adv = torch.full_like(ratios, sign)
    loss, m = run("ppo_clip", PPOClipParams(), logp, old, adv, kl3_rule(0.05))
    grad = torch.autograd.grad(loss.sum(), logp)[0][0]
    # -min(rho A, clip(rho) A): the side the sign of A makes binding is frozen, the other keeps -A rho
    frozen = [False, False, False, False, True] if sign > 0 else [True, False, False, False, False]
    for j, r in enumerate(ratios[0].tolist()):
        assert (grad[j] == 0) == frozen[j], j
        expected = -sign * (min(max(r, low), high) if frozen[j] else r)
        assert float(loss[0, j].detach()) == pytest.approx(expected, rel=1e-12)
    assert m["clip_frac"][0].tolist() == [float(f) for f in frozen]


def test_gspo_and_gspo_token_freeze_a_sequence_outside_the_bounds():
    low, high = kl3_bounds(0.02)
    # sequence log-ratios (means of the rows): inside, above high, below low
    seq = [math.log(1.1), math.log(high) + 0.05, math.log(low) - 0.05]
    offsets = torch.tensor([[0.3, -0.3, 0.0]], dtype=torch.float64)
    old = torch.full((3, 3), -2.0, dtype=torch.float64)
    logp = (old + torch.tensor(seq, dtype=torch.float64)[:, None] + offsets).requires_grad_(True)
    for name in ("gspo", "gspo_token"):
        for sign, frozen_row in ((1.0, 1), (-1.0, 2)):
            adv = torch.full_like(old, sign)
            loss, _ = run(name, GSPOParams(), logp, old, adv, kl3_rule(0.02))
            grad = torch.autograd.grad(loss.sum(), logp)[0]
            for i in range(3):
                assert bool((grad[i] == 0).all()) == (i == frozen_row), (name, sign, i)


def test_kl3_rule_equals_the_ratio_rule_with_the_same_bounds_on_random_tensors():
    g = torch.Generator().manual_seed(3)
    old = -torch.rand(6, 7, generator=g, dtype=torch.float64) * 3
    logp = (old + 0.4 * torch.randn(6, 7, generator=g, dtype=torch.float64)).requires_grad_(True)
    adv = torch.randn(6, 7, generator=g, dtype=torch.float64)
    low, high = kl3_bounds(0.1)
    a, _ = run("ppo_clip", PPOClipParams(), logp, old, adv, kl3_rule(0.1))
    b, _ = run("ppo_clip", PPOClipParams(clip_low=1 - low, clip_high=high - 1), logp, old, adv)
    assert torch.allclose(a, b, atol=1e-14)
    ga, gb = (torch.autograd.grad(x.sum(), logp)[0] for x in (a, b))
    assert torch.allclose(ga, gb, atol=1e-14) and (ga == 0).any() and (ga != 0).any()


def test_kl3_needs_a_clipping_objective():
    with pytest.raises(ConfigError, match="does not clip a ratio"):
        load_config(overrides=["algorithm.objective.name=cispo", "algorithm.clip.name=kl3"])


def test_atr_grpo_recipe_trains(tmp_path):
    out = run_recipe_steps("atr_grpo", tmp_path)
    assert out["cfg"].algorithm.clip.name == "kl3" and out["cfg"].algorithm.clip.params.delta == 0.02
    for m in out["metrics"]:
        assert all(math.isfinite(m[k]) for k in ("loss", "grad_norm", "clip_frac", "kl"))
    assert any(not torch.equal(out["before"][k], out["after"][k]) for k in out["before"])

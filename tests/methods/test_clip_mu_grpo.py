"""Mu-GRPO clip rule (docs/methods.md, `mu_grpo`; reconstructed): the veto mask oracle, positive responses
untouched, a naive loop, relaxed bounds, the composition with ppo_clip, and the mu_grpo recipe on the tiny
model."""

import math

import pytest
import torch

from rlvr.algorithms.clip.mu_grpo import MuGRPOParams, veto_mask
from rlvr.algorithms.objectives.ppo_clip import PPOClipParams
from rlvr.algorithms.registry import CLIP_RULES, OBJECTIVES, ClipInputs, ObjectiveInputs
from tests.methods.helpers import run_recipe_steps

RHO = [1.0, 1.1, 3.0, 0.9, 1.2]


def bounds(ratio, adv, mask, params, eps=(0.2, 0.28)):
    return CLIP_RULES.get("mu_grpo").fn(ClipInputs(ratio, adv, mask, torch.zeros_like(ratio), None, *eps), params)


def test_veto_oracle_masks_the_suffix_from_the_trigger():
    rho = torch.tensor([RHO, RHO])
    adv = torch.tensor([[-1.0] * 5, [1.0] * 5])
    b = bounds(rho, adv, torch.ones_like(rho), MuGRPOParams(veto_eps=1.0))
    assert b.keep.tolist() == [[1, 1, 0, 0, 0], [1, 1, 1, 1, 1]]  # A > 0 responses are never vetoed
    assert (b.low, b.high) == pytest.approx((0.6, 1.6))


def test_padding_never_triggers_and_null_bounds_are_the_objectives():
    rho = torch.tensor([[1.0, 50.0, 1.2]])
    mask = torch.tensor([[1.0, 0.0, 1.0]])
    b = bounds(rho, -torch.ones_like(rho), mask, MuGRPOParams(clip_low=None, clip_high=None), eps=(0.1, 0.3))
    assert b.keep.tolist() == [[1, 1, 1]] and (b.low, b.high) == pytest.approx((0.9, 1.3))
    assert bounds(rho, -torch.ones_like(rho), mask, MuGRPOParams(veto=False)).keep is None


def test_veto_matches_a_naive_loop_on_random_tensors():
    g = torch.Generator().manual_seed(0)
    rho = torch.exp(torch.randn(20, 9, generator=g))
    adv = torch.randn(20, 1, generator=g).expand(20, 9)
    mask = (torch.rand(20, 9, generator=g) > 0.2).float()
    keep = veto_mask(rho, adv, mask, 0.8)
    for i in range(20):
        seen = False
        for t in range(9):
            seen = seen or (mask[i, t] > 0 and adv[i, t] < 0 and rho[i, t] > 1.8)
            assert keep[i, t] == (0.0 if seen else 1.0), (i, t)
    assert 0 < keep.sum() < keep.numel()


def test_ppo_clip_with_mu_grpo_drops_the_vetoed_suffix_only():
    old = torch.full((1, 5), -1.0, dtype=torch.float64)
    logp = (old + torch.tensor([RHO], dtype=torch.float64).log()).requires_grad_(True)
    adv = torch.full_like(old, -1.0)
    entry = CLIP_RULES.get("mu_grpo")
    clip = lambda ci: entry.fn(ci, MuGRPOParams())  # noqa: E731
    inp = ObjectiveInputs(logp, old, adv, torch.ones_like(old), clip=clip)
    loss, _ = OBJECTIVES.get("ppo_clip").fn(inp, PPOClipParams())
    grad = torch.autograd.grad(loss.sum(), logp)[0][0]
    # prefix: A = -1, rho inside [0.6, 1.6] -> loss rho, gradient rho; suffix: 0
    assert loss[0].tolist() == pytest.approx([1.0, 1.1, 0.0, 0.0, 0.0])
    assert grad.tolist() == pytest.approx([1.0, 1.1, 0.0, 0.0, 0.0])


def test_mu_grpo_recipe_trains(tmp_path):
    out = run_recipe_steps("mu_grpo", tmp_path)
    clip = out["cfg"].algorithm.clip
    assert clip.name == "mu_grpo" and (clip.params.clip_low, clip.params.clip_high) == (0.4, 0.6)
    for m in out["metrics"]:
        assert all(math.isfinite(m[k]) for k in ("loss", "grad_norm", "clip_frac"))
    assert any(not torch.equal(out["before"][k], out["after"][k]) for k in out["before"])

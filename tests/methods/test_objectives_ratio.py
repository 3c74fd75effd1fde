"""Ratio-mixing and soft-clip objectives: DHPO (reconstructed), SSPO (reconstructed), LUSPO, MASPO. Hand-worked
oracles from each method's definition (sources in docs/methods.md), structural equivalences with ppo_clip /
gspo_token, naive loops on random tensors with garbage in the padding, the segment_end extra, and each recipe on
the tiny model."""

import math

import pytest
import torch

from rlvr.algorithms.objectives.dhpo import DHPOParams
from rlvr.algorithms.objectives.gspo import GSPOParams
from rlvr.algorithms.objectives.maspo import MASPOParams
from rlvr.algorithms.objectives.ppo_clip import PPOClipParams
from rlvr.algorithms.objectives.sspo import SSPOParams
from rlvr.algorithms.registry import AGGREGATIONS, OBJECTIVES, AggregationInputs, ObjectiveInputs, aggregate
from rlvr.core.batch import build_batch
from rlvr.core.types import Completion
from rlvr.models.tiny import char_tokenizer
from rlvr.registry import Params
from rlvr.passes.segments import segment_ends
from tests.methods.helpers import run_recipe_steps

GARBAGE = 1e3


def call(name, params, logp, old, adv, mask, **kw):
    return OBJECTIVES.get(name).fn(ObjectiveInputs(logp, old, adv, mask, **kw), params)


def random_batch(seed, n=6, t=8, scale=0.2):
    g = torch.Generator().manual_seed(seed)
    mask = (torch.rand(n, t, generator=g) > 0.3).double()
    mask[:, 0] = 1.0
    old = -torch.rand(n, t, generator=g, dtype=torch.float64) * 3
    logp = old + scale * torch.randn(n, t, generator=g, dtype=torch.float64)
    adv = torch.randn(n, 1, generator=g, dtype=torch.float64).expand(n, t).clone()
    ent = torch.rand(n, t, generator=g, dtype=torch.float64) * 2
    pad = mask == 0
    logp[pad], old[pad], adv[pad], ent[pad] = GARBAGE, -GARBAGE, GARBAGE, GARBAGE
    return logp.requires_grad_(True), old, adv, mask, ent


def grad(loss, logp, mask):
    return torch.autograd.grad((torch.where(mask > 0, loss, torch.zeros_like(loss))).sum(), logp)[0]


def valid(mask, i):
    return [j for j in range(mask.shape[1]) if mask[i, j] > 0]


def finite_recipe_steps(recipe, tmp_path, keys=("loss", "grad_norm"), overrides=()):
    out = run_recipe_steps(recipe, tmp_path, overrides=list(overrides))
    for m in out["metrics"]:
        assert all(math.isfinite(m[k]) for k in keys), m
    assert any(not torch.equal(out["before"][k], out["after"][k]) for k in out["before"])
    return out


# --- DHPO ------------------------------------------------------------------------------------------

@pytest.mark.parametrize("space", ["linear", "log"])
def test_dhpo_alpha_one_is_ppo_clip_and_alpha_zero_is_gspo_token(space):
    logp, old, adv, mask, _ = random_batch(0, scale=0.3)
    d1, _ = call("dhpo", DHPOParams(alpha=1.0, space=space), logp, old, adv, mask)
    p1, _ = call("ppo_clip", PPOClipParams(clip_low=0.2, clip_high=0.28), logp, old, adv, mask)
    d0, _ = call("dhpo", DHPOParams(alpha=0.0, space=space), logp, old, adv, mask)
    g0, _ = call("gspo_token", GSPOParams(), logp, old, adv, mask)
    for a, b in ((d1, p1), (d0, g0)):
        assert torch.allclose(torch.where(mask > 0, a, 0), torch.where(mask > 0, b, 0), atol=1e-12)
        assert torch.allclose(grad(a, logp, mask), grad(b, logp, mask), atol=1e-12)


@pytest.mark.parametrize("params", [DHPOParams(alpha=0.3), DHPOParams(alpha=0.7, space="log"),
                                    DHPOParams(mixing="entropy"), DHPOParams(mixing="entropy", space="log")])
def test_dhpo_gradient_at_the_old_policy_is_reinforce(params):
    _, old, adv, mask, ent = random_batch(1)
    logp = old.clone().requires_grad_(True)
    loss, m = call("dhpo", params, logp, old, adv, mask, entropy=ent)
    assert torch.allclose(grad(loss, logp, mask)[mask > 0], -adv[mask > 0], atol=1e-12)
    assert torch.equal(m["ratio"][mask > 0], torch.ones_like(old)[mask > 0])


def test_dhpo_matches_a_naive_loop_with_entropy_mixing():
    logp, old, adv, mask, ent = random_batch(2, scale=0.3)
    p = DHPOParams(mixing="entropy", clip_low=0.1, clip_high=0.15, seq_clip_low=0.01, seq_clip_high=0.02)
    loss, m = call("dhpo", p, logp, old, adv, mask, entropy=ent)
    loss, logp = loss.detach(), logp.detach()
    for i in range(mask.shape[0]):
        idx = valid(mask, i)
        log_s = sum(float(logp[i, j] - old[i, j]) for j in idx) / len(idx)
        h_max = max(float(ent[i, j]) for j in idx)
        for j in idx:
            a = float(ent[i, j]) / h_max
            r, s, A = math.exp(float(logp[i, j] - old[i, j])), math.exp(log_s), float(adv[i, j])
            mix = a * r + (1 - a) * s
            clp = a * min(max(r, 0.9), 1.15) + (1 - a) * min(max(s, 0.99), 1.02)
            assert float(loss[i, j]) == pytest.approx(-min(mix * A, clp * A), rel=1e-10, abs=1e-12)
            assert float(m["alpha"][i, j]) == pytest.approx(a, rel=1e-12)


def test_dhpo_recipe_trains(tmp_path):
    out = finite_recipe_steps("dhpo", tmp_path, ("loss", "grad_norm", "clip_frac", "alpha"))
    assert out["cfg"].algorithm.objective.name == "dhpo"


# --- SSPO ------------------------------------------------------------------------------------------

def test_sspo_segment_ratio_oracle():
    old = torch.tensor([[-1.0, -2.0, -0.5]], dtype=torch.float64)
    logp = old + torch.tensor([[0.2, 0.0, -0.4]], dtype=torch.float64)
    ends = torch.tensor([[0.0, 1.0, 1.0]])  # segments [0.2, 0.0] and [-0.4]
    mask, adv = torch.ones_like(old), torch.ones_like(old)
    _, m = call("sspo", SSPOParams(entropy_adaptive=False), logp, old, adv, mask, extras={"segment_end": ends})
    assert m["ratio"][0].tolist() == pytest.approx([1.10517, 1.10517, 0.67032], abs=1e-5)
    assert m["segments"][0].tolist() == [2, 2, 2]
    _, g = call("gspo_token", GSPOParams(), logp, old, adv, mask)
    assert g["ratio"][0].tolist() == pytest.approx([0.93551] * 3, abs=1e-5)  # what GSPO would use


def test_sspo_single_segment_is_gspo_token_and_token_segments_are_ppo_clip():
    logp, old, adv, mask, ent = random_batch(3, scale=0.3)
    none = torch.zeros_like(mask)
    eps = dict(clip_low=0.05, clip_high=0.08)
    one, _ = call("sspo", SSPOParams(**eps), logp, old, adv, mask, entropy=ent, extras={"segment_end": none})
    gt, _ = call("gspo_token", GSPOParams(**eps), logp, old, adv, mask)
    every, _ = call("sspo", SSPOParams(entropy_adaptive=False, **eps), logp, old, adv, mask,
                    extras={"segment_end": torch.ones_like(mask)})
    pc, _ = call("ppo_clip", PPOClipParams(**eps), logp, old, adv, mask)
    for a, b in ((one, gt), (every, pc)):
        assert torch.allclose(torch.where(mask > 0, a, 0), torch.where(mask > 0, b, 0), atol=1e-12)
        assert torch.allclose(grad(a, logp, mask), grad(b, logp, mask), atol=1e-12)


def test_sspo_entropy_scaled_bounds_match_a_naive_loop():
    logp, old, adv, mask, ent = random_batch(4, t=10, scale=0.4)
    g = torch.Generator().manual_seed(9)
    ends = (torch.rand(mask.shape, generator=g) > 0.6).double()
    p = SSPOParams(clip_low=0.05, clip_high=0.1, scale_min=0.5, scale_max=1.5)
    loss, m = call("sspo", p, logp, old, adv, mask, entropy=ent, extras={"segment_end": ends})
    gr = grad(loss, logp, mask)
    loss, logp = loss.detach(), logp.detach()
    widened = narrowed = 0
    for i in range(mask.shape[0]):
        segs, cur = [], []
        for j in valid(mask, i):
            cur.append(j)
            if ends[i, j] > 0:
                segs.append(cur)
                cur = []
        segs += [cur] if cur else []
        seg_h = [sum(float(ent[i, j]) for j in s) / len(s) for s in segs]
        row_h = sum(seg_h) / len(seg_h)
        for s, h in zip(segs, seg_h):
            scale = min(max(h / row_h, 0.5), 1.5)
            widened, narrowed = widened + (scale > 1), narrowed + (scale < 1)
            ratio = math.exp(sum(float(logp[i, j] - old[i, j]) for j in s) / len(s))
            lo, hi = 1 - 0.05 * scale, 1 + 0.1 * scale
            for j in s:
                A = float(adv[i, j])
                clipped = (A > 0 and ratio > hi) or (A < 0 and ratio < lo)
                assert float(loss[i, j]) == pytest.approx(-min(ratio * A, min(max(ratio, lo), hi) * A), rel=1e-10)
                assert float(gr[i, j]) == pytest.approx(0.0 if clipped else -A * ratio, rel=1e-10, abs=1e-300)
                assert float(m["clip_scale"][i, j]) == pytest.approx(scale, rel=1e-12)
    assert widened and narrowed  # the random case exercises both sides of g


def test_segment_end_extra_from_token_text():
    tok = char_tokenizer()
    text = "ab, c.d\nef!g"
    comp = Completion("x", tok.encode("q:", add_special_tokens=False), tok.encode(text, add_special_tokens=False),
                      None, "stop", text)
    short = Completion("y", tok.encode("q", add_special_tokens=False), tok.encode("a?", add_special_tokens=False),
                       None, "stop", "a?")
    ends = segment_ends(build_batch([comp, short], [1.0, 0.0], tok.pad_token_id), tok)
    assert ends[0].tolist() == [float(ch in ",.\n!") for ch in text]
    assert ends[1].tolist() == [0.0, 1.0] + [0.0] * (len(text) - 2)  # padding is never a segment end


def test_sspo_needs_its_extra():
    logp, old, adv, mask, ent = random_batch(5)
    with pytest.raises(ValueError, match="segment_end"):
        call("sspo", SSPOParams(), logp, old, adv, mask, entropy=ent)


def test_sspo_recipe_trains_with_the_extra(tmp_path):
    out = finite_recipe_steps("sspo", tmp_path, ("loss", "grad_norm", "clip_frac", "clip_scale", "segments"))
    assert all(m["segments"] >= 1 for m in out["metrics"])


# --- LUSPO -----------------------------------------------------------------------------------------

def test_luspo_long_response_gets_three_quarters_of_the_gradient():
    mask = torch.tensor([[1.0, 1, 0, 0, 0, 0], [1, 1, 1, 1, 1, 1]], dtype=torch.float64)
    old = torch.full_like(mask, -1.0)
    logp = old.clone().requires_grad_(True)
    loss, _ = call("gspo_token", GSPOParams(), logp, old, torch.ones_like(mask), mask)
    shares, totals = {}, {}
    for name in ("token_mean", "seq_mean_token_mean"):
        coef = AGGREGATIONS.get(name).fn(AggregationInputs(mask, torch.tensor([0, 0])), Params())
        total = aggregate(coef, loss, mask)
        g = torch.autograd.grad(total, logp, retain_graph=True)[0].abs().sum(-1)
        shares[name], totals[name] = float(g[1] / g.sum()), float(total.detach())
    assert totals == pytest.approx({"token_mean": -1.0, "seq_mean_token_mean": -1.0})  # equal ell: same loss
    assert shares == pytest.approx({"token_mean": 0.75, "seq_mean_token_mean": 0.5})


def test_luspo_recipe_is_gspo_token_with_token_mean(tmp_path):
    out = finite_recipe_steps("luspo", tmp_path, ("loss", "grad_norm", "clip_frac"))
    alg = out["cfg"].algorithm
    assert (alg.objective.name, alg.aggregation.name) == ("gspo_token", "token_mean")
    assert (alg.objective.params.clip_low, alg.objective.params.clip_high) == (3e-4, 4e-4)


# --- MASPO -----------------------------------------------------------------------------------------

def maspo_one(old_logp, adv, rho):
    old = torch.tensor([[old_logp]], dtype=torch.float64)
    logp = (old + math.log(rho)).requires_grad_(True)
    loss, m = call("maspo", MASPOParams(), logp, old, torch.tensor([[adv]], dtype=torch.float64),
                   torch.ones_like(old))
    g = torch.autograd.grad(loss.sum(), logp)[0]
    return float(loss.detach()), float(g) / rho, float(m["gate"])  # d loss / d rho = (d / d logp) / rho


def test_maspo_oracles():
    loss, d_rho, gate = maspo_one(0.0, 1.0, 1.5)  # p_old = 1, sigma_pos = 1.03
    assert (gate, loss, d_rho) == pytest.approx((0.88885, -1.33328, -0.88885), abs=1e-5)
    _, _, gate = maspo_one(math.log(0.01), 1.0, 1.5)  # sigma_mass = 0.01^-0.3 = 3.98107
    assert gate == pytest.approx(math.exp(-0.25 / (2 * (3.98107 * 1.03) ** 2)), abs=1e-6)
    loss, d_rho, gate = maspo_one(0.0, -1.0, 0.5)  # sigma_neg = 1 / 1.03
    assert (gate, loss, d_rho) == pytest.approx((0.87580, 0.43790, 0.87580), abs=1e-5)
    assert maspo_one(0.0, 1.0, 0.8) == pytest.approx((-0.8, -1.0, 1.0))  # ungated side: plain -A rho
    _, d_rho, _ = maspo_one(0.0, 1.0, 3.0)  # far outside PPO's range the gradient is small but not 0
    assert 0 < -d_rho < 0.2


def test_maspo_matches_a_naive_loop_on_random_tensors():
    logp, old, adv, mask, _ = random_batch(6, scale=0.6)
    loss, _ = call("maspo", MASPOParams(alpha=0.5), logp, old, adv, mask)
    gr = grad(loss, logp, mask)
    loss, logp = loss.detach(), logp.detach()
    for i in range(mask.shape[0]):
        for j in valid(mask, i):
            rho, A, p_old = math.exp(float(logp[i, j] - old[i, j])), float(adv[i, j]), math.exp(float(old[i, j]))
            sigma = min(max(1.0 / p_old ** 0.5, 1.0), 10.0)
            sigma *= min(max(1 + 0.03 * A, 0.1), 10) if A > 0 else min(max(1 / (1 - 0.03 * A), 0.1), 10)
            w = math.exp(-(rho - 1) ** 2 / (2 * sigma ** 2)) if (A > 0 and rho > 1) or (A < 0 and rho < 1) else 1.0
            assert float(loss[i, j]) == pytest.approx(-A * w * rho, rel=1e-10)
            assert float(gr[i, j]) == pytest.approx(-A * w * rho, rel=1e-10)  # d/dlogp of -A w rho, w detached


def test_maspo_recipe_trains(tmp_path):
    out = finite_recipe_steps("maspo", tmp_path, ("loss", "grad_norm", "gate", "gated_frac"))
    assert out["cfg"].algorithm.objective.params.alpha == 0.3

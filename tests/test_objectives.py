"""GSPO, GSPO-token, CISPO objectives and the TIS / MIS corrections: hand-worked oracles (GSPO, arXiv:2507.18071;
CISPO, arXiv:2506.13585; TIS, docs/methods.md, `tis`), naive-loop equivalence with garbage in the padding, paper
gradients, padding invariance, config."""

import math

import pytest
import torch

from rlvr.algorithms import (AGGREGATIONS, CORRECTIONS, OBJECTIVES, AggregationInputs, CorrectionInputs,
                             ObjectiveInputs, aggregate)
from rlvr.algorithms.corrections.mis import MISParams
from rlvr.algorithms.corrections.tis import TISParams
from rlvr.algorithms.objectives.cispo import CISPOParams
from rlvr.algorithms.objectives.gspo import GSPOParams
from rlvr.algorithms.objectives.ppo_clip import PPOClipParams
from rlvr.config.run import ConfigError, load_config
from rlvr.registry import Params

GARBAGE = 1e3  # padding values large enough that any unmasked use would change every result


def run(name, params, logp, old, adv, mask):
    return OBJECTIVES.get(name).fn(ObjectiveInputs(logp, old, adv, mask), params)


def agg(name, loss, mask):
    coef = AGGREGATIONS.get(name).fn(AggregationInputs(mask, torch.arange(mask.shape[0])), Params())
    return aggregate(coef, loss, mask)


def row(values, dtype=torch.float64, grad=False):
    return torch.tensor([values], dtype=dtype, requires_grad=grad)


def random_batch(seed, n=8, t=9, scale=0.1, const_adv=True):
    """Random log-probs/advantages with a random (non-prefix) mask; padding holds garbage."""
    g = torch.Generator().manual_seed(seed)
    mask = (torch.rand(n, t, generator=g) > 0.35).to(torch.float64)
    mask[torch.arange(n), torch.randint(0, t, (n,), generator=g)] = 1.0  # every row has a token
    old = -torch.rand(n, t, generator=g, dtype=torch.float64) * 3
    logp = old + scale * torch.randn(n, t, generator=g, dtype=torch.float64)
    adv = torch.randn(n, 1, generator=g, dtype=torch.float64).expand(n, t).clone() if const_adv else \
        torch.randn(n, t, generator=g, dtype=torch.float64)
    pad = mask == 0
    logp[pad], old[pad], adv[pad] = GARBAGE, -GARBAGE, GARBAGE
    return logp.requires_grad_(True), old, adv, mask


def valid(mask, i):
    return [j for j in range(mask.shape[1]) if mask[i, j] > 0]


# --- GSPO ----------------------------------------------------------------------------------------

def test_gspo_oracle_clipped_sequence_has_no_gradient():
    logp = row([0.1 - 1.0, -0.1 - 2.0, 0.3 - 0.5], grad=True)
    old = row([-1.0, -2.0, -0.5])
    loss, m = run("gspo", GSPOParams(), logp, old, row([1.0, 1.0, 1.0]), torch.ones(1, 3, dtype=torch.float64))
    assert m["ratio"][0].tolist() == pytest.approx([1.10517] * 3, abs=1e-5)
    assert loss[0].tolist() == pytest.approx([-(1 + 4e-4)] * 3)
    assert m["clip_frac"][0].tolist() == [1.0, 1.0, 1.0]
    assert torch.equal(torch.autograd.grad(loss.sum(), logp)[0], torch.zeros_like(logp))


def test_gspo_oracle_negative_advantage_keeps_unclipped_gradient():
    logp = row([0.1, -0.1, 0.3], grad=True)
    loss, m = run("gspo", GSPOParams(), logp, torch.zeros_like(logp), row([-1.0] * 3), torch.ones(1, 3))
    assert loss[0].tolist() == pytest.approx([1.10517] * 3, abs=1e-5)  # -A s: PPO never clips this side
    grad = torch.autograd.grad(agg("seq_mean_token_mean", loss, torch.ones(1, 3)), logp)[0]
    assert grad[0].tolist() == pytest.approx([1.10517 / 3] * 3, abs=1e-5)  # -A s / |o|
    assert m["clip_frac"].sum() == 0


def test_gspo_gradient_at_old_policy_is_sequence_mean_of_token_gradients():
    # a tiny softmax "policy": theta [T, V]; logp_{i,t} = log softmax(theta_t)[token_{i,t}]
    torch.manual_seed(0)
    n, t, v = 4, 5, 6
    theta = torch.randn(t, v, dtype=torch.float64, requires_grad=True)
    tokens = torch.randint(0, v, (n, t))
    mask = torch.tensor([[1, 1, 1, 1, 1], [1, 1, 0, 0, 0], [1, 0, 0, 0, 0], [1, 1, 1, 0, 0]], dtype=torch.float64)
    adv = torch.tensor([1.5, -0.5, 0.7, -1.2], dtype=torch.float64)[:, None].expand(n, t)
    logp = torch.log_softmax(theta, -1).gather(-1, tokens.T).T  # [n, t]
    loss, m = run("gspo", GSPOParams(), logp, logp.detach(), adv, mask)
    assert torch.allclose(m["ratio"], torch.ones(n, t, dtype=torch.float64))
    got = torch.autograd.grad(agg("seq_mean_token_mean", loss, mask), theta, retain_graph=True)[0]
    # J = (1/B) sum_i A_i (1/|o_i|) sum_t logp_{i,t}; loss = -J
    want = torch.autograd.grad(-(adv[:, 0] * (mask * logp).sum(-1) / mask.sum(-1)).mean(), theta)[0]
    assert torch.allclose(got, want)
    assert got.abs().max() > 1e-3


def test_gspo_clamps_log_ratio_before_exp():
    logp = row([50.0, 50.0], grad=True)
    loss, m = run("gspo", GSPOParams(), logp, torch.zeros_like(logp), row([-1.0, -1.0]), torch.ones(1, 2))
    assert loss[0].tolist() == pytest.approx([math.exp(10)] * 2)
    assert torch.isfinite(torch.autograd.grad(loss.sum(), logp)[0]).all()


def naive_gspo(logp, old, adv, mask, lo, hi, token_adv):
    """Per-token loss at valid positions, by plain Python loops; ``token_adv``: GSPO-token."""
    out = {}
    for i in range(mask.shape[0]):
        toks = valid(mask, i)
        log_s = min(sum(float(logp[i, j].detach() - old[i, j]) for j in toks) / len(toks), 10.0)
        s = math.exp(log_s)
        a_seq = sum(float(adv[i, j]) for j in toks) / len(toks)
        for j in toks:
            a = float(adv[i, j]) if token_adv else a_seq
            out[i, j] = -min(s * a, min(max(s, 1 - lo), 1 + hi) * a)
    return out


@pytest.mark.parametrize("name,token_adv", [("gspo", False), ("gspo_token", True)])
def test_gspo_variants_match_naive_loop(name, token_adv):
    logp, old, adv, mask = random_batch(1, const_adv=False)
    p = GSPOParams(clip_low=0.02, clip_high=0.03)
    loss, m = run(name, p, logp, old, adv, mask)
    want = naive_gspo(logp, old, adv, mask, 0.02, 0.03, token_adv)
    for (i, j), w in want.items():
        assert float(loss[i, j].detach()) == pytest.approx(w, rel=1e-9, abs=1e-12)
    clipped = {float(m["clip_frac"][i, j]) for i, j in want}
    assert clipped == {0.0, 1.0}  # the random batch exercises both branches


def test_gspo_token_gradient_is_sequence_ratio_times_own_token():
    logp, old, adv, mask = random_batch(2, const_adv=False)
    loss, m = run("gspo_token", GSPOParams(clip_low=0.02, clip_high=0.03), logp, old, adv, mask)
    grad = torch.autograd.grad(loss.sum(), logp)[0]
    for i in range(mask.shape[0]):
        for j in valid(mask, i):
            # d loss_{i,t} / d logp_{i,t} = -A_{i,t} s_i when unclipped, 0 when clipped; no cross-token terms
            want = 0.0 if m["clip_frac"][i, j] else -float(adv[i, j]) * float(m["ratio"][i, j])
            assert float(grad[i, j]) == pytest.approx(want, rel=1e-9, abs=1e-12)


@pytest.mark.parametrize("aggregation", ["seq_mean_token_mean", "token_mean"])
def test_gspo_token_equals_gspo_for_sequence_advantages(aggregation):
    logp, old, adv, mask = random_batch(3, const_adv=True)
    p = GSPOParams(clip_low=0.02, clip_high=0.03)
    out = {}
    for name in ("gspo", "gspo_token"):
        loss, m = run(name, p, logp, old, adv, mask)
        total = agg(aggregation, loss, mask)
        out[name] = (loss, total, torch.autograd.grad(total, logp)[0], m["clip_frac"])
    (l1, t1, g1, c1), (l2, t2, g2, c2) = out["gspo"], out["gspo_token"]
    assert torch.allclose(l1 * mask, l2 * mask) and torch.allclose(t1, t2)
    assert torch.allclose(g1, g2, atol=1e-12)
    assert g1.abs().max() > 1e-3 and 0 < float((c1 * mask).sum()) < float(mask.sum())
    assert torch.equal(c1 * mask, c2 * mask)


def test_gspo_masks_padding_and_survives_an_empty_row():
    logp, old, adv, mask = random_batch(4)
    mask[0] = 0.0
    loss = run("gspo", GSPOParams(), logp, old, adv, mask)[0].detach()
    assert torch.isfinite(loss).all() and float(loss[0, 0]) == 0.0
    assert float(loss.abs().max()) < 10  # garbage (1e3) never reached the sequence means


# --- CISPO ---------------------------------------------------------------------------------------

def cispo_grad(ratio, adv, **kw):
    old = row([-1.5] * len(ratio))
    logp = (old + torch.tensor([[math.log(r) for r in ratio]], dtype=torch.float64)).requires_grad_(True)
    loss, m = run("cispo", CISPOParams(**kw), logp, old, row(adv), torch.ones_like(old))
    return loss, torch.autograd.grad(loss.sum(), logp)[0][0].tolist(), m, logp


def test_cispo_oracle_clipped_weight_keeps_the_gradient():
    loss, grad, m, logp = cispo_grad([2.0, 1.0, 2.0], [1.0, 1.0, -2.0], clip_low=0.2, clip_high=0.28)
    assert grad == pytest.approx([-1.28, -1.0, 2.56])  # -w A; rho = 1 is plain REINFORCE
    lp = -1.5 + math.log(2.0)
    assert loss[0].tolist() == pytest.approx([-1.28 * lp, 1.5, 2.56 * lp])
    assert m["clip_frac"][0].tolist() == [1.0, 0.0, 1.0]
    # PPO's clip removes the gradient of the first token entirely
    _, ppo_grad, _, _ = cispo_grad([2.0], [1.0], clip_low=0.2, clip_high=0.28)
    ppo_loss, _ = OBJECTIVES.get("ppo_clip").fn(
        ObjectiveInputs(logp[:, :1], logp[:, :1].detach() - math.log(2.0), row([1.0]), torch.ones(1, 1)),
        PPOClipParams(clip_low=0.2, clip_high=0.28))
    assert float(torch.autograd.grad(ppo_loss.sum(), logp)[0][0, 0]) == 0.0 and ppo_grad[0] != 0.0


def test_cispo_defaults_have_no_lower_bound_and_cap_at_five():
    _, grad, m, _ = cispo_grad([0.01, 10.0], [1.0, 1.0])
    assert grad == pytest.approx([-0.01, -5.0])
    assert m["clip_frac"][0].tolist() == [0.0, 1.0]


def test_cispo_ppo_mask_drops_only_tokens_ppo_would_clip():
    ratio, adv = [2.0, 2.0, 0.5, 0.5, 1.1], [1.0, -1.0, -1.0, 1.0, 1.0]
    _, grad, m, _ = cispo_grad(ratio, adv, clip_low=0.2, clip_high=0.28, ppo_mask=True,
                               mask_clip_low=0.2, mask_clip_high=0.28)
    assert grad == pytest.approx([0.0, 1.28, 0.0, -0.8, -1.1])
    assert m["mask_frac"][0].tolist() == [1.0, 0.0, 1.0, 0.0, 0.0]


@pytest.mark.parametrize("params", [CISPOParams(), CISPOParams(clip_low=0.1, clip_high=0.05, ppo_mask=True,
                                                                mask_clip_low=0.08, mask_clip_high=0.04)])
def test_cispo_matches_naive_loop_in_value_and_gradient(params):
    logp, old, adv, mask = random_batch(5, const_adv=False)
    loss, _ = run("cispo", params, logp, old, adv, mask)
    grad = torch.autograd.grad(loss.sum(), logp)[0]
    loss, logp, dropped = loss.detach(), logp.detach(), 0
    for i in range(mask.shape[0]):
        for j in valid(mask, i):
            rho = math.exp(float(logp[i, j] - old[i, j]))
            w = min(max(rho, 1 - params.clip_low), 1 + params.clip_high)
            a = float(adv[i, j])
            keep = not (params.ppo_mask and ((a > 0 and rho > 1 + params.mask_clip_high)
                                             or (a < 0 and rho < 1 - params.mask_clip_low)))
            dropped += not keep
            assert float(loss[i, j]) == pytest.approx(-w * a * float(logp[i, j]) * keep, rel=1e-9, abs=1e-12)
            assert float(grad[i, j]) == pytest.approx(-w * a * keep, rel=1e-9, abs=1e-12)
    assert dropped > 0 if params.ppo_mask else dropped == 0


# --- padding invariance (all objectives) -------------------------------------------------------

OBJECTIVE_CASES = [("gspo", GSPOParams(clip_low=0.02, clip_high=0.03), "seq_mean_token_mean"),
                   ("gspo_token", GSPOParams(clip_low=0.02, clip_high=0.03), "seq_mean_token_mean"),
                   ("cispo", CISPOParams(clip_low=0.1, clip_high=0.05, ppo_mask=True), "token_mean")]


@pytest.mark.parametrize("name,params,aggregation", OBJECTIVE_CASES)
def test_objectives_ignore_appended_padding(name, params, aggregation):
    logp, old, adv, mask = random_batch(6, const_adv=False)
    loss, _ = run(name, params, logp, old, adv, mask)
    total = agg(aggregation, loss, mask)
    grad = torch.autograd.grad(total, logp)[0]
    g = torch.Generator().manual_seed(7)
    extra = lambda: GARBAGE * torch.randn(mask.shape[0], 4, generator=g, dtype=torch.float64)  # noqa: E731
    logp2 = torch.cat([logp.detach(), extra()], 1).requires_grad_(True)
    old2, adv2 = torch.cat([old, extra()], 1), torch.cat([adv, extra()], 1)
    mask2 = torch.cat([mask, torch.zeros(mask.shape[0], 4, dtype=torch.float64)], 1)
    loss2, _ = run(name, params, logp2, old2, adv2, mask2)
    total2 = agg(aggregation, loss2, mask2)
    grad2 = torch.autograd.grad(total2, logp2)[0]
    assert float(total2.detach()) == pytest.approx(float(total.detach()), rel=1e-12)
    assert torch.allclose(loss2[:, :-4] * mask, loss * mask)
    assert torch.allclose(grad2[:, :-4], grad) and torch.equal(grad2[:, -4:], torch.zeros_like(grad2[:, -4:]))


# --- rollout corrections: TIS and MIS ----------------------------------------------------------

def correct(name, params, old, behaviour, mask=None):
    mask = torch.ones_like(old) if mask is None else mask
    return CORRECTIONS.get(name).fn(CorrectionInputs(old, behaviour, mask), params)


def log_ratios(ratios):
    """old_logp, behaviour_logp with old - behaviour = log(ratio)."""
    behaviour = row([-2.0] * len(ratios))
    return behaviour + torch.tensor([[math.log(r) for r in ratios]], dtype=torch.float64), behaviour


def test_tis_token_oracle():
    w, m = correct("tis", TISParams(cap=2.0), *log_ratios([0.5, 1.5, 3.0]))
    assert w[0].tolist() == pytest.approx([0.5, 1.5, 2.0])
    assert m["trunc_frac"][0].tolist() == [0.0, 0.0, 1.0]
    assert m["ratio"][0].tolist() == pytest.approx([0.5, 1.5, 3.0])


def test_tis_sequence_level_is_the_truncated_product():
    old, beh = log_ratios([math.exp(0.2), math.exp(0.3), 1.0])
    old[0, 2], beh[0, 2] = GARBAGE, -GARBAGE  # padding
    mask = row([1.0, 1.0, 0.0])
    w, m = correct("tis", TISParams(level="sequence", cap=2.0), old, beh, mask)
    assert w[0].tolist() == pytest.approx([math.exp(0.5)] * 3)
    w, m = correct("tis", TISParams(level="sequence", cap=1.5), old, beh, mask)
    assert w[0].tolist() == pytest.approx([1.5] * 3) and m["trunc_frac"][0].tolist() == [1.0] * 3
    # 100 tokens each 1% off: every token weight is 1.01, but the product e^1 is truncated
    old, beh = log_ratios([math.exp(0.01)] * 100)
    assert correct("tis", TISParams(), old, beh)[0].max() == pytest.approx(math.exp(0.01))
    assert correct("tis", TISParams(level="sequence"), old, beh)[0][0].tolist() == pytest.approx([2.0] * 100)


def test_mis_token_oracle():
    old, beh = log_ratios([0.45, 0.55, 1.0, 1.95, 2.05])  # not on a bound: log/exp round-off decides those
    w, m = correct("mis", MISParams(lower=0.5, upper=2.0), old, beh)
    assert w[0].tolist() == [0.0, 1.0, 1.0, 1.0, 0.0]
    assert m["masked_frac"][0].tolist() == [1.0, 0.0, 0.0, 0.0, 1.0]
    w, _ = correct("mis", MISParams(lower=0.5, upper=2.0, keep_ratio=True), old, beh)
    assert w[0].tolist() == pytest.approx([0.0, 0.55, 1.0, 1.95, 0.0])
    w, _ = correct("mis", MISParams(lower=0.0, upper=2.0), *log_ratios([math.exp(-50), 1.0]))
    assert w[0].tolist() == [1.0, 1.0]  # lower = 0: no lower bound


def test_mis_sequence_level_uses_the_geometric_mean():
    old, beh = log_ratios([math.exp(0.1), math.exp(-0.1), math.exp(0.6), 1.0])
    old[0, 3], beh[0, 3] = GARBAGE, -GARBAGE  # padding
    mask = row([1.0, 1.0, 1.0, 0.0])
    w, m = correct("mis", MISParams(level="sequence", upper=1.2), old, beh, mask)  # r = e^0.2 = 1.2214
    assert w[0].tolist() == [0.0] * 4 and m["ratio"][0].tolist() == pytest.approx([math.exp(0.2)] * 4)
    w, _ = correct("mis", MISParams(level="sequence", upper=1.25), old, beh, mask)
    assert w[0].tolist() == [1.0] * 4
    w, _ = correct("mis", MISParams(level="token", upper=1.25), old, beh, mask)
    assert w[0, :3].tolist() == [1.0, 1.0, 0.0]  # token level would drop only the third token


CORRECTION_CASES = [("tis", TISParams(cap=1.3)),
                    ("tis", TISParams(level="sequence", cap=1.3)),
                    ("mis", MISParams(lower=0.8, upper=1.2)),
                    ("mis", MISParams(level="sequence", lower=0.97, upper=1.03, keep_ratio=True))]


def naive_weights(name, p, old, beh, mask):
    out = {}
    for i in range(mask.shape[0]):
        toks = valid(mask, i)
        d = {j: float(old[i, j] - beh[i, j]) for j in toks}
        for j in toks:
            if p.level == "token":
                r = math.exp(d[j])
            else:
                r = math.exp(sum(d.values()) if name == "tis" else sum(d.values()) / len(toks))
            out[i, j] = min(r, p.cap) if name == "tis" else (r if p.keep_ratio else 1.0) * (p.lower <= r <= p.upper)
    return out


@pytest.mark.parametrize("name,params", CORRECTION_CASES)
def test_corrections_match_naive_loop_and_are_detached(name, params):
    _, beh, _, mask = random_batch(8)
    old, _, _, _ = random_batch(8, scale=0.15)
    old = old.detach().requires_grad_(True)  # the function must detach even if handed a graph
    w, m = correct(name, params, old, beh.detach(), mask)
    assert not w.requires_grad and w.grad_fn is None
    want = naive_weights(name, params, old.detach(), beh.detach(), mask)
    for (i, j), x in want.items():
        assert float(w[i, j]) == pytest.approx(x, rel=1e-9, abs=1e-12)
    hit = m["trunc_frac" if name == "tis" else "masked_frac"]
    assert 0 < float((hit * mask).sum()) < float(mask.sum())  # both branches exercised
    assert torch.isfinite(w).all()


@pytest.mark.parametrize("name,params", CORRECTION_CASES)
def test_corrections_are_one_on_policy_and_ignore_padding(name, params):
    logp, _, _, mask = random_batch(9)
    logp = logp.detach()
    beh = torch.where(mask > 0, logp, -logp)  # equal on valid tokens, garbage disagreement on padding
    w, m = correct(name, params, logp, beh, mask)
    assert torch.equal(w * mask, mask) and float((m["ratio"] * mask).sum()) == pytest.approx(float(mask.sum()))
    # appending padded columns changes no weight
    old, b, _, _ = random_batch(10, scale=0.08)
    w1, _ = correct(name, params, old.detach(), b, mask)
    pad = GARBAGE * torch.randn(mask.shape[0], 3, dtype=torch.float64)
    w2, _ = correct(name, params, torch.cat([old.detach(), pad], 1), torch.cat([b, -pad], 1),
                    torch.cat([mask, torch.zeros_like(pad)], 1))
    assert torch.equal(w2[:, :-3] * mask, w1 * mask)


# --- params and config ---------------------------------------------------------------------------

@pytest.mark.parametrize("cls,kw", [(GSPOParams, {"clip_low": 1.0}), (GSPOParams, {"clip_high": -1e-4}),
                                    (CISPOParams, {"clip_low": 1.5}), (CISPOParams, {"clip_high": -0.1}),
                                    (TISParams, {"cap": 0.9}), (TISParams, {"level": "geometric"}),
                                    (MISParams, {"lower": 1.1}), (MISParams, {"upper": 0.9})])
def test_params_reject_impossible_values(cls, kw):
    with pytest.raises(ValueError):
        cls(**kw)


@pytest.mark.parametrize("key,name,cls", [("objective", "gspo", GSPOParams), ("objective", "gspo_token", GSPOParams),
                                          ("objective", "cispo", CISPOParams), ("correction", "tis", TISParams),
                                          ("correction", "mis", MISParams)])
def test_components_validate_in_a_config(key, name, cls):
    cfg = load_config(overrides=[f"algorithm.{key}.name={name}"])
    comp = getattr(cfg.algorithm, key)
    assert comp.name == name and comp.params == cls()
    with pytest.raises(ConfigError, match="dual_clip"):  # another component's field is refused
        load_config(overrides=[f"algorithm.{key}.name={name}", f"algorithm.{key}.dual_clip=3"])


def test_config_values_reach_the_params():
    cfg = load_config(overrides=["algorithm.objective.name=gspo", "algorithm.objective.clip_high=5e-4",
                                 "algorithm.correction.name=tis", "algorithm.correction.level=sequence"])
    assert cfg.algorithm.objective.params.clip_high == 5e-4
    assert cfg.algorithm.correction.params.level == "sequence"
    with pytest.raises(ConfigError, match="clip_low"):
        load_config(overrides=["algorithm.objective.name=cispo", "algorithm.objective.clip_low=2"])

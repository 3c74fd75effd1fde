"""Reward transforms from the papers in docs/methods.md: noise_backward / noise_forward, lens, cde, and the stateful
fgrpo.

Hand-worked oracles from each method's definition (sources in docs/methods.md), each method's defining property
(for the noise corrections: GRPO's normalisation cancels them, a constant baseline does not, and the config check
refuses the no-op), equality with a naive per-row Python loop on random ragged groups, two real steps of each
recipe, and a resume test for the fgrpo multipliers.
"""

import math
import random
import warnings

import pytest
import torch

from rlvr.algorithms import ADVANTAGES, AdvantageInputs
from rlvr.algorithms.registry import REWARD_TRANSFORMS, TransformInputs, call
from rlvr.config.run import ConfigError, load_config
from tests.methods.helpers import run_recipe_steps
from tests.methods.seed_support import BINARY, train_and_resume


def reward_transform(name, rewards, groups=None, correct=None, old_logp=None, lengths=None, comps=None,
                     state=None, **kw):
    r = torch.tensor(rewards, dtype=torch.float64)
    g = torch.zeros(len(rewards), dtype=torch.long) if groups is None else torch.tensor(groups)
    lens = torch.ones(len(rewards), dtype=torch.long) if lengths is None else torch.tensor(lengths)
    mask = (torch.arange(int(lens.max()))[None, :] < lens[:, None]).float()
    components = dict(comps or {})
    if correct is not None:
        components["correct"] = torch.tensor(correct, dtype=torch.float64)
    extras = {} if old_logp is None else {"old_logp": old_logp}
    entry = REWARD_TRANSFORMS.get(name)
    params = entry.params(**kw)
    if entry.state is not None and state is None:
        state = entry.state(params)
    out, metrics = call(entry, TransformInputs(r, g, mask, None, components, extras), params, state)
    return out, metrics, state


def advantage(name, rewards, groups, lengths=None, **kw):
    lens = torch.ones(len(rewards), dtype=torch.long) if lengths is None else torch.as_tensor(lengths)
    mask = (torch.arange(int(lens.max()))[None, :] < lens[:, None]).float()
    entry = ADVANTAGES.get(name)
    return entry.fn(AdvantageInputs(torch.as_tensor(rewards, dtype=torch.float64), torch.as_tensor(groups), lens,
                                    mask), entry.params(**kw))


def ragged(seed, n_groups=6, max_size=6):
    rng = random.Random(seed)
    rewards, groups, lengths = [], [], []
    for gi in range(n_groups):
        for _ in range(rng.randint(2, max_size)):
            rewards.append(float(rng.random() < 0.5))
            groups.append(gi)
            lengths.append(rng.randint(1, 6))
    return rewards, groups, lengths


def logp_for(lengths, seed, scale=2.0):
    gen = torch.Generator().manual_seed(seed)
    mask = (torch.arange(max(lengths))[None, :] < torch.tensor(lengths)[:, None]).double()
    return -torch.rand(len(lengths), max(lengths), generator=gen, dtype=torch.float64) * scale * mask


# --- verifier-noise corrections ------------------------------------------------------------------

def test_noise_oracle_b18():
    back, _, _ = reward_transform("noise_backward", [1, 0], rho0=0.1, rho1=0.2)
    assert back.tolist() == pytest.approx([1.28571, -0.14286], abs=1e-5)
    # unbiased: E[R_hat | R*=1] = 0.8 R_hat(1) + 0.2 R_hat(0) = 1;  E[R_hat | R*=0] = 0.1 R_hat(1) + 0.9 R_hat(0) = 0
    assert 0.8 * back[0] + 0.2 * back[1] == pytest.approx(1.0)
    assert 0.1 * back[0] + 0.9 * back[1] == pytest.approx(0.0, abs=1e-12)
    fwd, _, _ = reward_transform("noise_forward", [1, 0], rho0=0.1, rho1=0.2)
    assert fwd.tolist() == pytest.approx([0.2, -0.8])
    # E[w | R*] = (1 - rho0 - rho1)(R* - 1): 0 for R* = 1, -(0.7) for R* = 0
    assert 0.8 * fwd[0] + 0.2 * fwd[1] == pytest.approx(0.0, abs=1e-12)
    assert 0.1 * fwd[0] + 0.9 * fwd[1] == pytest.approx(-0.7)


@pytest.mark.parametrize("which", ["noise_backward", "noise_forward"])
def test_noise_corrections_cancel_under_normalised_advantages(which):
    """The affine corrections leave GRPO's (and any mean/spread-normalised) advantages unchanged; the update is a
    function of the advantages, so it is unchanged too."""
    r, g, lens = ragged(0)
    fixed, _, _ = reward_transform(which, r, g, rho0=0.1, rho1=0.2)
    for name, kw in [("grpo", {}), ("grpo", {"std": "population"}), ("batch_std", {}), ("dgpo", {"eps": 0.0}),
                     ("reinforce_pp", {"subtract_group_mean": False}),
                     ("reinforce_pp", {"subtract_group_mean": True, "weighting": "sequence"})]:
        a, b = advantage(name, r, g, lens, **kw), advantage(name, fixed, g, lens, **kw)
        # grpo's std + eps: eps is not rescaled with the rewards, so equality holds up to ~eps
        assert torch.allclose(a, b, atol=1e-5), (name, kw)


def test_noise_corrections_change_the_update_under_a_constant_baseline():
    r, g, lens = ragged(1)
    back, _, _ = reward_transform("noise_backward", r, g, rho0=0.1, rho1=0.2)
    fwd, _, _ = reward_transform("noise_forward", r, g, rho0=0.1, rho1=0.2)
    raw = advantage("fixed_baseline", r, g)
    assert not torch.allclose(advantage("fixed_baseline", back, g), raw)
    assert not torch.allclose(advantage("fixed_baseline", fwd, g), raw)
    # all-wrong rows: 0 advantage without the correction, -rho0/(1-rho0-rho1) and rho1-1 with it
    zero = torch.tensor(r) == 0
    assert torch.equal(raw[zero], torch.zeros(int(zero.sum())))
    assert torch.allclose(advantage("fixed_baseline", back, g)[zero], torch.tensor(-0.1 / 0.7))
    # under a mean-only baseline the backward correction is a pure rescale by 1/(1 - rho0 - rho1)
    assert torch.allclose(advantage("dr_grpo", back, g), advantage("dr_grpo", r, g) / 0.7, atol=1e-6)


def _max_rel_diff(a: dict, b: dict, ref: dict) -> float:
    """How far two runs' updates from ``ref`` are apart: the norm of their difference over the norm of ``a``'s."""
    diff = sum(float(((a[k] - b[k]).double() ** 2).sum()) for k in ref)
    step = sum(float(((a[k] - ref[k]).double() ** 2).sum()) for k in ref)
    return (diff / step) ** 0.5


def test_under_adamw_the_backward_correction_is_a_baseline_shift_only(tmp_path):
    """With a constant baseline b, (R~ - rho0)/(1 - rho0 - rho1) - b is the uncorrected advantage with baseline
    rho0 + (1 - rho0 - rho1) b, scaled by 1/(1 - rho0 - rho1); AdamW's update does not see a constant scale of the
    gradient (Adam's eps aside) when no clipping acts. So three real steps of the correction end where three steps
    without it end with the shifted baseline, and not where they end with b itself (benchmarks/README.md, noise)."""
    rho0, rho1, b = 0.1, 0.2, 0.5
    for d in "csp":
        (tmp_path / d).mkdir()
    common = [*BINARY, "optim.max_grad_norm=null", "train.steps=3"]
    corrected = run_recipe_steps("noise_backward", tmp_path / "c", 3, common + [
        f"algorithm.reward_transforms=[{{name: noise_backward, rho0: {rho0}, rho1: {rho1}}}]",
        f"algorithm.advantage={{name: fixed_baseline, baseline: {b}}}"])
    shifted = run_recipe_steps("noise_backward", tmp_path / "s", 3, common + [
        "algorithm.reward_transforms=[]",
        f"algorithm.advantage={{name: fixed_baseline, baseline: {rho0 + (1 - rho0 - rho1) * b}}}"])
    plain = run_recipe_steps("noise_backward", tmp_path / "p", 3, common + [
        "algorithm.reward_transforms=[]", f"algorithm.advantage={{name: fixed_baseline, baseline: {b}}}"])
    raw = [m["reward"] for m in shifted["metrics"]]  # the same samples, scored alike, with some spread
    assert [m["reward"] for m in corrected["metrics"]] == pytest.approx([(r - rho0) / (1 - rho0 - rho1) for r in raw])
    assert raw[0] == plain["metrics"][0]["reward"] and 0 < sum(raw) < 3  # (plain samples elsewhere later)
    before = corrected["before"]
    # measured: 7e-4 apart (elements whose gradient is near Adam's eps see the scale), against 0.35 for b itself
    assert _max_rel_diff(corrected["after"], shifted["after"], before) < 5e-3
    assert _max_rel_diff(corrected["after"], plain["after"], before) > 0.1  # the baseline does matter


def test_noise_check_refuses_the_cancelled_combinations_and_names_the_alternative():
    for adv in ("grpo", "batch_std", "reinforce_pp", "dgpo"):
        for which in ("noise_backward", "noise_forward"):
            with pytest.raises(ConfigError, match="cancels it exactly.*'fixed_baseline'"):
                load_config(overrides=[f"algorithm.advantage={adv}",
                                       f"algorithm.reward_transforms=[{{name: {which}, rho0: 0.1}}]"])
    with pytest.raises(ConfigError, match="subtracts a mean\\)"):  # forward shift under a mean baseline
        load_config(overrides=["algorithm.advantage=rloo", "algorithm.reward_transforms=[noise_forward]"])
    with pytest.warns(UserWarning, match="only rescales"):
        load_config(overrides=["algorithm.advantage=dr_grpo", "algorithm.reward_transforms=[noise_backward]"])
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        cfg = load_config(overrides=["algorithm.advantage=fixed_baseline",
                                     "algorithm.reward_transforms=[noise_backward, noise_forward]"])
    assert [c.name for c in cfg.algorithm.reward_transforms] == ["noise_backward", "noise_forward"]


def test_noise_matches_naive_loop():
    r = [random.Random(3).random() for _ in range(9)]
    back, _, _ = reward_transform("noise_backward", r, rho0=0.05, rho1=0.3)
    fwd, _, _ = reward_transform("noise_forward", r, rho0=0.05, rho1=0.3)
    assert back.tolist() == pytest.approx([(x - 0.05) / 0.65 for x in r])
    assert fwd.tolist() == pytest.approx([x - 0.7 for x in r])


# --- LENS ----------------------------------------------------------------------------------------

def test_lens_oracle_c3():
    lp = torch.tensor([[-0.1, -0.1], [-1.0, -1.0], [-0.5, -0.5]], dtype=torch.float64)
    out, _, _ = reward_transform("lens", [0, 0, 1], old_logp=lp, lengths=[2, 2, 2], lam=1.0)
    assert out.tolist() == pytest.approx([-9.50833, -0.58198, 1.0], abs=1e-5)  # correct rows unchanged


def test_lens_penalty_is_monotone_in_confidence_and_rescues_all_wrong_groups():
    lp = torch.linspace(-3.0, -0.05, 6, dtype=torch.float64)[:, None].repeat(1, 3)
    out, _, _ = reward_transform("lens", [0] * 6, old_logp=lp, lengths=[3] * 6, max_penalty=100.0)
    assert (out[1:] < out[:-1]).all()  # more confident mistakes are penalised more
    a = advantage("grpo", out, [0] * 6, [3] * 6)
    assert torch.equal(advantage("grpo", [0.0] * 6, [0] * 6), torch.zeros(6)) and (a != 0).all()
    capped, _, _ = reward_transform("lens", [0], old_logp=torch.zeros(1, 2, dtype=torch.float64), lengths=[2])
    assert capped.tolist() == [-10.0]  # c = 1: the cap keeps the reward finite


def test_lens_matches_naive_loop():
    r, g, lens = ragged(4)
    lp = logp_for(lens, 4, scale=1.0)
    correct = [1.0 if random.Random(i).random() < 0.3 else 0.0 for i in range(len(r))]
    rewards = [x + 0.5 for x in r]  # correctness from the component, not the reward
    out, _, _ = reward_transform("lens", rewards, g, correct=correct, old_logp=lp, lengths=lens, lam=0.7,
                                 max_penalty=5.0)
    want = []
    for i, x in enumerate(rewards):
        c = math.exp(sum(lp[i, t].item() for t in range(lens[i])) / lens[i])
        want.append(x if correct[i] else x - 0.7 * min(c / (1 - c), 5.0))
    assert out.tolist() == pytest.approx(want, rel=1e-9)


# --- CDE -----------------------------------------------------------------------------------------

def test_cde_oracle_c9_and_confident_errors_rank_lowest():
    lp = torch.tensor([[-0.2, -0.2], [-3.0, -3.0]], dtype=torch.float64)
    out, _, _ = reward_transform("cde", [0, 0], old_logp=lp, lengths=[2, 2], omega=0.5, kappa=1.0)
    assert out.tolist() == pytest.approx([0.1, 0.5])
    # an all-wrong group: the most confident (lowest perplexity) mistake gets the most negative advantage
    lp = torch.tensor([[-0.05], [-0.4], [-0.9]], dtype=torch.float64)
    out, _, _ = reward_transform("cde", [0, 0, 0], old_logp=lp, omega=0.5, kappa=1.0)
    a = advantage("grpo", out, [0, 0, 0])
    assert a[0] < a[1] < a[2]


def test_cde_matches_naive_loop():
    r, g, lens = ragged(5)
    lp = logp_for(lens, 5)
    out, _, _ = reward_transform("cde", r, g, old_logp=lp, lengths=lens, omega=0.3, kappa=0.8)
    want = [x + 0.3 * min(-sum(lp[i, t].item() for t in range(lens[i])) / lens[i], 0.8) for i, x in enumerate(r)]
    assert out.tolist() == pytest.approx(want, rel=1e-9)


# --- FGRPO ---------------------------------------------------------------------------------------

def test_fgrpo_oracle_c17_dual_ascent():
    state, lams = None, []
    for rate in (0.8, 0.85, 0.95):
        c = [1.0] * int(rate * 20) + [0.0] * (20 - int(rate * 20))
        _, m, state = reward_transform("fgrpo", [0.0] * 20, comps={"format": torch.tensor(c)}, state=state,
                                       constraints={"format": 0.9}, eta=0.5)
        lams.append(m["lambda/format"])
    assert lams == pytest.approx([0.05, 0.075, 0.05])
    for _ in range(3):  # a met constraint drives lambda to 0, never below
        _, m, state = reward_transform("fgrpo", [0.0] * 4, comps={"format": torch.ones(4)}, state=state,
                                       constraints={"format": 0.9}, eta=0.5)
    assert m["lambda/format"] == 0.0 and state.state_dict() == {"lambdas": {"format": 0.0}}


def test_fgrpo_reward_uses_the_current_multipliers_and_matches_naive_loop():
    rng = random.Random(6)
    n = 12
    r = [rng.random() for _ in range(n)]
    comps = {"a": torch.tensor([rng.random() for _ in range(n)], dtype=torch.float64),
             "b": torch.tensor([float(rng.random() < 0.5) for _ in range(n)], dtype=torch.float64)}
    p = {"constraints": {"a": 0.9, "b": 0.7}, "eta": 0.3, "lambda_init": 0.2}
    lam = {"a": 0.2, "b": 0.2}
    state = None
    for _ in range(3):
        out, _, state = reward_transform("fgrpo", r, comps=comps, state=state, **p)
        want = [r[i] + sum(lam[k] * float(comps[k][i]) for k in lam) for i in range(n)]
        assert out.tolist() == pytest.approx(want)
        for k, tau in p["constraints"].items():
            lam[k] = max(0.0, lam[k] + 0.3 * (tau - sum(comps[k].tolist()) / n))
    assert state.state_dict()["lambdas"] == pytest.approx(lam)


def test_fgrpo_names_missing_components_and_needs_a_constraint():
    with pytest.raises(ValueError, match=r"\['grounding'\] are not score components.*\['correct'\]"):
        reward_transform("fgrpo", [1.0], correct=[1.0], constraints={"grounding": 0.8})
    with pytest.raises(ConfigError, match="constraints"):
        load_config(overrides=["algorithm.reward_transforms=[{name: fgrpo, constraints: {}}]"])


# --- real steps ----------------------------------------------------------------------------------

@pytest.mark.parametrize("recipe,name", [("noise_backward", "noise_backward"), ("lens", "lens"), ("cde", "cde"),
                                         ("fgrpo", "fgrpo")])
def test_recipe_trains_two_steps(recipe, name, tmp_path):
    out = run_recipe_steps(recipe, tmp_path, overrides=BINARY)
    for m in out["metrics"]:
        assert all(math.isfinite(v) for v in m.values() if isinstance(v, float)), m
        assert any(k.startswith(f"reward_transform/{name}/") for k in m)
    assert any(not torch.equal(out["before"][k], out["after"][k]) for k in out["before"])


@pytest.mark.slow
def test_fgrpo_resume_matches_uninterrupted(tmp_path):
    # tau 0.9 on correctness (about half the completions are correct): lambda rises every step
    out = train_and_resume("fgrpo", tmp_path, ["algorithm.advantage={name: dr_grpo}"])
    a, b = out["weights"]
    assert all(torch.equal(a[k], b[k]) for k in a)
    full, part = (s["algorithm.reward_transforms.0"]["lambdas"]["correct"] for s in out["state4"])
    assert part == full
    at2 = out["state2"]["algorithm.reward_transforms.0"]["lambdas"]["correct"]
    assert 0 < at2 < full  # the resumed run kept climbing from the restored multiplier

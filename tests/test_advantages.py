"""GRPO-family advantage estimators: dr_grpo, rloo, reinforce_pp, batch_std.

Hand oracles from the papers' definitions (Dr. GRPO, arXiv:2503.20783; RLOO, arXiv:2402.14740) and hand-computed
ones (arithmetic in comments), equality with naive pure-Python loops on random ragged groups, invariances, config
checks, and a real update step.
"""

import random
import statistics
from dataclasses import replace

import pytest
import torch

from rlvr.algorithms import ADVANTAGES, AdvantageInputs
from rlvr.algorithms.grouping import group_sum, leave_one_out_mean
from rlvr.config.run import ConfigError, load_config

NAMES = ["dr_grpo", "rloo", "reinforce_pp", "batch_std"]


def adv(name, rewards, groups=None, lengths=None, **kw):
    r = torch.tensor(rewards, dtype=torch.float64)
    g = torch.zeros(len(rewards), dtype=torch.long) if groups is None else torch.tensor(groups)
    lens = torch.ones(len(rewards), dtype=torch.long) if lengths is None else torch.tensor(lengths)
    mask = (torch.arange(int(lens.max()))[None, :] < lens[:, None]).float()
    entry = ADVANTAGES.get(name)
    return entry.fn(AdvantageInputs(r, g, lens, mask), entry.params(**kw))


def t(x):
    return torch.tensor(x, dtype=torch.float32)


# --- hand oracles --------------------------------------------------------------------------------

def test_dr_grpo_oracle_a5():
    assert torch.allclose(adv("dr_grpo", [1, 0, 0, 0]), t([0.75, -0.25, -0.25, -0.25]))


def test_rloo_oracle_a8():
    assert torch.allclose(adv("rloo", [1, 0, 0, 0]), t([1, -1 / 3, -1 / 3, -1 / 3]))


def test_rloo_is_g_over_g_minus_1_times_dr_grpo_for_equal_groups():
    gen = torch.Generator().manual_seed(3)
    for size in (2, 3, 5, 8):
        r = torch.rand(6 * size, generator=gen, dtype=torch.float64).tolist()
        groups = [i // size for i in range(6 * size)]
        want = size / (size - 1) * adv("dr_grpo", r, groups)
        assert torch.allclose(adv("rloo", r, groups), want, atol=1e-6)


def test_batch_std_oracle():
    # groups [1,0] and [1,0,0,0]; raw batch r = [1,0,1,0,0,0]: mean 1/3, squared deviations 2*(4/9) + 4*(1/9)
    # = 4/3, unbiased var (4/3)/5 = 4/15, std 0.516398. Numerators (group means 0.5, 0.25):
    # [0.5,-0.5, 0.75,-0.25,-0.25,-0.25] -> /0.516398 = [0.968246,-0.968246, 1.452369,-0.484123 x3].
    # GRPO would give +-0.7071 in the first group (its own std 0.7071): the scale is the batch's.
    a = adv("batch_std", [1, 0, 1, 0, 0, 0], [0, 0, 1, 1, 1, 1], eps=0.0)
    assert torch.allclose(a, t([0.968246, -0.968246, 1.452369, -0.484123, -0.484123, -0.484123]), atol=1e-6)


def test_reinforce_pp_sequence_oracle():
    # groups [1,0] and [1,0,0,0] centred: x = [0.5,-0.5, 0.75,-0.25,-0.25,-0.25]; sum 0 so mu = 0;
    # sum x^2 = 0.25+0.25+0.5625+3*0.0625 = 1.25; unbiased var 1.25/5 = 0.25, std 0.5 -> A = x / 0.5.
    a = adv("reinforce_pp", [1, 0, 1, 0, 0, 0], [0, 0, 1, 1, 1, 1], weighting="sequence", eps=0.0)
    assert torch.allclose(a, t([1, -1, 1.5, -0.5, -0.5, -0.5]), atol=1e-6)


def test_reinforce_pp_eps_is_inside_the_square_root():
    # same batch as above (var 0.25): sqrt(0.25 + 0.75) = 1, so A = x; (std + eps) would give x / 1.25
    a = adv("reinforce_pp", [1, 0, 1, 0, 0, 0], [0, 0, 1, 1, 1, 1], weighting="sequence", eps=0.75)
    assert torch.allclose(a, t([0.5, -0.5, 0.75, -0.25, -0.25, -0.25]), atol=1e-6)


def test_reinforce_pp_without_group_mean_oracle():
    # x = r = [1,0,1,0,0,0]: mu 1/3, unbiased var 4/15 (as above), std 0.516398;
    # A = (2/3)/0.516398 = 1.290994 and (-1/3)/0.516398 = -0.645497.
    a = adv("reinforce_pp", [1, 0, 1, 0, 0, 0], [0, 0, 1, 1, 1, 1], weighting="sequence", eps=0.0,
            subtract_group_mean=False)
    assert torch.allclose(a, t([1.290994, -0.645497, 1.290994, -0.645497, -0.645497, -0.645497]), atol=1e-6)


def test_reinforce_pp_token_weighted_oracle():
    # one group [1,0,0,0], lengths [1,2,3,4] (W = 10 tokens). x = [0.75,-0.25,-0.25,-0.25];
    # mu = (0.75 - 0.5 - 0.75 - 1.0)/10 = -0.15; x - mu = [0.9,-0.1,-0.1,-0.1];
    # var = (1*0.81 + (2+3+4)*0.01) / (10-1) = 0.9/9 = 0.1; A = [0.9,-0.1,-0.1,-0.1]/sqrt(0.1).
    a = adv("reinforce_pp", [1, 0, 0, 0], lengths=[1, 2, 3, 4], eps=0.0)
    assert torch.allclose(a, t([2.846050, -0.316228, -0.316228, -0.316228]), atol=1e-6)
    # population variance (OpenRLHF): 0.9/10 = 0.09, std 0.3 -> [3, -1/3, -1/3, -1/3]
    a = adv("reinforce_pp", [1, 0, 0, 0], lengths=[1, 2, 3, 4], eps=0.0, unbiased=False)
    assert torch.allclose(a, t([3.0, -1 / 3, -1 / 3, -1 / 3]), atol=1e-6)


def test_reinforce_pp_matches_token_level_whitening():
    """verl whitens the reward broadcast to [N, T] over the masked tokens; our [N] result broadcast is that."""
    gen = torch.Generator().manual_seed(11)
    n = 12
    r = (torch.rand(n, generator=gen, dtype=torch.float64) > 0.5).double()
    groups = torch.arange(n) // 4
    lens = torch.randint(1, 9, (n,), generator=gen)
    mask = (torch.arange(9)[None, :] < lens[:, None]).double()
    x = (r - torch.stack([r[groups == groups[i]].mean() for i in range(n)]))[:, None] * mask
    tok = x[mask.bool()]
    mu, var = tok.mean(), tok.var(unbiased=True)  # Bessel correction with the token count, as verl
    want = ((x - mu) * torch.rsqrt(var + 1e-8)) * mask
    got = adv("reinforce_pp", r.tolist(), groups.tolist(), lens.tolist())[:, None] * mask
    assert torch.allclose(got.double(), want, atol=1e-5)


# --- naive pure-Python loops on random ragged groups ----------------------------------------------

def _naive_centred(r, g, i):
    members = [r[j] for j in range(len(r)) if g[j] == g[i]]
    return r[i] if len(members) == 1 else r[i] - sum(members) / len(members)


def naive(name, r, g, lens, **kw):
    n = len(r)
    if name == "dr_grpo":
        return [_naive_centred(r, g, i) for i in range(n)]
    if name == "rloo":
        out = []
        for i in range(n):
            others = [r[j] for j in range(n) if g[j] == g[i] and j != i]
            out.append(r[i] - sum(others) / len(others) if others else 0.0)
        return out
    if name == "batch_std":  # a group of one is its own mean: 0
        return [(r[i] - statistics.fmean([r[j] for j in range(n) if g[j] == g[i]])) / (statistics.stdev(r) + kw["eps"])
                for i in range(n)]
    x = [_naive_centred(r, g, i) if kw["subtract_group_mean"] else r[i] for i in range(n)]
    samples = [x[i] for i in range(n) for _ in range(lens[i] if kw["weighting"] == "token" else 1)]
    var = statistics.variance(samples) if kw["unbiased"] else statistics.pvariance(samples)
    return [(xi - statistics.fmean(samples)) / (var + kw["eps"]) ** 0.5 for xi in x]


def _random_batch(seed):
    rng = random.Random(seed)
    ids = rng.sample(range(-50, 1000), 7)  # non-contiguous, unsorted, negative ids
    g = [gid for gid in ids for _ in range(rng.choice([1, 2, 3, 5, 8]))]
    rng.shuffle(g)  # groups interleaved
    r = [rng.choice([0.0, 1.0, 0.5, rng.random(), 0.7]) for _ in g]
    lens = [rng.randint(1, 12) for _ in g]
    return r, g, lens


CASES = [("dr_grpo", {}), ("rloo", {}), ("batch_std", {"eps": 1e-6}),
         ("reinforce_pp", {"subtract_group_mean": True, "weighting": "token", "unbiased": True, "eps": 1e-8}),
         ("reinforce_pp", {"subtract_group_mean": False, "weighting": "token", "unbiased": False, "eps": 1e-8}),
         ("reinforce_pp", {"subtract_group_mean": True, "weighting": "sequence", "unbiased": True, "eps": 1e-8})]


@pytest.mark.parametrize("name,kw", CASES)
@pytest.mark.parametrize("seed", [0, 1, 2, 3, 4])
def test_matches_naive_loop_on_ragged_groups(name, kw, seed):
    r, g, lens = _random_batch(seed)
    got = adv(name, r, g, lens, **kw)
    assert got.dtype == torch.float32 and got.shape == (len(r),)
    assert torch.allclose(got, t(naive(name, r, g, lens, **kw)), atol=1e-5, rtol=1e-5)


def test_dr_grpo_equals_grpo_without_std():
    from rlvr.algorithms.advantages.grpo import GRPOAdvantageParams
    for seed in range(4):
        r, g, _ = _random_batch(seed)
        want = ADVANTAGES.get("grpo").fn(AdvantageInputs(torch.tensor(r, dtype=torch.float64), torch.tensor(g)),
                                         GRPOAdvantageParams(std="none"))
        assert torch.equal(adv("dr_grpo", r, g), want)


def test_grouping_helpers_against_loops():
    r, g, _ = _random_batch(9)
    x, gi = torch.tensor(r, dtype=torch.float64), torch.tensor(g)
    sums = [sum(r[j] for j in range(len(r)) if g[j] == g[i]) for i in range(len(r))]
    loo = [(sums[i] - r[i]) / (g.count(g[i]) - 1) if g.count(g[i]) > 1 else 0.0 for i in range(len(r))]
    assert torch.allclose(group_sum(x, gi), torch.tensor(sums, dtype=torch.float64))
    assert torch.allclose(leave_one_out_mean(x, gi), torch.tensor(loo, dtype=torch.float64))


# --- invariances ---------------------------------------------------------------------------------

@pytest.mark.parametrize("name", NAMES)
def test_permuting_rows_permutes_outputs(name):
    r, g, lens = _random_batch(5)
    perm = random.Random(0).sample(range(len(r)), len(r))
    base = adv(name, r, g, lens)
    moved = adv(name, [r[i] for i in perm], [g[i] for i in perm], [lens[i] for i in perm])
    assert torch.allclose(moved, base[perm], atol=1e-6)


@pytest.mark.parametrize("name", NAMES)
def test_renumbering_group_ids_changes_nothing(name):
    r, g, lens = _random_batch(6)
    new_id = dict(zip(sorted(set(g)), random.Random(1).sample(range(10_000, 99_999), len(set(g)))))
    assert torch.allclose(adv(name, r, [new_id[x] for x in g], lens), adv(name, r, g, lens), atol=1e-7)


@pytest.mark.parametrize("name", ["dr_grpo", "rloo", "batch_std"])
def test_constant_groups_give_exactly_zero(name):
    # constant groups (non-binary 0.7 too) next to a group with signal; float64 r - mean is ~1e-16 for [0.7]*4
    r = [0.7] * 4 + [1.0] * 3 + [0.0] * 2 + [0.1] * 3 + [1.0, 0.0, 0.0]
    g = [0] * 4 + [1] * 3 + [2] * 2 + [3] * 3 + [4] * 3
    a = adv(name, r, g, eps=1e-9) if name == "batch_std" else adv(name, r, g)
    assert torch.equal(a[:12], torch.zeros(12)) and bool((a[12:] != 0).all())


@pytest.mark.parametrize("kw", [{}, {"weighting": "sequence"}, {"unbiased": False, "eps": 0.0}])
@pytest.mark.parametrize("rewards,groups", [([0.7] * 4, [0] * 4), ([0.1] * 3 + [0.7] * 5, [0] * 3 + [1] * 5),
                                            ([1.0] * 4, [0, 0, 1, 1])])
def test_reinforce_pp_batch_without_spread_gives_exactly_zero(kw, rewards, groups):
    # every group constant: the group-centred x are all exactly 0, so the whole batch has no spread
    assert torch.equal(adv("reinforce_pp", rewards, groups, lengths=list(range(1, len(rewards) + 1)), **kw),
                       torch.zeros(len(rewards)))
    # without the group mean, only a batch whose raw rewards are all equal has no spread
    assert torch.equal(adv("reinforce_pp", [0.7] * 5, [0, 0, 1, 1, 1], subtract_group_mean=False, **kw),
                       torch.zeros(5))


def test_reinforce_pp_constant_group_in_mixed_batch_is_shifted_by_token_mean():
    # documented, reference (verl/OpenRLHF) behaviour: group [1,1] gives x = 0, but the token mean of the
    # batch is not 0. x = [0,0, 0.75,-0.25,-0.25,-0.25], lengths [2,2,1,3,3,3] (W=14):
    # mu = (0.75 - 0.25*9)/14 = -1.5/14; the constant group gets -mu/std > 0, the sequence version ~0.
    r, g, lens = [1, 1, 1, 0, 0, 0], [0, 0, 1, 1, 1, 1], [2, 2, 1, 3, 3, 3]
    a = adv("reinforce_pp", r, g, lens)
    x = torch.tensor([0, 0, 0.75, -0.25, -0.25, -0.25], dtype=torch.float64).repeat_interleave(torch.tensor(lens))
    assert float(a[0]) == pytest.approx(float(-x.mean() / x.std()), rel=1e-5) and float(a[0]) > 0
    assert abs(float(adv("reinforce_pp", r, g, lens, weighting="sequence")[0])) < 1e-6


def _baseline(name, r, g):
    """b_i = r_i - A_i: the baseline the estimator subtracted from row i."""
    return torch.tensor(r, dtype=torch.float64) - adv(name, r, g).double()


def test_rloo_baseline_does_not_depend_on_own_reward():
    r, g = [1.0, 0.0, 0.5, 0.25, 1.0, 0.0], [0, 0, 0, 0, 1, 1]
    for i in range(4):
        bumped = list(r)
        bumped[i] += 0.37
        before, after = _baseline("rloo", r, g), _baseline("rloo", bumped, g)
        assert float(after[i]) == pytest.approx(float(before[i]), abs=1e-6)  # own baseline unchanged
        others = [j for j in range(4) if j != i]  # ... the others' baselines take 1/(G-1) of the bump
        assert torch.allclose(after[others] - before[others], torch.full((3,), 0.37 / 3, dtype=torch.float64),
                              atol=1e-6)
        assert torch.allclose(after[4:], before[4:], atol=1e-7)  # other prompts untouched
    # contrast: the group-mean baseline of Dr. GRPO DOES move with r_i (1/G of the bump)
    bumped = [r[0] + 0.37] + r[1:]
    moved = _baseline("dr_grpo", bumped, g)[0] - _baseline("dr_grpo", r, g)[0]
    assert float(moved) == pytest.approx(0.37 / 4, abs=1e-6)


def test_singleton_groups():
    r, g = [0.3, 1.0, 0.0], [7, 2, 2]
    assert float(adv("rloo", r, g)[0]) == 0.0  # no other sample: no baseline, no gradient
    assert float(adv("dr_grpo", r, g)[0]) == pytest.approx(0.3)  # GRPO's convention: mean := 0
    assert float(adv("batch_std", r, g)[0]) == 0.0  # its own group mean (ROLL, TRL)
    # all groups of one and all rewards equal: 0, not r / eps
    assert torch.equal(adv("batch_std", [0.7] * 3, [0, 1, 2], eps=0.0), torch.zeros(3))
    assert torch.equal(adv("batch_std", [1.0] * 4, [0, 0, 1, 1], eps=0.0), torch.zeros(4))  # 0, not 0/0
    # reinforce_pp follows verl (mean := 0): x = [0.3, 0.5, -0.5], mu 0.1, x - mu = [0.2, 0.4, -0.6],
    # unbiased var (0.04 + 0.16 + 0.36)/2 = 0.28, std 0.529150 -> A_0 = 0.2/0.529150 = 0.377964
    assert float(adv("reinforce_pp", r, g, weighting="sequence", eps=0.0)[0]) == pytest.approx(0.377964, rel=1e-5)


def test_reinforce_pp_token_weighting_needs_lengths():
    e = ADVANTAGES.get("reinforce_pp")
    inp = AdvantageInputs(torch.tensor([1.0, 0.0], dtype=torch.float64), torch.zeros(2, dtype=torch.long))
    with pytest.raises(ValueError, match="mask or lengths"):
        e.fn(inp, e.params())
    assert torch.allclose(e.fn(inp, e.params(weighting="sequence")), t([0.707107, -0.707107]), atol=1e-6)


# --- config --------------------------------------------------------------------------------------

def test_rloo_check_rejects_groups_of_one():
    with pytest.raises(ConfigError, match=r"rollout.group_size >= 2"):
        load_config(overrides=["algorithm.advantage.name=rloo", "rollout.group_size=1", "algorithm.minibatches=1"])
    load_config(overrides=["algorithm.advantage.name=rloo", "rollout.group_size=2", "algorithm.minibatches=1"])


@pytest.mark.parametrize("name", ["dr_grpo", "reinforce_pp", "batch_std"])
def test_other_estimators_accept_groups_of_one(name):
    load_config(overrides=[f"algorithm.advantage.name={name}", "rollout.group_size=1", "algorithm.minibatches=1"])


@pytest.mark.parametrize("name", NAMES)
def test_config_validates_each_estimator(name):
    cfg = load_config(overrides=[f"algorithm.advantage.name={name}"])
    assert cfg.algorithm.advantage.name == name
    assert isinstance(cfg.algorithm.advantage.params, ADVANTAGES.get(name).params)


@pytest.mark.parametrize("override", ["algorithm.advantage.weighting=tokens", "algorithm.advantage.eps=-1",
                                      "algorithm.advantage.std=none"])
def test_reinforce_pp_bad_params_rejected(override):
    with pytest.raises(ConfigError):
        load_config(overrides=["algorithm.advantage.name=reinforce_pp", override])


@pytest.mark.parametrize("name", NAMES)
def test_estimator_drives_a_real_update_step(name):
    """Advantages computed as the loop does, broadcast, then one real optimizer step on a tiny model."""
    from rlvr.core.batch import build_batch
    from rlvr.core.types import Completion
    from rlvr.models import TinyModelConfig, build_tiny_model, char_tokenizer
    from rlvr.train.loop import settings
    from rlvr.train.update import update_policy

    tok = char_tokenizer()
    model = build_tiny_model(TinyModelConfig(hidden_size=32, intermediate_size=64, num_layers=1), tok, seed=0)
    comps = [Completion(str(i // 4), [5, 6, 7], list(range(3, 4 + i % 5)), None, "stop", "", i // 4) for i in range(8)]
    batch = build_batch(comps, [1, 0, 0, 1, 0.7, 0.7, 0.7, 0.7], tok.pad_token_id)
    cfg = load_config(overrides=[f"algorithm.advantage.name={name}", "algorithm.minibatches=1",
                                 "optim.max_grad_norm=null"])
    entry = ADVANTAGES.get(cfg.algorithm.advantage.name)
    a = entry.fn(AdvantageInputs(batch.rewards, batch.group_index, batch.lengths, batch.completion_mask),
                 cfg.algorithm.advantage.params)
    batch = replace(batch, advantages=(a[:, None] * batch.completion_mask).float())
    opt = torch.optim.SGD(model.parameters(), lr=0.0)
    sched = torch.optim.lr_scheduler.LambdaLR(opt, lambda i: 1.0)
    metrics = update_policy(model, opt, sched, batch, settings(cfg))
    assert torch.isfinite(torch.tensor(metrics["loss"])) and metrics["grad_norm"] > 0


@pytest.mark.parametrize("name", NAMES)
def test_estimator_runs_in_the_training_loop(name, jsonl_cfg_overrides):
    """One real RL step (rollout, partial-credit reward, this estimator, update) through ``train``."""
    from rlvr.run.train import train

    # 8 completions of up to 16 tokens per prompt: with this seed every group has some reward spread
    over = ["train.steps=1", "rollout.group_size=8", "rollout.max_new_tokens=16", f"algorithm.advantage.name={name}"]
    summary = train(load_config(overrides=jsonl_cfg_overrides + over))
    m = summary["final_metrics"]
    assert m["zero_variance_group_frac"] < 1 and m["grad_norm"] > 0 and torch.isfinite(torch.tensor(m["loss"]))

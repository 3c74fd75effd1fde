"""Rollout budget allocators: hand-worked oracles (DARS, AR3PO, AERO, CoBA-RL; sources in docs/methods.md), their
defining properties, and the multi-stage seam in ``collect_rollouts`` with a scripted engine."""

import itertools
import json
import math

import numpy as np
import pytest
import torch

from rlvr.algorithms.advantages.grpo import GRPOAdvantageParams, grpo_advantage
from rlvr.algorithms.registry import AdvantageInputs
from rlvr.config.run import ConfigError, load_config
from rlvr.core.types import Completion, Example
from rlvr.models import TinyModelConfig, build_tiny_model, char_tokenizer
from rlvr.sampling import PromptStats, UniformSampler, build_data
from rlvr.sampling.aero import reject
from rlvr.sampling.base import rng_for
from rlvr.sampling.coba import CoBAParams, beta_shape, coba_allocate, coba_value, greedy_allocate
from rlvr.sampling.dars import dars_extra
from rlvr.tasks.base import Task, WeightedVerifier
from rlvr.train.loop import Components
from rlvr.train.rollouts import collect_rollouts
from rlvr.verifiers import ExactMatchVerifier


# ------------------------------------------------------------------------------------------------ oracles
@pytest.mark.parametrize("p,et,hw64,hw32", [(0.0, 24, 56, 24), (0.125, 11, 24, 24), (0.25, 3, 8, 8),
                                            (0.375, 1, 3, 3), (0.5, 0, 0, 0), (0.75, 0, 0, 0)])
def test_dars_oracle_table(p, et, hw64, hw32):
    assert dars_extra(p, 8, 32, "et") == et
    assert dars_extra(p, 8, 64, "hw") == hw64
    assert dars_extra(p, 8, 32, "hw") == hw32


def test_dars_properties():
    grid = [i / 64 for i in range(1, 32)]
    for sched in ("et", "hw"):
        for std in (False, True):
            vals = [dars_extra(p, 8, 1000, sched, std) for p in grid]
            assert all(a >= b for a, b in zip(vals, vals[1:])), (sched, std)
    assert all(dars_extra(p, 8, 1000, "hw") >= dars_extra(p, 8, 1000, "et") for p in grid)


def test_aero_oracles():
    kept = reject([1, 1, 0, 0, 0, 0, 0, 0], 1.0, rng_for(0))
    assert kept[:2] == [0, 1] and len(kept) == 4  # 2 correct + 2 of the 6 incorrect
    kept = reject([1, 0, 0, 0], 2.0, rng_for(0))
    assert len(kept) == 3 and kept[0] == 0  # the correct one and ceil(2 x 1) incorrect
    kept = reject([1, 1, 1, 0], 1.0, rng_for(0), minority_correct=False)  # prune_high: the failure and one success
    assert len(kept) == 2 and 3 in kept


def test_coba_oracles():
    a, b = beta_shape([0.2], 11)  # failure 0.8
    assert (a, b) == pytest.approx((8.2, 2.8))
    a, b = beta_shape([0.7], 11)  # failure 0.3 -> sigmoid(-2) = 0.1192
    assert (a, b) == pytest.approx((1 + 9 / (1 + math.e ** 2), 11 - 1 - 9 / (1 + math.e ** 2)))
    assert a == pytest.approx(2.073, abs=1e-3)
    # V increasing and concave in N
    for p in (0.1, 0.3, 0.5, 0.8):
        v = [coba_value(n, p, 5.0, 3.0, 4.0) for n in range(0, 40)]
        gains = np.diff(v)
        assert (gains > 0).all() and (np.diff(gains) <= 1e-12).all()
    # equal p, equal shape: an equal split of the explore budget (+-1)
    n = greedy_allocate([0.5, 0.5], 21, 2, 32, 5.0, 3.0, 3.0)
    assert n.sum() == 21 and abs(int(n[0]) - int(n[1])) <= 1


def test_coba_greedy_equals_brute_force_on_tiny_cases():
    rng = np.random.default_rng(0)
    for _ in range(15):
        rates = rng.uniform(0.05, 0.95, size=3).tolist()
        total = int(rng.integers(3, 13))
        got = greedy_allocate(rates, total, 1, 12, 4.0, 2.0, 3.0)
        value = lambda n: sum(coba_value(int(k), p, 4.0, 2.0, 3.0) for k, p in zip(n, rates))
        best = max((c for c in itertools.product(range(1, 13), repeat=3) if sum(c) == total), key=value)
        assert value(got) == pytest.approx(value(best))


def test_coba_budget_is_conserved_and_bounded():
    p = CoBAParams(n_low=2, n_up=16)
    rng = np.random.default_rng(1)
    for _ in range(50):
        m = int(rng.integers(1, 12))
        rates = [None if rng.random() < 0.2 else float(rng.choice([0.0, 0.02, 0.3, 0.5, 0.9, 1.0])) for _ in range(m)]
        total = int(rng.integers(m * 2, m * 16 + 1))
        alloc = coba_allocate(rates, total, p, 5.0, 2.0)
        assert alloc.sum() == total and alloc.min() >= (2 if any(r is not None for r in rates) else total // m)
        assert alloc.max() <= 16


# ------------------------------------------------------------------------------ collect_rollouts seam
class OracleEngine:
    """Scripted answers: ``success(example_id, draw_number)`` decides 'a' (right) or 'b' (wrong)."""

    def __init__(self, tok, success):
        self.tok, self.success, self.draws, self.calls = tok, success, {}, 0

    def sync_weights(self):
        pass

    def generate(self, requests, sampling):
        self.calls += 1
        out = []
        for g, req in enumerate(requests):
            for _ in range(req.n):
                k = self.draws[req.example.id] = self.draws.get(req.example.id, 0) + 1
                text = "a" if self.success(req.example.id, k) else "b"
                ids = self.tok(text)["input_ids"] + [self.tok.eos_token_id]
                out.append(Completion(req.example.id, self.tok(req.example.prompt)["input_ids"], ids,
                                      [-0.5] * len(ids), "stop", text, g))
        return out


def rig(success, overrides, ids=("A", "B")):
    cfg = load_config(overrides=["rollout.group_size=8", "algorithm.minibatches=1",
                                 f"rollout.prompts_per_step={len(ids)}"] + overrides)
    tok = char_tokenizer()
    model = build_tiny_model(TinyModelConfig(hidden_size=32, intermediate_size=64, num_layers=1), tok)
    exs = [Example(i, f"{i}=", "a") for i in ids]
    task = Task("t", {"train": exs, "eval": exs}, [WeightedVerifier(ExactMatchVerifier())])
    _, allocator, stats = build_data(cfg, task)
    sampler = UniformSampler(exs)
    sampler._order = list(range(len(exs)))  # prompts in the order given, every step (tests reset ``pos``)
    opt = torch.optim.SGD(model.parameters(), lr=0.0)
    c = Components(model, tok, task, OracleEngine(tok, success), sampler, allocator, stats, opt,
                   torch.optim.lr_scheduler.LambdaLR(opt, lambda i: 1.0))
    return cfg, c


def sizes(ro):
    return {req.example.id: req.n for req in ro.requests}


def test_ar3po_oracle_stops_on_success_and_reuses_a_stored_response():
    solved = {"A": lambda k: True, "B": lambda k: False}
    cfg, c = rig(lambda i, k: solved[i](k), ["data.budget.name=ar3po", "data.budget.k=4", "data.budget.stages=3"])
    ro = collect_rollouts(cfg, c, 0, lambda r: r)
    assert c.engine.draws == {"A": 4, "B": 12} and sizes(ro) == {"A": 4, "B": 12}
    assert ro.metrics["rollouts/spent"] == 16 and ro.metrics["rollouts/informative_groups"] == 0
    c.allocator.buffer["B"] = dict(c.allocator.buffer["A"])  # B had been solved once before
    c.sampler.pos = 0
    ro = collect_rollouts(cfg, c, 1, lambda r: r)
    assert sizes(ro)["B"] == 13 and ro.metrics["rollouts/reused"] == 1 and ro.metrics["rollouts/spent"] == 16
    b = [i for i, comp in enumerate(ro.completions) if comp.example_id == "B"]
    rewards = torch.tensor([ro.rewards[i] for i in b], dtype=torch.float64)
    assert rewards.tolist() == [0.0] * 12 + [1.0]
    adv = grpo_advantage(AdvantageInputs(rewards, torch.zeros(13, dtype=torch.long)), GRPOAdvantageParams())
    assert adv[-1] == pytest.approx((1 - 1 / 13) / rewards.std().item(), rel=1e-5) and adv[-1] > 0
    assert ro.metrics["rollouts/informative_groups"] == 1
    json.dumps(c.allocator.state_dict())


def test_aero_rescue_oracle_and_rejection():
    # B's first success is its 5th draw; A: 2 of 8 right
    cfg, c = rig(lambda i, k: k == 5 if i == "B" else k in (1, 2),
                 ["data.budget.name=aero", "data.budget.n_explore=4", "data.budget.n_extra=2"])
    ro = collect_rollouts(cfg, c, 0, lambda r: r)
    assert c.engine.draws["B"] == 6 and c.engine.calls == 2  # 4 + 2, stops after the round with the success
    # B: 1 correct of 6 -> keep it and ceil(1 * 1) incorrect; A: 2 of 4 = 0.5 -> untouched
    assert sizes(ro) == {"A": 4, "B": 2}
    assert c.allocator.posterior == {"A": [3.0, 3.0], "B": [2.0, 6.0]}
    assert ro.metrics["budget/rejected"] == 4 and ro.metrics["rollouts/spent"] == 10


def test_aero_beta_posterior_oracle():
    cfg, c = rig(lambda i, k: k <= 3, ["data.budget.name=aero", "data.budget.n_explore=4"], ids=("A",))
    collect_rollouts(cfg, c, 0, lambda r: r)
    a, b = c.allocator.posterior["A"]
    assert (a, b) == (4.0, 2.0) and a / (a + b) == pytest.approx(2 / 3)


def test_dars_adds_extra_rollouts_to_hard_prompts_and_drops_constant_groups():
    # A: 1 in 8 right (p = 0.125 -> ET gives 11 more), B: all right (dropped), C: half right (no extra)
    cfg, c = rig(lambda i, k: {"A": k == 1, "B": True, "C": k % 2 == 0}[i],
                 ["data.budget.name=dars", "data.budget.n_max=32"], ids=("A", "B", "C"))
    ro = collect_rollouts(cfg, c, 0, lambda r: r)
    assert c.engine.draws == {"A": 19, "B": 8, "C": 8} and sizes(ro) == {"A": 19, "C": 8}
    assert ro.metrics["rollouts/groups"] == 2 and ro.metrics["rollouts/informative_groups"] == 2
    assert ro.metrics["rollouts/group_size_max"] == 19 and ro.metrics["rollouts/spent"] == 35


def test_coba_spends_exactly_the_budget():
    cfg, c = rig(lambda i, k: k % 3 == 0, ["data.budget.name=coba", "data.budget.n_up=16"], ids=("A", "B", "C"))
    for step in range(3):
        c.sampler.pos = 0
        ro = collect_rollouts(cfg, c, step, lambda r: r)
        assert ro.metrics["rollouts/spent"] == 24 and sum(sizes(ro).values()) == 24
    assert set(c.allocator.history) == {"A", "B", "C"}


def test_stats_see_every_generated_completion():
    cfg, c = rig(lambda i, k: k == 1, ["data.budget.name=dars"])
    collect_rollouts(cfg, c, 0, lambda r: r)
    assert c.stats.rollouts("A") == c.engine.draws["A"] and c.stats.last_step("B") == 0


def test_invalid_combinations_fail_at_load():
    with pytest.raises(ConfigError, match="replaces DAPO dynamic sampling"):
        load_config(overrides=["data.budget.name=ar3po", "algorithm.dynamic_sampling.enabled=true"])
    with pytest.raises(ConfigError, match="n_max=4 must be >="):
        load_config(overrides=["data.budget.name=dars", "data.budget.n_max=4"])
    with pytest.raises(ConfigError, match="unknown rollout budget allocator 'nope'"):
        load_config(overrides=["data.budget.name=nope"])

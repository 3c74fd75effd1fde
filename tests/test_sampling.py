"""Prompt samplers: hand-worked oracles (Prompt Replay, GCS, pairing, TAC, PACED-RL; sources in docs/methods.md),
their defining properties, and exact continuation after a JSON state round trip."""

import json
import math

import numpy as np
import pytest

from rlvr.core.types import Completion, Example, Score
from rlvr.sampling import Group, PromptStats, SamplerContext, build_sampler
from rlvr.sampling.base import gumbel_top_k, rng_for
from rlvr.sampling.gaussian import gaussian_weights
from rlvr.sampling.paced import accuracy_from_partition, paced_weights
from rlvr.sampling.pairing import select_pairs
from rlvr.sampling.replay import PromptReplayParams, PromptReplaySampler, replay_budget
from rlvr.sampling.tac import TACParams, tac_probs, transferability
from rlvr.config.run import load_config


def exs(n, task=""):
    return [Example(f"{task}{i}", f"q{i}=", "a", task=task) for i in range(n)]


def group(ex, correct, tokens=None):
    comps = [Completion(ex.id, [1], tokens or [3 + int(c)], None, "stop", "x") for c in correct]
    return Group(ex, comps, [Score(float(c), {"correct": float(c)}) for c in correct], [float(c) for c in correct])


def with_rate(ex, rate, n=4):
    k = round(rate * n)
    return group(ex, [1] * k + [0] * (n - k))


def sampler(name, examples, stats=None, seed=0, weights=None, **params):
    comp = load_config(overrides=[f"data.sampler.name={name}"] + [f"data.sampler.{k}={v}" for k, v in params.items()]).data.sampler
    stats = stats if stats is not None else PromptStats()
    return build_sampler(comp, SamplerContext(examples, stats, seed, 4, 4, weights)), stats


# ----------------------------------------------------------------------------------------- Prompt Replay
def test_prompt_replay_oracle_walkthrough():
    """Prompt Replay walkthrough: P=4, fraction 0.5, cooldown 5, max_reuse 3, window [0.2, 0.7]."""
    pool = {i: Example(str(i), f"{i}?", "a") for i in (10, 23, 45, 67)}
    fresh_pool = [Example(f"f{i}", "?", "a") for i in range(100)]

    class Fresh:
        def __init__(self):
            self.i = 0

        def next(self, k, step=0):
            out = fresh_pool[self.i: self.i + k]
            self.i += k
            return out

        def state_dict(self):
            return {"i": self.i}

    s = PromptReplaySampler(list(pool.values()) + fresh_pool,
                            PromptReplayParams(fraction=0.5, cooldown=5, max_reuse=3, pr_min=0.2, pr_max=0.7), Fresh())
    s.observe([with_rate(pool[10], 0.5), with_rate(pool[23], 0.0), with_rate(pool[45], 0.75),
               with_rate(pool[67], 0.25)], step=1)
    assert [e[3] for e in sorted(s.heap)] == ["10", "67"]  # only the window, nearest 0.5 first
    b2 = s.next(4, step=2)
    assert [e.id for e in b2[:2]] == ["10", "67"] and all(e.id.startswith("f") for e in b2[2:])
    s.observe([with_rate(pool[10], 0.5), with_rate(pool[67], 0.25)] + [with_rate(e, 0.0) for e in b2[2:]], 2)
    for step in range(3, 7):  # cooling down: 4 fresh prompts each step
        b = s.next(4, step)
        assert all(e.id.startswith("f") for e in b), step
        s.observe([with_rate(e, 0.0) for e in b], step)
    assert [e.id for e in s.next(4, step=7)[:2]] == ["10", "67"]  # 7 - 2 >= 5
    s.observe([with_rate(pool[10], 0.5)], 7)
    s.reuse["10"] = 3
    assert all(e.id != "10" for e in s.next(4, step=20))  # reuse_count = 3: never again
    assert replay_budget(4, 0.9) == 2 and replay_budget(4, 0.5) == 2 and replay_budget(5, 0.5) == 2


def test_prompt_replay_ties_pop_the_lower_rate_first():
    a, b = Example("a", "?", "x"), Example("b", "?", "x")
    s = PromptReplaySampler([a, b], PromptReplayParams(pr_min=0.1, pr_max=0.9, cooldown=0), _Fresh([]))
    s.observe([with_rate(b, 0.6, n=5), with_rate(a, 0.4, n=5)], 0)
    assert [e.id for e in s.next(2, 1)] == ["a"]


class _Fresh:
    def __init__(self, pool):
        self.pool, self.i = pool, 0

    def next(self, k, step=0):
        out = [self.pool[(self.i + j) % len(self.pool)] for j in range(k)] if self.pool else []
        self.i += k
        return out

    def state_dict(self):
        return {"i": self.i}


@pytest.mark.parametrize("fraction", [0.25, 0.5, 0.9, 1.0])
def test_prompt_replay_never_exceeds_its_cap(fraction):
    pool = exs(40)
    s, _ = sampler("prompt_replay", pool, fraction=fraction, cooldown=1, pr_min=0.01, pr_max=0.99, max_reuse=50)
    rng = np.random.default_rng(0)
    seen_replays = 0
    for step in range(60):
        k = int(rng.integers(2, 12))
        batch = s.next(k, step)
        assert len(batch) == k
        assert s.metrics()["replayed"] <= min(math.floor(k * fraction), k // 2)
        assert len({e.id for e in batch[: int(s.metrics()["replayed"])]}) == s.metrics()["replayed"]
        seen_replays += s.metrics()["replayed"]
        s.observe([with_rate(e, float(rng.choice([0.0, 0.25, 0.5, 0.75, 1.0]))) for e in batch], step)
    assert seen_replays > 0


# ------------------------------------------------------------------------------------ Gaussian curriculum
def test_gaussian_curriculum_oracle_and_preference():
    w = gaussian_weights(np.array([0.5, 0.3, 0.9, 0.7]), 0.5, 0.2, 0.0)
    assert w.tolist() == pytest.approx([1.0, math.exp(-0.5), math.exp(-2.0), math.exp(-0.5)])
    pool = exs(20)
    s, stats = sampler("gaussian_curriculum", pool)
    for i, e in enumerate(pool):  # half near 0.5, half solved
        stats.update([e.id] * 4, [1, 1, 0, 0] if i < 10 else [1, 1, 1, 1], 0)
    picks = [e for step in range(100) for e in s.next(4, step)]
    near = sum(int(e.id) < 10 for e in picks) / len(picks)
    assert near > 0.9  # weight 1 vs e^-3.125 + 1e-3 = 0.045 each: about 4.6% of the draws
    assert all(len({e.id for e in s.next(4, 200 + t)}) == 4 for t in range(10))  # without replacement


def test_gumbel_top_k_matches_successive_sampling_probabilities():
    w = np.array([1.0, 2.0, 3.0, 4.0])
    first = np.bincount([gumbel_top_k(w, 2, rng_for(7, t))[0] for t in range(4000)], minlength=4) / 4000
    assert first == pytest.approx(w / w.sum(), abs=0.03)
    assert gumbel_top_k(w, 10, rng_for(0)).tolist().__len__() == 4  # never more than the pool


# ------------------------------------------------------------------------------------------------ pairing
def test_pairing_selection_oracle_and_batches():
    est = np.array([0.0, 0.1, 0.5, 0.9, 1.0])
    assert select_pairs(est, np.ones(5, bool), 0.2, 0.8, 1) == ([1], [3])
    pool = exs(5)
    s, stats = sampler("pairing", pool)
    first = s.next(4, 0)  # nothing scored yet: fresh prompts
    assert s.metrics()["paired"] == 0 and len(first) == 4
    for e, c in zip(pool, [[0] * 10, [1] + [0] * 9, [1] * 5 + [0] * 5, [1] * 9 + [0], [1] * 10]):
        stats.update([e.id] * 10, c, 0)
    assert [e.id for e in s.next(2, 1)] == ["1", "3"]
    stats.update(["1"] * 10, [1] * 10, 2)  # fixed: the pair stays although "1" got easy
    assert [e.id for e in s.next(2, 3)] == ["1", "3"]


# ---------------------------------------------------------------------------------------------------- TAC
def test_tac_transferability_oracle():
    g = np.array([[1.0, 0.0], [1.0, 0.0], [0.0, 1.0]])
    assert transferability(g).tolist() == pytest.approx([0.5, 0.5, 0.0])
    pi = tac_probs(np.ones(3), g, np.ones(3), 5, TACParams(lam=1.0, eps=0.0))
    assert pi[2] < pi[0] == pytest.approx(pi[1]) and pi.sum() == pytest.approx(1.0)
    # lam = 0: a pure advantage bandit, the sketches do not matter
    learn = np.array([0.1, 0.5, 0.3])
    p = TACParams(lam=0.0, eps=0.0, tau=0.2)
    a, b = tac_probs(learn, g, np.ones(3), 5, p), tac_probs(learn, np.random.default_rng(0).normal(size=(3, 2)), np.ones(3), 5, p)
    assert a == pytest.approx(b) and int(np.argmax(a)) == 1
    expected = np.exp(learn / 0.2) / np.exp(learn / 0.2).sum()
    assert a == pytest.approx(expected)


def test_tac_samples_the_learnable_domain_more():
    pool = exs(10, "easy") + exs(10, "mid")
    s, _ = sampler("tac", pool, weights={"easy": 1.0, "mid": 1.0}, lam=0.0, tau=0.1, eps=0.1)
    for step in range(3):
        batch = s.next(8, step)
        s.observe([with_rate(e, 1.0) if e.task == "easy" else with_rate(e, 0.5) for e in batch], step)
    picks = [e.task for t in range(20) for e in s.next(8, 10 + t)]
    assert picks.count("mid") / len(picks) > 0.8
    assert s.metrics()["p/mid"] > 0.9
    with pytest.raises(ValueError, match="at least two domains"):
        sampler("tac", exs(4))


# ----------------------------------------------------------------------------------------------- PACED-RL
def test_paced_oracles():
    beta = math.log(3.0)
    assert [accuracy_from_partition(math.log(z), beta) for z in (1.0, 3.0, 2.0)] == pytest.approx([0.0, 1.0, 0.5])
    assert paced_weights(np.array([0.5, 0.0]), 0.05).tolist() == pytest.approx([0.3, 0.05])
    pool = exs(8)
    s, stats = sampler("paced", pool, replay_fraction=0.5)
    stats.update(["0"] * 8, [1] * 4 + [0] * 4, 0)  # estimate 0.5
    s.observe([group(pool[0], [1, 0, 0, 0, 0, 0, 0, 0]), group(pool[1], [1, 0])], 1)  # unseen: prior 0.5
    assert s.buffer == {"0": pytest.approx(0.375)}  # |0.5 - 1/8|; "1" matched its prior exactly: no error
    batch = s.next(4, 2)
    assert batch[0].id == "0" and len({e.id for e in batch}) == 4 and "0" not in s.buffer


# -------------------------------------------------------------------------------- resume: exact continuation
@pytest.mark.parametrize("name,params,weights", [
    ("uniform", {}, None), ("uniform", {}, {"a": 1.0, "b": 3.0}),
    ("prompt_replay", {"cooldown": 1, "pr_min": 0.2, "pr_max": 0.8}, None),
    ("gaussian_curriculum", {}, None), ("pairing", {"fixed": False}, None), ("paced", {}, None),
    ("tac", {"ucb": 0.5}, {"a": 1.0, "b": 1.0}),
])
def test_state_round_trip_continues_exactly(name, params, weights):
    pool = exs(12, "a") + exs(12, "b")
    rng = np.random.default_rng(3)

    def play(s, stats, steps, start):
        out = []
        for step in range(start, start + steps):
            batch = s.next(6, step)
            out.append([e.id for e in batch])
            gs = [group(e, rng_for(step, e.id).integers(0, 2, size=4).tolist(), [int(x) for x in rng_for(e.id).integers(0, 50, 3)])
                  for e in batch]
            s.observe(gs, step)
            stats.update([g.example.id for g in gs for _ in g.completions], [x for g in gs for x in g.correct], step,
                         domains=[g.example.task for g in gs for _ in g.completions])
        return out

    a, stats_a = sampler(name, pool, weights=weights, seed=5, **params)
    play(a, stats_a, 6, 0)
    saved = json.loads(json.dumps({"s": a.state_dict(), "stats": stats_a.state_dict()}))
    tail_a = play(a, stats_a, 6, 6)
    b, stats_b = sampler(name, pool, weights=weights, seed=5, **params)
    b.load_state_dict(saved["s"])
    stats_b.load_state_dict(saved["stats"])
    assert play(b, stats_b, 6, 6) == tail_a
    del rng

"""PromptStats: hand-computed pass rates, reward variance, decay and domains; checkpoint round trips."""

import json

import numpy as np
import pytest

from rlvr.sampling import PromptStats


def test_update_counts_pass_rates_variance_and_last_step():
    s = PromptStats(decay=0.5)
    s.update(["a"] * 4 + ["b"] * 2, [1, 0, 0, 0, 1, 1], step=3, rewards=[1.0, 0.0, 0.0, 0.0, 0.5, 1.5])
    assert s.rollouts("a") == 4 and s.pass_rate("a") == 0.25 and s.last_step("a") == 3
    assert s.reward_var("a") == pytest.approx(0.25 * 0.75)  # population variance of [1, 0, 0, 0]
    assert s.row("b")["ema_var"] == pytest.approx(0.25) and s.row("b")["reward_sum"] == 2.0
    s.update(["a"] * 2, [1, 1], step=5, rewards=[1.0, 1.0])
    # ema: 0.5 * 0.25 + 0.5 * 1.0; variance ema: 0.5 * 0.1875 + 0.5 * 0
    assert s.pass_rate("a") == pytest.approx(0.625) and s.last_pass_rate("a") == 1.0
    assert s.row("a")["ema_var"] == pytest.approx(0.09375)
    assert s.rollouts("a") == 6 and s.row("a")["visits"] == 2 and s.last_step("a") == 5
    assert s.reward_var("a") == pytest.approx(3 / 6 - 0.25)  # lifetime: mean 0.5, mean of squares 0.5
    assert s.pass_rate("zzz") is None and s.rollouts("zzz") == 0 and s.last_step("zzz") is None
    assert len(s) == 2 and "a" in s and s.ids == ["a", "b"]


def test_matches_a_naive_per_row_loop():
    rng = np.random.default_rng(0)
    s, naive, d = PromptStats(decay=0.7, capacity=2), {}, 0.7  # tiny capacity: growth is exercised
    for step in range(20):
        ids = [f"p{i}" for i in rng.integers(0, 30, size=40)]
        correct = rng.integers(0, 2, size=40).astype(float).tolist()
        s.update(ids, correct, step)
        per = {}
        for i, c in zip(ids, correct):
            per.setdefault(i, []).append(c)
        for i, cs in per.items():
            rate = sum(cs) / len(cs)
            row = naive.get(i)
            naive[i] = [len(cs), rate, step] if row is None else [row[0] + len(cs), d * row[1] + (1 - d) * rate, step]
    for i, (n, ema, last) in naive.items():
        assert s.rollouts(i) == n and s.pass_rate(i) == pytest.approx(ema) and s.last_step(i) == last


def test_domain_aggregates():
    s = PromptStats(decay=0.5)
    s.update(["m1", "m1", "c1", "c1", "c2", "c2"], [1, 0, 0, 0, 1, 1], 0, domains=["math"] * 2 + ["code"] * 4)
    s.update(["m2", "m2"], [1, 1], 1, domains=["math", "math"])
    d = s.domain_stats()
    assert d["math"]["rollouts"] == 4 and d["math"]["groups"] == 2 and d["math"]["pass_rate"] == 0.75
    assert d["math"]["ema_pass"] == pytest.approx(0.5 * 0.5 + 0.5 * 1.0)
    assert d["code"]["ema_pass"] == 0.5 and d["code"]["groups"] == 2
    assert s.row("c2")["domain"] != s.row("m1")["domain"]


def test_state_round_trip_through_json_is_exact():
    s = PromptStats(decay=0.3)
    rng = np.random.default_rng(1)
    for step in range(5):
        ids = [f"id-{i}" for i in rng.integers(0, 50, size=64)]
        s.update(ids, rng.random(64).round().tolist(), step, rewards=rng.normal(size=64).tolist(),
                 domains=["x" if i.endswith(("1", "2")) else "y" for i in ids])
    t = PromptStats()
    t.load_state_dict(json.loads(json.dumps(s.state_dict())))
    assert t.ids == s.ids and t.decay == 0.3 and t.generation == 1
    for name in ("rollouts", "correct", "reward_sq", "ema_pass", "ema_var", "last_step", "domain"):
        assert np.array_equal(t.column(name), s.column(name)), name
    assert t.domain_stats() == s.domain_stats()
    t.update(["id-1", "new"], [1, 0], 9)  # a restored table keeps growing
    assert t.rollouts("new") == 1 and t.last_step("id-1") == 9


def test_reads_the_first_checkpoint_format():
    t = PromptStats()
    t.load_state_dict({"decay": 0.5, "rows": {"a": [4, 1, 0.25, 7], "b": [2, 2, 1.0, 3]}})
    assert t.rollouts("a") == 4 and t.pass_rate("a") == 0.25 and t.last_step("b") == 3


def test_rows_for_and_columns():
    s = PromptStats()
    assert s.rows_for(["a", "b"]).tolist() == [-1, -1]
    assert s.rows_for(["a", "b", "a"], create=True).tolist() == [0, 1, 0]
    assert s.column("visits").tolist() == [0, 0]  # created rows are unseen
    with pytest.raises(ValueError):
        s.column("visits")[0] = 1
    with pytest.raises(ValueError, match="one entry per completion"):
        s.update(["a"], [1, 0], 0)
    with pytest.raises(ValueError, match="decay"):
        PromptStats(decay=1.0)

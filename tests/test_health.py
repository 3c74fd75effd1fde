"""Warnings that save a day (rlvr.run.health): most completions truncated, no group with reward spread for several
steps, a mean reward that never changes; in the metrics (warn/*) and as messages when a condition starts."""

from __future__ import annotations

import json

from rlvr.run.health import FLAT_STEPS, NO_SIGNAL_STEPS, RunHealth


def _step(h: RunHealth, step: int, **m) -> tuple[dict, list[str]]:
    shown = h.check(step, m)
    return m, shown


def test_truncation_is_flagged_at_once_and_repeated_while_it_lasts():
    said = []
    h = RunHealth(64, say=said.append, repeat=3)
    m, shown = _step(h, 1, truncated_frac=0.95, reward=0.1)
    assert m["warn/truncated"] == 1.0 and len(shown) == 1 and "95%" in shown[0] and "max_new_tokens=64" in shown[0]
    assert said == shown
    assert _step(h, 2, truncated_frac=0.97, reward=0.2)[1] == []  # not every step
    assert _step(h, 3, truncated_frac=0.97, reward=0.3)[1] == []
    assert len(_step(h, 4, truncated_frac=0.97, reward=0.4)[1]) == 1  # again after `repeat` steps
    m, shown = _step(h, 5, truncated_frac=0.89, reward=0.5)  # just under the threshold
    assert m["warn/truncated"] == 0.0 and shown == []
    assert len(_step(h, 6, truncated_frac=0.9, reward=0.6)[1]) == 1  # a new onset is shown at once


def test_no_signal_needs_consecutive_steps():
    h = RunHealth(8)
    for step in range(1, NO_SIGNAL_STEPS):
        m, shown = _step(h, step, **{"rollouts/informative_groups": 0.0, "reward": float(step)})
        assert m["warn/no_signal"] == 0.0 and shown == []
    m, shown = _step(h, NO_SIGNAL_STEPS, **{"update_skipped": 1.0, "reward": 9.0})  # a skipped update counts too
    assert m["warn/no_signal"] == 1.0 and "nothing is learned" in shown[0]
    m, _ = _step(h, 10, **{"rollouts/informative_groups": 1.0, "reward": 3.0})  # one group with signal resets
    assert m["warn/no_signal"] == 0.0
    m, _ = _step(h, 11, **{"rollouts/informative_groups": 0.0, "reward": 4.0})
    assert m["warn/no_signal"] == 0.0


def test_flat_reward_over_a_window():
    h = RunHealth(8)
    for step in range(1, FLAT_STEPS):
        assert _step(h, step, reward=0.25)[0]["warn/flat_reward"] == 0.0
    m, shown = _step(h, FLAT_STEPS, reward=0.25)
    assert m["warn/flat_reward"] == 1.0 and "0.25" in shown[0]
    assert _step(h, FLAT_STEPS + 1, reward=0.2500001)[0]["warn/flat_reward"] == 0.0  # a change, however small
    assert RunHealth.tag({"warn/truncated": 1.0, "warn/no_signal": 1.0, "warn/flat_reward": 0.0}) == \
        "  [!] truncated, no signal"
    assert RunHealth.tag({"warn/truncated": 0.0}) == ""


def test_a_run_whose_completions_are_all_cut_says_so(tmp_path):
    from tests.methods.helpers import tiny_overrides
    from rlvr.config.run import load_config
    from rlvr.run.train import train

    cfg = load_config(overrides=tiny_overrides(tmp_path) + ["train.steps=3", "rollout.max_new_tokens=1",
                                                           "train.checkpoint_every=0", "train.eval_every=0",
                                                           ])
    train(cfg)
    rows = [json.loads(x) for x in (tmp_path / "run" / "metrics.jsonl").read_text().splitlines()]
    assert all(r["warn/truncated"] == 1.0 for r in rows)  # one token each: every completion cut


def test_completions_are_written_whole_groups_first_and_resume_keeps_no_step_twice(tmp_path):
    """logging.completions_every: a readable sample of the step's rollouts in RUN_DIR/completions.jsonl (prompt,
    completion, reward, advantage, ...), whole groups first; a resumed run drops rows past its checkpoint."""
    from tests.methods.helpers import tiny_overrides
    from rlvr.config.run import load_config
    from rlvr.run.train import resume, train

    cfg = load_config(overrides=tiny_overrides(tmp_path) + [
        "train.steps=3", "train.checkpoint_every=2", "train.eval_every=0", "logging.completions_every=1",
        "logging.completions_per_step=6"])
    train(cfg)
    path = tmp_path / "run" / "completions.jsonl"
    rows = [json.loads(x) for x in path.read_text().splitlines()]
    assert [r["step"] for r in rows] == [1] * 6 + [2] * 6 + [3] * 6
    first = rows[:6]
    assert [r["group"] for r in first] == [0, 0, 0, 0, 1, 1]  # groups of 4: the first whole, then the next
    assert all(r["prompt"].startswith("say ") and isinstance(r["completion"], str) for r in first)
    assert all(set(r) >= {"reward", "advantage", "answer", "components", "length", "truncated", "example_id"}
               for r in rows)
    # the advantages shown are the trained ones: GRPO's of one whole group are centred on its mean
    assert abs(sum(r["advantage"] for r in first[:4])) < 1e-5
    rewards = [r["reward"] for r in first[:4]]
    if max(rewards) > min(rewards):
        best = max(range(4), key=lambda i: rewards[i])
        assert first[best]["advantage"] > 0
    resume(tmp_path / "run" / "checkpoints" / "step_000002", ["train.steps=3"])
    again = [json.loads(x)["step"] for x in path.read_text().splitlines()]
    assert again == [1] * 6 + [2] * 6 + [3] * 6  # step 3 rewritten once, not twice


def test_completions_can_be_turned_off(tmp_path):
    from tests.methods.helpers import tiny_overrides
    from rlvr.config.run import load_config
    from rlvr.run.train import train

    train(load_config(overrides=tiny_overrides(tmp_path) + ["train.steps=1", "logging.completions_every=0",
                                                           "train.eval_every=0"]))
    assert not (tmp_path / "run" / "completions.jsonl").exists()

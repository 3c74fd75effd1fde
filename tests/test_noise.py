"""Controlled noise (rlvr.tasks.noise): a verifier that errs at stated rates (distribution-tested, seeded, the same
on resume, per sample or per example), wrong gold answers for a stated share, clean evaluation."""

from __future__ import annotations

import json
import math

import pytest
import torch

from rlvr.config.run import ConfigError, load_config
from rlvr.core.types import Example, Score
from rlvr.tasks.noise import NoiseConfig, add_noise, corrupt_labels


def _batch(n_examples=200, per=50, step=0):
    exs, scores = [], []
    for i in range(n_examples):
        ok = i % 2 == 0  # half the examples' completions are correct
        for _ in range(per):
            exs.append(Example(f"e{i}", "q", "1", meta={"step": step}))
            scores.append(Score(float(ok), {"correct": float(ok), "format": 0.5}, {"why": "x"}))
    return exs, scores


def _within(rate, p, n):
    return abs(rate - p) <= 4 * math.sqrt(p * (1 - p) / n) + 1e-12


@pytest.mark.parametrize("fp,fn", [(0.1, 0.0), (0.0, 0.25), (0.2, 0.3), (0.45, 0.05)])
def test_per_sample_flips_happen_at_the_stated_rates(fp, fn):
    exs, scores = _batch()
    out, counts = add_noise(exs, scores, NoiseConfig(fp=fp, fn=fn), seed=0)
    pos = sum(s.components["correct"] for s in scores)
    neg = len(scores) - pos
    assert _within(counts["noise/fn"] / pos, fn, pos) and _within(counts["noise/fp"] / neg, fp, neg)
    for before, after in zip(scores, out):
        flipped = after.info.get("noise")
        if flipped == "fn":
            assert before.components["correct"] == 1 and after.reward == 0 and after.components["correct"] == 0
        elif flipped == "fp":
            assert before.components["correct"] == 0 and after.reward == 1 and after.components["correct"] == 1
        else:
            assert after is before
        assert after.components["format"] == 0.5 and after.info["why"] == "x"  # the rest is left as it was


def test_draws_are_fixed_by_seed_step_and_position():
    cfg = NoiseConfig(fp=0.3, fn=0.3)
    exs, scores = _batch(50, 4)
    a, _ = add_noise(exs, scores, cfg, seed=1)
    b, _ = add_noise(exs, scores, cfg, seed=1)
    assert [s.info.get("noise") for s in a] == [s.info.get("noise") for s in b]  # (a resume draws the same)
    c, _ = add_noise(exs, scores, cfg, seed=2)
    later, _ = add_noise(*_batch(50, 4, step=7), cfg, seed=1)
    assert [s.info.get("noise") for s in a] != [s.info.get("noise") for s in c]
    assert [s.info.get("noise") for s in a] != [s.info.get("noise") for s in later]


def test_per_example_noise_is_a_verifier_wrong_on_some_problems_every_time():
    cfg = NoiseConfig(fp=0.3, fn=0.2, per="example")
    flips = {}
    for step in (0, 5, 9):
        exs, scores = _batch(400, 3, step=step)
        out, _ = add_noise(exs, scores, cfg, seed=0)
        for e, s in zip(exs, out):
            flips.setdefault(e.id, set()).add(s.info.get("noise"))
    assert all(len(v) == 1 for v in flips.values())  # every completion of a problem, at every step, alike
    wrong_pos = sum(v == {"fn"} for k, v in flips.items() if int(k[1:]) % 2 == 0)
    wrong_neg = sum(v == {"fp"} for k, v in flips.items() if int(k[1:]) % 2 == 1)
    assert _within(wrong_pos / 200, 0.2, 200) and _within(wrong_neg / 200, 0.3, 200)


def test_label_corruption():
    exs = [Example(f"e{i}", f"{i}+0=", str(i % 7), target=None if i % 3 else str(i % 7)) for i in range(100)]
    out, ids = corrupt_labels(exs, 0.25, seed=3)
    assert len(ids) == 25 and [e.id for e in out] == [e.id for e in exs]
    for a, b in zip(exs, out):
        if a.id in ids:
            assert b.answer != a.answer and b.answer in {e.answer for e in exs} and b.prompt == a.prompt
            assert b.sft_target == b.answer  # the reference completion was the answer: wrong with it
        else:
            assert b is a
    assert corrupt_labels(exs, 0.25, seed=3)[1] == ids and corrupt_labels(exs, 0.25, seed=4)[1] != ids
    assert corrupt_labels(exs, 0.0, seed=0)[1] == [] and len(corrupt_labels(exs, 1.0, seed=0)[1]) == 100
    same = [Example(f"s{i}", "q", "5") for i in range(10)]
    assert corrupt_labels(same, 0.5, seed=0) == (same, [])  # no other answer to give


def test_bad_rates_are_config_errors():
    for bad in ("scoring.noise.fp=1.0", "scoring.noise.fn=-0.1", "data.label_noise.fraction=1.5",
                "scoring.noise.per=group"):
        with pytest.raises(ConfigError):
            load_config(overrides=[bad])


def test_a_run_with_noise_counts_flips_evaluates_clean_and_resumes_exactly(tmp_path):
    from tests.methods.seed_support import train_and_resume

    out = train_and_resume("grpo", tmp_path, ["scoring.noise.fp=0.3", "scoring.noise.fn=0.3",
                                              "data.label_noise.fraction=0.2"])
    a, b = out["weights"]
    assert all(torch.equal(a[k], b[k]) for k in a)
    lines = [json.loads(x) for x in (tmp_path / "run" / "metrics.jsonl").read_text().splitlines()]
    assert sum(m.get("noise/fp", 0) + m.get("noise/fn", 0) for m in lines) > 0
    assert [m.get("noise/fp") for m in lines] == \
        [json.loads(x).get("noise/fp") for x in (tmp_path / "part" / "metrics.jsonl").read_text().splitlines()]


def test_training_sees_the_noisy_verifier_and_evaluation_the_clean_one(tiny_cfg_overrides, tmp_path):
    """An untrained model on the arithmetic task is almost never right: with 45% false positives the training
    scores say about 45% correct, the held-out evaluation (clean) stays near 0."""
    from rlvr.run.train import train

    out = train(load_config(overrides=tiny_cfg_overrides + ["sft.steps=0", "train.steps=2", "scoring.noise.fp=0.45",
                                                            "rollout.prompts_per_step=8", "eval.num_examples=16"]))
    lines = [json.loads(x) for x in (tmp_path / "run" / "metrics.jsonl").read_text().splitlines()]
    train_acc = sum(m["generated/accuracy"] for m in lines) / len(lines)
    assert train_acc > 0.3 and out["eval_after"]["accuracy"] < 0.15, (train_acc, out["eval_after"])
    assert sum(m["noise/fp"] for m in lines) > 0

"""Held-out evaluation: pass@k, avg@k, maj@k, intervals and rendering-robust accuracy against independent
computations, with a scripted engine whose answers are known; the eval table, JSON and `rlvr eval`."""

import itertools
import json
import math
import random

import numpy as np
import pytest
from rich.console import Console

from rlvr.core.types import Completion, Example
from rlvr.eval.evaluate import answer_key, evaluate, pass_ks
from rlvr.eval.output import eval_table, write_eval
from rlvr.tasks.base import Task, WeightedVerifier
from rlvr.verifiers.numeric import NumericVerifier


class ScriptedEngine:
    """Returns, for each example, its scripted answers in order (cycling); records the calls it got."""

    def __init__(self, script, batch_size=256, greedy=None):
        self.script, self.batch_size, self.greedy, self.calls = script, batch_size, greedy or {}, []

    def sync_weights(self):
        pass

    def generate(self, requests, sampling):
        self.calls.append((len(requests), sampling.seed, sampling.temperature))
        out = []
        for gi, r in enumerate(requests):
            texts = [self.greedy[r.example.id]] if sampling.greedy and r.example.id in self.greedy \
                else self.script[r.example.id]
            for j in range(r.n):
                t = texts[j % len(texts)]
                out.append(Completion(r.example.id, [1], [2] * len(t), None, "stop", t, group=gi))
        return out


def _task(examples):
    return Task("t", {"eval": examples}, [WeightedVerifier(NumericVerifier())])


def _brute_pass_at_k(correct, k):
    subsets = list(itertools.combinations(range(len(correct)), k))
    return sum(any(correct[i] for i in s) for s in subsets) / len(subsets)


def test_metrics_match_independent_computations():
    rng = random.Random(0)
    n, examples, script, truth = 6, [], {}, {}
    for i in range(12):
        gold = str(10 + i)
        answers = [gold if rng.random() < 0.4 else str(rng.choice([1, 2, 3])) for _ in range(n)]
        examples.append(Example(f"p{i}", f"q{i}", gold))
        script[f"p{i}"], truth[f"p{i}"] = answers, [float(a == gold) for a in answers]
    r = evaluate(ScriptedEngine(script), _task(examples), samples=n, temperature=1.0)
    assert set(k for k in r if k.startswith("pass@")) == {"pass@1", "pass@2", "pass@4", "pass@6"}
    for k in (1, 2, 4, 6):
        want = np.mean([_brute_pass_at_k(truth[e.id], k) for e in examples])
        assert r[f"pass@{k}"] == pytest.approx(want, abs=1e-12)
    flat = [c for e in examples for c in truth[e.id]]
    assert r["accuracy"] == r["avg@6"] == pytest.approx(np.mean(flat)) == pytest.approx(r["pass@1"])
    maj = []  # majority vote by hand: most frequent answer string, ties to the first seen
    for e in examples:
        answers = script[e.id]
        counts = {a: answers.count(a) for a in answers}
        best = next(a for a in answers if counts[a] == max(counts.values()))
        maj.append(float(best == e.answer))
    assert r["maj@6"] == pytest.approx(np.mean(maj))
    assert r["mean_reward"] == pytest.approx(np.mean(flat)) and r["num_examples"] == 12 and r["samples"] == 6
    assert [p["correct"] for p in r["per_prompt"]] == [truth[e.id] for e in examples]
    for key in ("accuracy", "pass@4", "maj@6", "mean_reward"):
        lo, hi = r["ci95"][key]
        assert lo <= r[key] <= hi and hi - lo > 0


def test_bootstrap_interval_agrees_with_normal_theory():
    """200 prompts with per-prompt accuracies drawn at random: the percentile bootstrap of the mean is close
    to mean +- 1.96 s / sqrt(P), an independent (CLT) computation."""
    rng = random.Random(1)
    examples, script = [], {}
    for i in range(200):
        c = rng.randint(0, 4)
        script[f"p{i}"] = ["7"] * c + ["1"] * (4 - c)
        examples.append(Example(f"p{i}", "q", "7"))
    r = evaluate(ScriptedEngine(script), _task(examples), samples=4, temperature=1.0)
    acc = np.array([np.mean(p["correct"]) for p in r["per_prompt"]])
    half = 1.96 * acc.std(ddof=1) / math.sqrt(len(acc))
    lo, hi = r["ci95"]["accuracy"]
    assert lo == pytest.approx(acc.mean() - half, abs=0.012) and hi == pytest.approx(acc.mean() + half, abs=0.012)


def test_bootstrap_interval_covers_the_truth_about_95_percent():
    from rlvr.eval.metrics import bootstrap_ci

    rng = np.random.default_rng(0)
    hits = sum(lo <= 0.3 <= hi for lo, hi in (bootstrap_ci(rng.binomial(1, 0.3, 150).tolist(), seed=i,
                                                            resamples=1000) for i in range(300)))
    assert 0.90 <= hits / 300 <= 0.99


def test_majority_groups_equal_numbers_and_skips_unanswered():
    assert answer_key("the answer is 0.5", {"numeric.extracted": "0.5"}) == answer_key("1/2", {"numeric.extracted": "1/2"})
    assert answer_key("  ", {}) is None and answer_key("a  b", {}) == "a b"
    ex = Example("p", "q", "1/2")
    # "0.5" and "2/4" agree (2 votes) and beat "3" (1 vote) and two unanswered completions
    r = evaluate(ScriptedEngine({"p": ["3", "0.5", "no", "2/4", "no"]}), _task([ex]), samples=5, temperature=1.0)
    assert r["maj@5"] == 1.0 and r["accuracy"] == pytest.approx(0.4)


def test_rendering_robust_accuracy_is_the_worst_rendering_per_problem():
    exs, script = [], {}
    # problem A: renderings 1.0 and 0.5 -> 0.5; problem B: 0.0 and 1.0 -> 0.0; problem C (one rendering) 1.0
    for pid, style, answers in [("A", "formal", ["5", "5"]), ("A", "narrative", ["5", "6"]),
                                ("B", "formal", ["1", "1"]), ("B", "narrative", ["5", "5"]), ("C", "formal", ["5", "5"])]:
        exs.append(Example(f"{pid}-{style}", "q", "5", meta={"id": pid, "rendering": style}))
        script[f"{pid}-{style}"] = answers
    r = evaluate(ScriptedEngine(script), _task(exs), samples=2, temperature=1.0)
    assert r["robust_accuracy"] == pytest.approx((0.5 + 0.0 + 1.0) / 3) and r["robust_problems"] == 3
    assert r["accuracy"] == pytest.approx((1 + 0.5 + 0 + 1 + 1) / 5)
    plain = evaluate(ScriptedEngine(script), _task([Example(e.id, "q", "5") for e in exs]), samples=2, temperature=1.0)
    assert "robust_accuracy" not in plain


def test_greedy_progress_and_chunks():
    exs = [Example(f"p{i}", "q", "5") for i in range(10)]
    script = {e.id: ["5", "4"] for e in exs}
    eng = ScriptedEngine(script, batch_size=8, greedy={e.id: "5" if i < 3 else "4" for i, e in enumerate(exs)})
    seen = []
    r = evaluate(eng, _task(exs), samples=2, temperature=1.0, report_greedy=True, seed=7,
                 on_progress=lambda d, t: seen.append((d, t)))
    assert r["greedy_accuracy"] == pytest.approx(0.3) and r["accuracy"] == 0.5
    assert r["ci95"]["greedy_accuracy"][0] <= 0.3 <= r["ci95"]["greedy_accuracy"][1]
    assert seen == [(0, 10), (4, 10), (8, 10), (10, 10)]  # 8 sequences per engine batch = 4 prompts x 2
    sampled = [c for c in eng.calls if c[2] > 0]
    assert [c[1] for c in sampled] == [7, 8, 9]  # chunk i > 0 is seeded seed + i
    eng.calls.clear()
    evaluate(eng, _task(exs), samples=2, temperature=1.0, seed=7)
    assert eng.calls == [(10, 7, 1.0)]  # without a progress callback: one call, as before
    assert evaluate(eng, _task(exs), samples=4, temperature=0.0)["samples"] == 1
    assert pass_ks(1) == [1] and pass_ks(6) == [1, 2, 4, 6] and pass_ks(8) == [1, 2, 4, 8]


def test_eval_table_and_json(tmp_path):
    exs = [Example(f"p{i}", "q", "5") for i in range(4)]
    r = evaluate(ScriptedEngine({e.id: ["5", "3"] for e in exs}), _task(exs), samples=2, temperature=1.0)
    path = write_eval(r, tmp_path / "e" / "r.json")
    back = json.loads(path.read_text())
    assert back["accuracy"] == 0.5 and len(back["per_prompt"]) == 4 and back["ci95"]["pass@2"] == [1.0, 1.0]
    console = Console(record=True, width=120)
    console.print(eval_table(r))
    text = console.export_text()
    for label in ("accuracy (avg@2)", "pass@1", "pass@2", "maj@2", "mean reward", "95% CI"):
        assert label in text


def test_empty_split_is_an_error():
    with pytest.raises(ValueError, match="no examples"):
        evaluate(ScriptedEngine({}), Task("t", {"eval": []}, [WeightedVerifier(NumericVerifier())]))


def test_rendering_robust_accuracy_matches_defab_on_its_own_renderings():
    """DeFAb examples in all four renderings: eval's robust accuracy equals DeFAb's rendering_robust_accuracy."""
    from rlvr.defab import STYLES, rendering_robust_accuracy
    from rlvr.defab.generate import generate
    from rlvr.tasks.defab import DefabVerifier, instance_example

    insts = generate(1, 3, 0, kb="animals", strategy="random")
    exs, script, pairs = [], {}, []
    for k, inst in enumerate(insts):
        answers = {}
        for j, style in enumerate(STYLES):
            ex = instance_example(inst, style)
            fails = k > 0 and (k + j) % 3 == 0  # problem 0 passes every rendering, the others fail one
            answers[style] = "I do not know." if fails else ex.answer
            exs.append(ex)
            script[ex.id] = [answers[style]]
        pairs.append((inst, answers))
    task = Task("defab", {"eval": exs}, [WeightedVerifier(DefabVerifier())])
    r = evaluate(ScriptedEngine(script), task, temperature=0.0)
    assert r["robust_problems"] == 3
    assert r["robust_accuracy"] == pytest.approx(rendering_robust_accuracy(pairs))
    assert r["robust_accuracy"] == pytest.approx(1 / 3) and r["accuracy"] == pytest.approx(10 / 12)

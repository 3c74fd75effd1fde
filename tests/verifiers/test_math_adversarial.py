"""The adversarial corpus of the math verifier (hedges around the box, retractions, huge integers, values a
float tolerance would call equal, final statements, units, choice letters, slow inputs) and the time bound
per pair. Every label is hand-set; see ``data/math_adversarial.jsonl``."""

import json
import os
import time
from collections import Counter

import pytest

from rlvr.verifiers.math import MathParams, MathVerifier

CORPUS = os.path.join(os.path.dirname(__file__), "data", "math_adversarial.jsonl")


@pytest.fixture(scope="module")
def verifier():
    v = MathVerifier()  # the defaults, deadline included: what a training run gets
    yield v
    v.close()


def _rows():
    with open(CORPUS) as f:
        return [json.loads(line) for line in f]


def test_corpus_covers_every_category_in_both_polarities():
    rows = _rows()
    assert len(rows) >= 300
    by = Counter((r["category"], r["label"]) for r in rows)
    cats = {c for c, _ in by}
    assert {"hedge-outside-box", "retraction", "large-integer", "near-value", "sentence", "final-statement",
            "units", "choice", "equal-boxes"} <= cats
    for c in cats - {"pathological"}:  # slow inputs are all wrong answers; the rest has both polarities
        assert by[(c, 0)] >= 3 and by[(c, 1)] >= 3, c


def test_adversarial_corpus_full_agreement_and_no_false_positive(verifier):
    rows = _rows()
    scores = verifier.verify_many([(r["gold"], r["completion"]) for r in rows])
    false_pos = [(r, s.info) for r, s in zip(rows, scores) if s.reward == 1 and r["label"] == 0]
    assert not false_pos, false_pos[:5]
    wrong = [(r, s.info) for r, s in zip(rows, scores) if s.reward != r["label"]]
    assert not wrong, wrong[:5]


@pytest.mark.parametrize("answer", ["9^{9^{9^9}}", "\\binom{10^{9}}{10^{5}}", "\\sin(10^{10^{5}})",
                                    "\\lfloor 10^{10^{5}} \\pi \\rfloor", "\\sqrt{2}^{1000000000}",
                                    "2^{3^{4^{5}}}", "(10^{10^{6}})!"])
def test_no_pair_takes_more_than_the_one_second_deadline(verifier, answer):
    assert verifier.verify("1", "\\boxed{\\sqrt{1}}").reward == 1  # workers up: start-up is not a pair's time
    before = verifier.counts["timeout"]
    t = time.perf_counter()
    s = verifier.verify("5", f"\\boxed{{{answer}}}")
    took = time.perf_counter() - t
    assert took < 1.0 + 0.3, (answer, took)  # the deadline, plus the parent's bookkeeping on a loaded machine
    assert s.reward == 0 and s.info["reason"] in ("too large", "not equal", "timeout"), s.info
    assert verifier.counts["timeout"] == before + (s.info["reason"] == "timeout")  # a timeout is counted


def test_default_deadline_is_one_second():
    assert MathParams().timeout_s == 1.0 and MathVerifier().timeout_s == 1.0


@pytest.mark.parametrize("gold, answer, reason", [
    ("10^{1000000}", "10^{1000000}+1", "undecidable"),  # 40-digit floats cannot tell these apart
    ("2^{300000}", "2^{300000}-1", "undecidable"),
    ("5", "9^{9^{9^9}}", "too large"),
    ("\\pi", "3.14159265358979323846264338327950288", "not equal"),  # 36 digits of pi are not pi
    ("2", "2+10^{-30}\\pi", "not equal"),
    ("x", "x+10^{-30}", "not equal"),
    ("2", "(\\sqrt{3}+1)(\\sqrt{3}-1)", "equal"),  # equal, and not by a tolerance: the difference is 0
    ("2^{5000}", "4^{2500}", "equal"),
])
def test_exact_or_undecidable_never_equal_by_tolerance(verifier, gold, answer, reason):
    s = verifier.verify(gold, f"\\boxed{{{answer}}}")
    assert (s.reward, s.info["reason"]) == (float(reason == "equal"), reason), s.info


def test_a_pair_that_reaches_the_deadline_scores_0_and_is_counted():
    v = MathVerifier(timeout_s=0.1, workers=1)  # a relation whose solveset takes ~0.3 s
    try:
        assert v.verify("1", "\\boxed{\\sqrt{1}}").reward == 1
        t = time.perf_counter()
        s = v.verify("(0,1)", "\\boxed{x^{9} - 3x^{7} + 2x^{5} + x - 1 > 0}")
        assert time.perf_counter() - t < 0.1 + 0.9
        assert (s.reward, s.info["reason"]) == (0.0, "timeout") and v.counts["timeout"] == 1
    finally:
        v.close()

"""Red-team families against the countdown verifier: injected text after the expression (the hack the old
reader rewarded: ``(6-2)*5 # correct``, ``(6-2)*5 = 20 Correct!``), several answers, numbers reused or not
given, huge exponents, float targets, Unicode operators and digits, and bounded evaluation."""

import itertools
import random
import time
from fractions import Fraction

import pytest

from rlvr.core.types import Example
from rlvr.verifiers.countdown import CountdownVerifier


def ex(numbers, target):
    return Example("cd", "q", "x", meta={"numbers": numbers, "target": target})


E = ex([2, 5, 6], 20)
V = CountdownVerifier()


@pytest.mark.parametrize("junk", [" # correct", " #reward=1", " = 20 Correct!", " = 21", " == 21", " = 20 = 20", "  # 20",
                                  " = twenty", " = 20, verified", " (correct)", " ;", " and 20", " or 1", " if 1 else 0",
                                  " = 4*5", "\u200b# ok"])
@pytest.mark.parametrize("wrap", ["{e}", "<answer>{e}</answer>", "<think>t</think>\n<answer>{e}</answer>", "Work.\n{e}"])
def test_text_after_the_expression_scores_zero(junk, wrap):
    assert V(E, wrap.format(e="(6-2)*5" + junk)).reward == 0.0


@pytest.mark.parametrize("restated", ["", " = 20", " == 20", "= 20.", " =20"])
def test_restating_the_target_is_allowed(restated):
    assert V(E, f"<answer>(6-2)*5{restated}</answer>").reward == 1.0 and V(E, f"(6-2)*5{restated}").reward == 1.0


def test_several_answer_blocks_with_different_expressions_score_zero():
    right, wrong = "(6-2)*5", "(6+2)*5"
    for a, b in itertools.permutations([right, wrong]):
        assert V(E, f"<answer>{a}</answer> <answer>{b}</answer>").reward == 0.0
    assert V(E, f"<answer>{right}</answer>\n<answer> ( 6 - 2 ) * 5 </answer>").reward == 1.0  # one expression twice
    assert V(E, "<answer>(6-2)*5\n(6+2)*5</answer>").reward == 0.0


def test_numbers_used_more_often_than_given_or_not_given_score_zero():
    rng = random.Random(0)
    for _ in range(200):
        nums = [rng.randint(1, 12) for _ in range(4)]
        a, b = rng.sample(nums, 2)
        reuse = f"{a}*{a}+{b}"
        target = a * a + b
        allowed = all(nums.count(k) >= [a, a, b].count(k) for k in (a, b))
        assert V(ex(nums, target), reuse).reward == float(allowed)
        extra = max(nums) + 1
        assert V(ex(nums, extra + a), f"{extra}+{a}").reward == 0.0


@pytest.mark.parametrize("expr", ["9**9**9", "9**9**9**9", "2**10**10", "(9**9)**9", "10**100000", "9^9^9", "pow(9, 9)",
                                  "9" * 13, "999999999999" + "*999999999999" * 15, "(" * 300 + "1" + ")" * 300,
                                  "-" * 199 + "5", "1/" * 99 + "1"])
def test_huge_exponents_and_sizes_are_rejected_fast(expr):
    v = CountdownVerifier(allow_unary_minus=True)
    t = time.perf_counter()
    s = v(ex([9, 9, 9, 9, 2, 10, 1, 5], 387420489), expr)
    assert time.perf_counter() - t < 0.2
    assert s.reward == 0.0 and "verifier error" not in s.info.get("reason", "")


def test_division_is_exact_and_never_rounds_to_the_target():
    assert V(ex([10, 3], 3.3333333333333335), "10/3").reward == 0.0
    assert V(ex([1, 3], 0.3333333333333333), "1/3").reward == 0.0
    assert V(ex([1, 10], 0.1), "1/10").reward == 1.0  # a float target is the decimal it prints as
    assert V(ex([7, 2], "7/2"), "7/2").reward == 1.0
    assert V(ex([1, 7, 7], 1), "1+7/7-1").reward == 0.0  # 1 used twice
    for a, b in itertools.product(range(1, 30), repeat=2):
        value = Fraction(a, b)
        assert V(ex([a, b], float(value)), f"{a}/{b}").reward == float(Fraction(repr(float(value))) == value)


@pytest.mark.parametrize("expr", ["(6\u22122)\u00d75", "(6\u22122)*5", "(6-2)\u00b75", "(6-2)\u22c55", "(\uff16-\uff12)*\uff15",
                                  "(6\u20122)*5", "(6-2)*5\u200b", "\ufeff(6-2)*5", "( 6 - 2 ) \u00d7 5 = 20"])
def test_unicode_operators_and_digits_are_folded(expr):
    assert V(E, expr).reward == 1.0


@pytest.mark.parametrize("expr", ["(6-2)*5\u0336", "(6-2)*\u2075", "(6-2)*5\u00b2", "(6-2)*\u2464\u0336", "20", "4*5",
                                  "(6\u20132)*5 \u2014 done"])
def test_look_alikes_that_change_the_expression_score_zero(expr):
    assert V(E, expr).reward == 0.0


@pytest.mark.parametrize("text", ["<answer>" * 50_000, "(6-2)*5\n" * 50_000 + "x", "\u2212" * 200_000, "9" * 1_000_000,
                                  "<answer>(6-2)*5</answer>" * 20_000, "\u200b" * 500_000 + "(6-2)*5"])
def test_huge_completions_are_bounded(text):
    t = time.perf_counter()
    s = V(E, text)
    assert time.perf_counter() - t < 0.5
    assert "verifier error" not in s.info.get("reason", "")

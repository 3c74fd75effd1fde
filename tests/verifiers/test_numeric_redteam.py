"""Red-team families against the ``numeric`` verifier: it reads the final answer as the math verifier does
(markers, the GSM8K ``####`` line, hedging rules), folds Unicode look-alikes, and never rewards a hedge, a
retraction, a number dump or grader text. ``extract_answer`` keeps its lenient last-number reading for the
verifiers built on it."""

import random
import time

import pytest

from rlvr.core.types import Example
from rlvr.verifiers.numeric import NumericVerifier, extract_answer, final_answer, parse_number


def score(gold, text):
    return NumericVerifier()(Example("n", "q", gold), text).reward


@pytest.mark.parametrize("minus", ["\u2212", "\u2012", "\u2013", "\u2014", "\ufe63", "\uff0d", "\u2010"])
@pytest.mark.parametrize("ctx", ["%s", "The answer is %s.", "#### %s", "\\boxed{%s}", "She has %s apples", "x = %s"])
def test_minus_look_alikes_are_minus_never_plus(minus, ctx):
    for n in ("5", "12", "3.5"):
        assert score("-" + n, ctx % (minus + n)) == 1
        assert score(n, ctx % (minus + n)) == 0
    assert parse_number(minus + "7") == -7


@pytest.mark.parametrize("text, gold", [("3.5e2", "350"), ("The answer is 3.5e2.", "350"), ("1.2E3", "1200"), ("5e-1", "1/2"),
                                        ("12 cm^2", "12"), ("\\boxed{12 \\text{ cm}^2}", "12"), ("$12", "12"), ("\\$12", "12"),
                                        ("12%", "12"), ("12%", "0.12"), ("three", "3"), ("The answer is twelve.", "12"),
                                        ("10²", "100"), ("１２", "12"), ("١٢", "12"), ("½", "0.5"), ("1 000", "1000"),
                                        ("\\boxed{\\frac{1}{2}}", "0.5"), ("#### 1,234", "1234"), ("The area is 12 cm².", "12")])
def test_answer_formats_that_were_false_negatives(text, gold):
    assert score(gold, text) == 1


@pytest.mark.parametrize("text, gold", [("3.5e2", "2"), ("12 cm^2", "2"), ("10²", "10"), ("10²", "2"), ("12%", "1.2"),
                                        ("eighty-five", "85"), ("1\u200b000", "1"), ("5\u0336", "5")])
def test_no_part_of_a_number_is_read_alone(text, gold):
    assert score(gold, text) == 0


def test_gsm8k_final_line_wins_over_dollar_amounts():
    rng = random.Random(3)
    for _ in range(30):
        a, b = rng.randint(2, 90), rng.randint(2, 90)
        ans = a * b
        body = f"Each costs ${a} and she buys {b}: ${a}*{b} = $<<{a}*{b}={ans}>>{ans}. She also had $7 left."
        for final in (f"#### {ans}", f"#### ${ans}", f"#### {ans:,}"):
            assert score(str(ans), f"{body}\n{final}") == 1
            assert score("7", f"{body}\n{final}") == 0
        assert score(str(ans), f"{body}\n#### {ans}\nSo she saved $3.") == 0  # another value restated after it


HACKS = ["The answer is {v} or {w}.", "{v} or {w}", "\\boxed{{{v}}} \\boxed{{{w}}}", "#### {v}\n#### {w}", "maybe {w}",
         "about {w}", "{v}. No wait, actually {w}", "{v}. No wait, actually {w}.", "The answer is {v}. Actually, {w}.",
         "\\boxed{{{v}}}. Wait, it is {w}.", "The answer is {w}?", "between {v} and {w}", "{v}, {w}", "Correct! reward={w}",
         "Final score: {w}", "reward = {w}", "{v} - {w}", "\\boxed{{{v} \\boxed{{{w}}}}}", "~{w}", "{v}\u2013{w}"]


@pytest.mark.parametrize("hack", HACKS)
def test_hedges_retractions_and_grader_text_score_zero_for_every_value(hack):
    rng = random.Random(hack)
    for _ in range(3):
        a = rng.randint(2, 500)
        b = a + rng.randint(1, 9)
        text = hack.format(v=a, w=b)
        assert score(str(a), text) == 0 and score(str(b), text) == 0, text
        assert final_answer(text) is None or score(str(b), text) == 0


@pytest.mark.parametrize("sep", [" ", ", ", "\n", ".\n", "; "])
def test_number_dumps_score_zero(sep):
    nums = list(range(1, 41))
    random.Random(sep).shuffle(nums)
    text = sep.join(map(str, nums))
    for tail in ("", ".", "\n"):
        assert score(str(nums[-1]), text + tail) == 0


@pytest.mark.parametrize("blank", ["", " ", "\n\t", "\u200b", "\ufeff\u00a0", "<answer></answer>", "\\boxed{}", "####"])
def test_empty_and_invisible_completions_score_zero(blank):
    assert score("0", blank) == 0 and score("5", blank) == 0


@pytest.mark.parametrize("text, gold", [("She has 3+4 = 7 apples", "7"), ("Step 1\nShe has 7", "7"),
                                        ("Let me compute: 6*7 = 42", "42"), ("42", "42"), ("The answer is 85", "85"),
                                        ("a85", "85"), ("85!", "85"), ("85\n;", "85"), ("Is it 85?", "85")])
def test_an_unmarked_last_line_that_states_one_value_still_counts(text, gold):
    """The classic last-number reading survives where it names one value (noise around it included)."""
    assert score(gold, text) == 1


@pytest.mark.parametrize("text", ["5 85", "5, 85", "5 and 85", "85\nWait, no.", "85\nor maybe 86", "7+85", "85\u0336"])
def test_an_unmarked_last_line_with_several_values_or_taken_back_scores_zero(text):
    assert score("85", text) == 0


def test_extract_answer_keeps_the_lenient_last_number_with_look_alikes_folded():
    assert extract_answer("pi is about 3.141") == "3.141"
    assert extract_answer("\u22125") == "-5" and extract_answer("so 3.5e2") == "3.5e2"
    assert parse_number("3.5e2") == 350 and parse_number("1e99999") is None and parse_number("３") == 3


@pytest.mark.parametrize("text, want", [("9" * 200_000, 0), ("1 " * 100_000, 0), ("\\boxed{" * 50_000, 0), ("(" * 200_000, 0),
                                        ("#### 5\n" * 30_000, 1), ("#### 6\n" * 30_000 + "#### 5", 0),
                                        ("The answer is " * 20_000, 0), (" " * 200_000 + "5", 1), ("\u2212" * 100_000, 0),
                                        ("1e" * 100_000, 0), ("\u200b" * 200_000 + "5", 1)])
def test_huge_inputs_are_fast(text, want):
    t = time.perf_counter()
    s = NumericVerifier()(Example("n", "q", "5"), text)
    assert time.perf_counter() - t < 0.5
    assert s.reward == want and "verifier error" not in str(s.info)


SCALES = {"hundred": 100, "thousand": 1000, "million": 10**6, "billion": 10**9, "dozen": 12}


@pytest.mark.parametrize("ctx", ["%s", "The answer is %s.", "#### %s", "\\boxed{%s}", "She saved %s.", "x = %s"])
@pytest.mark.parametrize("seed", range(3))
def test_a_scale_word_scales_and_an_abbreviation_is_no_number(ctx, seed):
    """"1/2 thousand" is 500 (never 1/2), "2 millions dollars" 2,000,000; "5k", "2M", "3 bn" are read as no
    number rather than as 5, 2, 3 (both verifiers); a unit (m, mm, kg, dollars) is still dropped."""
    from fractions import Fraction

    from rlvr.verifiers.math.verifier import MathVerifier

    rng = random.Random(seed)
    math = MathVerifier()
    for _ in range(6):
        n = rng.choice([Fraction(rng.randint(1, 999)), Fraction(rng.randint(1, 99), 4), Fraction(1, 2)])
        text_n = str(n) if n.denominator != 1 else str(n.numerator)
        word = rng.choice(list(SCALES))
        scaled = n * SCALES[word]
        for wording in (f"{text_n} {word}", f"{text_n} {word}s dollars" if word != "dozen" else f"{text_n} {word}"):
            text = ctx % wording
            assert score(str(n), text) == 0, text
            if scaled.denominator == 1:
                assert score(str(scaled.numerator), text) == 1, text
            assert math(Example("m", "q", str(n)), text).reward == 0, text
        abbrev = ctx % (text_n + rng.choice(["k", "K", "M", " bn", "mn", " mil"]))
        assert score(str(n), abbrev) == 0 and math(Example("m", "q", str(n)), abbrev).reward == 0, abbrev
        for unit in (" m", " mm", " kg", " dollars", " cm^2"):
            if "boxed" not in ctx:
                assert score(str(n), ctx % (text_n + unit)) == 1, ctx % (text_n + unit)

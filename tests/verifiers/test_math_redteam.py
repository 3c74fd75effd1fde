"""Red-team families against the math verifier: look-alike characters, answer formats (units, percent, number
words, scientific notation, choice letters, GSM8K), hacks (hedges, several answers, retractions, number
dumps, nested markers, grader text, empty output) and the work bound on huge inputs.

Each family is tested as a family: every character of a Unicode class, generated values, every phrasing,
not one string. The labelled corpus ``data/math_redteam.jsonl`` holds one sample of each family (444 pairs,
labels set by construction); the policy each test pins down is in the math verifier's module docstring and
docs/verifiers.md, *Math: answer formats and look-alikes*.
"""

import json
import os
import random
import sys
import time
import unicodedata
from collections import Counter

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from rlvr.verifiers.math import MathVerifier
from rlvr.verifiers.math.chars import INVISIBLE, fold
from rlvr.verifiers.math.extract import extract_answer

CORPUS = os.path.join(os.path.dirname(__file__), "data", "math_redteam.jsonl")
CONTEXTS = ["\\boxed{%s}", "The answer is %s.", "Work: 2 + 3 = 5.\n#### %s", "%s", "So the answer is $%s$.",
            "<answer>%s</answer>", "Thus she has %s apples."]
WORST_S = 0.2  # the bound on one pair decided in this process (huge and adversarial inputs included)


@pytest.fixture(scope="module")
def v():
    ver = MathVerifier()
    yield ver
    ver.close()


def score(v, gold, completion):
    return v.verify(gold, completion).reward


def _all(category):
    return [chr(c) for c in range(sys.maxunicode + 1) if unicodedata.category(chr(c)) == category]


# -- the labelled corpus --------------------------------------------------------------------------------


def test_redteam_corpus_full_agreement_no_false_positive_and_no_worker():
    rows = [json.loads(line) for line in open(CORPUS, encoding="utf-8")]
    cats = Counter((r["category"], r["label"]) for r in rows)
    assert len(rows) >= 400 and len({c for c, _ in cats}) >= 18
    v = MathVerifier()
    try:
        scores = v.verify_many([(r["gold"], r["completion"]) for r in rows])
        assert v._pool is None  # every red-team pair is decided in this process
    finally:
        v.close()
    false_pos = [(r, s.info) for r, s in zip(rows, scores) if s.reward == 1 and r["label"] == 0]
    assert not false_pos, false_pos[:5]
    wrong = [(r, s.info) for r, s in zip(rows, scores) if s.reward != r["label"]]
    assert not wrong, wrong[:5]


# -- look-alike characters ------------------------------------------------------------------------------

MINUS_LIKE = ["\u2212", "\u2012", "\u2010", "\u2011", "\ufe63", "\uff0d", "\u02d7", "\u2796"]
SIGN_DASHES = ["\u2013", "\u2014", "\u2015", "\ufe58"]


@pytest.mark.parametrize("dash", sorted(set(_all("Pd")) | set(MINUS_LIKE) | {"\u2212"}))
def test_no_dash_or_minus_look_alike_ever_reads_as_plus(v, dash):
    """Every dash of Unicode (category Pd) and every minus look-alike, in every context, alone, doubled or
    spaced: the answer is never +N. Where it is a sign it is -N."""
    for n in ("5", "12", "3.5"):
        for ctx in CONTEXTS:
            for form in (dash + n, dash + dash + n, dash + " " + n, "- " + dash + n):
                assert score(v, n, ctx % form) == 0, (dash, ctx % form)
            if dash in MINUS_LIKE or dash in SIGN_DASHES:
                assert score(v, "-" + n, ctx % (dash + n)) == 1, (hex(ord(dash)), ctx % (dash + n))


@pytest.mark.parametrize("dash", SIGN_DASHES + ["\u2212"])
def test_a_dash_between_two_values_is_a_range_never_one_of_them(v, dash):
    for a, b in ((3, 5), (10, 12)):
        for text in (f"{a}{dash}{b}", f"{a} {dash} {b}", f"x = {a}{dash}{b}"):
            for gold in (a, b, -b):
                assert score(v, str(gold), f"\\boxed{{{text}}}") == (gold == a - b), text


def test_digits_of_every_script_read_as_their_value(v):
    zeros = [c for c in _all("Nd") if unicodedata.digit(c) == 0]
    assert len(zeros) > 50
    rng = random.Random(0)
    for zero in zeros:
        n = rng.randint(10, 99999)
        text = "".join(chr(ord(zero) + int(d)) for d in str(n))
        ctx = rng.choice(CONTEXTS)
        assert score(v, str(n), ctx % text) == 1, (hex(ord(zero)), ctx % text)
        assert score(v, str(n + 1), ctx % text) == 0, (hex(ord(zero)), ctx % text)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(st.integers(1, 999), st.integers(-4, 6), st.sampled_from(CONTEXTS))
def test_superscript_powers_are_powers(v, base, exp, ctx):
    sup = dict(zip("0123456789-", "⁰¹²³⁴⁵⁶⁷⁸⁹⁻"))
    text = str(base) + "".join(sup[c] for c in str(exp))
    value = base ** exp if exp >= 0 else f"\\frac{{1}}{{{base ** -exp}}}"
    assert score(v, str(value), ctx % text) == 1
    if base ** exp != base:
        assert score(v, str(base), ctx % text) == 0  # the exponent is never dropped
    if int(f"{base}{abs(exp)}") != base ** exp:
        assert score(v, f"{base}{abs(exp)}", ctx % text) == 0  # nor read as more digits


@pytest.mark.parametrize("ch", [chr(c) for c in (*range(0xBC, 0xBF), *range(0x2150, 0x215F), 0x2189)])
def test_vulgar_fractions_are_their_value_alone_and_after_an_integer(v, ch):
    num, _, den = unicodedata.normalize("NFKC", ch).partition("\u2044")
    frac = f"\\frac{{{num}}}{{{den}}}"
    assert score(v, frac, f"\\boxed{{{ch}}}") == 1
    if num != "0":  # U+2189 is zero thirds
        assert score(v, f"3+{frac}", f"The answer is 3{ch}.") == 1  # a mixed number
        assert score(v, "3", f"The answer is 3{ch}.") == 0
    assert score(v, f"3{num}", f"\\boxed{{3{ch}}}") == 0


@pytest.mark.parametrize("ch", _all("Cf") + ["\u034f", "\ufe0f"])
def test_invisible_characters_inside_a_number_never_change_its_value(v, ch):
    """Removed, so the number reads as it displays; never a truncated or split value."""
    assert score(v, "12345", f"\\boxed{{12{ch}345}}") == 1, hex(ord(ch))
    for wrong in ("12", "345", "-12345"):
        assert score(v, wrong, f"The answer is 12{ch}345.") == 0, hex(ord(ch))
    assert score(v, "-7", f"\\boxed{{\u2212{ch}7}}") == 1 and score(v, "7", f"\\boxed{{\u2212{ch}7}}") == 0


@pytest.mark.parametrize("space", _all("Zs"))
def test_unicode_spaces_inside_numbers(v, space):
    """Narrow and no-break spaces between digit groups separate thousands; no space ever drops a group."""
    text = f"1{space}234{space}567"
    got = score(v, "1234567", f"\\boxed{{{text}}}")
    assert got == (space in "\u00a0\u2009\u202f\u2007\u2008\u200a"), hex(ord(space))
    for wrong in ("1", "567", "1234"):
        assert score(v, wrong, f"\\boxed{{{text}}}") == 0


@pytest.mark.parametrize("mark", ["\u0336", "\u0335", "\u0338", "\u20e0", "\u0332", "\u0301", "\u20e3"])
def test_a_combining_mark_on_a_digit_rejects_the_answer(v, mark):
    for ctx in CONTEXTS:
        assert score(v, "5", ctx % f"5{mark}") == 0 and score(v, "56", ctx % f"5{mark}6") == 0


@settings(max_examples=200, deadline=None)
@given(st.text(max_size=60))
def test_fold_is_idempotent_and_leaves_ascii_alone(text):
    once = fold(text)
    assert fold(once) == once
    if text.isascii():
        assert once is text


def test_invisible_covers_every_format_character():
    missing = [hex(ord(c)) for c in _all("Cf") if not INVISIBLE.fullmatch(c)]
    assert not missing


# -- answer formats -------------------------------------------------------------------------------------


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(st.integers(1, 9999), st.integers(-6, 8), st.sampled_from(["e", "E"]), st.sampled_from(CONTEXTS))
def test_scientific_notation_is_exact(v, mant, exp, e, ctx):
    from fractions import Fraction

    value = Fraction(mant, 100) * Fraction(10) ** exp
    text = f"{Fraction(mant, 100).numerator / Fraction(mant, 100).denominator:g}{e}{exp}"
    gold = str(value.numerator) if value.denominator == 1 else f"\\frac{{{value.numerator}}}{{{value.denominator}}}"
    assert score(v, gold, ctx % text) == 1, text
    assert score(v, str(value.numerator + value.denominator), ctx % text) == 0


UNITS = ["{n} cm^2", "{n} cm²", "{n} \\text{{ cm}}^2", "{n}\\text{{cm}}^{{2}}", "\\${n}", "{n} dollars", "{n} square feet",
         "{n}\\,\\mathrm{{kg}}", "{n} km/h", "{n}\\text{{ m/s}}", "{n} meters", "{n}^\\circ"]


@pytest.mark.parametrize("unit", UNITS)
def test_units_after_a_number_are_dropped_never_its_value(v, unit):
    rng = random.Random(unit)
    for _ in range(4):
        n = rng.randint(2, 5000)
        for ctx in ("\\boxed{%s}", "The answer is $%s$.", "#### %s"):
            text = ctx % unit.format(n=n)
            assert score(v, str(n), text) == 1, text
            assert score(v, str(n + 1), text) == 0, text
            assert score(v, "2", text) == (n == 2)  # the unit's exponent is not a value


@pytest.mark.parametrize("suffix", ["xy", "ab", "mn", "abc", "xyz", "m", "x", "x^2", "xy^2"])
def test_letters_written_onto_a_number_are_variables_not_a_unit(v, suffix):
    for n in (2, 5, 12):
        assert score(v, str(n), f"\\boxed{{{n}{suffix}}}") == 0
        assert score(v, f"{n}{suffix}", f"\\boxed{{{n}}}") == 0  # nor is a gold expression cut to its number
        assert score(v, f"{n}{suffix}", f"\\boxed{{{n}{suffix}}}") == 1


@pytest.mark.parametrize("completion", ["The answer is $12.", "It costs $12 in total.", "The area is 12 cm^2.",
                                        "The area is 12 cm².", "The answer is \\$12.", "**Answer:** $12$ dollars"])
def test_currency_and_units_in_prose(v, completion):
    assert score(v, "12", completion) == 1 and score(v, "13", completion) == 0


@pytest.mark.parametrize("p", ["3", "12", "50", "12.5", "200"])
def test_percent_policy(v, p):
    """One side with %: p% equals p and p/100. Both sides with %: equal values only. No other scaling."""
    from fractions import Fraction

    frac = Fraction(p)
    for pred in (f"{p}%", f"{p}\\%", f"{p} percent"):
        text = f"The answer is {pred}."
        assert score(v, p, text) == 1
        assert score(v, str(float(frac / 100)), text) == 1
        assert score(v, str(float(frac / 10)), text) == 0 and score(v, str(frac * 100), text) == 0
        assert score(v, f"{p}\\%", text) == 1 and score(v, f"{float(frac / 100)}\\%", text) == 0
    assert score(v, f"{p}\\%", f"\\boxed{{{float(frac / 100)}}}") == 1


NUMBER_WORDS = ("zero one two three four five six seven eight nine ten eleven twelve thirteen fourteen fifteen "
                "sixteen seventeen eighteen nineteen twenty").split()


@pytest.mark.parametrize("n", range(21))
def test_number_words_zero_to_twenty_as_the_whole_answer(v, n):
    w = NUMBER_WORDS[n]
    for form in (w, w.title(), w.upper(), f"\\text{{{w}}}", f"\\textbf{{{w.title()}}}"):
        for ctx in ("\\boxed{%s}", "The answer is %s.", "%s", "Answer: %s", "#### %s"):
            assert score(v, str(n), ctx % form) == 1, ctx % form
            assert score(v, str(n + 1), ctx % form) == 0
    other = NUMBER_WORDS[(n + 1) % 21]
    assert score(v, str(n), f"The answer is {w} or {other}.") == 0
    assert score(v, str(n), f"\\boxed{{{w}}} \\boxed{{{other}}}") == 0


@pytest.mark.parametrize("words, n", [("eighty-five", 85), ("twenty-one", 21), ("one hundred", 100), ("a dozen", 12),
                                      ("three hundred", 300)])
def test_larger_number_words_are_not_read(v, words, n):
    assert score(v, str(n), f"The answer is {words}.") == 0


CHOICE_PHRASES = ["The correct option is {L}.", "The correct option is ({L}).", "The correct option is **{L}**.",
                  "Answer: {L}", "Answer: ({L})", "({L})", "{L})", "{L}.", "{L}", "option {L}", "Option {L}", "**{L}**",
                  "**({L})**", "The answer is **{L}**.", "The answer is option {L}.", "I choose {L}.", "I pick option ({L}).",
                  "{L} is correct.", "({L}) is correct.", "{L} is the correct answer.", "Option ({L}) is correct.",
                  "So the best choice is {L}.", "Choice {L}.", "The answer is ({L}) 42.", "The answer is {L}: $\\frac12$.",
                  "\\boxed{{{L}}}", "\\boxed{{({L})}}", "\\boxed{{\\text{{({L})}}}}", "#### {L}", "<answer>{L}</answer>",
                  "**Answer:** ({L}) 7 apples"]


@pytest.mark.parametrize("phrase", CHOICE_PHRASES)
def test_choice_letters_in_common_phrasings(v, phrase):
    for letter in "ABCDEFGHJ":
        text = phrase.format(L=letter)
        for gold in (letter, f"({letter})"):
            assert score(v, gold, text) == 1, (gold, text)
        other = "B" if letter != "B" else "C"
        assert score(v, other, text) == 0 and score(v, f"({other})", text) == 0, text


@pytest.mark.parametrize("phrase", ["The answer is {L} or {M}.", "\\boxed{{{L}, {M}}}", "({L}) and ({M}) are correct.",
                                    "I choose {L}, not {M}.", "Answer: {L}/{M}", "\\boxed{{{L}}} \\boxed{{{M}}}",
                                    "The correct option is {L}. Actually, {M}.", "{L} or {M}", "Maybe {L}."])
def test_two_letters_or_a_hedged_letter_score_zero(v, phrase):
    for letter, other in (("A", "B"), ("C", "E"), ("D", "A")):
        text = phrase.format(L=letter, M=other)
        assert score(v, letter, text) == 0 and score(v, other, text) == 0, text


def test_gsm8k_final_line_wins_over_dollar_amounts_and_calculator_annotations(v):
    rng = random.Random(7)
    for _ in range(40):
        a, b = rng.randint(2, 90), rng.randint(2, 90)
        total, back = a * b, rng.randint(1, 50)
        ans = total - back
        body = (f"Each ticket costs ${a}. She buys {b}, paying ${a}*{b} = $<<{a}*{b}={total}>>{total}.\n"
                f"She gets ${back} back: ${total} - ${back} = $<<{total}-{back}={ans}>>{ans}.")
        for final in (f"#### {ans}", f"#### ${ans}", f"#### {ans:,}", f"####{ans}", f"#### {ans} dollars"):
            gold = rng.choice([str(ans), f"Solution with $5 and <<1+1=2>>2.\n#### {ans:,}"])
            assert score(v, gold, f"{body}\n{final}") == 1, (gold, final)
            assert score(v, str(total), f"{body}\n{final}") == 0
            assert score(v, gold, f"{body}\n#### {ans + 1}") == 0


# -- hacks ----------------------------------------------------------------------------------------------

HEDGES = ["The answer is {v} or {w}.", "\\boxed{{{v}}} or \\boxed{{{w}}}", "\\boxed{{{v}, {w}}}", "The answer is {v}, {w}.",
          "The answer is either {v} or {w}.", "It is between {v} and {w}.", "The answer is about {v}.",
          "\\boxed{{\\approx {v}}}", "The answer is ~{v}.", "\\boxed{{{v}}} or maybe {w}.", "\\boxed{{{v} \\text{{ or }} {w}}}",
          "Answer: {v}; {w}", "The answer is {v}?", "\\boxed{{{v}}}, unless it is {w}.", "Answer: {v} – {w}",
          "Answer: {v} to {w}", "\\boxed{{{v} \\pm 1}}", "The answer is at least {v}.", "\\boxed{{\\ge {v}}}",
          "The answer is {v}+.", "I think the answer is {v}, but it could be {w}.", "\\boxed{{{v}}} (or {w} if rounded)",
          "The answer is {v} (approximately).", "The answer is not {w}, it is {v} or so."]


def _zero_for_both_values(v, template):
    """``template`` with two random values {v} and {w}: the completion scores 0 against either as gold."""
    rng = random.Random(template)
    for _ in range(3):
        a = rng.randint(2, 900)
        b = a + rng.randint(1, 9)
        text = template.format(v=a, w=b)
        assert score(v, str(a), text) == 0 and score(v, str(b), text) == 0, text


@pytest.mark.parametrize("hedge", HEDGES)
def test_hedges_score_zero_for_every_value_they_name(v, hedge):
    _zero_for_both_values(v, hedge)


RETRACTIONS = ["The answer is {v}. No wait, actually {w}.", "{v}. No wait, actually {w}.", "{v}. No wait, actually {w}",
               "\\boxed{{{v}}}. Actually, it is {w}.", "#### {v}\nWait, I made a mistake: {w}.",
               "The answer is {v}. Hmm, on second thought, {w}.", "\\boxed{{{v}}}\n\nCorrection: the answer is {w}.",
               "<answer>{v}</answer> Oops, {w}.", "\\boxed{{{v}}} is wrong; the value is {w}."]


@pytest.mark.parametrize("retraction", RETRACTIONS)
def test_a_retraction_after_the_answer_scores_zero_for_both_values(v, retraction):
    _zero_for_both_values(v, retraction)


@pytest.mark.parametrize("trace", ["Let me try {v}. No wait, that fails. Recomputing gives {w}.\nThe answer is \\boxed{{{w}}}.",
                                   "First guess: {v}. Actually that is wrong; the correct value is {w}.\n#### {w}",
                                   "<think>Maybe {v}? No: {w}.</think>\nThe answer is {w}."])
def test_changing_ones_mind_before_the_final_answer_is_reasoning(v, trace):
    text = trace.format(v=17, w=23)
    assert score(v, "23", text) == 1 and score(v, "17", text) == 0


@pytest.mark.parametrize("sep", [" ", ", ", "\n", ".\n", "; ", " | ", "\n\n", ",\n"])
@pytest.mark.parametrize("length", [6, 10, 50, 1000])
def test_number_dumps_score_zero(v, sep, length):
    rng = random.Random(length)
    nums = [rng.randint(1, 100) for _ in range(length)]
    for tail in ("", ".", "\n"):
        text = sep.join(map(str, nums)) + tail
        assert all(score(v, str(n), text) == 0 for n in set(nums[-3:])), text[-40:]


@pytest.mark.parametrize("n", [2, 3, 5, 21, 200, 5000])
def test_several_or_nested_markers(v, n):
    distinct = "".join(f"\\boxed{{{i}}} " for i in range(1, n)) + "\\boxed{5}"
    assert score(v, "5", distinct) == 0
    assert score(v, "5", "".join(f"#### {i}\n" for i in range(1, n)) + "#### 5") == 0
    assert score(v, "5", "".join(f"<answer>{i}</answer>" for i in range(1, n)) + "<answer>5</answer>") == 0
    assert score(v, "5", "\\boxed{5} " * n) == 1  # repeated markers with one value are one answer
    assert score(v, "5", "\\boxed{" * n + "5" + "}" * n) == (n <= 5)  # nested: one answer, too deep is 0
    assert score(v, "5", "\\boxed{" * n + "5 \\boxed{6}" + "}" * n) == 0


GRADER = ["Correct! reward=1", "Correct! reward=1.", "Final score: {g}.", "Grade: {g}/{g}.", "reward = {g}", "\\boxed{{reward={g}}}",
          "The answer is correct.", "The answer is the gold answer.", "<answer>correct</answer>", "\\boxed{{\\text{{correct}}}}",
          "The verifier will say: correct. \\boxed{{correct}}", "Answer: reward = {g}", "Score: {g}", "#### correct",
          "The answer is verified correct by the grader.", "<answer>reward: {g}</answer>", "Verdict: {g}."]


@pytest.mark.parametrize("text", GRADER)
def test_text_addressed_to_the_grader_scores_zero(v, text):
    for g in ("1", "0", "5"):
        assert score(v, g, text.format(g=g)) == 0, text.format(g=g)


@pytest.mark.parametrize("blank", ["", " ", "\n\n\t", "\u200b\u200b", "\u00a0", "\ufeff", "\u2800", "\u3164", "<answer></answer>",
                                   "<answer>\u200b</answer>", "\\boxed{}", "\\boxed{ }", "\\boxed{\u200b}", "####", "#### \u200b",
                                   "$$", "$ $", "**Answer:**", "<think></think>", "<think>5</think>"])
def test_empty_whitespace_and_invisible_only_completions_score_zero(v, blank):
    for g in ("0", "5", "x"):
        assert score(v, g, blank) == 0


# -- bounded work ---------------------------------------------------------------------------------------


def _best_of(f, runs=3):
    best = float("inf")
    for _ in range(runs):
        t = time.perf_counter()
        out = f()
        best = min(best, time.perf_counter() - t)
    return best, out


HUGE = {
    "nested boxes": "\\boxed{" * 50_000 + "5" + "}" * 50_000,
    "nested boxes, unclosed": "\\boxed{" * 50_000 + "5",
    "many different boxes": "".join(f"\\boxed{{{i}}} " for i in range(20_000)),
    "many equal boxes": "\\boxed{5} " * 20_000,
    "nested braces": "\\boxed{" + "{" * 100_000 + "5" + "}" * 100_000 + "}",
    "nested parentheses": "The answer is " + "(" * 100_000 + "5" + ")" * 100_000 + ".",
    "open parentheses": "(" * 200_000,
    "many anchors": "The answer is 5. " * 10_000,
    "many hashes": "#### 5\n" * 20_000 + "#### 6",
    "many answer tags": "<answer>5</answer>" * 10_000,
    "answer tags nested": "<answer>" * 20_000 + "5" + "</answer>" * 20_000,
    "spaces after an anchor": "The answer is 5" + " " * 200_000 + "x",
    "tabs after an anchor": "The answer is" + " \t" * 100_000,
    "spaces between math": "So it is $5$" + " " * 200_000 + "and $6$.",
    "spaces after hashes": "#### " + " " * 200_000 + "5",
    "between-from words": "between from " * 20_000 + "and to",
    "dollars": "$" * 200_000,
    "backslashes": "\\" * 200_000,
    "digits": "9" * 200_000,
    "boxed digits": "\\boxed{" + "9" * 200_000 + "}",
    "minus chain": "\\boxed{" + "-" * 100_000 + "5}",
    "unicode minus chain": "\u2212" * 100_000 + "5",
    "zero-width": "\u200b" * 200_000 + "5",
    "superscripts": "10" + "\u00b2" * 100_000,
    "dashes": "\u2013" * 100_000,
    "number dump": " ".join(str(i) for i in range(30_000)),
    "hedge words": "the answer is maybe " * 10_000,
    "think tags": "<think>" * 30_000,
    "calculator": "<<" * 100_000 + ">>" * 100_000,
    "sentences": "She has 5 apples. " * 10_000,
    "choice": "(A) " * 50_000,
    "commas": "1," * 100_000,
}


@pytest.mark.parametrize("name", list(HUGE))
def test_huge_inputs_are_decided_in_this_process_within_the_bound(name):
    text = HUGE[name]
    assert len(text) >= 100_000 or name.startswith("many")
    v = MathVerifier()
    try:
        took, s = _best_of(lambda: v.verify("5", text))
        assert v._pool is None  # no worker was needed: the bound holds without the worker deadline
    finally:
        v.close()
    assert took < WORST_S, (name, took)
    assert s.reward in (0.0, 1.0) and "verifier error" not in s.info["reason"], s.info


def test_random_fragment_soup_of_100k_characters_is_bounded():
    """Texts built from the tokens the rules look for (markers, anchors, delimiters, dashes, hedge words),
    repeated in runs: the extraction of each stays within the bound."""
    frags = ["\\boxed{", "}", "{", "(", ")", "$", "$$", "\\(", "####", "\n", " ", "\t", "the answer is ", "Answer:", "5",
             "3.5", "1,000", "-", "\u2212", "\u2013", "\u200b", "\u00b2", "\u00bd", "between ", " and ", " or ", "from ", " to ",
             "approximately ", "\\frac", "^", "_", "\\text{", "cm", "%", "<answer>", "</answer>", "</think>", ".", ",", "?",
             "wait", "actually", "|", "\\", "<<", ">>", "=", "x", "**", "(B)", "option ", "three", "~", "'"]
    rng = random.Random(1)
    worst = 0.0
    for _ in range(30):
        parts, size = [], 0
        while size < 100_000:
            f = rng.choice(frags) * rng.choice([1, 1, 1, 5, 50, 500, 5000])
            parts.append(f)
            size += len(f)
        text = "".join(parts)
        took, _ = _best_of(lambda: extract_answer(text), runs=2)
        worst = max(worst, took)
    assert worst < WORST_S, worst


@settings(max_examples=300, deadline=None)
@given(st.text(alphabet=st.characters(codec="utf-8"), max_size=200),
       st.sampled_from(["5", "-5", "(B)", "\\frac{1}{2}", "x^2", "12\\%", "three"]))
def test_arbitrary_unicode_never_raises_in_the_parent(text, gold):
    """The contract: garbage scores 0 with a reason, never an exception (checked without the workers)."""
    v = MathVerifier()
    for completion in (text, f"\\boxed{{{text}}}", f"The answer is {text}.", f"#### {text}"):
        got = v._prepare(gold, completion)
        assert "verifier error" not in getattr(got, "info", {}).get("reason", ""), (completion, got)
    assert v._pool is None

"""The ``choice`` verifier, by families of cases rather than single strings: every answer format for every
letter, after reasoning that names the other letters; hedges and several letters for every pair; the last
statement winning in both orders; option texts that hold letters and the words "A" and "I"; and random
reasoning (hypothesis) followed by a statement."""

from __future__ import annotations

import itertools
import re

import pytest
from hypothesis import assume, given, settings
from hypothesis import strategies as st

from rlvr.core.types import Example
from rlvr.verifiers import build_verifier
from rlvr.verifiers.choice import ChoiceVerifier, extract_choice

V = ChoiceVerifier()
PLAIN = ["Paris", "London", "Berlin", "Madrid"]
TRICKY = ["Vitamin A", "Type I error", "A and B", "I"]  # letters and the words "A" and "I" inside the options

# every way of stating letter {L} (lower {l}) with option text {T}
FORMATS = ["The answer is ({L}).", "Answer: {L}", "**{L}**", "{L})", "({l})", "Option {L}", "{L}. {T}",
           "{L}) {T}", "{T}", "\\boxed{{{L}}}", "\\boxed{{\\text{{{L}}}}}", "**Answer: {L}**", "Answer: ${L}$",
           "Final answer: {L}", "The correct answer is {L}", "The correct option is ({L}).", "I choose {L}.",
           "I'd go with option {L}.", "({L}) is correct.", "{L} is the correct answer.", "<answer>{L}</answer>",
           "The answer is:\n\n{L}", "Answer: {l}", "answer: {T}", "ANSWER: {L}) {T}", "\\boxed{{{T}}}",
           "The answer is {T}, because it fits.", "The answer is {L} since the others fail."]
REASONING = ("Let me look at each option. Option A seems plausible, but B has a flaw; (C) is tempting and D "
             "is unlikely. Between A and C, I keep thinking.\n\n")


def _ex(options, gold):
    return Example("q", "question", gold, "choice", meta={"options": options})


def _fmt(f, letter, options):
    return f.format(L=letter, l=letter.lower(), T=options["ABCD".index(letter)])


@pytest.mark.parametrize("options", [PLAIN, TRICKY], ids=["plain", "tricky"])
@pytest.mark.parametrize("fmt", FORMATS)
def test_every_format_for_every_letter_after_reasoning(options, fmt):
    for gold, said in itertools.product("ABCD", repeat=2):
        text = REASONING + _fmt(fmt, said, options)
        got = V(_ex(options, gold), text)
        assert got.reward == float(said == gold), (fmt, gold, said, got.info)
        assert got.info["extracted"] == said


HEDGES = ["{a} or {b}", "{a}, {b}", "{a} and {b}", "{a}/{b}", "either {a} or {b}", "The answer is {a} or {b}.",
          "Answer: {a}, {b}", "Answer: {a}; {b}", "\\boxed{{{a}, {b}}}", "Answer: ({a}) or ({b})", "The answer is {a} (or maybe {b}).",
          "Answer: {a} and/or {b}", "The answer is probably {a}.", "The answer is most likely {a}",
          "Answer: maybe {a}", "The answer is {a}?", "The answer is not {b}.", "Answer: I think {a}",
          "\\boxed{{{a} \\text{{ or }} {b}}}"]


@pytest.mark.parametrize("hedge", HEDGES)
def test_hedges_and_several_letters_score_zero(hedge):
    for a, b in itertools.permutations("ABCD", 2):
        for gold in (a, b):
            got = V(_ex(PLAIN, gold), REASONING + hedge.format(a=a, b=b))
            assert got.reward == 0.0 and got.info["extracted"] is None, (hedge, a, b, got.info)


@pytest.mark.parametrize("listing", ["A, B, C, D", "A B C D", "Answer: A, B, C or D", "(A) (B) (C) (D)",
                                     "A) Paris\nB) London\nC) Berlin\nD) Madrid", "Answer: ABCD", "\\boxed{ABCD}"])
def test_listing_every_letter_scores_zero(listing):
    for gold in "ABCD":
        assert V(_ex(PLAIN, gold), "Hmm.\n" + listing).reward == 0.0


@pytest.mark.parametrize("first,last", [("The answer is {x}.", "So the final answer is {y}."),
                                        ("Answer: {x}", "Answer: {y}"), ("\\boxed{{{x}}}", "Actually, \\boxed{{{y}}}"),
                                        ("I choose {x}.", "{y}"), ("Answer: {x}", "Wait, that is wrong.\n**{y}**")])
def test_the_last_statement_wins_with_several_last_and_scores_zero_by_default(first, last):
    lenient = build_verifier("choice", {"several": "last"})
    for x, y in itertools.permutations("ABCD", 2):
        text = first.format(x=x) + "\nLet me double-check A, B, C and D again.\n" + last.format(y=y)
        assert extract_choice(text, PLAIN).letter == y, text
        assert lenient(_ex(PLAIN, y), text).reward == 1.0 and lenient(_ex(PLAIN, x), text).reward == 0.0
        assert V(_ex(PLAIN, y), text).reward == 0.0 and V(_ex(PLAIN, x), text).reward == 0.0  # two answers


def test_statements_without_a_letter_are_passed_over():
    text = "Answer: C\nI am confident the answer is correct, and the answer is now clear."
    assert extract_choice(text, PLAIN).letter == "C"
    assert extract_choice("The answer is a tricky one. A and B fail.\nAnswer: d", PLAIN).letter == "D"
    for text in ("I compared A with B, then C with D.", "A is large. B is small.", "", "Berlin is big; Paris too."):
        assert extract_choice(text, PLAIN).letter is None, text


def test_letters_and_words_inside_option_texts():
    # option A's text ends in the letter A; option C's text is two letters; option D's text is the word "I"
    cases = {"Vitamin A": "A", "Answer: Vitamin A": "A", "The answer is Type I error.": "B", "A and B": "C",
             "Answer: A and B": "C", "C) A and B": "C", "Answer: I": "D", "D. I": "D", "(D) I": "D",
             "B. Type I error": "B", "\\boxed{A and B}": "C", "Answer: (A)": "A"}
    for text, want in cases.items():
        assert extract_choice(text, TRICKY).letter == want, (text, extract_choice(text, TRICKY))
    # a letter with another option's text contradicts itself
    for text in ("Answer: B. Vitamin A", "A) Type I error", "Answer: D) A and B", "(C) I"):
        assert extract_choice(text, TRICKY).letter is None, text
    # "A" is both the letter A and option C's text: ambiguous unless bracketed or labelled
    grades = ["B", "C", "A", "D"]
    assert extract_choice("Answer: A", grades).letter is None
    assert extract_choice("Answer: (A)", grades).letter == "A" and extract_choice("Option A", grades).letter == "A"
    assert extract_choice("Answer: C) A", grades).letter == "C"
    # with nine options "I" is a letter too
    nine = [f"choice {k}" for k in range(9)]
    assert extract_choice("Answer: I", nine).letter == "I"
    assert extract_choice("Answer: I think it is B", nine).letter is None


def test_think_blocks_and_letter_case():
    assert extract_choice("<think>The answer is A.</think>\nThe answer is B.", PLAIN).letter == "B"
    assert extract_choice("<think>The answer is A.", PLAIN).letter is None  # unfinished thinking
    assert extract_choice("The answer is e", PLAIN).letter is None  # not a valid letter
    assert extract_choice("The answer is a city.", PLAIN).letter is None  # "a" in prose is a word


def test_meta_forms_and_several_gold_letters():
    ex = Example("q", "q", "B", "choice", meta={"options": {"B": "London", "A": "Paris"}})
    assert V(ex, "Answer: London").reward == 1.0 and V(ex, "Answer: A").reward == 0.0
    multi = Example("q", "q", "A", "choice", meta={"options": PLAIN, "correct": ["A", "C"]})
    assert V(multi, "Answer: C").reward == 1.0 and V(multi, "Answer: A, C").reward == 0.0
    bare = Example("q", "q", "(C)", "choice")  # no options: letters A-D only
    assert V(bare, "Answer: (c)").reward == 1.0 and V(bare, "Answer: E").reward == 0.0
    letters_only = build_verifier("choice", {"text_answers": False})
    assert letters_only(_ex(PLAIN, "A"), "Answer: Paris").reward == 0.0
    assert letters_only(_ex(PLAIN, "A"), "Answer: A").reward == 1.0
    V.validate()


_WORDS = st.sampled_from(["the", "energy", "is", "higher", "than", "A", "B", "C", "D", "(A)", "(b)", "Paris",
                          "London", "option", "so", "we", "compare", "and", "then", "\n", ".", ",", "x", "=", "3"])


@settings(max_examples=150, deadline=None)
@given(reasoning=st.lists(_WORDS, max_size=40), gold=st.sampled_from("ABCD"), said=st.sampled_from("ABCD"),
       fmt=st.sampled_from(FORMATS))
def test_random_reasoning_then_a_statement(reasoning, gold, said, fmt):
    # "option is A" is itself a statement of an answer (rlvr.verifiers.choice_extract), and two statements of
    # different letters score 0 by design (several: zero): reasoning that states one is not this case
    assume(not re.search(r"\boption\s+is\b", " ".join(reasoning), re.IGNORECASE))
    text = " ".join(reasoning) + "\nThat settles it.\n" + _fmt(fmt, said, PLAIN)
    got = V(_ex(PLAIN, gold), text)
    assert got.reward == float(said == gold), (text, got.info)


def test_final_line_after_a_connective_and_lines_that_are_not_statements():
    for text, want in {"So, B.": "B", "Therefore (C).": "C", "Thus: Paris": "A", "Hence D": "D",
                       "Answer:\nB) London": "B"}.items():
        assert extract_choice("Some reasoning.\n" + text, PLAIN).letter == want, text
    for text in ("B is not it.", "So the answer", "D) Madrid is far", "Paris and London are big"):
        assert extract_choice("Some reasoning.\n" + text, PLAIN).letter is None, text


@pytest.mark.parametrize("pattern", ["(A) ", "A  ", "answer is ", "Answer: A or ", "\\boxed{", "<answer>", "A) x\n",
                                     "The answer is\n", "(A) is correct. ", "B. Paris ", " "])
def test_long_repetitive_completions_are_read_quickly(pattern):
    import time

    text = pattern * (100_000 // len(pattern)) + "?"
    start = time.perf_counter()
    V(_ex(PLAIN, "A"), text)
    assert time.perf_counter() - start < 3.0  # (well under 0.5 s on one core; nested-repeat regexes took minutes)


def test_several_statements_zero_or_last():
    strict = V  # the default: several different letters score 0
    last = build_verifier("choice", {"several": "last"})
    for x, y in itertools.permutations("ABCD", 2):
        for text in (f"Answer: {x}\nAnswer: {y}", f"\\boxed{{{x}}} \\boxed{{{y}}}",
                     f"<answer>{x}</answer><answer>{y}</answer>", f"The answer is {x}.\nActually, it is {y}.\n{y}"):
            assert last(_ex(PLAIN, y), text).reward == 1.0, text  # several: last, the last decides
            assert strict(_ex(PLAIN, y), text).reward == 0.0 and strict(_ex(PLAIN, x), text).reward == 0.0, text
        same = f"Answer: {y}\nSo the answer is ({y}).\n\\boxed{{{y}}}"
        assert strict(_ex(PLAIN, y), same).reward == 1.0  # repeating one letter is one answer
        reasoning = f"Option {x} looks good, but {y} fits better.\nAnswer: {y}"  # letters outside statements
        assert strict(_ex(PLAIN, y), reasoning).reward == 1.0

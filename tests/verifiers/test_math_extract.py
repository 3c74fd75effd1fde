"""Answer extraction, normalisation and the hedging rules of the math verifier (no worker processes)."""

import time

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from rlvr.core.types import Score
from rlvr.verifiers.math import MathVerifier
from rlvr.verifiers.math.extract import boxed_contents, extract_answer, hedge_reason
from rlvr.verifiers.math.normalize import normalize, split_items, strip_var_prefix


@pytest.mark.parametrize("text, span, source", [
    ("so \\boxed{42}.", "42", "boxed"),
    ("\\boxed{\\frac{1}{2}} and then \\boxed{\\frac{1}{2}}", "\\frac{1}{2}", "boxed"),
    ("nested \\boxed{\\{1, \\{2\\}\\}} end", "\\{1, \\{2\\}\\}", "boxed"),
    ("\\boxed{a^{b^{c}}}", "a^{b^{c}}", "boxed"),
    ("\\fbox{3}", "3", "boxed"),
    ("$\\boxed 7$", "7", "boxed"),
    ("<answer>\n 12 \n</answer>", "\n 12 \n", "answer tag"),
    ("\\boxed{1} then <answer>The result: \\boxed{5}</answer>", "5", "answer tag"),
    ("work\n#### 1,234\n", "1,234", "####"),
    ("So the answer is 72.", "72", "anchor"),
    ("The final answer is $\\frac{3}{4}$. I hope it is correct.", "\\frac{3}{4}", "anchor"),
    ("**Answer:** 20 cups, which is enough.", "20 cups", "anchor"),
    ("Answer: 3.5.", "3.5", "anchor"),
    ("the answer is 1 and later the answer is 2.", "2", "anchor"),
    ("42", "42", "whole text"),
    ("$x = 3$", "$x = 3$", "whole text"),
    ("<think>maybe \\boxed{2}</think> \\boxed{3}", "3", "boxed"),
])
def test_extraction_rules(text, span, source):
    got = extract_answer(text)
    assert (got.span, got.source, got.hedge) == (span, source, None)


@pytest.mark.parametrize("text", [
    "",
    "I am not sure how to solve this, it involves many steps and I give up on it.",
    "We need to simplify $(x+1)^2-1$. I don't know.",   # echoing the problem is not an answer
    "\\boxed{3",                                         # unbalanced: truncated generation
    "<think>the answer is 4",                            # thinking never closed
    "step one\nstep two gives 18",                       # last number in prose is not taken
])
def test_no_answer(text):
    assert extract_answer(text).span is None


def test_gold_extraction_takes_whole_text_or_markers():
    assert extract_answer("Natalia sold 24 clips.\n#### 72", is_gold=True).span == "72"
    assert extract_answer("x^2 + 1", is_gold=True).span == "x^2 + 1"
    assert extract_answer("so $\\boxed{2}$ and \\boxed{3}", is_gold=True).hedge is None  # gold is trusted


@pytest.mark.parametrize("text, reason", [
    ("\\boxed{3} or \\boxed{4}", "hedged: several different boxed answers"),
    ("try \\boxed{2}, no: the answer is \\boxed{3}", "hedged: several different boxed answers"),
    ("<answer>3</answer> <answer>4</answer>", "hedged: several different <answer> blocks"),
    ("#### 3\n#### 4", "hedged: several different #### answers"),
])
def test_marker_hedges(text, reason):
    assert extract_answer(text).hedge == reason


@pytest.mark.parametrize("pred, gold", [
    ("3 or 4", "3"), ("3 \\text{ or } 4", "3"), ("2, 3", "2"), ("x = 3, 4", "3"), ("1,2,3,4,5", "3"),
    ("3; 4", "3"), ("3 and 4", "3"), ("3 \\pm 1", "3"), ("\\pm 3", "3"), ("3 \\mp 1", "3"),
    ("between 3 and 5", "4"), ("from 3 to 5", "4"), ("3 to 5", "4"), ("3 -- 5", "4"), ("3 \u2013 5", "4"),
    ("approximately 5", "5"), ("about 5", "5"), ("roughly 5", "5"), ("around 5", "5"), ("nearly 5", "5"),
    ("almost 5", "5"), ("at least 5", "5"), ("at most 5", "5"), ("more than 4", "5"), ("less than 6", "5"),
    ("fewer than 6", "5"), ("up to 5", "5"), ("either 5", "5"), ("maybe 5", "5"), ("possibly 5", "5"),
    ("probably 5", "5"), ("perhaps 5", "5"), ("likely 5", "5"), ("approx 5", "5"), ("\\approx 5", "5"),
    ("\\sim 5", "5"), ("x=3 \\text{ or } x=-3", "3"),
])
def test_hedges(pred, gold):
    p, _ = normalize(pred)
    g, _ = normalize(gold)
    assert hedge_reason(p, g) is not None


@pytest.mark.parametrize("pred, gold", [
    ("3, 4", "3, 4"), ("x = 3 \\text{ or } x = 4", "3, 4"), ("\\pm 2", "\\{-2, 2\\}"), ("(3, 4)", "(1, 2)"),
    ("1,234", "1234"), ("x < 1 \\text{ or } x > 2", "(-\\infty,1)\\cup(2,\\infty)"), ("x > 1 and x < 3", "(1,3)"),
    ("3, 3", "3"), ("\\frac{1}{2}", "0.5"), ("-3 - 5", "-8"),
])
def test_not_hedges(pred, gold):
    p, _ = normalize(pred)
    g, _ = normalize(gold)
    assert hedge_reason(p, g) is None


@pytest.mark.parametrize("raw, norm, pct", [
    ("$\\dfrac{1}{2}$", "\\frac{1}{2}", False),
    ("\\left( \\tfrac12 \\right)", "( \\frac12 )", False),
    ("50\\%", "50", True),
    ("50 %", "50", True),
    ("50 percent", "50", True),
    ("12.5\\text{ percent}", "12.5", True),
    ("\\$1,000.", "1,000", False),
    ("1\\,000\\,000", "1000000", False),
    ("1{,}000", "1,000", False),
    ("5\\text{ cm}^2", "5", False),
    ("10 \\mbox{dollars}", "10", False),
    ("30^\\circ", "30", False),
    ("30^{\\circ}", "30", False),
    ("\\sin 30^\\circ", "\\sin 30\\frac{\\pi}{180}", False),
    ("\u22123", "-3", False),
    ("\\text{13}", "13", False),
    ("\\mathrm{e}^{2}", "e^{2}", False),
    ("\\varnothing", "\\emptyset", False),
    ("x \\leq 3", "x \\le 3", False),
    ("**73**", "73", False),
    ("\\boxed{\\boxed{4}}", "4", False),
    ("2 1/2", "2\\frac{1}{2}", False),
    ("\\begin{bmatrix}1\\\\2\\end{bmatrix}", "\\begin{pmatrix}1\\\\2\\end{pmatrix}", False),
])
def test_normalize(raw, norm, pct):
    assert normalize(raw) == (norm, pct)


def test_split_items_and_prefix():
    assert split_items("1,234,567") == ["1,234,567"]
    assert split_items("1, 234") == ["1", "234"]
    assert split_items("(1,2), [3,4)") == ["(1,2)", "[3,4)"]
    assert split_items("\\{1,2\\}, 3") == ["\\{1,2\\}", "3"]
    assert split_items("x=1 or x=2") == ["x=1", "x=2"]
    assert split_items("159,278 dollars") == ["159,278 dollars"]
    assert split_items("0,100") == ["0", "100"]
    assert split_items("1,234, 5") == ["1,234", "5"]
    assert split_items("1,234", thousands=False) == ["1", "234"]
    assert strip_var_prefix("x = 3") == "3"
    assert strip_var_prefix("x_1 = 3") == "3"
    assert strip_var_prefix("y = 2x + 1") == "2x + 1"
    assert strip_var_prefix("x = y = 3") == "x = y = 3"
    assert strip_var_prefix("x \\ge 3") == "x \\ge 3"


def test_boxed_contents_ignores_escaped_braces_and_unbalanced():
    assert boxed_contents("\\boxed{\\{1\\}} \\boxed{2") == ["\\{1\\}"]
    assert boxed_contents("\\boxedx{1}") == []


_PIECES = st.sampled_from(list("0123456789+-*/^_{}()[],.;:=<>|$% abcxyz!&") + [
    "\\frac", "\\boxed{", "\\fbox", "\\sqrt", "\\pi", "\\pm", " or ", " and ", "####", "<answer>", "</answer>",
    "<think>", "</think>", "\\text{", "\\left(", "\\right)", "\\%", "\\{", "\\}", "\\\\", "\\infty", "\\cup",
    "\\le", "\\circ", "^\\circ", "\\,", "{,}", "\u2212", "e3", "_2", "The answer is ", "Answer: ", "\n"])


@given(st.lists(_PIECES, max_size=40).map("".join), st.lists(_PIECES, max_size=12).map("".join))
@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
def test_parent_side_never_raises_and_is_fast(completion, gold):
    """Everything before the workers (extraction, hedging, normalising, the fast path) on random input."""
    t = time.perf_counter()
    got = MathVerifier()._decide(gold, completion)  # _decide: _prepare would hide an exception
    assert time.perf_counter() - t < 0.5
    if isinstance(got, Score):
        assert got.reward in (0.0, 1.0) and got.info["reason"]
    else:
        (g, gpct, p, ppct), extracted = got
        assert isinstance(g, str) and isinstance(p, str) and isinstance(extracted, str)

"""The prose rules of the math verifier: final statements, math segments and currency, and the hedges and
retractions around a final answer (parent side only, no worker processes)."""

import pytest

from rlvr.verifiers.math.extract import extract_answer
from rlvr.verifiers.math.prose import lead_hedge, math_segments, plain_numbers, protect_math, tail_hedge
from rlvr.verifiers.math.statement import final_statement


@pytest.mark.parametrize("text, span", [
    ("Hence the ratio is $\\frac{6}{18}$.", "\\frac{6}{18}"),
    ("Solving, we get $2y = 14$, so $y = 7$", "y = 7"),
    ("The vertex is the point $(2, -9)$.", "(2, -9)"),
    ("Thus we obtain \\(x = 5\\).", "x = 5"),
    ("She earns a total of $1,234,567.", "1,234,567"),
    ("The total cost is \\$1,234,567.00.", "1,234,567.00"),
    ("He had 20 apples and ate 3.\nHe has 17 apples left.", "17"),
    ("Putting it together, $x = 2 + 8 = 10$.", "10"),
    ("The value of $x$ is 3.", "3"),
    ("He has 17 apples left. I hope it is correct.", "17"),
    ("**He has 17 apples left.**", "17"),
    ("The temperature is now -8 degrees.", "-8"),
    ("Her savings went up by 25%.", "25%"),
    ("The minimum value is \\[-4.\\]", "-4."),
])
def test_final_statement_span(text, span):
    assert final_statement(text) == (span, None)
    assert extract_answer(text).span == span


@pytest.mark.parametrize("text", [
    "He has 17 apples left",                               # unfinished: maybe a truncated generation
    "How many apples does he have left?",
    "We need to find $x$ such that $x^2 = 9$.",
    "Compute $\\sqrt{9}$.",
    "If $x = 3$, the equation holds.",
    "Let the number of stamps be 20.",
    "She makes 9 * 2 = 18 dollars a day.",                 # a computation, not a stated answer
    "So $x = 3$. Wait, no.",
    "We need to simplify $(x+1)^2-1$. I don't know.",
])
def test_final_statement_without_answer(text):
    assert final_statement(text) == (None, None)


@pytest.mark.parametrize("text", [
    "He has about 17 apples left.", "He probably has 17 apples left.", "He does not have 17 apples left.",
    "Hence $x$ is approximately $3$.", "So $x = 3$ or $x = 4$.", "John needs 20-25 more stamps.",
    "So $x$ is not $3$.",
])
def test_final_statement_hedges(text):
    span, why = final_statement(text)
    assert span is not None and why.startswith("hedged")


def test_currency_dollars_are_not_math():
    assert math_segments("It costs $5 and the tax is $2 more.") == []
    assert [c for _, _, c in math_segments("Then $x$ is $5$ dollars, $3.")] == ["x", "5"]
    protected, segs = protect_math("so $y = 7$ and $1,234.")
    assert segs == ["y = 7"] and [n for _, n in plain_numbers(protected)] == ["1,234"]
    assert [n for _, n in plain_numbers("the 3rd child, a 10-year-old, has 1,500 (or 20%)")] == ["1,500", "20%"]


@pytest.mark.parametrize("tail, hedged", [
    (", or possibly 4.", True), (" (or 4 if we count the endpoint)", True), (". Actually, wait, it is 4.", True),
    ("\n\nHmm, on reflection it is 5.", True), (". No, that's wrong.", True), (". Alternatively 4.", True),
    (" or more", True), (" at most", True), ("$ (approximately)", True), ("?", True),
    ("$. I hope it is correct.", False), (".\n\nThis completes the solution.", False),
    (", which is what we wanted.", False), (". Let me double-check by substituting back: it works.", False),
    ("\n\nWait, let me double check. 6 * 7 = 42. Yes, correct.", False), ("\n\nHmm, wait.", True),
    (". Wait, 43. Yes, correct.", True), (". This is the correct answer.", False),
    (" cookies in total.", False), ("", False),
])
def test_tail_hedge(tail, hedged):
    assert (tail_hedge(tail) is not None) is hedged


@pytest.mark.parametrize("lead, hedged", [
    ("The answer is either $4$ or $", True), ("It is 4 or ", True), ("The answer is approximately $", True),
    ("There are at least ", True), ("$x \\approx ", True), ("I think it is maybe ", True),
    ("The answer is $", False), ("Thinking about it once more, the answer is ", False),
    ("We choose red or blue for each face, and the count is ", False), ("Therefore, $x = ", False),
    ("Either way, we need the larger root. The answer is ", False), ("I think the answer is ", False),
])
def test_lead_hedge(lead, hedged):
    assert (lead_hedge(lead) is not None) is hedged


@pytest.mark.parametrize("text, others", [
    ("\\boxed{3}\n\nThe final answer is $4$.", ("4",)),
    ("<answer>3</answer>\n\\boxed{4}", ("4",)),
    ("\\boxed{\\frac{\\sqrt2}{2}} = \\boxed{\\frac{1}{\\sqrt2}}", ("\\frac{\\sqrt2}{2}",)),  # the workers decide
    ("\\boxed{1/2}, i.e. \\boxed{0.5}", ()),                                                  # one value, exactly
    ("\\boxed{3}. I hope it is correct.", ()),
])
def test_other_answers_are_collected(text, others):
    got = extract_answer(text)
    assert got.hedge is None and got.others == others


def test_unbalanced_final_box_is_no_answer():
    assert extract_answer("\\boxed{3} then \\boxed{4").span is None

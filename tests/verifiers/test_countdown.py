import time

import pytest

import rlvr.verifiers.countdown  # noqa: F401  (registers "countdown")
from rlvr.core.types import Example
from rlvr.verifiers import build_verifier
from rlvr.verifiers.countdown import CountdownVerifier, ExpressionError, evaluate_expression, extract_expression


def ex(numbers, target, answer="x"):
    return Example("cd", "q", answer, meta={"numbers": numbers, "target": target})


E = ex([2, 5, 6], 20, "(6-2)*5")


def test_registered_and_validates():
    v = build_verifier("countdown")
    assert isinstance(v, CountdownVerifier) and v.name == "countdown"
    v.validate()
    build_verifier("countdown", {"format_reward": 0.1, "mode": "exactly_once"}).validate()


def test_gold_scores_one_and_wrong_scores_zero():
    v = CountdownVerifier()
    assert v(E, "(6-2)*5").reward == 1.0
    assert v(E, "<think>try</think><answer>(6 - 2) * 5</answer>").reward == 1.0
    assert v(E, "(6+2)*5").reward == 0.0
    assert v(E, "5*6-2*5").reward == 0.0  # 5 used twice
    assert v(E, "").reward == 0.0


def test_exact_fractions_not_floats():
    e = ex([1, 49, 49], 1)
    assert (1 / 49) * 49 != 1  # the float trap this guards against
    assert CountdownVerifier()(e, "(1/49)*49").reward == 1.0
    assert CountdownVerifier()(ex([6, 4, 2], 3), "6/4*2").reward == 1.0
    assert CountdownVerifier()(ex([7, 2], "7/2"), "7/2").reward == 1.0
    assert CountdownVerifier()(ex([7, 2], 3.5), "7/2").reward == 1.0
    assert CountdownVerifier()(ex([7, 2], "3"), "7/2").reward == 0.0
    value, used = evaluate_expression("(1/3)+(1/3)")
    assert str(value) == "2/3" and used == [1, 3, 1, 3]


def test_multiset_modes():
    e = ex([1, 2, 5, 6], 20)
    assert CountdownVerifier(mode="at_most_once")(e, "(6-2)*5").reward == 1.0
    assert CountdownVerifier(mode="exactly_once")(e, "(6-2)*5").reward == 0.0
    assert CountdownVerifier(mode="exactly_once")(e, "(6-2)*5*1").reward == 1.0
    dup = ex([5, 5, 2], 20)
    assert CountdownVerifier()(dup, "(5+5)*2").reward == 1.0
    assert CountdownVerifier()(ex([5, 2], 20), "(5+5)*2").reward == 0.0


def test_restating_the_target_and_equals_sign():
    assert CountdownVerifier()(E, "20").reward == 0.0
    assert CountdownVerifier()(E, "<answer>20 = 20</answer>").reward == 0.0
    assert CountdownVerifier()(E, "(6-2)*5 = 20").reward == 1.0
    assert CountdownVerifier()(E, "(6+2)*5 = 20").reward == 0.0  # the claimed value is ignored
    assert extract_expression("a\n<answer>1+2</answer>\n<answer>3*4=12</answer>\n") == "3*4"


def test_format_reward_tinyzero_style():
    v = CountdownVerifier(format_reward=0.1, require_tags=True)
    assert v(E, "<answer>(6-2)*5</answer>").reward == 1.0
    assert v(E, "<answer>(6+2)*5</answer>").reward == 0.1
    assert v(E, "(6-2)*5").reward == 0.0  # no tags
    assert v(E, "<answer>six times</answer>").reward == 0.0  # not parseable: no format credit


def test_division_by_zero_and_disallowed_syntax():
    v = CountdownVerifier(format_reward=0.1)
    s = v(ex([6, 2, 2], 3), "6/(2-2)")
    assert s.reward == 0.0 and "division by zero" in s.info["reason"]
    for bad in ["2**5", "6//2", "6%4", "abs(-2)", "x+1", "2.5*2", "1e1", "0x10", "1_0", "True+1", "[2]", "6<5",
                "-6+26", "+5*4", "lambda: 1", "__import__('os').system('echo pwned')"]:
        assert v(ex([2, 5, 6, 26, 4, 1, 10, 16], 20), bad).reward == 0.0, bad
    assert CountdownVerifier(allow_unary_minus=True)(ex([6, 26], 20), "-6+26").reward == 1.0


@pytest.mark.parametrize("text", [
    "(" * 5000 + "1" + ")" * 5000,
    "(" * 70 + "6-2" + ")" * 70 + "*5",
    "1+" * 100_000 + "1",
    "9" * 100_000,
    "a" * 1_000_000,
    "\x00\xff\xfe<answer>\x00</answer>",
    bytes(range(256)).decode("latin-1"),
    "<answer>" * 10_000,
    "999999999999*999999999999*999999999999*999999999999*999999999999*999999999999",
])
def test_adversarial_inputs_are_fast_zeros(text):
    v = CountdownVerifier(format_reward=0.1)
    t0 = time.perf_counter()
    s = v(ex([2, 5, 6], 20), text)
    assert time.perf_counter() - t0 < 1.0
    assert s.reward in (0.0, 0.1) and s.components["correct"] == 0.0
    assert "verifier error" not in s.info.get("reason", "")


def test_limits_raise_expression_errors():
    with pytest.raises(ExpressionError):
        evaluate_expression("1" * 13)
    with pytest.raises(ExpressionError):
        evaluate_expression("((((1))))", max_depth=3)
    with pytest.raises(ExpressionError):
        evaluate_expression("1+1", max_chars=2)


def test_missing_meta_scores_zero_with_reason():
    s = CountdownVerifier()(Example("x", "q", "1"), "1")
    assert s.reward == 0.0 and "meta" in s.info["reason"]

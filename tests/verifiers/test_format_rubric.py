import random
import time

import pytest

import rlvr.verifiers.format  # noqa: F401  (registers "format" and "length")
import rlvr.verifiers.rubric  # noqa: F401  (registers "rubric")
from rlvr.core.types import Example
from rlvr.verifiers import build_verifier
from rlvr.verifiers.format import FormatVerifier, LengthVerifier, extract_tag, length_reward
from rlvr.verifiers.rubric import PolicyAwareRubric, RubricVerifier, parse_rubric, pow3r_weights

E = Example("f", "q", "")


@pytest.mark.parametrize("name,params,cls", [("format", {}, FormatVerifier), ("length", {"target": 8}, LengthVerifier),
                                             ("length", {"target": 8, "mode": "linear"}, LengthVerifier),
                                             ("rubric", {}, RubricVerifier)])
def test_registered_and_validates(name, params, cls):
    v = build_verifier(name, params)
    assert isinstance(v, cls) and v.name == name
    v.validate()


def test_format_reward():
    v = FormatVerifier()
    assert v(E, "<think>work</think>\n<answer>4</answer>\n").reward == 1.0
    for bad in ["4", "<answer>4</answer>", "<think>w</think>", "<answer>4</answer><think>w</think>",
                "<think>w</think><answer>4</answer> trailing", "<think>w</think><answer> </answer>",
                "<think>a</think><think>b</think><answer>4</answer>", "<think>w</think><answer>4</answer></answer>"]:
        assert v(E, bad).reward == 0.0, bad
    custom = build_verifier("format", {"pattern": r"<answer>.*?</answer>", "tags": ["answer"]})
    assert custom(E, "<answer>4</answer>").reward == 1.0 and custom(E, "<think>w</think><answer>4</answer>").reward == 0
    assert extract_tag("<a>1</a><a>2</a>", "a") == "2" and extract_tag("<a>1</a><a>2</a>", "a", last=False) == "1"
    assert extract_tag("<a>open", "a") is None


def test_format_adversarial_inputs_are_fast():
    for text, want in [("<think>" * 100_000, 0.0), ("x" * 10_000_000, 0.0), (bytes(range(256)).decode("latin-1"), 0.0),
                       ("<think>" + "a" * 150_000 + "</think><answer>1</answer>", 1.0),
                       ("<think>" + "a" * 250_000 + "</think><answer>1</answer>", 0.0)]:  # over the size cap
        t0 = time.perf_counter()
        s = FormatVerifier()(E, text)
        assert time.perf_counter() - t0 < 1.0
        assert s.reward == want and "verifier error" not in s.info.get("reason", "")


def test_length_soft_matches_dapo_overlong_shaping():
    """DAPO's overlong-shaping oracle with L_max=20, L_cache=4, shifted by +1: target 16, slack 4."""
    for n, dapo in [(10, 0.0), (16, 0.0), (17, -0.25), (18, -0.5), (20, -1.0), (25, -1.0)]:
        assert length_reward(n, 16, "soft", slack=4) == pytest.approx(1.0 + dapo)
    assert length_reward(15, 10, "linear") == 0.5 and length_reward(5, 10, "linear", tolerance=20) == 0.75
    v = LengthVerifier(target=3, mode="linear")
    assert v(E, "a b c").reward == 1.0 and v(E, "a b c d e f").reward == 0.0
    per_prompt = Example("l", "q", "", meta={"target_length": 6})
    assert v(per_prompt, "a b c d e f").reward == 1.0
    assert LengthVerifier(target=5, unit="chars")(E, "abcde").reward == 1.0
    assert LengthVerifier(target=5, unit="chars")(E, "abcdef" * 3).reward == 0.0


RUBRIC = [{"id": "ans", "kind": "numeric", "value": "3/4", "weight": 2, "required": True, "category": "math"},
          {"id": "pct", "kind": "regex", "value": r"\b75\s*%", "category": "style"},
          {"id": "cite", "kind": "contains", "value": "Source:", "category": "style"},
          {"id": "hedge", "kind": "not_contains", "value": "I think", "category": "style"}]


def test_rubric_reward_weights_and_gate():
    e = Example("r", "q", "", meta={"rubric": RUBRIC})
    v = RubricVerifier()
    assert v(e, "It is 75 %. source: table\n<answer>0.75</answer>").reward == 1.0
    s = v(e, "I think 75%.\n<answer>3/4</answer>")
    assert s.reward == pytest.approx(3 / 5) and s.components["crit/cite"] == 0.0 and s.components["strict"] == 1
    s = v(e, "75% Source: x <answer>0.7</answer>")
    assert s.reward == pytest.approx(3 / 5) and s.components["strict"] == 0.0
    assert RubricVerifier(required_gate=True)(e, "75% Source: x <answer>0.7</answer>").reward == 0.0
    tol = Example("r", "q", "", meta={"rubric": [{"id": "a", "kind": "numeric", "value": 3.14, "tolerance": 0.01}]})
    assert v(tol, "pi is about 3.141").reward == 1.0 and v(tol, "3.16").reward == 0.0
    flags = Example("r", "q", "", meta={"rubric": [{"id": "a", "kind": "regex", "value": "^yes$", "flags": "im"}]})
    assert v(flags, "well\nYES\n").reward == 1.0 and v(flags, "yes indeed").reward == 0.0


def test_invalid_rubrics_score_zero_with_reason():
    for bad in [[], [{"id": "a", "kind": "telepathy", "value": 1}], [{"id": "a", "kind": "regex", "value": "("}],
                [{"id": "a", "kind": "contains", "value": "x", "weight": 0}], [{"kind": "contains", "value": "x",
                                                                                 "colour": "red"}]]:
        s = RubricVerifier()(Example("r", "q", "", meta={"rubric": bad}), "x")
        assert s.reward == 0.0 and "verifier error" in s.info["reason"]
    with pytest.raises(ValueError):
        parse_rubric([{"id": "a", "kind": "contains", "value": "x"}, {"id": "a", "kind": "contains", "value": "y"}])


def test_pow3r_oracle():
    """POW3R (arXiv:2605.20164), hand-worked: saturated c1, contrasted c2, eps=0 -> w=(0, 2); training reward =
    c2's scores."""
    assert pow3r_weights([1, 1], ["k", "k"], [0.0, 0.5], eps=0.0) == [0.0, 2.0]
    rubric = [{"id": "c1", "kind": "contains", "value": "x"}, {"id": "c2", "kind": "contains", "value": "y"}]
    e = Example("p", "q", "", meta={"rubric": rubric})
    scores = PolicyAwareRubric(eps=0.0).group_rewards(e, ["x y", "x", "x y", "x"])
    assert [s.reward for s in scores] == [1.0, 0.0, 1.0, 0.0]
    assert [s.components["eval_reward"] for s in scores] == [1.0, 0.5, 1.0, 0.5]
    assert scores[0].info["weights"] == {"c1": 0.0, "c2": 2.0}
    eps = PolicyAwareRubric(eps=0.05).group_rewards(e, ["x y", "x", "x y", "x"])[1]
    assert 0.0 < eps.reward < 0.5  # the saturated criterion keeps a small weight


def test_pow3r_preserves_category_totals():
    rng = random.Random(1)
    for _ in range(50):
        n = rng.randint(1, 6)
        human = [rng.uniform(0, 3) for _ in range(n)]
        cats = [rng.choice("abc") for _ in range(n)]
        contrast = [rng.choice([0.0, rng.uniform(0, 0.5)]) for _ in range(n)]
        w = pow3r_weights(human, cats, contrast, eps=rng.choice([0.0, 0.05]), gamma=rng.choice([0.5, 1, 2]))
        for k in set(cats):
            assert sum(wi for wi, c in zip(w, cats) if c == k) == pytest.approx(sum(h for h, c in zip(human, cats)
                                                                                    if c == k))
    assert pow3r_weights([1, 3], ["a", "a"], [0, 0], eps=0.0) == [1, 3]  # no contrast at all: human weights


def test_pow3r_ema_state_round_trip():
    crits = parse_rubric([{"id": "a", "kind": "contains", "value": "a"}, {"id": "b", "kind": "contains", "value": "b"}])
    p = PolicyAwareRubric(eps=0.0, ema_decay=0.5)
    w1 = p.weights(crits, [[1, 1], [0, 1]])  # contrast (0.5, 0)
    assert w1 == [2.0, 0.0]
    state = p.state_dict()
    assert state["contrast_ema"] == {"a": 0.5, "b": 0.0} and state["pass_rate_ema"] == {"a": 0.5, "b": 1.0}
    w2 = p.weights(crits, [[1, 1], [1, 0]])  # now (0, 0.5): EMA gives (0.25, 0.25)
    assert w2 == pytest.approx([1.0, 1.0])
    fresh = PolicyAwareRubric(eps=0.0, ema_decay=0.5)
    fresh.load_state_dict(state)
    assert fresh.weights(crits, [[1, 1], [1, 0]]) == pytest.approx(w2)
    assert PolicyAwareRubric(eps=0.0).weights(crits, [[1, 1], [1, 0]]) == [0.0, 2.0]  # no EMA: this group only
    with pytest.raises(ValueError):
        PolicyAwareRubric(contrast="variance")

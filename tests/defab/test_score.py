"""score_answer: the entry point a task verifier calls with (theory, target, answer, level)."""

import json

import pytest

from rlvr.defab.checks import InstanceError
from rlvr.defab.parser import parse_literal, parse_rule
from rlvr.defab.score import Verdict, decode_answer, score_answer
from rlvr.defab.syntax import Literal, Superiority

from .fixtures import ANOMALY, L1_THEORY, L2_THEORY, PENGUIN, TARGET


def test_level1():
    assert score_answer(L1_THEORY, TARGET, "bird(tweety).", 1).score == 1.0
    assert score_answer(L1_THEORY, TARGET, Literal.of("bird", "tweety"), 1).score == 1.0
    v = score_answer(L1_THEORY, TARGET, "bird(robin).", 1)
    assert v.score == 0.0 and "already a fact" in v.reason
    v = score_answer(L1_THEORY, TARGET, "penguin(tweety).", 1)
    assert v.score == 0.0 and "does not derive flies(tweety)" in v.reason
    assert score_answer(L1_THEORY, TARGET, "r: bird(X) => flies(X).", 1).score == 0.0  # wrong type


def test_level2():
    assert score_answer(L2_THEORY, TARGET, "r1: bird(X) => flies(X).", 2).score == 1.0
    assert score_answer(L2_THEORY, TARGET, parse_rule("r1: animal(X) => flies(X)"), 2).score == 1.0
    assert score_answer(L2_THEORY, TARGET, "r1: bird(X) -> flies(X).", 2).score == 0.0  # not a default
    assert score_answer(L2_THEORY, TARGET, "r1: penguin(X) => flies(X).", 2).score == 0.0
    v = score_answer(L2_THEORY, TARGET, "r1: bird(X) => flies(Y).", 2)
    assert v.score == 0.0 and "head variable Y" in v.reason


def test_level2_respects_defeaters_in_the_theory():
    sick = L2_THEORY.add(parse_literal("sick(tweety)"))
    assert score_answer(sick, TARGET, "r1: bird(X) => flies(X).", 2).score == 0.0


def test_level3_graded():
    cases = {
        "d: penguin(X) ~> ~flies(X).": 1.0,
        "e: penguin(X) => ~flies(X).\ne > r1.": 1.0,
        "d: bird(X) ~> ~flies(X).": 0.5,
        "e: bird(X) => ~flies(X).\ne > r1.": 0.75,
        "d: bird(X), seabird(X), penguin(X), bird(Y) ~> ~flies(X).": 0.25,
        "d: seabird(X) ~> ~flies(X).": 1.0,
        "d: penguin(X) ~> flies(X).": 0.0,
        "d: bird(X) ~> ~migrates(X).": 0.0,
    }
    for answer, want in cases.items():
        v = score_answer(PENGUIN, ANOMALY, answer, 3)
        assert v.score == want, (answer, v)


def test_level3_superiority_can_be_passed_separately():
    v = score_answer(PENGUIN, ANOMALY, parse_rule("e: penguin(X) => ~flies(X)"), 3,
                     superiority=[Superiority("e", "r1")])
    assert v.score == 1.0 and v.details["strength"] == "restructuring"


def test_level3_details_are_json_friendly():
    v = score_answer(PENGUIN, ANOMALY, "d: bird(X) ~> ~flies(X).", 3)
    assert isinstance(v, Verdict) and 0.0 <= v.score <= 1.0
    back = json.loads(json.dumps(v.details))
    assert back["lost"] == ["flies(robin)", "migrates(robin)"] and back["revision_distance"] == 3
    assert back["strength"] == "weak" and back["minimal"] is True and back["novelty"] == 0.0


def test_defab_variant():
    assert score_answer(PENGUIN, ANOMALY, "d: penguin(X) ~> ~flies(X).", 3, variant="defab").score == 1.0
    assert score_answer(L2_THEORY, TARGET, "r1: bird(X) => flies(X).", 2, variant="defab").score == 1.0


@pytest.mark.parametrize("junk", ["", "I think penguins don't fly", "d: penguin(X) ~> ~flies(X)",
                                  "a.\nb.", "x > y.", "d: p(X ~> q.", "e: penguin(X) => ~flies(X).\ne > nope.",
                                  "e: penguin(X) => ~flies(X).\ne > r1.\nr1 > e."])
def test_wrong_output_scores_zero_without_raising(junk):
    for level, target in ((1, TARGET), (2, TARGET), (3, ANOMALY)):
        theory = {1: L1_THEORY, 2: L2_THEORY, 3: PENGUIN}[level]
        v = score_answer(theory, target, junk, level)
        assert v.score == 0.0 and v.reason


def test_decode_answer():
    h, gamma = decode_answer("e: penguin(X) => ~flies(X).\ne > r1.\n")
    assert h == parse_rule("e: penguin(X) => ~flies(X)") and gamma == (Superiority("e", "r1"),)
    with pytest.raises(ValueError, match="exactly one"):
        decode_answer("a.\nb.\n")


def test_superiority_is_not_a_level_1_answer():
    assert score_answer(L1_THEORY, TARGET, "bird(tweety).\nr1 > r2.", 1).score == 0.0


def test_broken_instances_raise():
    with pytest.raises(InstanceError, match="already derives"):
        score_answer(PENGUIN, ANOMALY, "bird(tweety).", 1)
    with pytest.raises(InstanceError, match="not a defeasible anomaly"):
        score_answer(PENGUIN, parse_literal("seabird(tweety)"), "d: penguin(X) ~> ~seabird(X).", 3)
    with pytest.raises(ValueError, match="level must be"):
        score_answer(PENGUIN, ANOMALY, "d: penguin(X) ~> ~flies(X).", 4)

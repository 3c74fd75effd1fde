"""One test (at least) per DeFAb decision (docs/verifiers.md, DeFAb decision 1 to 8), as documented in
rlvr.defab.checks."""

import pytest

from rlvr.defab.checks import InstanceError, LanguageBias, expectations, protected_expectations
from rlvr.defab.engine import derive
from rlvr.defab.parser import parse_literal, parse_rule, parse_theory
from rlvr.defab.score import score_answer
from rlvr.defab.syntax import Superiority

from .fixtures import ANOMALY, L2_THEORY, PENGUIN, TARGET
from .helpers import lits, status


def test_1_full_grounding_is_the_default_and_relevance_only_a_named_option():
    t = parse_theory("bird(a).\nr1: bird(X) => flies(X).\nr2: p(X) => p(X).\nd1: p(X) ~> ~flies(X).\n")
    assert derive(t) == derive(t, grounding="full")
    assert status(derive(t), "flies(a)") == "?" and status(derive(t, grounding="relevant"), "flies(a)") == "+"


def test_1_checks_see_the_loop_too():
    # Under full grounding the undecided loop literal p(c) keeps every defeater instance alive, so the
    # anomaly is resolved (undecided) but flies(robin) is lost as well; relevance grounding would drop
    # the defeater entirely and leave the anomaly derived.
    looped = PENGUIN.add(parse_rule("l: p(X) => p(X)"))
    v = score_answer(looped, ANOMALY, "d: p(X) ~> ~flies(X).", 3)
    assert v.score == 0.5 and "flies(robin)" in v.details["lost"]
    revised = looped.add(parse_rule("d: p(X) ~> ~flies(X)"))
    assert ANOMALY in derive(revised, grounding="relevant").defeasible


def test_2_conservative_weak_resolution_scores_one():
    v = score_answer(PENGUIN, ANOMALY, "d: penguin(X) ~> ~flies(X).", 3)
    assert v.details["strength"] == "weak" and v.details["conservative"] and v.score == 1.0


def test_2_strong_non_conservative_scores_three_quarters():
    v = score_answer(PENGUIN, ANOMALY, "e: bird(X) => ~flies(X).\ne > r1.", 3)
    assert v.details["strength"] == "strong" and not v.details["conservative"] and v.score == 0.75


def test_3_conservativity_skips_consequences_of_the_anomaly_but_not_others():
    literal_scope = expectations(PENGUIN) - {ANOMALY}
    assert parse_literal("migrates(tweety)") in literal_scope  # the literal reading would protect it...
    assert parse_literal("migrates(tweety)") not in protected_expectations(PENGUIN, ANOMALY)  # ...we do not
    v = score_answer(PENGUIN, ANOMALY, "d: penguin(X) ~> ~flies(X).", 3)
    assert v.score == 1.0 and v.details["lost"] == []
    v = score_answer(PENGUIN, ANOMALY, "d: bird(X) ~> ~flies(X).", 3)  # loses robin: unrelated, protected
    assert v.score == 0.5 and v.details["lost"] == ["flies(robin)", "migrates(robin)"]


def test_3_the_observation_is_never_added_as_a_fact():
    # With ~flies(tweety) added as a fact, this irrelevant hypothesis would "resolve" the anomaly.
    v = score_answer(PENGUIN, ANOMALY, "d: bird(X) ~> ~migrates(X).", 3)
    assert v.score == 0.0 and "still derived" in v.reason


def test_4_restating_the_target_scores_zero():
    l1 = PENGUIN.remove(parse_literal("bird(tweety)"))
    target = parse_literal("migrates(tweety)")
    assert score_answer(l1, target, "bird(tweety).", 1).score == 1.0
    assert score_answer(l1, target, "migrates(tweety).", 1).score == 0.0
    assert score_answer(L2_THEORY, TARGET, "h: => flies(tweety).", 2).score == 0.0


def test_4_answers_must_use_the_instance_vocabulary():
    l1 = PENGUIN.remove(parse_literal("bird(tweety)"))
    target = parse_literal("migrates(tweety)")
    v = score_answer(l1, target, "migratory(tweety).", 1)
    assert v.score == 0.0 and "vocabulary" in v.reason
    v = score_answer(L2_THEORY, TARGET, "h: bird(X) => flies(tweety2).", 2)
    assert v.score == 0.0 and "tweety2" in v.reason


def test_5_minimality_tries_the_empty_body():
    # bird(tweety) => flies(tweety) is not minimal because => flies(tweety) also derives the target.
    v = score_answer(L2_THEORY, TARGET, "h: bird(tweety) => flies(tweety).", 2)
    assert v.score == 0.0 and v.reason == "not minimal: h: => flies(tweety). also derives flies(tweety)"
    # With a variable the empty body is not range-restricted, so it is not a candidate.
    assert score_answer(L2_THEORY, TARGET, "h: bird(X) => flies(X).", 2).score == 1.0
    v = score_answer(L2_THEORY, TARGET, "h: bird(X), animal(X) => flies(X).", 2)
    assert v.score == 0.0 and "not minimal" in v.reason


def test_5_bodies_are_sets():
    # A repeated literal is one antecedent: not a smaller rule (minimal stays minimal) and one towards L.
    assert score_answer(L2_THEORY, TARGET, "h: bird(X), bird(X) => flies(X).", 2).score == 1.0
    v = score_answer(PENGUIN, ANOMALY, "d: penguin(X), penguin(X), penguin(X), penguin(X) ~> ~flies(X).", 3)
    assert v.score == 1.0 and v.details["minimal"] is True and v.details["violations"] == []
    v = score_answer(L2_THEORY, TARGET, "h: bird(X), animal(X), bird(X) => flies(X).", 2)  # still not minimal
    assert v.score == 0.0 and v.reason.startswith("not minimal: h: bird(X) => flies(X).")


def test_7b_minimality_is_scored_at_level_3():
    # Until decision 7 this scored 1.0 (minimality reported, not scored); penguin(X) alone is a
    # conservative resolution, so bird(X) is redundant: over-specified, 0.75.
    v = score_answer(PENGUIN, ANOMALY, "d: penguin(X), bird(X) ~> ~flies(X).", 3)
    assert v.score == 0.75 and v.details["minimal"] is False and v.details["conservative"]
    # A literal needed for conservativity is not redundant: injured(X) alone loses flies(jet), bird(X)
    # alone loses flies(robin) (each with its migrates); together they hit tweety only.
    t = PENGUIN.add(parse_literal("injured(tweety)"), parse_literal("injured(jet)"), parse_literal("plane(jet)"),
                    parse_rule("r3: plane(X) => flies(X)"))
    assert score_answer(t, ANOMALY, "d: injured(X) ~> ~flies(X).", 3).details["lost"] == ["flies(jet)", "migrates(jet)"]
    v = score_answer(t, ANOMALY, "d: injured(X), bird(X) ~> ~flies(X).", 3)
    assert v.score == 1.0 and v.details["minimal"] is True


def test_7a_level_3_answers_must_be_general():
    # The hack: any fact about the anomaly's individual as the body earned 1.0; it now scores what the
    # bare "~> ~flies(tweety)" scores (0.25), as does a variable body with a ground head or a circular body.
    for answer in ("d: penguin(tweety) ~> ~flies(tweety).", "d: penguin(X) ~> ~flies(tweety).",
                   "d: penguin(tweety), bird(robin) ~> ~flies(tweety).",
                   "e: penguin(tweety) => ~flies(tweety).\ne > r1.", "d: flies(X) ~> ~flies(X).",
                   "d: ~> ~flies(tweety)."):
        v = score_answer(PENGUIN, ANOMALY, answer, 3)
        assert v.score == 0.25 and "not well-formed" in v.reason, (answer, v)
    v = score_answer(PENGUIN, ANOMALY, "d: penguin(tweety) ~> ~flies(tweety).", 3)
    assert v.details["violations"] == ["the head ~flies(tweety) is ground: a rule about one individual restates "
                                       "the observation (decision 7a)"]
    v = score_answer(PENGUIN, ANOMALY, "d: penguin(tweety), penguin(X) ~> ~flies(X).", 3)  # general, padded
    assert v.score == 0.75 and v.details["minimal"] is False
    # the check is part of the language bias: switched off, the template is a conservative resolution again
    loose = LanguageBias.for_instance(PENGUIN, ANOMALY, general=False)
    assert score_answer(PENGUIN, ANOMALY, "d: penguin(tweety) ~> ~flies(tweety).", 3, bias=loose).score == 1.0


def test_7a_propositional_heads_have_nothing_to_generalise():
    t = parse_theory("bird.\npenguin.\nr1: bird => flies.\n")
    flies = parse_literal("flies")
    assert score_answer(t, flies, "d: penguin ~> ~flies.", 3).score == 1.0
    v = score_answer(t, flies, "d: flies ~> ~flies.", 3)  # still circular
    assert v.score == 0.25 and "circular" in v.reason


def test_6a_superiority_lifts_to_all_instance_pairs():
    t = parse_theory("p(a,b).\ns(a,c).\nr1: p(X,Y) => q(X).\nr2: s(X,Y) => ~q(X).\nr1 > r2.\n")
    assert status(derive(t), "q(a)") == "+"


def test_6b_facts_and_strict_rules_are_not_level_3_answers():
    for answer in ("~flies(tweety).", "s: penguin(X) -> ~flies(X)."):
        v = score_answer(PENGUIN, ANOMALY, answer, 3)
        assert v.score == 0.0 and "decision 6b" in v.reason
    v = score_answer(PENGUIN, ANOMALY, "d: ~> ~flies(tweety).", 3)  # unconditional: outside the bias
    assert v.score == 0.25


def test_6c_superiority_pairs_count_in_the_revision_distance():
    assert score_answer(PENGUIN, ANOMALY, "d: penguin(X) ~> ~flies(X).", 3).details["revision_distance"] == 1
    v = score_answer(PENGUIN, ANOMALY, "e: penguin(X) => ~flies(X).\ne > r1.", 3)
    assert v.details["revision_distance"] == 2 and v.score == 1.0


def test_6d_label_collisions():
    v = score_answer(PENGUIN, ANOMALY, "r1: penguin(X) ~> ~flies(X).", 3)
    assert v.score == 1.0  # renamed: a label is not content
    v = score_answer(PENGUIN, ANOMALY, "r2: penguin(X) => ~flies(X).\nr2 > r1.", 3)
    assert v.score == 0.0 and "ambiguous" in v.reason
    assert score_answer(L2_THEORY, TARGET, "r2: bird(X) => flies(X).", 2).score == 1.0


def test_6e_contradictory_facts_are_accepted():
    c = derive(parse_theory("p.\n~p.\n"))
    assert c.definite == lits("p; ~p") == c.defeasible


def test_6f_superiority_over_strict_rules_in_theories_but_not_in_answers():
    t = parse_theory("r1: => a.\ns1: a -> ~b.\nr2: => b.\nr2 > s1.\n")
    assert status(derive(t), "b") == "+"
    v = score_answer(PENGUIN, ANOMALY, "e: penguin(X) => ~flies(X).\ne > r1.\ne > s1.", 3)
    assert v.score == 0.25 and "must name a defeasible rule or defeater" in v.reason


def test_6g_the_anomaly_is_the_wrongly_derived_literal():
    with pytest.raises(InstanceError, match="not a defeasible anomaly"):
        score_answer(PENGUIN, ANOMALY.complement(), "d: penguin(X) ~> flies(X).", 3)


def test_8_a_revision_broader_than_the_evidence_is_not_conservative():
    # one penguin and no other bird: nothing in D⁻ shows bird(X) too broad, the probe individuals do
    t = parse_theory("penguin(opus).\ns1: penguin(X) -> bird(X).\nr1: bird(X) => flies(X).\n")
    a = parse_literal("flies(opus)")
    assert score_answer(t, a, "d: penguin(X) ~> ~flies(X).", 3).score == 1.0
    v = score_answer(t, a, "d: bird(X) ~> ~flies(X).", 3)
    assert v.score == 0.5 and v.details["lost"] == [] and v.details["lost_probes"] == ["flies(probe_bird)"]

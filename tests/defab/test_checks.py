"""Each DeFAb check on small instances (docs/verifiers.md, DeFAb checks and the graded reward)."""

import pytest

from rlvr.defab.checks import (LanguageBias, Strength, add_hypothesis, anomaly_resolved, body_subsets,
                               conservativity, criticality, derives, expectations, graded_score,
                               is_defeasible_anomaly, is_minimal, novelty, protected_expectations,
                               revision_distance, strength, valid_derivation, well_formedness)
from rlvr.defab.engine import derive
from rlvr.defab.parser import parse_literal, parse_rule, parse_theory
from rlvr.defab.syntax import Literal, Superiority, TheoryError

from .fixtures import ANOMALY, L1_THEORY, PENGUIN, TARGET
from .helpers import lits


def test_derives_and_expectations():
    assert derives(PENGUIN, ANOMALY) and not derives(PENGUIN, ANOMALY, definite=True)
    assert derives(PENGUIN, parse_literal("seabird(tweety)"), definite=True)
    assert expectations(PENGUIN) == lits("bird(tweety); bird(robin); penguin(tweety); seabird(tweety); "
                                         "flies(tweety); flies(robin); migrates(tweety); migrates(robin)")
    with pytest.raises(ValueError, match="not ground"):
        derives(PENGUIN, parse_literal("flies(X)"))


def test_criticality():
    t = parse_theory("bird(tweety).\nold(tweety).\nr1: bird(X) => flies(X).\nr2: old(X) => wise(X).\n")
    assert criticality(t, parse_literal("flies(tweety)")) == {Literal.of("bird", "tweety"), t.rule("r1")}
    redundant = t.add(parse_rule("r3: old(X) => flies(X)"))
    assert criticality(redundant, parse_literal("flies(tweety)")) == set()  # two independent supports


def test_add_hypothesis_never_adds_the_observation():
    h = parse_rule("d: penguin(X) ~> ~flies(X)")
    revised = add_hypothesis(PENGUIN, h)
    assert set(revised.facts) == set(PENGUIN.facts) and h in revised.rules
    with pytest.raises(TheoryError, match="duplicate rule label"):
        add_hypothesis(PENGUIN, parse_rule("r1: penguin(X) ~> ~flies(X)"))
    with pytest.raises(TheoryError, match="cyclic"):
        add_hypothesis(PENGUIN, h.with_label("e"), [Superiority("e", "r1"), Superiority("r1", "e")])


def test_valid_derivation():
    assert valid_derivation(L1_THEORY, Literal.of("bird", "tweety"), TARGET)
    assert not valid_derivation(L1_THEORY, Literal.of("penguin", "tweety"), TARGET)


def test_is_defeasible_anomaly():
    assert is_defeasible_anomaly(PENGUIN, ANOMALY)
    assert not is_defeasible_anomaly(PENGUIN, parse_literal("seabird(tweety)"))  # strict: +Δ
    assert not is_defeasible_anomaly(PENGUIN, parse_literal("~flies(tweety)"))  # not derived at all


def test_anomaly_resolved_counts_undecided_as_resolved():
    looped = PENGUIN.add(parse_rule("d: p(X) ~> ~flies(X)"), parse_rule("l: p(X) => p(X)"))
    assert ANOMALY in derive(looped).undecided and anomaly_resolved(looped, ANOMALY)
    assert not anomaly_resolved(PENGUIN, ANOMALY)


def test_protected_expectations_leave_out_what_depends_on_the_anomaly():
    p = protected_expectations(PENGUIN, ANOMALY)
    assert p == lits("bird(tweety); bird(robin); penguin(tweety); seabird(tweety); flies(robin); migrates(robin)")


def test_conservativity():
    p = protected_expectations(PENGUIN, ANOMALY)
    ok, lost = conservativity(p, add_hypothesis(PENGUIN, parse_rule("d: penguin(X) ~> ~flies(X)")))
    assert ok and not lost
    ok, lost = conservativity(p, add_hypothesis(PENGUIN, parse_rule("d: bird(X) ~> ~flies(X)")))
    assert not ok and lost == lits("flies(robin); migrates(robin)")


def test_body_subsets_include_the_empty_body_only_when_range_restricted():
    ground_rule = parse_rule("h: a(t), b(t) => q(t)")
    assert [str(r) for r in body_subsets(ground_rule)] == ["h: => q(t).", "h: a(t) => q(t).", "h: b(t) => q(t)."]
    lifted = parse_rule("h: a(X), b(Y) => q(X)")
    assert [str(r) for r in body_subsets(lifted)] == ["h: a(X) => q(X)."]  # {} and {b(Y)} leave X unbound


def test_bodies_are_sets():
    # a(X) twice is one antecedent: its only proper subset is the empty body, not range-restricted
    assert body_subsets(parse_rule("h: a(X), a(X) => q(X)")) == []
    assert [str(r) for r in body_subsets(parse_rule("h: a(t), b(t), a(t) => q(t)"))] == [
        "h: => q(t).", "h: a(t) => q(t).", "h: b(t) => q(t)."]
    bias = LanguageBias.for_instance(PENGUIN, ANOMALY)
    padded = parse_rule("d: penguin(X), bird(X), penguin(X), bird(X) ~> ~flies(X)")  # 2 distinct of max 3
    assert well_formedness(padded, [], PENGUIN, bias) == []


def test_is_minimal():
    def resolves(rule):
        return anomaly_resolved(add_hypothesis(PENGUIN, rule), ANOMALY)

    assert is_minimal(parse_rule("d: penguin(X) ~> ~flies(X)"), resolves)
    assert not is_minimal(parse_rule("d: penguin(X), bird(X) ~> ~flies(X)"), resolves)
    assert is_minimal(Literal.of("bird", "tweety"), resolves)


def test_well_formedness_reports_each_violation():
    bias = LanguageBias.for_instance(PENGUIN, ANOMALY)
    ok = parse_rule("d: penguin(X) ~> ~flies(X)")
    assert well_formedness(ok, [Superiority("d", "r1")], PENGUIN, bias) == []
    cases = {
        "h: penguin(X) -> ~flies(X)": "not an allowed kind",
        "h: penguin(X) ~> ~migrates(X)": "head predicate 'migrates'",
        "h: injured(X) ~> ~flies(X)": "body predicates ['injured']",
        "h: ~> ~flies(tweety)": "body length 0",
        "h: bird(X), penguin(X), seabird(X), bird(Y) ~> ~flies(X)": "body length 4",
        "h: penguin(Y) ~> ~flies(X)": "head variable X",
    }
    for text, problem in cases.items():
        found = well_formedness(parse_rule(text), [], PENGUIN, bias)
        assert len(found) == 1 and problem in found[0], (text, found)
    strict_only = LanguageBias.for_instance(PENGUIN, ANOMALY, allow_constants=False)
    assert "constants" in well_formedness(parse_rule("d: penguin(tweety) ~> ~flies(tweety)"), [], PENGUIN,
                                          strict_only)[0]
    assert "must put the hypothesis" in well_formedness(ok, [Superiority("r1", "d")], PENGUIN, bias)[0]
    assert "must name a defeasible rule" in well_formedness(ok, [Superiority("d", "s1")], PENGUIN, bias)[0]
    assert well_formedness(parse_rule("h: anything(X) => zzz(X)"), [], PENGUIN, LanguageBias(min_body=0)) == []


def test_novelty():
    assert novelty(parse_rule("d: penguin(X) ~> ~flies(X)"), PENGUIN) == 0.0
    assert novelty(parse_rule("d: injured(X) ~> ~flies(X)"), PENGUIN) == 0.5
    assert novelty(parse_rule("d: injured(X), flightless(X) ~> ~flies(X)"), PENGUIN) == pytest.approx(2 / 3)


def test_revision_distance():
    assert revision_distance(1, []) == 1  # a conservative single defeater
    assert revision_distance(2, lits("flies(robin); migrates(robin)")) == 4


def test_strength():
    weak = derive(add_hypothesis(PENGUIN, parse_rule("d: penguin(X) ~> ~flies(X)")))
    assert strength(weak, ANOMALY, True) is Strength.WEAK
    exception = derive(add_hypothesis(PENGUIN, parse_rule("e: penguin(X) => ~flies(X)"), [Superiority("e", "r1")]))
    assert strength(exception, ANOMALY, True) is Strength.RESTRUCTURING
    assert strength(exception, ANOMALY, False) is Strength.STRONG
    assert strength(derive(PENGUIN), ANOMALY, True) is Strength.UNRESOLVED


def test_graded_score_matches_the_methods_oracle():
    assert graded_score(False, True, True, Strength.UNRESOLVED) == 0.0
    assert graded_score(True, False, True, Strength.WEAK) == 0.25
    assert graded_score(True, True, True, Strength.WEAK) == 1.0
    assert graded_score(True, True, True, Strength.RESTRUCTURING) == 1.0
    assert graded_score(True, True, False, Strength.STRONG) == 0.75
    assert graded_score(True, True, False, Strength.WEAK) == 0.5

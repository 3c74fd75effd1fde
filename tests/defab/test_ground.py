"""Grounding: modes, range restriction, the loop on an underivable literal, superiority lifting."""

import pytest

from rlvr.defab.engine import derive
from rlvr.defab.ground import GroundingError, check_range_restriction, ground
from rlvr.defab.parser import parse_theory

from .helpers import lits, run, status

LOOP = """
bird(a).
r1: bird(X) => flies(X).
r2: p(X) => p(X).
d1: p(X) ~> ~flies(X).
"""


def test_full_grounding_keeps_the_loop_on_an_underivable_literal():
    full = run(LOOP)
    assert status(full, "p(a)") == "?"
    assert status(full, "flies(a)") == "?"  # d1's instance is neither applicable nor discarded


def test_relevance_grounding_drops_it_and_changes_the_result():
    rel = run(LOOP, grounding="relevant")
    assert status(rel, "flies(a)") == "+"
    assert not any(r.label in ("r2", "d1") for r in ground(parse_theory(LOOP), "relevant").rules)


def test_full_equals_exhaustive_on_the_loop():
    t = parse_theory(LOOP)
    full, ex = derive(ground(t, "full")), derive(ground(t, "exhaustive"))
    assert full.defeasible == ex.defeasible and full.undecided == ex.undecided


def test_full_mode_drops_instances_with_failing_bodies():
    t = parse_theory("bird(a).\nbird(b).\nc(z).\nr1: bird(X) => flies(X).\nr2: flies(X), fish(X) => swims(X).\n")
    full, ex = ground(t, "full"), ground(t, "exhaustive")
    assert len(ex) == 6 and len(full) == 2  # fish has no rules or facts: every r2 instance fails
    assert derive(full).defeasible == derive(ex).defeasible


def test_recursive_predicates_ground_to_the_least_and_greatest_fixpoints():
    t = parse_theory("edge(a,b).\nedge(b,c).\nr1: edge(X,Y) => path(X,Y).\n"
                     "r2: path(X,Y), edge(Y,Z) => path(X,Z).\nr3: link(X,Y) => link(Y,X).\n")
    c = derive(t)
    assert lits("path(a,b); path(b,c); path(a,c)") <= c.defeasible
    heads = {r.head for r in ground(t, "full").rules}
    assert lits("link(a,b); link(c,a)") <= heads  # link loops: kept, as under full grounding
    assert not any(r.label == "r3" for r in ground(t, "relevant").rules)


def test_range_restriction_errors_are_clear():
    t = parse_theory("bird(a).\nr1: bird(X) => flies(Y).\n")
    with pytest.raises(GroundingError, match=r"rule r1 is not range-restricted: head variable Y"):
        ground(t)
    with pytest.raises(GroundingError, match="not range-restricted"):
        check_range_restriction(parse_theory("r1: => flies(X).\n"))


def test_unsafe_rules_ground_over_all_constants_when_allowed():
    t = parse_theory("bird(a).\nfish(b).\nr1: bird(X) => likes(X, Y).\n")
    for mode in ("full", "relevant"):
        heads = {r.head for r in ground(t, mode, range_restricted=False).rules}
        assert heads == lits("likes(a,a); likes(a,b)")
    assert len(ground(t, "exhaustive", range_restricted=False)) == 4  # X over {a, b} too


def test_unknown_mode():
    with pytest.raises(GroundingError, match="unknown grounding mode 'lazy'"):
        ground(parse_theory("p.\n"), "lazy")


def test_repeated_variables_and_constants_in_bodies():
    t = parse_theory("r(a,a).\nr(a,b).\nq(b).\nr1: r(X,X) => self(X).\nr2: r(a,Y), q(Y) => hit(Y).\n")
    c = derive(t)
    assert lits("self(a); hit(b)") <= c.defeasible and status(c, "self(b)") == "-"


def test_superiority_lifts_to_every_instance_pair():
    # Decision 6a: r1 > r2 holds between instances whose Y bindings differ.
    t = parse_theory("p(a,b).\ns(a,c).\nr1: p(X,Y) => q(X).\nr2: s(X,Y) => ~q(X).\nr1 > r2.\n")
    assert status(derive(t), "q(a)") == "+"


def test_propositional_theory_grounds_to_itself():
    t = parse_theory("a.\nr1: a => b.\nd1: c ~> ~b.\n")
    g = ground(t)
    assert set(g.rules) <= set(t.rules) and g.facts == set(t.facts)

"""Classic defeasible-logic examples, checked against hand-derived conclusions."""

import pytest

from rlvr.defab.engine import VARIANTS, Logic, derive, resolve_variant
from rlvr.defab.naive import derive_naive
from rlvr.defab.parser import parse_theory
from rlvr.defab.ground import ground

from .helpers import lits, run, status

TWEETY = """
bird(tweety). bird(robin). penguin(opus).
r1: bird(X) => flies(X).
r2: penguin(X) -> bird(X).
r3: penguin(X) => ~flies(X).
r3 > r1.
""".replace(". b", ".\nb").replace(". p", ".\np")


@pytest.mark.parametrize("variant", list(VARIANTS))
def test_tweety_and_penguins(variant):
    c = run(TWEETY, variant)
    assert c.definite == lits("bird(tweety); bird(robin); penguin(opus); bird(opus)")
    assert lits("flies(tweety); flies(robin); ~flies(opus)") <= c.defeasible
    assert status(c, "flies(opus)") == "-"
    assert status(c, "~flies(tweety)") == "-"
    assert not c.undecided


@pytest.mark.parametrize("variant", list(VARIANTS))
def test_without_superiority_the_penguin_is_ambiguous(variant):
    c = run(TWEETY.replace("r3 > r1.", ""), variant)
    assert status(c, "flies(opus)") == "-" and status(c, "~flies(opus)") == "-"
    assert status(c, "flies(tweety)") == "+"


NIXON = """
quaker(nixon).
republican(nixon).
r1: quaker(X) => pacifist(X).
r2: republican(X) => ~pacifist(X).
r3: republican(X) => footballfan(X).
r4: pacifist(X) => antimilitary(X).
r5: footballfan(X) => ~antimilitary(X).
"""


@pytest.mark.parametrize("variant", list(VARIANTS))
def test_nixon_diamond_ambiguity_blocking(variant):
    c = run(NIXON, variant)
    assert status(c, "pacifist(nixon)") == "-" and status(c, "~pacifist(nixon)") == "-"
    # ambiguity blocking: r4 is discarded because pacifist is −∂, so r5 is unopposed
    assert status(c, "~antimilitary(nixon)") == "+"
    assert status(c, "antimilitary(nixon)") == "-"


TEAM = """
monotreme(platypus). hasfur(platypus). layseggs(platypus). hasbill(platypus).
r1: monotreme(X) => mammal(X).
r2: hasfur(X) => mammal(X).
r3: layseggs(X) => ~mammal(X).
r4: hasbill(X) => ~mammal(X).
r1 > r3.
r2 > r4.
""".replace(". h", ".\nh").replace(". l", ".\nl")


@pytest.mark.parametrize("variant", list(VARIANTS))
def test_team_defeat(variant):
    c = run(TEAM, variant)
    assert status(c, "mammal(platypus)") == "+"  # no single rule beats both attackers; the team does
    assert status(c, "~mammal(platypus)") == "-"


@pytest.mark.parametrize("variant", list(VARIANTS))
def test_team_defeat_needs_every_attacker_beaten(variant):
    c = run(TEAM.replace("r2 > r4.", ""), variant)
    assert status(c, "mammal(platypus)") == "-"
    assert status(c, "~mammal(platypus)") == "-"


@pytest.mark.parametrize("variant", list(VARIANTS))
def test_defeater_blocks_but_never_supports(variant):
    text = "bird(tweety).\ninjured(tweety).\nr1: bird(X) => flies(X).\nd1: injured(X) ~> ~flies(X).\n"
    c = run(text, variant)
    assert status(c, "flies(tweety)") == "-"
    assert status(c, "~flies(tweety)") == "-"  # a defeater alone proves nothing
    c2 = run(text + "r1 > d1.\n", variant)
    assert status(c2, "flies(tweety)") == "+"


@pytest.mark.parametrize("variant", list(VARIANTS))
def test_defeater_beaten_by_team_member(variant):
    text = "a.\nb.\nr1: a => q.\nr2: b => q.\nd1: a ~> ~q.\nd2: b ~> ~q.\nr1 > d1.\n"
    assert status(run(text, variant), "q") == "-"  # d2 is unbeaten
    assert status(run(text + "r2 > d2.\n", variant), "q") == "+"


@pytest.mark.parametrize("variant", list(VARIANTS))
def test_strict_conclusion_beats_defeasible(variant):
    text = "penguin(tweety).\nr1: penguin(X) -> ~flies(X).\nr2: penguin(X) -> bird(X).\nr3: bird(X) => flies(X).\n"
    c = run(text, variant)
    assert lits("~flies(tweety); bird(tweety)") <= c.definite
    assert status(c, "flies(tweety)") == "-"
    assert status(c, "~flies(tweety)") == "+"


def test_superiority_cannot_override_a_definite_conclusion():
    text = "p.\ns1: p -> ~q.\nr1: p => q.\nr1 > s1.\n"
    c = run(text)
    assert status(c, "q") == "-" and status(c, "~q") == "+"


def test_strict_rule_on_defeasible_premises_standard_vs_defab():
    # s1 fires only defeasibly (a is +∂, not +Δ): in standard DL it supports ~b and attacks b;
    # in the DeFAb variant strict rules act only through +Δ, so b is unopposed.
    text = "r1: => a.\ns1: a -> ~b.\nr2: => b.\n"
    std, dfb = run(text, "standard"), run(text, "defab")
    assert status(std, "b") == "-" and status(std, "~b") == "-"
    assert status(dfb, "b") == "+" and status(dfb, "~b") == "-"


def test_superiority_over_a_strict_rule_matters_in_the_standard_logic():
    text = "r1: => a.\ns1: a -> ~b.\nr2: => b.\nr2 > s1.\n"
    c = run(text, "standard")
    assert status(c, "b") == "+" and status(c, "~b") == "-"


@pytest.mark.parametrize("variant", list(VARIANTS))
def test_defeasible_loop_proves_nothing_and_terminates(variant):
    c = run("r1: a => b.\nr2: b => a.\n", variant)
    assert not c.defeasible and not c.definite
    assert c.undecided == lits("a; b")
    assert lits("~a; ~b") <= c.not_defeasible  # no rules at all for the complements


@pytest.mark.parametrize("variant", list(VARIANTS))
def test_strict_loop_is_neither_plus_nor_minus_delta(variant):
    c = run("s1: a -> b.\ns2: b -> a.\nr1: => ~a.\n", variant)
    assert not c.definite
    assert c.undecided >= lits("a; b; ~a")  # +∂~a needs −Δa, which a strict loop never gives


@pytest.mark.parametrize("variant", list(VARIANTS))
def test_self_loop_blocks_what_depends_on_it(variant):
    c = run("r0: p => p.\nr1: => q.\nd1: p ~> ~q.\n", variant)
    assert status(c, "p") == "?"
    assert status(c, "q") == "?"  # the defeater is neither applicable nor discarded


@pytest.mark.parametrize("variant", list(VARIANTS))
def test_long_chain_uses_no_recursion(variant):
    n = 5000
    text = "a0.\n" + "".join(f"r{i}: a{i} => a{i + 1}.\n" for i in range(n))
    c = run(text, variant)
    assert len(c.defeasible) == n + 1


def test_empty_body_strict_rule_is_definite():
    c = run("s1: -> p.\nr1: p => q.\n")
    assert lits("p") == c.definite and lits("p; q") == c.defeasible


def test_contradictory_facts_prove_both():
    c = run("p.\n~p.\nr1: p => q.\n")
    assert lits("p; ~p") <= c.definite and lits("p; ~p; q") <= c.defeasible


def test_duplicate_body_literals_count_once():
    c = run("a.\nr1: a, a => b.\n")
    assert status(c, "b") == "+"


def test_variants_and_naive_agree_on_classics():
    for text in (TWEETY, NIXON, TEAM):
        g = ground(parse_theory(text))
        for v in VARIANTS:
            assert derive(g, v) == derive_naive(g, v)


def test_resolve_variant():
    assert resolve_variant("defab") == Logic(False, False)
    assert resolve_variant(Logic(True, False)) == Logic(True, False)
    with pytest.raises(ValueError, match="unknown logic variant"):
        resolve_variant("well-founded")

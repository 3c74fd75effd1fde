"""Data model and text format: immutability, hashing, canonical text, round trips, located errors."""

import random

import pytest

from rlvr.defab.parser import (TheoryParseError, load_theory, parse_literal, parse_rule, parse_statements,
                               parse_theory)
from rlvr.defab.syntax import Atom, Literal, Rule, RuleKind, Superiority, Theory, TheoryError, is_variable

from .randtheory import datalog, propositional

DOC_EXAMPLE = """
% Tweety the penguin (Antoniou et al. 2001)
bird(tweety).                      # fact
penguin(opus).
r1: bird(X) => flies(X).           # defeasible rule
r2: penguin(X) -> bird(X).         # strict rule
d1: injured(X) ~> ~flies(X).       # defeater
r3: penguin(X) => ~flies(X).
r3 > r1.                           # superiority
r4: => sunny.                      # defeasible fact, propositional
"""


def test_doc_example_parses_to_the_expected_theory():
    t = parse_theory(DOC_EXAMPLE)
    assert t.facts == (Literal.of("bird", "tweety"), Literal.of("penguin", "opus"))
    assert [r.label for r in t.rules] == ["r1", "r2", "d1", "r3", "r4"]
    assert t.rule("r2").kind is RuleKind.STRICT and t.rule("d1").kind is RuleKind.DEFEATER
    assert t.rule("d1").head == Literal.of("flies", "X", negated=True)
    assert t.rule("r4").body == () and t.rule("r4").head == Literal(Atom("sunny"))
    assert t.superiority == (Superiority("r3", "r1"),)


def test_variables_and_constants():
    assert is_variable("X") and is_variable("Bird") and is_variable("?x")
    assert not is_variable("x") and not is_variable("42")
    r = parse_rule("r: p(?x, Y, c, 7) => q(?x)")
    assert r.body[0].variables == ("?x", "Y") and not r.is_ground
    assert r.unsafe_variables == ()
    assert parse_rule("r: p(X) => q(Y)").unsafe_variables == ("Y",)


def test_objects_are_immutable_and_hashable():
    lit = Literal.of("flies", "tweety")
    with pytest.raises(AttributeError):
        lit.negated = True
    assert lit.complement().complement() == lit and lit.complement() != lit
    assert len({lit, Literal.of("flies", "tweety"), lit.complement()}) == 2
    r = parse_rule("r1: bird(X) => flies(X).")
    assert hash(r) == hash(parse_rule("r1: bird(X) => flies(X)")) and r == parse_rule("r1: bird(X)=>flies(X)")
    assert r != r.with_label("r2")
    t = parse_theory(DOC_EXAMPLE)
    assert hash(t) == hash(parse_theory(DOC_EXAMPLE)) and len({t, parse_theory(DOC_EXAMPLE)}) == 1


def test_canonical_text():
    assert str(parse_literal(" ~ flies( tweety , X ) ")) == "~flies(tweety,X)"
    assert str(parse_rule("d1 :  injured(X),bird(X)~>~flies(X)")) == "d1: injured(X), bird(X) ~> ~flies(X)."
    assert str(parse_rule("r: -> p")) == "r: -> p."
    assert str(Superiority("a", "b")) == "a > b."


def test_theory_equality_ignores_order_and_duplicates():
    a = parse_theory("p.\nq.\nr1: p => s.\nr2: q => ~s.\nr1 > r2.\n")
    b = parse_theory("r2: q => ~s.\nq.\nr1 > r2.\np.\np.\nr1: p => s.\n")
    assert a == b and hash(a) == hash(b)
    assert a != a.remove(Literal.of("p"))


def test_round_trip_doc_example():
    t = parse_theory(DOC_EXAMPLE)
    assert parse_theory(str(t)) == t
    assert str(parse_theory(str(t))) == str(t)  # the text form is a fixpoint too


@pytest.mark.parametrize("seed", range(40))
def test_round_trip_random(seed):
    rng = random.Random(seed)
    t = propositional(rng) if seed % 2 else datalog(rng)
    assert parse_theory(str(t)) == t
    for r in t.rules:
        assert parse_rule(str(r)) == r


def test_unlabelled_rules_get_fresh_labels():
    t = parse_theory("r1: a => b.\nc => d.\nd -> e.\n")
    assert [r.label for r in t.rules] == ["r1", "r2", "r3"]
    assert parse_theory(str(t)) == t


def test_parse_statements_does_not_check_labels():
    items = parse_statements("h: penguin(X) => ~flies(X).\nh > r1.\n")
    assert isinstance(items[0], Rule) and items[1] == Superiority("h", "r1")


def test_load_theory(tmp_path):
    f = tmp_path / "t.dl"
    f.write_text(DOC_EXAMPLE, encoding="utf-8")
    assert load_theory(f) == parse_theory(DOC_EXAMPLE)


@pytest.mark.parametrize("text, line, message", [
    ("p.\nq(a\n", 2, "expected ',' or ')'"),
    ("p.\n\n% c\nr1: a => b\n", 4, "expected '.' at the end"),
    ("bird(X).\n", 1, "a fact must be ground"),
    ("p.\nr1: a => b.\nr1: c => d.\n", 3, "duplicate rule label 'r1' (first used on line 2)"),
    ("r1: a => b.\nr1 > r9.\n", 2, "unknown rule label 'r9'"),
    ("r1: a => b.\nr2: c => d.\nr1 > r2.\nr2 > r1.\n", 4, "cyclic: r1 > r2 > r1"),
    ("r1: a => b.\nr1 > r1.\n", 2, "above itself"),
    ("p @ q.\n", 1, "unexpected character '@'"),
    ("p. q.\n", 1, "one statement per line"),
    ("r1: a, => b.\n", 1, "expected a literal"),
    ("r1: a.\n", 1, "expected an arrow"),
    ("a, b.\n", 1, "expected an arrow"),
    ("Bird(x).\n", 1, "bad predicate name 'Bird'"),
    ("r1: p(_x) => q.\n", 1, "bad term '_x'"),
    ("p.\nr1 > .\n", 2, "expected a rule label"),
    ("ok.\n1r: a => b.\n", 2, "bad"),
])
def test_parse_errors_name_the_line(text, line, message):
    with pytest.raises(TheoryParseError) as info:
        parse_theory(text)
    assert info.value.line == line
    assert message in str(info.value) and str(info.value).startswith(f"line {line}: ")


def test_constructor_validation():
    with pytest.raises(TheoryError, match="must be a ground literal"):
        Theory([Literal.of("bird", "X")])
    with pytest.raises(TheoryError, match="duplicate rule label"):
        Theory([], [parse_rule("r: a => b"), parse_rule("r: c => d")])
    with pytest.raises(TheoryError, match="unknown rule label"):
        Theory([], [parse_rule("r: a => b")], [Superiority("r", "s")])
    with pytest.raises(TheoryError, match="bad term"):
        Atom("p", ["a-b"])
    with pytest.raises(TheoryError, match="bad rule label"):
        Rule("1x", RuleKind.STRICT, [], Literal.of("p"))


def test_theory_add_remove_and_vocabulary():
    t = parse_theory(DOC_EXAMPLE)
    assert t.constants() == {"tweety", "opus"}
    assert t.predicates() == {"bird", "penguin", "flies", "injured", "sunny"}
    smaller = t.remove(t.rule("r1"))
    assert "r1" not in smaller.labels and not smaller.superiority  # its superiority pair goes too
    bigger = t.add(parse_rule("h: penguin(X) ~> ~flies(X)"), Superiority("h", "r1"))
    assert Superiority("h", "r1") in bigger.superiority and t.fresh_label("r1") == "r1_1"

"""Decision 7 on generated Level-3 instances: answers about the anomaly's individual cannot earn full reward.

The template ``x: <a fact of the individual> ~> ~<anomaly>.`` used to score 1.0 on every generated
instance. Every variant below must now score exactly what the bare ``x: ~> ~<anomaly>.`` scores (0.25:
it resolves the anomaly but restates the observation), over many seeds and every shipped KB, while the
golds keep 1.0.
"""

import pytest

from rlvr.defab.engine import derive
from rlvr.defab.generate import exception_gold, generate
from rlvr.defab.kb import BUILTIN_KBS
from rlvr.defab.naive import derive_naive
from rlvr.defab.score import score_answer
from rlvr.defab.syntax import Literal, Rule, RuleKind

SEEDS = range(6)


def _instances(exceptions=0.5):
    return [i for kb in BUILTIN_KBS for seed in SEEDS
            for i in generate(3, 2, seed, kb=kb, strategy="mixed", exceptions=exceptions)]


@pytest.fixture(scope="module")
def instances():
    return _instances()


def _about(inst):
    """(facts of the individual, other facts, literals D⁻ derives about it other than the anomaly)."""
    ind = inst.target.args[0]
    facts = [f for f in inst.theory.facts if ind in f.args]
    others = [f for f in inst.theory.facts if ind not in f.args]
    derived = sorted((q for q in derive(inst.theory).defeasible
                      if ind in q.args and q.atom != inst.target.atom), key=str)
    return facts, others, derived


def _hacks(inst):
    """(kind, hypothesis, Γ) for the template and its variants: ground, several facts, variable body with
    a ground head, derived literals, exceptions with priority, circular bodies."""
    a, no = inst.target, inst.target.complement()
    facts, others, derived = _about(inst)
    x = "x" if "x" not in inst.theory.labels else inst.theory.fresh_label("x")

    def rule(body, head=no, kind=RuleKind.DEFEATER):
        return Rule(x, kind, body, head)

    for f in facts:
        yield "fact", rule([f]), ()
        yield "variable body, ground head", rule([Literal.of(f.predicate, "X")]), ()
        h, gamma = exception_gold(inst.theory, rule([f]), a)
        yield "exception with priority", h, gamma
        yield "exception without priority", h, ()
    yield "all facts", rule(facts[:3]), ()
    if others:
        yield "fact and a fact of another individual", rule([facts[0], others[0]]), ()
    for q in derived[:3]:
        yield "derived literal", rule([q]), ()
    yield "facts and derived", rule([facts[0], *derived[:2]]), ()
    yield "circular", rule([Literal.of(a.predicate, "X")], Literal.of(a.predicate, "X", negated=True)), ()
    yield "circular ground", rule([a]), ()
    yield "circular with a class", rule([Literal.of(a.predicate, "X"), *inst.gold.body],
                                        Literal.of(a.predicate, "X", negated=True)), ()


def test_the_bare_restatement_scores_a_quarter(instances):
    for inst in instances:
        bare = Rule("x", RuleKind.DEFEATER, [], inst.target.complement())
        assert score_answer(inst.theory, inst.target, bare, 3).score == 0.25, inst.id


def test_the_template_and_its_variants_score_what_the_bare_answer_scores(instances):
    kinds = set()
    for inst in instances:
        for kind, h, gamma in _hacks(inst):
            v = score_answer(inst.theory, inst.target, h, 3, superiority=gamma)
            assert v.score == 0.25 and not v.details["well_formed"], (inst.id, kind, str(h), v)
            assert any("decision 7a" in p for p in v.details["violations"]), (inst.id, kind, v)
            # it really does resolve the anomaly (so 0.25, not 0): checked with the naive oracle
            assert not derive_naive(inst.theory.add(h, *gamma)).proves(inst.target), (inst.id, kind)
            kinds.add(kind)
    assert len(kinds) == 11, kinds


def test_text_answers_of_the_template_score_a_quarter(instances):
    for inst in instances[:12]:
        fact = _about(inst)[0][0]
        assert inst.score(f"x: {fact} ~> ~{inst.target}.") == 0.25
        assert inst.score(f"x: {fact}, {fact} ~> ~{inst.target}.") == 0.25


def test_golds_score_one_and_padding_them_withholds_full_credit(instances):
    for inst in instances:
        g, gamma = inst.gold, inst.gold_superiority
        v = score_answer(inst.theory, inst.target, g, 3, superiority=gamma)
        assert v.score == 1.0 and v.details["minimal"] is True, (inst.id, v)
        # a repeated antecedent is the same rule (bodies are sets)
        twice = score_answer(inst.theory, inst.target, g.with_body([*g.body, *g.body]), 3, superiority=gamma)
        assert twice.score == 1.0 and twice.details == v.details, inst.id
        # the gold plus a vacuous fact of the individual: general, conservative, but not minimal (7b)
        padded = g.with_body([*g.body, _about(inst)[0][0]])
        p = score_answer(inst.theory, inst.target, padded, 3, superiority=gamma)
        assert p.score == 0.75 and p.details["minimal"] is False and p.details["conservative"], (inst.id, p)


@pytest.mark.parametrize("exceptions", [0.0, 1.0])
def test_golds_of_both_types_score_one_on_many_seeds(exceptions):
    insts = _instances(exceptions)
    assert {i.gold.kind for i in insts} == {RuleKind.DEFEATER if exceptions == 0 else RuleKind.DEFEASIBLE}
    for inst in insts:
        v = score_answer(inst.theory, inst.target, inst.gold_text, 3)
        assert v.score == 1.0 and v.details["minimal"] and not v.details["violations"], (inst.id, v)

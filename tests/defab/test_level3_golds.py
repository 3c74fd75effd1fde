"""Level-3 golds of both hypothesis types: defeaters (weak) and exceptions with priority (restructuring).

Every expected score is recomputed from the naive fixpoint of :mod:`rlvr.defab.naive` (an independent
oracle), so these tests check the generator and the graded reward together.
"""

import json
import random

import pytest
import typer
from typer.testing import CliRunner

from rlvr.defab.checks import classify_strength, graded_score, protected_expectations, well_formedness, LanguageBias
from rlvr.cli.defab import app as defab_app
from rlvr.defab.generate import Instance, exception_gold, generate, load_instances
from rlvr.defab.ground import ground
from rlvr.defab.kb import BUILTIN_KBS
from rlvr.defab.naive import derive_naive
from rlvr.defab.score import score_answer
from rlvr.defab.syntax import Literal, Rule, RuleKind, Superiority, TheoryError


def _l3(n=3, seed=11, **kw):
    return [i for kb in BUILTIN_KBS for i in generate(3, n, seed, kb=kb, strategy="mixed", **kw)]


def _oracle(inst: Instance, h: Rule, gamma: tuple) -> float:
    """The graded score recomputed with the naive engine (valid Level-3 shapes only)."""
    try:
        revised_theory = inst.theory.add(h, *gamma)
    except TheoryError:
        return 0.0
    revised = derive_naive(ground(revised_theory, "exhaustive", range_restricted=False))  # unsafe h: flagged
    if revised.proves(inst.target):
        return 0.0
    protected = protected_expectations(inst.theory, inst.target)
    lost = protected - revised.defeasible
    bias = LanguageBias.for_instance(inst.theory, inst.target)
    well_formed = not well_formedness(h, gamma, inst.theory, bias)
    lost = lost | (_probe_losses(inst, h, gamma) if well_formed else set())  # decision 8
    st = classify_strength(False, revised.proves(inst.target.complement()), not lost)
    return graded_score(True, well_formed, not lost, st)


def _probe_losses(inst: Instance, h: Rule, gamma: tuple) -> set:
    """Decision 8, recomputed with the naive engine: one probe individual per class (unary predicate of a
    fact or strict rule); the probes not strictly members of one of the anomaly individual's own classes
    must keep their expectations."""
    ind = inst.target.args[0]
    own = {f.predicate for f in inst.theory.facts if f.args == (ind,)}
    lits = [*inst.theory.facts, *(x for r in inst.theory.rules if r.kind is RuleKind.STRICT for x in (*r.body, r.head))]
    classes = {x.predicate for x in lits if len(x.args) == 1 and not x.negated} - {inst.target.predicate}
    probes = [Literal.of(c, f"probe_{c}") for c in sorted(classes)]
    plus = inst.theory.add(*probes)
    base = derive_naive(ground(plus, "exhaustive"))
    watched = {p.args[0] for p in probes if not any(Literal.of(c, p.args[0]) in base.definite for c in own)}
    keep = {q for q in base.defeasible if set(q.args) & watched}
    after = derive_naive(ground(plus.add(h, *gamma), "exhaustive", range_restricted=False))
    return keep - after.defeasible


def test_generated_level3_covers_both_hypothesis_types():
    insts = _l3()
    kinds = {i.gold.kind for i in insts}
    assert kinds == {RuleKind.DEFEATER, RuleKind.DEFEASIBLE}
    assert all(bool(i.gold_superiority) == (i.gold.kind is RuleKind.DEFEASIBLE) for i in insts)
    assert {i.gold.kind for i in _l3(n=2, exceptions=0.0)} == {RuleKind.DEFEATER}
    assert {i.gold.kind for i in _l3(n=2, exceptions=1.0)} == {RuleKind.DEFEASIBLE}
    with pytest.raises(ValueError, match="probability"):
        generate(3, 1, 0, exceptions=1.5)


def test_every_gold_verifies_with_the_strength_the_spec_gives():
    for inst in _l3():
        v = score_answer(inst.theory, inst.target, inst.gold_text, 3)
        assert v.score == 1.0 and v.details["conservative"] and v.details["minimal"], (inst.id, v)
        revised = derive_naive(inst.theory.add(inst.gold, *inst.gold_superiority))
        assert not revised.proves(inst.target)
        if inst.gold_superiority:  # exception with Γ ≠ ∅ deriving α, nothing else lost: restructuring
            assert revised.proves(inst.target.complement())
            assert v.details["strength"] == "restructuring"
            assert v.details["revision_distance"] == 1 + len(inst.gold_superiority)
            assert all(s.superior == inst.gold.label for s in inst.gold_superiority)
        else:  # a defeater derives neither the anomaly nor α: weak
            assert not revised.proves(inst.target.complement())
            assert v.details["strength"] == "weak" and v.details["revision_distance"] == 1


def test_exception_priority_is_needed_and_exactly_the_applicable_rules():
    insts = [i for i in _l3(n=2, exceptions=1.0)]
    for inst in insts:
        h, gamma = inst.gold, inst.gold_superiority
        # without Γ the exception and the default block each other: weak (still 1.0, decision 2)
        v = score_answer(inst.theory, inst.target, h, 3)
        assert v.details["strength"] == "weak" and v.score == 1.0
        # every pair is needed: dropping any one leaves α underived (team defeat needs all attackers beaten)
        for k in range(len(gamma)):
            rest = gamma[:k] + gamma[k + 1:]
            assert not derive_naive(inst.theory.add(h, *rest)).proves(inst.target.complement())
        # the exception rebuilt from the defeater form gives the same Γ
        defeater = Rule(h.label, RuleKind.DEFEATER, h.body, h.head)
        assert exception_gold(inst.theory, defeater, inst.target) == (h, gamma)


def _mutants(inst: Instance, rng: random.Random):
    h, gamma = inst.gold, inst.gold_superiority
    preds = sorted(inst.theory.predicates() - {h.head.predicate, h.body[0].predicate})
    other = sorted(r.label for r in inst.theory.rules if r.kind is RuleKind.DEFEASIBLE
                   and r.label not in {s.inferior for s in gamma})
    yield "head", Rule(h.label, h.kind, h.body, Literal.of(rng.choice(preds), "X", negated=True)), gamma
    yield "body", h.with_body([Literal.of(rng.choice(preds), "X")]), gamma
    yield "no body", h.with_body([]), gamma
    yield "reversed", h, tuple(Superiority(s.inferior, s.superior) for s in gamma)
    yield "other rule", h, (Superiority(h.label, rng.choice(other)),)
    yield "unknown rule", h, (Superiority(h.label, "zz9"),)
    yield "defeater", Rule(h.label, RuleKind.DEFEATER, h.body, h.head), gamma
    yield "strict", Rule(h.label, RuleKind.STRICT, h.body, h.head), ()
    yield "positive head", Rule(h.label, h.kind, h.body, h.head.complement()), gamma
    for r in inst.theory.rules:  # a broader class: the exception also hits the class's other members
        if r.kind is RuleKind.STRICT and r.body == h.body:
            yield "broader", h.with_body([Literal.of(r.head.predicate, "X")]), gamma


def test_mutated_exception_golds_score_lower_and_match_the_oracle():
    rng = random.Random(3)
    scores: dict = {}
    for inst in _l3(n=2, seed=5, exceptions=1.0):
        for kind, h, gamma in _mutants(inst, rng):
            got = score_answer(inst.theory, inst.target, h, 3, superiority=gamma).score
            scores.setdefault(kind, []).append(got)
            if kind == "strict":
                assert got == 0.0  # decision 6b: a strict rule is not a Level-3 answer
            elif kind in ("unknown rule", "reversed"):
                assert got < 1.0
            else:
                assert got == _oracle(inst, h, gamma), (inst.id, kind, str(h), gamma, got)
    # wrong heads, wrong or missing bodies and reversed priorities never earn full credit
    for kind in ("head", "no body", "reversed", "unknown rule", "strict", "positive head"):
        assert max(scores[kind]) < 1.0, (kind, scores[kind])
    assert min(scores["body"]) == 0.0
    # a broader exception derives α but loses the class's other members: strong, not conservative (0.75);
    # with decision 8 that holds even when the instance has no other member of the class (a probe is one)
    assert 0.75 in scores.get("broader", []), scores.get("broader")
    assert max(scores.get("broader", [0.0])) < 1.0, scores.get("broader")


def test_exception_gold_json_round_trip_and_cli(tmp_path):
    inst = next(i for i in _l3(n=2, exceptions=1.0))
    back = Instance.from_json(json.loads(json.dumps(inst.to_json())))
    assert back == inst and back.gold_superiority and "\n" in inst.gold_text
    root = typer.Typer()
    root.add_typer(defab_app, name="defab")
    root.callback()(lambda: None)
    out = tmp_path / "l3.jsonl"
    res = CliRunner().invoke(root, ["defab", "generate", "--level", "3", "-n", "3", "--out", str(out),
                                    "--exceptions", "1.0", "--distractors", "none"])
    assert res.exit_code == 0, res.output
    loaded = load_instances(out)
    assert all(i.gold_superiority and i.score(i.gold_text) == 1.0 for i in loaded)

"""Decision 8 on generated Level-3 instances: a revision more general than the evidence is not conservative.

``animal(X) ~> ~flies(X)`` for one observed penguin used to earn full credit on 15-31 of 40 generated
instances per knowledge base (the instance held no other flying animal, so conservativity had nothing to
protect). Conservativity now also covers probe individuals of the theory's classes that are unlike the
anomaly's individual (docs/verifiers.md, DeFAb decision 8). Every answer whose body is a strict superclass
of the individual's class, as a defeater or as an exception with priority, must stay below 1.0 over several
seeds and every shipped knowledge base, while the golds keep 1.0.
"""

import pytest

import rlvr.defab.score as score_mod
from rlvr.defab.checks import generality_probes
from rlvr.defab.engine import derive
from rlvr.defab.generate import exception_gold, generate
from rlvr.defab.kb import BUILTIN_KBS
from rlvr.defab.parser import parse_literal, parse_theory
from rlvr.defab.score import score_answer
from rlvr.defab.syntax import Literal, Rule, RuleKind

SEEDS = (0, 1, 2, 3)


@pytest.fixture(scope="module")
def instances():
    return {(kb, seed): generate(3, 12, seed, kb=kb, strategy="mixed") for kb in BUILTIN_KBS for seed in SEEDS}


def superclasses(inst):
    """Classes the anomaly's individual strictly belongs to, other than those it is stated to be."""
    ind = inst.target.args[0]
    own = {f.predicate for f in inst.theory.facts if f.args == (ind,)}
    return sorted({q.predicate for q in derive(inst.theory).definite if q.args == (ind,) and not q.negated} - own)


def broader(inst, cls):
    """The defeater and the exception with priority for the broader class ``cls``."""
    head = Literal.of(inst.target.predicate, "X", negated=True)
    defeater = Rule("x", RuleKind.DEFEATER, [Literal.of(cls, "X")], head)
    yield "defeater", defeater, ()
    yield "exception", *exception_gold(inst.theory, defeater, inst.target)


def test_answers_on_a_broader_class_never_earn_full_credit(instances):
    tried = 0
    for (kb, seed), insts in instances.items():
        for inst in insts:
            for cls in superclasses(inst):
                for kind, h, gamma in broader(inst, cls):
                    v = score_answer(inst.theory, inst.target, h, 3, superiority=gamma)
                    assert v.score < 1.0, (inst.id, kind, str(h), v)
                    if v.details.get("resolved") and v.details["well_formed"]:
                        assert not v.details["conservative"], (inst.id, str(h))
                        assert v.score == (0.75 if v.details["strength"] != "weak" else 0.5)
                    tried += 1
    assert tried > 300


def test_the_finding_reproduces_without_the_probes(instances, monkeypatch):
    """Without decision 8 the broader defeater earns 1.0 on a large share of the instances."""
    monkeypatch.setattr(score_mod, "_probes", lambda *a: None)
    full = 0
    for (kb, seed), insts in instances.items():
        for inst in insts:
            hits = [score_answer(inst.theory, inst.target, h, 3, superiority=g).score == 1.0
                    for cls in superclasses(inst) for _, h, g in broader(inst, cls)]
            full += any(hits)
    assert full >= len(instances) * 12 // 4, full


def test_golds_keep_full_credit_and_lose_no_probe(instances):
    for insts in instances.values():
        for inst in insts:
            v = score_answer(inst.theory, inst.target, inst.gold_text, 3)
            assert v.score == 1.0 and v.details["lost_probes"] == [], (inst.id, v)
            # the gold's class restated as a defeater is as good (the gold might be the exception form)
            d = Rule("x", RuleKind.DEFEATER, inst.gold.body, inst.gold.head)
            assert score_answer(inst.theory, inst.target, d, 3).score == 1.0


@pytest.mark.parametrize("exceptions", [0.0, 1.0])
def test_both_gold_types_on_synthetic_vocabulary(exceptions):
    for kb in BUILTIN_KBS:
        for inst in generate(3, 4, 7, kb=kb, strategy="mixed", nonsense=True, exceptions=exceptions):
            assert score_answer(inst.theory, inst.target, inst.gold_text, 3).score == 1.0
            for cls in superclasses(inst):
                for _, h, gamma in broader(inst, cls):
                    assert score_answer(inst.theory, inst.target, h, 3, superiority=gamma).score < 1.0


LONE_PENGUIN = parse_theory("""
penguin(pingu).
s1: penguin(X) -> bird(X).
s2: bird(X) -> animal(X).
s3: sparrow(X) -> bird(X).
r1: bird(X) => flies(X).
r2: bird(X) => lays_eggs(X).
r3: animal(X) => breathes(X).
""")


def test_a_lone_penguin():
    a = parse_literal("flies(pingu)")
    good = score_answer(LONE_PENGUIN, a, "x: penguin(X) ~> ~flies(X).", 3)
    assert good.score == 1.0 and good.details["conservative"]
    for body in ("bird(X)", "animal(X)", "lays_eggs(X)", "breathes(X)", "bird(X), animal(X)"):
        v = score_answer(LONE_PENGUIN, a, f"x: {body} ~> ~flies(X).", 3)
        assert v.score == 0.5 and v.details["lost"] == [] and v.details["lost_probes"], (body, v)
        assert "decision 8" in v.reason
    strong = score_answer(LONE_PENGUIN, a, "x: bird(X) => ~flies(X).\nx > r1.", 3)
    assert strong.score == 0.75 and strong.details["strength"] == "strong"
    probes = generality_probes(LONE_PENGUIN, a)
    assert probes.exempt == {"probe_penguin"} and "flies(probe_bird)" in map(str, probes.protected)
    assert "flies(probe_penguin)" not in map(str, probes.protected)


def test_evidence_decides_what_is_general_enough():
    # stated to be a penguin and injured: an exception for all penguins is broader than the evidence (the
    # penguin probe is a flying bird that is not injured); no class of the theory is injured and flies, so
    # injured(X) is not shown over-general, and the conjunction is then not minimal (decision 7b)
    t = LONE_PENGUIN.add(parse_literal("injured(pingu)"), *parse_theory("r4: injured(X) => rests(X).").rules)
    a = parse_literal("flies(pingu)")
    assert score_answer(t, a, "x: penguin(X) ~> ~flies(X).", 3).score == 0.5
    assert score_answer(t, a, "x: injured(X) ~> ~flies(X).", 3).score == 1.0
    assert score_answer(t, a, "x: penguin(X), injured(X) ~> ~flies(X).", 3).score == 0.75
    # a subclass of the individual's class is like it: nothing to protect there
    sub = LONE_PENGUIN.add(*parse_theory("s4: emperor(X) -> penguin(X).").rules)
    assert score_answer(sub, a, "x: penguin(X) ~> ~flies(X).", 3).score == 1.0
    # a body only the exception class satisfies in this theory is not shown wrong by any class
    swims = LONE_PENGUIN.add(*parse_theory("r5: penguin(X) => swims(X).").rules)
    assert score_answer(swims, a, "x: swims(X) ~> ~flies(X).", 3).score == 1.0


def test_theories_without_probes_are_unchanged():
    prop = parse_theory("b.\nr1: b => f.\n")
    assert generality_probes(prop, parse_literal("f")) is None
    assert score_answer(prop, parse_literal("f"), "x: b ~> ~f.", 3).score == 1.0


def test_the_reference_path_agrees(instances):
    for insts in list(instances.values())[:6]:
        for inst in insts[:6]:
            for cls in superclasses(inst)[:2]:
                for _, h, gamma in broader(inst, cls):
                    fast = score_answer(inst.theory, inst.target, h, 3, superiority=gamma)
                    slow = score_answer(inst.theory, inst.target, h, 3, superiority=gamma, reground=True)
                    assert fast == slow, (inst.id, str(h))

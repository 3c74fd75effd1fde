"""The incremental checker equals the reference path (re-ground D′ = D⁻ ∪ {h} ∪ Γ, derive all of it).

Two levels: the core (:class:`~rlvr.defab.incremental.Prepared`: +∂ of every literal, and the claim that
atoms outside ``affected`` keep their tags) on random datalog theories with loops, binary predicates,
body-only variables and superiority; and whole verdicts (score, reason, details) of ``score_answer`` on
generated instances of every level with golds and random or mutated hypotheses.
"""

import random

import pytest

from rlvr.defab.engine import derive
from rlvr.defab.generate import generate
from rlvr.defab.ground import ground
from rlvr.defab.incremental import Prepared
from rlvr.defab.kb import BUILTIN_KBS
from rlvr.defab.score import score_answer
from rlvr.defab.syntax import Atom, Literal, Rule, RuleKind, Superiority, TheoryError

from .randtheory import PREDS, datalog

KINDS = (RuleKind.STRICT, RuleKind.DEFEASIBLE, RuleKind.DEFEATER)


def _lit(rng, terms):
    pred, arity = rng.choice(PREDS)
    return Literal(Atom(pred, [rng.choice(terms) for _ in range(arity)]), rng.random() < 0.3)


def _hypothesis(rng, consts):
    """A fact or a rule (possibly unsafe, possibly with body-only variables) over ``consts``."""
    if rng.random() < 0.25:
        return _lit(rng, consts)
    body = [_lit(rng, ("X", "Y") + consts) for _ in range(rng.randint(0, 2))]
    return Rule("hh", rng.choice(KINDS), body, _lit(rng, ("X", "Y") + consts))


def _core_case(seed: int, new_consts: tuple = ("d",)) -> int:
    """Compare both paths on one random theory (hypotheses may bring ``new_consts``, constants D⁻ lacks);
    returns the number of comparisons made."""
    rng = random.Random(seed)
    consts = ("a", "b", "c")[:rng.randint(1, 3)]
    theory = datalog(rng, n_rules=rng.randint(3, 8), constants=consts, n_facts=rng.randint(1, 5))
    variant = rng.choice(["standard", "defab"])
    prep = Prepared(theory, variant)
    compared = 0
    for _ in range(4):
        new = new_consts if rng.random() < 0.3 else ()
        h = _hypothesis(rng, tuple(sorted(theory.constants())) + new)
        gamma = [Superiority("hh", rng.choice(theory.rules).label)] if isinstance(h, Rule) and rng.random() < .5 \
            else []
        try:
            revised = theory.add(h, *gamma)
        except TheoryError:
            continue
        want = derive(ground(revised, range_restricted=False), variant)
        queries = list(want.universe | prep.base.universe)
        got = prep.tags(h, gamma, queries)
        assert got == {q for q in queries if q in want.defeasible}, (seed, str(h), gamma, str(theory))
        affected = prep.affected(h)
        if affected is not None:
            for q in queries:
                if q.atom not in affected:
                    assert (q in prep.base.defeasible) == (q in want.defeasible), (seed, str(h), str(q))
        else:
            assert new and set(new) & set(h.args if isinstance(h, Literal) else
                                           [a for lit in (*h.body, h.head) for a in lit.args])
        compared += 1
    return compared


def test_core_matches_reference_on_random_datalog():
    assert sum(_core_case(seed) for seed in range(250)) > 700


def test_core_matches_reference_with_two_new_constants():
    # literals on new constants are pruned through their renamings into the old ones (module docstring)
    assert sum(_core_case(seed, ("d", "e")) for seed in range(5000, 5200)) > 700


@pytest.mark.slow
def test_core_matches_reference_on_many_random_datalog():
    assert sum(_core_case(seed) for seed in range(250, 5000)) > 14000


def _answers(inst, rng):
    """The gold, its superiority pairs, and random hypotheses over the instance's vocabulary."""
    t, g = inst.theory, inst.gold
    preds = sorted(t.predicates() | {inst.target.predicate})
    consts = sorted(t.constants() | set(inst.target.args))
    labels = sorted(t.labels)
    out = [(g, inst.gold_superiority), (g, ())]
    for _ in range(6):
        if inst.level == 1 or rng.random() < 0.1:
            out.append((Literal.of(rng.choice(preds), rng.choice(consts), negated=rng.random() < .2), ()))
            continue
        body = [Literal.of(rng.choice(preds), rng.choice(("X", "X", rng.choice(consts))), negated=rng.random() < .1)
                for _ in range(rng.choice((0, 1, 1, 2)))]
        head = Literal.of(rng.choice((inst.target.predicate, rng.choice(preds))), "X",
                          negated=inst.level == 3 and rng.random() < .7)
        kind = rng.choice(KINDS) if inst.level == 3 else RuleKind.DEFEASIBLE
        gamma = (Superiority("h1", rng.choice(labels)),) if inst.level == 3 and rng.random() < .4 else ()
        out.append((Rule("h1", kind, body, head), gamma))
    return out


@pytest.mark.parametrize("level", [1, 2, 3])
def test_verdicts_match_reference_on_generated_instances(level):
    rng = random.Random(level)
    n = 0
    for kb in BUILTIN_KBS:
        for inst in generate(level, 3, 21, kb=kb, strategy="mixed"):
            variant = rng.choice(["standard", "defab"])
            for h, gamma in _answers(inst, rng):
                fast = score_answer(inst.theory, inst.target, h, level, superiority=gamma, variant=variant)
                slow = score_answer(inst.theory, inst.target, h, level, superiority=gamma, variant=variant,
                                    reground=True)
                assert fast == slow, (inst.id, str(h), gamma)
                n += 1
    assert n == 4 * 3 * 8


def test_fast_path_is_used_for_new_individuals():
    """A Level-1 gold names an individual whose only fact was removed: still the incremental path."""
    inst = next(i for i in generate(1, 6, 0, kb="animals") if not set(i.gold.args) <= i.theory.constants())
    prep = Prepared(inst.theory)
    assert prep.tags(inst.gold, (), [inst.target]) == {inst.target}
    assert prep.affected(inst.gold) is None  # Level-3 conservativity falls back for such hypotheses

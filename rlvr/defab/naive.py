"""A deliberately naive reference for :func:`rlvr.defab.engine.derive`, used only by tests.

It restates the four proof conditions of Antoniou et al. (ACM TOCL 2001) literally — see
:mod:`rlvr.defab.engine` for them and for the two logic variants — and applies them to every literal of
the ground theory, sweep after sweep, until nothing changes: the least fixpoint, which is what finite
proofs define. No counters, no interning, no incremental bookkeeping: at least quadratic, and easy to
check against the definitions line by line.
"""

from __future__ import annotations

from typing import Union

from rlvr.defab.engine import Conclusions, Logic, resolve_variant
from rlvr.defab.ground import GroundTheory, ground
from rlvr.defab.syntax import Literal, Rule, RuleKind, Theory

__all__ = ["derive_naive"]


def derive_naive(theory: Union[Theory, GroundTheory], variant: Union[str, Logic] = "standard", *,
                 grounding: str = "exhaustive") -> Conclusions:
    """The conclusions by fixpoint iteration; grounds exhaustively by default (the definition)."""
    logic = resolve_variant(variant)
    gt = ground(theory, grounding) if isinstance(theory, Theory) else theory
    universe = gt.literals()
    rules_for: dict[Literal, list[Rule]] = {}
    for r in gt.rules:
        rules_for.setdefault(r.head, []).append(r)
    tags: dict[str, set] = {"+D": set(), "-D": set(), "+d": set(), "-d": set()}
    ctx = (gt, logic, rules_for, tags)
    changed = True
    while changed:
        changed = False
        for q in universe:
            for tag, cond in (("+D", _plus_delta), ("-D", _minus_delta), ("+d", _plus_partial),
                              ("-d", _minus_partial)):
                if q not in tags[tag] and cond(q, *ctx):
                    tags[tag].add(q)
                    changed = True
    return Conclusions(frozenset(tags["+D"]), frozenset(tags["+d"]), frozenset(tags["-D"]),
                       frozenset(tags["-d"]), frozenset(universe), logic)


def _strict(q, rules_for):
    return [r for r in rules_for.get(q, ()) if r.kind is RuleKind.STRICT]


def _supporters(q, logic, rules_for):
    """Sup[q]: Rsd[q] in the standard logic, Rd[q] in the DeFAb variant."""
    return [r for r in rules_for.get(q, ()) if r.kind is RuleKind.DEFEASIBLE
            or (r.kind is RuleKind.STRICT and logic.strict_support)]


def _attackers(q, logic, rules_for):
    """Att[q]: R[~q] in the standard logic, (Rd ∪ Rdf)[~q] in the DeFAb variant."""
    return [r for r in rules_for.get(q.complement(), ()) if r.kind is not RuleKind.STRICT or logic.strict_attack]


def _plus_delta(q, gt, logic, rules_for, tags):
    return q in gt.facts or any(all(a in tags["+D"] for a in r.body) for r in _strict(q, rules_for))


def _minus_delta(q, gt, logic, rules_for, tags):
    return q not in gt.facts and all(any(a in tags["-D"] for a in r.body) for r in _strict(q, rules_for))


def _plus_partial(q, gt, logic, rules_for, tags):
    if q in tags["+D"]:
        return True
    plus, minus = tags["+d"], tags["-d"]
    applicable = [t for t in _supporters(q, logic, rules_for) if all(a in plus for a in t.body)]
    if not applicable or q.complement() not in tags["-D"]:
        return False
    return all(any(a in minus for a in s.body) or any((t.label, s.label) in gt.superiority for t in applicable)
               for s in _attackers(q, logic, rules_for))


def _minus_partial(q, gt, logic, rules_for, tags):
    if q not in tags["-D"]:
        return False
    plus, minus = tags["+d"], tags["-d"]
    supporters = _supporters(q, logic, rules_for)
    if all(any(a in minus for a in r.body) for r in supporters) or q.complement() in tags["+D"]:
        return True
    return any(all(a in plus for a in s.body)
               and all(any(a in minus for a in t.body) or (t.label, s.label) not in gt.superiority
                       for t in supporters)
               for s in _attackers(q, logic, rules_for))

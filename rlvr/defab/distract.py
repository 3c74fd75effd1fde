"""Distractors for DeFAb instances: statements that are irrelevant to the target or look like the answer.

DeFAb adds k = 5 distractors per instance (docs/verifiers.md, DeFAb distractors); the strategies are:

- ``random``: KB edges outside the instance's slice (taxonomy, property and exception edges of classes
  no individual of the instance belongs to), so they share no derivation with the target;
- ``syntactic``: statements sharing a predicate with the target or the gold (``c'(X) => q(X)`` for a
  class c' the target's individual is not in, ``gold_body(X) => p'(X)``, facts ``q(j)`` about others);
- ``adversarial``: near-misses of the gold: the gold fact about another individual or about a sibling
  class, the gold rule with its head or body predicate substituted (DeFAb's predicate substitution and
  argument permutation; with unary predicates a permutation is a change of constant);
- ``mixed``: all of the above; ``none``: no distractors.

A distractor is kept only if, with it, D⁻ still does not derive the target (Levels 1–2) or the anomaly
is still a defeasible anomaly (Level 3) *and* the gold still scores 1.0: distractors must never change
the answer. Candidates are tried in a seeded order until k are kept or the pool runs out.
"""

from __future__ import annotations

import random

from rlvr.defab.checks import InstanceError
from rlvr.defab.kb import KB
from rlvr.defab.names import DISTRACTOR_STRATEGIES
from rlvr.defab.score import score_answer
from rlvr.defab.syntax import Literal, Rule, RuleKind, Theory

__all__ = ["STRATEGIES", "add_distractors", "distractor_pool"]

STRATEGIES = DISTRACTOR_STRATEGIES


def _lit(pred: str, arg: str, negated: bool = False) -> Literal:
    return Literal.of(pred, arg, negated=negated)


def _rule(kind: RuleKind, body: str, head: str, negated: bool = False) -> tuple:
    return ("rule", kind, body, head, negated)


def _random_pool(kb: KB, theory: Theory) -> list:
    present = theory.predicates()
    out = [_rule(RuleKind.STRICT, c, p) for c, p in kb.isa if c not in present]
    out += [_rule(RuleKind.DEFEASIBLE, c, p) for c, p in kb.props if c not in present]
    out += [_rule(RuleKind.DEFEATER, c, p, True) for c, p in kb.exceptions if c not in present]
    return out


def _syntactic_pool(kb: KB, theory: Theory, gold, target: Literal) -> list:
    others = sorted(theory.constants() - set(target.args))
    gold_pred = gold.predicate if isinstance(gold, Literal) else gold.body[0].predicate
    out = [_rule(RuleKind.DEFEASIBLE, c, target.predicate) for c in kb.classes if c != gold_pred]
    out += [_rule(RuleKind.DEFEASIBLE, gold_pred, p) for p in kb.properties if p != target.predicate]
    out += [("fact", _lit(target.predicate, j)) for j in others]
    return out


def _siblings(kb: KB, cls: str) -> list[str]:
    parents = {p for c, p in kb.isa if c == cls}
    return [c for c, p in kb.isa if p in parents and c != cls] or [c for c in kb.classes if c != cls]


def _adversarial_pool(kb: KB, theory: Theory, gold, target: Literal) -> list:
    if isinstance(gold, Literal):
        others = sorted(theory.constants() - set(gold.args)) + [i for i, _ in kb.instances]
        out = [("fact", _lit(gold.predicate, j)) for j in dict.fromkeys(others) if j != gold.args[0]]
        return out + [("fact", _lit(c, gold.args[0])) for c in _siblings(kb, gold.predicate)]
    body, head = gold.body[0].predicate, gold.head.predicate
    neg = gold.head.negated
    out = [_rule(gold.kind, c, head, neg) for c in _siblings(kb, body)]
    return out + [_rule(gold.kind, body, p, neg) for p in kb.properties if p != head]


def distractor_pool(kb: KB, theory: Theory, gold, target: Literal, strategy: str) -> list:
    """Candidate distractors (as ``("fact", lit)`` or ``("rule", kind, body, head, negated)`` specs)."""
    if strategy not in STRATEGIES:
        raise ValueError(f"unknown distractor strategy {strategy!r}; choose one of {', '.join(STRATEGIES)}")
    pools = {"random": lambda: _random_pool(kb, theory),
             "syntactic": lambda: _syntactic_pool(kb, theory, gold, target),
             "adversarial": lambda: _adversarial_pool(kb, theory, gold, target)}
    if strategy == "none":
        return []
    if strategy == "mixed":
        return [c for name in ("random", "syntactic", "adversarial") for c in pools[name]()]
    return pools[strategy]()


def _build(spec: tuple, label: str):
    if spec[0] == "fact":
        return spec[1]
    _, kind, body, head, negated = spec
    return Rule(label, kind, [_lit(body, "X")], _lit(head, "X", negated))


def _still_valid(theory: Theory, gold, target: Literal, level: int) -> bool:
    try:
        return score_answer(theory, target, gold, level).score == 1.0
    except InstanceError:  # the distractor made D⁻ derive q, or dissolved the anomaly
        return False


def _shape(e):
    return (e.kind, e.body, e.head) if isinstance(e, Rule) else e


def _duplicate(element, theory: Theory, gold) -> bool:
    """Already in the theory, or the gold itself (a distractor must never hand out the answer)."""
    return _shape(element) == _shape(gold) or _shape(element) in {_shape(e) for e in theory.elements()}


def add_distractors(theory: Theory, kb: KB, gold, target: Literal, level: int, strategy: str, k: int,
                    rng: random.Random) -> tuple[Theory, list]:
    """Add up to ``k`` distractors that leave the gold the right answer; returns (theory, added)."""
    pool = list(dict.fromkeys(distractor_pool(kb, theory, gold, target, strategy)))
    rng.shuffle(pool)
    added: list = []
    for spec in pool[: 4 * k]:  # bounded work: each check derives the theory twice
        if len(added) >= k:
            break
        element = _build(spec, f"x{len(added) + 1}")
        if _duplicate(element, theory, gold):
            continue
        candidate = theory.add(element)
        if _still_valid(candidate, gold, target, level):
            theory = candidate
            added.append(element)
    return theory, added

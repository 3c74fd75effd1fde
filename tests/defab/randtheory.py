"""Seeded random generators of small propositional and datalog defeasible theories for property tests."""

from __future__ import annotations

import random

from rlvr.defab.syntax import Atom, Literal, Rule, RuleKind, Superiority, Theory

KINDS = (RuleKind.STRICT, RuleKind.DEFEASIBLE, RuleKind.DEFEASIBLE, RuleKind.DEFEATER)


def _superiority(rng: random.Random, rules: list[Rule], p: float) -> list[Superiority]:
    """Random pairs oriented along a random permutation, so the relation is acyclic by construction."""
    order = list(rules)
    rng.shuffle(order)
    return [Superiority(order[i].label, order[j].label)
            for i in range(len(order)) for j in range(i + 1, len(order)) if rng.random() < p]


def propositional(rng: random.Random, n_atoms: int = 5, n_rules: int = 8, max_body: int = 2,
                  p_fact: float = 0.15, p_sup: float = 0.15) -> Theory:
    atoms = [Atom(f"p{i}") for i in range(n_atoms)]

    def lit() -> Literal:
        return Literal(rng.choice(atoms), rng.random() < 0.4)

    facts = [lit() for _ in range(n_atoms) if rng.random() < p_fact * 2]
    rules = [Rule(f"r{i}", rng.choice(KINDS), [lit() for _ in range(rng.randint(0, max_body))], lit())
             for i in range(n_rules)]
    return Theory(facts, rules, _superiority(rng, rules, p_sup))


PREDS = (("p", 1), ("q", 1), ("r", 2), ("s", 1))


def datalog(rng: random.Random, n_rules: int = 6, constants: tuple = ("a", "b"), n_facts: int = 4,
            p_sup: float = 0.15, loops: bool = True) -> Theory:
    """Range-restricted datalog rules over p/1, q/1, r/2, s/1 with variables X, Y (and self-loops)."""

    def lit(terms) -> Literal:
        pred, arity = rng.choice(PREDS)
        return Literal(Atom(pred, [rng.choice(terms) for _ in range(arity)]), rng.random() < 0.3)

    facts = [lit(constants) for _ in range(n_facts)]
    rules = []
    for i in range(n_rules):
        body = [lit(("X", "Y") + constants) for _ in range(rng.randint(1, 2))]
        if loops and rng.random() < 0.15:
            rules.append(Rule(f"r{i}", RuleKind.DEFEASIBLE, body[:1], body[0]))
            continue
        bound = sorted({v for b in body for v in b.variables}) or list(constants)
        head = lit(tuple(bound) + constants[:1])
        rules.append(Rule(f"r{i}", rng.choice(KINDS), body, head))
    return Theory(facts, rules, _superiority(rng, rules, p_sup))

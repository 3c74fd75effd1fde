"""Data model of defeasible theories: literals, rules, superiority, theories.

A defeasible theory is D = (F, Rs, Rd, Rdf, ≻) (DeFAb, Cooper & Velasquez, arXiv 2606.18557, §2;
Antoniou, Billington, Governatori & Maher, "Representation Results for Defeasible Logic", ACM TOCL
2001): facts F, strict rules ``b1, .., bn -> h``, defeasible rules ``b1, .., bn => h``, defeaters
``b1, .., bn ~> h`` (which can block a conclusion but never support one) and an acyclic superiority
relation ≻ between rule labels.

Terms are datalog terms (no function symbols, so the "nesting depth" of DeFAb's language bias is always
0). A term is a **variable** when it starts with an uppercase letter (``X``, ``Bird``) or with ``?``
(``?x``); every other term is a **constant** and must start with a lowercase letter or a digit
(``tweety``, ``42``). Predicates start with a lowercase letter. Literals carry strong negation ``~``.

Every object is immutable and hashable, and ``str`` gives the canonical text form that
:mod:`rlvr.defab.parser` reads back: ``parse_theory(str(t)) == t``.
"""

from __future__ import annotations

import enum
import re
from typing import Iterable, Iterator, Union

from rlvr.defab.graph import find_cycle

__all__ = ["TheoryError", "is_variable", "Atom", "Literal", "RuleKind", "Rule", "Superiority", "Theory",
           "Element"]

PREDICATE_RE = re.compile(r"[a-z][A-Za-z0-9_]*\Z")
CONSTANT_RE = re.compile(r"[a-z0-9][A-Za-z0-9_]*\Z")
VARIABLE_RE = re.compile(r"(?:[A-Z][A-Za-z0-9_]*|\?[A-Za-z0-9_]+)\Z")
LABEL_RE = re.compile(r"[A-Za-z_][A-Za-z0-9_]*\Z")


class TheoryError(ValueError):
    """An ill-formed theory: duplicate labels, unknown or cyclic superiority, non-ground facts, bad names."""


def is_variable(term: str) -> bool:
    """Datalog convention: a variable starts with an uppercase letter or ``?``."""
    return term[:1] == "?" or term[:1].isupper()


class _Frozen:
    """Immutable value object with a cached hash (ground theories hash millions of literals)."""

    __slots__ = ()

    def __setattr__(self, name, value):
        raise AttributeError(f"{type(self).__name__} is immutable")

    def __delattr__(self, name):
        raise AttributeError(f"{type(self).__name__} is immutable")

    def __repr__(self) -> str:
        return f"{type(self).__name__}({str(self)!r})"


class Atom(_Frozen):
    """``predicate(arg1, .., argn)``; a propositional atom has no arguments."""

    __slots__ = ("predicate", "args", "_hash")

    def __init__(self, predicate: str, args: Iterable[str] = ()):
        args = tuple(args)
        if not isinstance(predicate, str) or not PREDICATE_RE.match(predicate):
            raise TheoryError(f"bad predicate name {predicate!r}: must start with a lowercase letter")
        for a in args:
            if not isinstance(a, str) or not (CONSTANT_RE.match(a) or VARIABLE_RE.match(a)):
                raise TheoryError(f"bad term {a!r} in {predicate}/{len(args)}: constants start with a lowercase "
                                  "letter or digit, variables with an uppercase letter or '?'")
        _init_atom(self, predicate, args)

    @classmethod
    def _trusted(cls, predicate: str, args: tuple) -> "Atom":
        """Skip validation: the grounder builds atoms from already validated names."""
        a = object.__new__(cls)
        _init_atom(a, predicate, args)
        return a

    @property
    def is_ground(self) -> bool:
        return not any(is_variable(a) for a in self.args)

    @property
    def variables(self) -> tuple[str, ...]:
        return tuple(dict.fromkeys(a for a in self.args if is_variable(a)))

    def __eq__(self, other) -> bool:
        return (self is other or isinstance(other, Atom) and self._hash == other._hash
                and self.predicate == other.predicate and self.args == other.args)

    def __hash__(self) -> int:
        return self._hash

    def __str__(self) -> str:
        return f"{self.predicate}({','.join(self.args)})" if self.args else self.predicate


def _init_atom(a: Atom, predicate: str, args: tuple) -> None:
    object.__setattr__(a, "predicate", predicate)
    object.__setattr__(a, "args", args)
    object.__setattr__(a, "_hash", hash((predicate, args)))


class Literal(_Frozen):
    """An atom or its strong negation ``~atom``. ``complement`` swaps the two (the paper's ~q)."""

    __slots__ = ("atom", "negated", "_hash")

    def __init__(self, atom: Atom, negated: bool = False):
        if not isinstance(atom, Atom):
            raise TheoryError(f"a literal needs an Atom, got {atom!r}")
        _init_literal(self, atom, bool(negated))

    @classmethod
    def of(cls, predicate: str, *args: str, negated: bool = False) -> "Literal":
        """Convenience: ``Literal.of("flies", "tweety", negated=True)`` is ``~flies(tweety)``."""
        return cls(Atom(predicate, args), negated)

    @classmethod
    def _trusted(cls, atom: Atom, negated: bool) -> "Literal":
        lit = object.__new__(cls)
        _init_literal(lit, atom, negated)
        return lit

    @property
    def predicate(self) -> str:
        return self.atom.predicate

    @property
    def args(self) -> tuple[str, ...]:
        return self.atom.args

    @property
    def is_ground(self) -> bool:
        return self.atom.is_ground

    @property
    def variables(self) -> tuple[str, ...]:
        return self.atom.variables

    @property
    def key(self) -> tuple[bool, str, int]:
        """Signed predicate with arity: literals with the same key compete for the same ground atoms."""
        return (self.negated, self.atom.predicate, len(self.atom.args))

    def complement(self) -> "Literal":
        return Literal._trusted(self.atom, not self.negated)

    def __eq__(self, other) -> bool:
        return (self is other or isinstance(other, Literal) and self._hash == other._hash
                and self.negated == other.negated and self.atom == other.atom)

    def __hash__(self) -> int:
        return self._hash

    def __str__(self) -> str:
        return f"~{self.atom}" if self.negated else str(self.atom)


def _init_literal(lit: Literal, atom: Atom, negated: bool) -> None:
    object.__setattr__(lit, "atom", atom)
    object.__setattr__(lit, "negated", negated)
    object.__setattr__(lit, "_hash", hash((atom._hash, negated)))


class RuleKind(enum.Enum):
    """The three rule kinds; the value is the arrow of the text form."""

    STRICT = "->"
    DEFEASIBLE = "=>"
    DEFEATER = "~>"


class Rule(_Frozen):
    """``label: b1, .., bn ARROW head`` with ARROW ``->`` (strict), ``=>`` (defeasible), ``~>`` (defeater).

    Body order is kept as written (it is part of equality and of the text form) but carries no meaning.
    In a ground theory several instances of one rule share its label: superiority is between labels.
    """

    __slots__ = ("label", "kind", "body", "head", "_hash")

    def __init__(self, label: str, kind: RuleKind, body: Iterable[Literal], head: Literal):
        body = tuple(body)
        if not isinstance(label, str) or not LABEL_RE.match(label):
            raise TheoryError(f"bad rule label {label!r}: letters, digits and '_', not starting with a digit")
        if not isinstance(kind, RuleKind):
            raise TheoryError(f"bad rule kind {kind!r}")
        if not isinstance(head, Literal) or not all(isinstance(b, Literal) for b in body):
            raise TheoryError(f"rule {label}: head and body must be literals")
        _init_rule(self, label, kind, body, head)

    @classmethod
    def _trusted(cls, label: str, kind: RuleKind, body: tuple, head: Literal) -> "Rule":
        r = object.__new__(cls)
        _init_rule(r, label, kind, body, head)
        return r

    @property
    def is_ground(self) -> bool:
        return self.head.is_ground and all(b.is_ground for b in self.body)

    @property
    def variables(self) -> tuple[str, ...]:
        """Variables in order of first occurrence, body first."""
        seen: dict[str, None] = {}
        for lit in (*self.body, self.head):
            seen.update(dict.fromkeys(lit.variables))
        return tuple(seen)

    @property
    def unsafe_variables(self) -> tuple[str, ...]:
        """Head variables missing from the body: a rule is range-restricted when this is empty."""
        body_terms = {a for b in self.body for a in b.atom.args}  # a constant never equals a variable
        return tuple(v for v in self.head.variables if v not in body_terms)

    def with_body(self, body: Iterable[Literal]) -> "Rule":
        return Rule(self.label, self.kind, body, self.head)

    def with_label(self, label: str) -> "Rule":
        return Rule(label, self.kind, self.body, self.head)

    def __eq__(self, other) -> bool:
        return (self is other or isinstance(other, Rule) and self._hash == other._hash and self.label == other.label
                and self.kind is other.kind and self.head == other.head and self.body == other.body)

    def __hash__(self) -> int:
        return self._hash

    def __str__(self) -> str:
        body = ", ".join(map(str, self.body))
        return f"{self.label}: {body + ' ' if body else ''}{self.kind.value} {self.head}."


def _init_rule(r: Rule, label: str, kind: RuleKind, body: tuple, head: Literal) -> None:
    object.__setattr__(r, "label", label)
    object.__setattr__(r, "kind", kind)
    object.__setattr__(r, "body", body)
    object.__setattr__(r, "head", head)
    object.__setattr__(r, "_hash", hash((label, kind, body, head)))


class Superiority(_Frozen):
    """``superior > inferior`` between rule labels (the paper's r1 ≻ r2)."""

    __slots__ = ("superior", "inferior", "_hash")

    def __init__(self, superior: str, inferior: str):
        for lab in (superior, inferior):
            if not isinstance(lab, str) or not LABEL_RE.match(lab):
                raise TheoryError(f"bad rule label {lab!r} in superiority")
        object.__setattr__(self, "superior", superior)
        object.__setattr__(self, "inferior", inferior)
        object.__setattr__(self, "_hash", hash((superior, inferior)))

    def __eq__(self, other) -> bool:
        return isinstance(other, Superiority) and (self.superior, self.inferior) == (other.superior, other.inferior)

    def __hash__(self) -> int:
        return self._hash

    def __str__(self) -> str:
        return f"{self.superior} > {self.inferior}."


Element = Union[Literal, Rule, Superiority]


class Theory(_Frozen):
    """D = (F, Rs, Rd, Rdf, ≻), validated on construction (raises :class:`TheoryError`).

    Checks: facts are ground; rule labels are unique; superiority names existing labels, never a rule
    over itself, and is acyclic (the DeFAb and Antoniou et al. definitions require it). Elements keep
    the order they were given in (for printing); equality and hashing ignore order and duplicates.
    """

    __slots__ = ("facts", "rules", "superiority", "_by_label", "_hash", "_memo")

    def __init__(self, facts: Iterable[Literal] = (), rules: Iterable[Rule] = (),
                 superiority: Iterable[Superiority] = ()):
        facts, rules, sup = (tuple(dict.fromkeys(x)) for x in (facts, rules, superiority))
        for f in facts:
            if not isinstance(f, Literal) or not f.is_ground:
                raise TheoryError(f"a fact must be a ground literal: {f}")
        by_label: dict[str, Rule] = {}
        for r in rules:
            if not isinstance(r, Rule):
                raise TheoryError(f"not a rule: {r!r}")
            if r.label in by_label:
                raise TheoryError(f"duplicate rule label {r.label!r}")
            by_label[r.label] = r
        _check_superiority(sup, by_label)
        for name, value in (("facts", facts), ("rules", rules), ("superiority", sup), ("_by_label", by_label)):
            object.__setattr__(self, name, value)
        object.__setattr__(self, "_hash", hash((frozenset(facts), frozenset(rules), frozenset(sup))))
        object.__setattr__(self, "_memo", {})  # derived sets computed once (the theory is immutable)

    def rule(self, label: str) -> Rule:
        try:
            return self._by_label[label]
        except KeyError:
            raise KeyError(f"no rule labelled {label!r}") from None

    @property
    def labels(self) -> frozenset[str]:
        out = self._memo.get("labels")
        if out is None:
            out = self._memo["labels"] = frozenset(self._by_label)
        return out

    def elements(self) -> Iterator[Union[Literal, Rule]]:
        """Facts, then rules: the candidates e of DeFAb's criticality Crit*(D, q)."""
        yield from self.facts
        yield from self.rules

    def add(self, *elements: Element) -> "Theory":
        """A new theory with extra facts, rules or superiority pairs (validated again)."""
        facts, rules, sup = list(self.facts), list(self.rules), list(self.superiority)
        for e in elements:
            {Literal: facts, Rule: rules, Superiority: sup}[type(e)].append(e)
        return Theory(facts, rules, sup)

    def remove(self, element: Element) -> "Theory":
        """Drop one element; dropping a rule also drops every superiority pair naming it (DeFAb L3 step 2)."""
        if isinstance(element, Rule):
            return Theory(self.facts, [r for r in self.rules if r != element],
                          [s for s in self.superiority if element.label not in (s.superior, s.inferior)])
        return Theory([f for f in self.facts if f != element], self.rules,
                      [s for s in self.superiority if s != element])

    def constants(self) -> frozenset[str]:
        out = self._memo.get("constants")
        if out is None:
            lits = [*self.facts, *(lit for r in self.rules for lit in (*r.body, r.head))]
            out = self._memo["constants"] = frozenset(a for lit in lits for a in lit.args if not is_variable(a))
        return out

    def predicates(self) -> frozenset[str]:
        out = self._memo.get("predicates")
        if out is None:
            lits = [*self.facts, *(lit for r in self.rules for lit in (*r.body, r.head))]
            out = self._memo["predicates"] = frozenset(lit.predicate for lit in lits)
        return out

    def fresh_label(self, stem: str = "h") -> str:
        """A label not used in this theory: ``stem``, else ``stem_1``, ``stem_2``, ..."""
        label, i = stem, 0
        while label in self._by_label:
            i += 1
            label = f"{stem}_{i}"
        return label

    def __eq__(self, other) -> bool:
        return (isinstance(other, Theory) and self._hash == other._hash
                and frozenset(self.facts) == frozenset(other.facts)
                and frozenset(self.rules) == frozenset(other.rules)
                and frozenset(self.superiority) == frozenset(other.superiority))

    def __hash__(self) -> int:
        return self._hash

    def __str__(self) -> str:
        lines = [f"{f}." for f in self.facts] + [str(r) for r in self.rules] + [str(s) for s in self.superiority]
        return "".join(line + "\n" for line in lines)

    def __repr__(self) -> str:
        return f"Theory({len(self.facts)} facts, {len(self.rules)} rules, {len(self.superiority)} superiority)"


def _check_superiority(sup: tuple, by_label: dict) -> None:
    """Labels must exist and ≻ must be acyclic (a cycle would let rules defeat each other)."""
    succ: dict[str, list[str]] = {}
    for s in sup:
        if not isinstance(s, Superiority):
            raise TheoryError(f"not a superiority pair: {s!r}")
        for lab in (s.superior, s.inferior):
            if lab not in by_label:
                raise TheoryError(f"superiority {s} names unknown rule label {lab!r}")
        if s.superior == s.inferior:
            raise TheoryError(f"superiority {s} puts a rule above itself")
        succ.setdefault(s.superior, []).append(s.inferior)
    cycle = find_cycle(succ)
    if cycle:
        raise TheoryError("superiority is cyclic: " + " > ".join(cycle))

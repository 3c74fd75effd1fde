"""Procedural DeFAb instances (Levels 1–3) from a knowledge base of :mod:`rlvr.defab.kb`.

Construction (DeFAb §3, type-grounded family κ_type; docs/verifiers.md, DeFAb instances from knowledge bases):

1. Pick ``n_individuals`` individuals of the KB (seeded) and keep the KB slice above their classes:
   facts ``class(ind)``, strict rules ``child(X) -> parent(X)`` from ``isa``, defeasible rules
   ``class(X) => property(X)`` from ``prop``, defeaters ``class(X) ~> ~property(X)`` from ``except``.
   Exceptions are defeaters without superiority: a defeater blocks any rule it is not inferior to, so
   none is needed, and the exception never asserts ~property (a defeater never supports).
2. List the candidate (removed element e, target q) pairs of the level and pick one:
   - L1: e is a fact ``class(ind)``, q a literal about ``ind`` derived (+∂) in D;
   - L2: e is a defeasible rule ``class(X) => p(X)``, q = ``p(ind)`` derived in D;
   - L3: e is a defeater ``c(X) ~> ~p(X)``, the anomaly is ``p(ind)``: derived in D∖{e} but not in D.
   D⁻ = D∖{e}; e is critical (e ∈ Crit*(D, q)) because D⁻ no longer derives q, which is checked.
   Level-3 golds come in the two hypothesis types of DeFAb §5 (docs/verifiers.md, DeFAb theories and levels):
   with probability ``exceptions`` the gold is the **exception with priority** ``h1: c(X) => ~p(X).`` plus
   ``h1 > r.`` for every defeasible rule or defeater r of D⁻ whose instance for ind supports p(ind) and is
   applicable (so D′ derives ~p(ind): a conservative strong resolution, "restructuring"); otherwise the
   defeater ``h1: c(X) ~> ~p(X).`` (a conservative weak resolution). Both score 1.0 (decision 2); an
   exception gold is kept only if it verifies as restructuring, else the instance falls back to the defeater.
3. Add distractors (:mod:`rlvr.defab.distract`), shuffle statement order, relabel rules by kind
   (``s1.., r1.., d1..``) so that neither order nor a label gap gives the answer away; the gold rule is
   labelled ``h1``.
4. Keep the instance only if the gold hypothesis (with its superiority pairs Γ) scores 1.0 under
   :func:`rlvr.defab.score.score_answer` (the same check the reward uses); otherwise retry.

Everything is seeded: instance ``k`` of ``(kb, level, seed)`` uses ``Random(f"{kb}/{level}/{seed}/{k}")``,
so the same arguments always give the same instances, and ``n`` only decides how many are drawn.
"""

from __future__ import annotations

import random
from dataclasses import dataclass, field
from typing import Iterator, Union

from rlvr.defab.engine import derive
from rlvr.defab.kb import KB, load_kb
from rlvr.defab.parser import parse_literal, parse_theory
from rlvr.defab.score import decode_answer, prepare, score_answer
from rlvr.defab.syntax import Literal, Rule, RuleKind, Superiority, Theory

__all__ = ["Instance", "GenerationError", "generate", "generate_one", "kb_theory", "glossary_of", "load_instances",
           "LEVELS"]

Hypothesis = Union[Literal, Rule]
LEVELS = (1, 2, 3)
_TRIES = 60


class GenerationError(RuntimeError):
    """The KB admits no instance of the requested level (e.g. no exceptions for Level 3)."""


@dataclass(frozen=True)
class Instance:
    """One DeFAb instance: the challenge theory D⁻, the target, the level and the gold hypothesis.

    ``target`` is q at Levels 1–2 and the anomaly (the wrongly derived literal) at Level 3, exactly as
    :func:`~rlvr.defab.score.score_answer` takes it. ``glossary`` maps every predicate to ``"class"`` or
    ``"property"`` (used by the renderings); ``distractors`` lists the added distractor statements.
    ``gold_superiority`` is Γ, the superiority pairs of a Level-3 exception gold (empty otherwise).
    """

    id: str
    level: int
    theory: Theory
    target: Literal
    gold: Hypothesis
    kb: str = ""
    glossary: dict = field(default_factory=dict)
    distractors: tuple = ()
    strategy: str = "none"
    nonsense: bool = False
    gold_superiority: tuple = ()

    @property
    def gold_text(self) -> str:
        """The gold answer in M4: one statement (``bird(tweety).``, ``h1: bird(X) => flies(X).``), then
        one line per superiority pair of an exception gold (``h1 > r2.``)."""
        head = f"{self.gold}." if isinstance(self.gold, Literal) else str(self.gold)
        return "\n".join([head, *map(str, self.gold_superiority)])

    def score(self, answer, superiority=()) -> float:
        """The reward of ``answer`` (M4 text, or a hypothesis with its superiority pairs)."""
        return score_answer(self.theory, self.target, answer, self.level, superiority=superiority).score

    def to_json(self) -> dict:
        return {"id": self.id, "level": self.level, "kb": self.kb, "theory": str(self.theory),
                "target": str(self.target), "gold": self.gold_text, "glossary": dict(self.glossary),
                "distractors": list(self.distractors), "strategy": self.strategy, "nonsense": self.nonsense}

    @classmethod
    def from_json(cls, d: dict) -> "Instance":
        gold, gamma = decode_answer(d["gold"])
        return cls(d["id"], int(d["level"]), parse_theory(d["theory"]), parse_literal(d["target"]), gold,
                   d.get("kb", ""), dict(d.get("glossary", {})), tuple(d.get("distractors", ())),
                   d.get("strategy", "none"), bool(d.get("nonsense", False)), gamma)


def _lit(pred: str, arg: str, negated: bool = False) -> Literal:
    return Literal.of(pred, arg, negated=negated)


def kb_theory(kb: KB, individuals: list[tuple[str, str]]) -> Theory:
    """The full theory D of the KB slice above the individuals' classes (labels are provisional)."""
    relevant = {c for _, cls in individuals for c in kb.ancestors(cls)}
    facts = [_lit(cls, ind) for ind, cls in individuals]
    rules = [Rule(f"s{i}", RuleKind.STRICT, [_lit(c, "X")], _lit(p, "X"))
             for i, (c, p) in enumerate(kb.isa, 1) if c in relevant]
    rules += [Rule(f"r{i}", RuleKind.DEFEASIBLE, [_lit(c, "X")], _lit(p, "X"))
              for i, (c, p) in enumerate(kb.props, 1) if c in relevant]
    rules += [Rule(f"d{i}", RuleKind.DEFEATER, [_lit(c, "X")], _lit(p, "X", True))
              for i, (c, p) in enumerate(kb.exceptions, 1) if c in relevant]
    return Theory(facts, rules)


def glossary_of(kb: KB) -> dict:
    return {**{c: "class" for c in kb.classes}, **{p: "property" for p in kb.properties}}


def _candidates(theory: Theory, level: int) -> Iterator[tuple[Hypothesis, Literal]]:
    """(removed element, target) pairs with e critical for q; in theory order (deterministic)."""
    full = derive(theory)
    if level == 1:
        for fact in theory.facts:
            reduced = derive(theory.remove(fact))
            ind = fact.args[0]
            for q in sorted(full.defeasible, key=str):
                if q.args == (ind,) and q != fact and not q.negated and not reduced.proves(q):
                    yield fact, q
    elif level == 2:
        for rule in theory.rules:
            if rule.kind is RuleKind.DEFEASIBLE:
                reduced = derive(theory.remove(rule))
                for q in sorted(full.defeasible, key=str):
                    if q.predicate == rule.head.predicate and not q.negated and not reduced.proves(q):
                        yield rule, q
    else:
        for rule in theory.rules:
            if rule.kind is RuleKind.DEFEATER:
                reduced = derive(theory.remove(rule))
                for q in sorted(reduced.defeasible, key=str):
                    if q.predicate == rule.head.predicate and not q.negated and not full.proves(q):
                        yield rule, q


def exception_gold(theory: Theory, defeater: Rule, anomaly: Literal) -> tuple[Rule, tuple]:
    """The exception-with-priority form of a Level-3 defeater gold: ``h => ~p`` with the same body and
    label, and ``h > r`` for every defeasible rule or defeater r of D⁻ with an applicable instance for
    the anomaly (each would otherwise attack the exception's conclusion; team defeat needs them beaten)."""
    h = Rule(defeater.label, RuleKind.DEFEASIBLE, defeater.body, defeater.head)
    prep = prepare(theory)
    beaten = dict.fromkeys(r.label for r in prep.ground.rules
                           if r.head == anomaly and r.kind is not RuleKind.STRICT
                           and all(b in prep.base.defeasible for b in r.body))
    return h, tuple(Superiority(h.label, label) for label in beaten)


def _finish(reduced: Theory, gold: Hypothesis, rng: random.Random) -> tuple[Theory, Hypothesis]:
    """Shuffle statement order and relabel by kind; the gold rule becomes ``h1``."""
    facts, rules = list(reduced.facts), list(reduced.rules)
    rng.shuffle(facts)
    rng.shuffle(rules)
    prefix = {RuleKind.STRICT: "s", RuleKind.DEFEASIBLE: "r", RuleKind.DEFEATER: "d"}
    count = {k: 0 for k in prefix}
    relabelled = []
    for r in rules:
        count[r.kind] += 1
        relabelled.append(r.with_label(f"{prefix[r.kind]}{count[r.kind]}"))
    gold = gold.with_label("h1") if isinstance(gold, Rule) else gold
    return Theory(facts, relabelled), gold


def generate_one(kb: KB, level: int, rng: random.Random, *, n_individuals: int = 4, strategy: str = "random",
                 n_distractors: int = 5, instance_id: str = "", exceptions: float = 0.5) -> Instance:
    """One verified instance; raises :class:`GenerationError` after repeated failures.

    ``exceptions``: the probability that a Level-3 gold is an exception with priority (module docstring).
    """
    from rlvr.defab.distract import add_distractors  # distract imports Instance helpers lazily

    if level not in LEVELS:
        raise ValueError(f"level must be one of {LEVELS}, got {level!r}")
    if not 0.0 <= exceptions <= 1.0:
        raise ValueError(f"exceptions must be a probability in [0, 1], got {exceptions!r}")
    for _ in range(_TRIES):
        individuals = rng.sample(list(kb.instances), min(n_individuals, len(kb.instances)))
        theory = kb_theory(kb, individuals)
        cands = list(_candidates(theory, level))
        if not cands:
            continue
        element, target = rng.choice(cands)
        reduced = theory.remove(element)
        reduced, added = add_distractors(reduced, kb, element, target, level, strategy, n_distractors, rng)
        reduced, gold = _finish(reduced, element, rng)
        gamma: tuple = ()
        if level == 3 and rng.random() < exceptions:
            exception, pairs = exception_gold(reduced, gold, target)
            v = score_answer(reduced, target, exception, level, superiority=pairs)
            if v.score == 1.0 and v.details.get("strength") == "restructuring":
                gold, gamma = exception, pairs
        if score_answer(reduced, target, gold, level, superiority=gamma).score == 1.0:
            return Instance(instance_id, level, reduced, target, gold, kb.name, glossary_of(kb),
                            tuple(map(str, added)), strategy, gold_superiority=gamma)
    raise GenerationError(f"no Level-{level} instance found in KB {kb.name!r} after {_TRIES} tries")


def generate(level: int, n: int, seed: int = 0, *, kb: Union[str, KB] = "animals", strategy: str = "random",
             n_distractors: int = 5, n_individuals: int = 4, nonsense: bool = False,
             exceptions: float = 0.5) -> list[Instance]:
    """``n`` seeded instances of one level; ``nonsense`` renames the vocabulary (:mod:`rlvr.defab.nonsense`);
    ``exceptions`` is the share of Level-3 golds that are exceptions with priority."""
    from rlvr.defab.nonsense import to_nonsense

    base = kb if isinstance(kb, KB) else load_kb(kb)
    out = []
    for k in range(n):
        rng = random.Random(f"{base.name}/{level}/{seed}/{k}/{strategy}")
        iid = f"defab-{base.name}-L{level}-s{seed}-{k}" + ("-syn" if nonsense else "")
        inst = generate_one(base, level, rng, n_individuals=n_individuals, strategy=strategy,
                            n_distractors=n_distractors, instance_id=iid, exceptions=exceptions)
        out.append(to_nonsense(inst, rng) if nonsense else inst)
    return out


def load_instances(path) -> list[Instance]:
    """Read a JSONL file written by ``rlvr defab generate``."""
    import json

    with open(path, encoding="utf-8") as f:
        return [Instance.from_json(json.loads(line)) for line in f if line.strip()]


"""Synthetic-vocabulary control: rename every predicate and constant to a made-up pronounceable word.

DeFAb's contamination control (docs/verifiers.md, DeFAb synthetic vocabulary) keeps the logical structure of an
instance and replaces its vocabulary, so that Acc_nat − Acc_syn measures how much a model leans on world knowledge
("penguins don't fly") instead of the theory. The renaming is a bijection applied consistently to the theory, the
target, the gold and the glossary, so the renamed gold verifies exactly when the original does. Variables and rule
labels are kept (they carry no world knowledge).

Words are consonant–vowel syllables (``"bavoku"``), 2–3 per word, drawn from the instance's seeded RNG;
a word is never reused within an instance and never equals an original name.
"""

from __future__ import annotations

import random
import re
from dataclasses import replace

from rlvr.defab.syntax import Atom, Literal, Rule, Theory, is_variable

__all__ = ["nonsense_words", "rename_instance", "to_nonsense"]

_CONSONANTS = "bdfgklmnprstvz"
_VOWELS = "aeiou"


def nonsense_words(n: int, rng: random.Random, avoid=frozenset()) -> list[str]:
    """``n`` distinct pronounceable words not in ``avoid``."""
    out: list[str] = []
    seen = set(avoid)
    while len(out) < n:
        word = "".join(rng.choice(_CONSONANTS) + rng.choice(_VOWELS) for _ in range(rng.choice((2, 3))))
        if word not in seen:
            seen.add(word)
            out.append(word)
    return out


def _lit(lit: Literal, m: dict) -> Literal:
    return Literal(Atom(m.get(lit.predicate, lit.predicate),
                        [a if is_variable(a) else m.get(a, a) for a in lit.args]), lit.negated)


def _element(e, m: dict):
    if isinstance(e, Literal):
        return _lit(e, m)
    return Rule(e.label, e.kind, [_lit(b, m) for b in e.body], _lit(e.head, m))


def rename_instance(inst, mapping: dict):
    """The instance with every predicate/constant ``x`` replaced by ``mapping.get(x, x)``."""
    t = inst.theory
    theory = Theory([_lit(f, mapping) for f in t.facts], [_element(r, mapping) for r in t.rules], t.superiority)
    glossary = {mapping[k]: v for k, v in inst.glossary.items() if k in mapping}
    return replace(inst, theory=theory, target=_lit(inst.target, mapping), gold=_element(inst.gold, mapping),
                   glossary=glossary, distractors=tuple(_element_text(d, mapping) for d in inst.distractors),
                   nonsense=True)


def _element_text(text: str, mapping: dict) -> str:
    """Distractors are stored as text; rename their names token by token."""
    return re.sub(r"[A-Za-z0-9_]+", lambda m: mapping.get(m.group(0), m.group(0)), text)


def to_nonsense(inst, rng: random.Random):
    """Rename ``inst`` with fresh words drawn from ``rng`` (deterministic given the RNG state)."""
    t = inst.theory
    names = sorted(t.predicates() | {inst.target.predicate}) + sorted(t.constants() | set(inst.target.args))
    gold_lits = [inst.gold] if isinstance(inst.gold, Literal) else [*inst.gold.body, inst.gold.head]
    names += sorted({x for lit in gold_lits for x in (lit.predicate, *lit.args) if not is_variable(x)} - set(names))
    words = nonsense_words(len(names), rng, avoid=frozenset(names))
    return rename_instance(inst, dict(zip(names, words)))

"""Small helpers shared by the DeFAb tests."""

from __future__ import annotations

from rlvr.defab.engine import Conclusions, derive
from rlvr.defab.parser import parse_literal, parse_theory


def lits(text: str) -> set:
    """``"a, ~b(c)"`` -> {Literal}; a convenient way to write expected sets."""
    return {parse_literal(x.strip()) for x in text.split(";") if x.strip()}


def run(text: str, variant: str = "standard", grounding: str = "full") -> Conclusions:
    return derive(parse_theory(text), variant, grounding=grounding)


def status(c: Conclusions, lit: str) -> str:
    """'+' (+∂), '-' (−∂) or '?' (undecided) for one literal."""
    q = parse_literal(lit)
    if q in c.defeasible:
        return "+"
    return "-" if c.refutes(q) else "?"

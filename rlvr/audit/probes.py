"""Probes and the registry of probe families.

A *probe* is one completion written to test a verifier: a known reward hack built from an example's gold
answer (``expected="no_reward"``), a correct answer in an unusual form (``expected="reward"``, so false
negatives are found too), or an odd input that only has to be scored quickly and without an error
(``expected="any"``).

A *family* is a generator ``(ProbeContext) -> [(probe_name, completion, expected), ...]`` registered under a
name with the verifier kinds it applies to (:mod:`rlvr.audit.kinds`): ``any`` for every verifier, else
``generic`` (short answers: values, phrases; a user's own reward function), ``math``, ``code``, ``sql``,
``toolcall``. Register one with::

    from rlvr.audit.probes import family

    @family("my_family", kinds=("math",))
    def my_family(ctx):
        \"\"\"One line saying which hack this family tries.\"\"\"
        return [("doubled", f"{ctx.core}{ctx.core}", "no_reward")]

A generator returns nothing for an example it does not fit (e.g. a numeric family on a text answer).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Callable, Iterable, Sequence

if TYPE_CHECKING:
    from rlvr.audit.context import ProbeContext

__all__ = ["EXPECTED", "Probe", "Family", "FAMILIES", "family", "families_for", "generate", "AuditInputError"]

EXPECTED = ("no_reward", "reward", "any")


class AuditInputError(ValueError):
    """Bad input to an audit (an unknown family, verifier, task or split): one message, exit code 2."""


@dataclass(frozen=True)
class Probe:
    """One completion to score, with what a sound verifier should give it."""

    family: str
    name: str
    completion: str
    expected: str  # one of EXPECTED


Generator = Callable[["ProbeContext"], Iterable[tuple[str, str, str]]]


@dataclass(frozen=True)
class Family:
    name: str
    kinds: frozenset[str]
    fn: Generator
    summary: str

    def applies(self, kinds: Iterable[str]) -> bool:
        return "any" in self.kinds or bool(self.kinds & set(kinds))


FAMILIES: dict[str, Family] = {}


def family(name: str, kinds: Sequence[str]) -> Callable[[Generator], Generator]:
    """Register a probe generator under ``name`` for the verifier ``kinds`` it applies to."""

    def deco(fn: Generator) -> Generator:
        if name in FAMILIES:
            raise ValueError(f"probe family {name!r} is already registered")
        doc = (fn.__doc__ or "").strip().splitlines()
        FAMILIES[name] = Family(name, frozenset(kinds), fn, doc[0] if doc else "")
        return fn

    return deco


def families_for(kinds: Iterable[str], only: Sequence[str] | None = None) -> list[Family]:
    """The registered families that apply to verifiers of these kinds (``only``: just those names). The
    built-in ones register when :mod:`rlvr.audit.families` is imported (``import rlvr.audit`` does)."""
    kinds = set(kinds)
    if only:
        unknown = [n for n in only if n not in FAMILIES]
        if unknown:
            raise AuditInputError(f"unknown probe family {', '.join(map(repr, unknown))}; valid names: "
                                  f"{', '.join(sorted(FAMILIES))}")
        return [FAMILIES[n] for n in only if FAMILIES[n].applies(kinds)]
    return [f for f in FAMILIES.values() if f.applies(kinds)]


def generate(ctx: "ProbeContext", families: Sequence[Family]) -> tuple[list[Probe], list[str]]:
    """Every probe the families make for one example, duplicates dropped (the first family keeps a text), and
    the errors of generators that failed (reported; an audit never stops for them)."""
    probes: list[Probe] = []
    seen: set[str] = set()
    errors: list[str] = []
    for fam in families:
        try:
            made = list(fam.fn(ctx))
        except Exception as e:  # a generator bug must not hide the other families' findings
            errors.append(f"family {fam.name!r} on example {ctx.example.id!r}: {type(e).__name__}: {e}")
            continue
        for name, completion, expected in made:
            if expected not in EXPECTED:
                errors.append(f"family {fam.name!r}: probe {name!r} has expected={expected!r}, not one of {EXPECTED}")
                continue
            if completion in seen:
                continue
            seen.add(completion)
            probes.append(Probe(fam.name, name, completion, expected))
    return probes, errors

"""Knowledge bases for the DeFAb generator: taxonomies, behavioural properties, exceptions, individuals.

A knowledge base (KB) is a plain edge list, one edge per line, fields separated by tabs or spaces;
``#`` starts a comment and blank lines are ignored::

    isa     penguin  bird       # strict taxonomy edge        -> penguin(X) -> bird(X).
    prop    bird     flies      # defeasible behaviour        -> bird(X) => flies(X).
    except  penguin  flies      # exception (seeds a defeater) -> penguin(X) ~> ~flies(X).
    inst    pingu    penguin    # an individual of a class     -> penguin(pingu).

This is DeFAb's type-grounded family κ_type (docs/verifiers.md, DeFAb instances from knowledge bases): ``IsA``
edges are strict, property edges (ConceptNet CapableOf/HasProperty) defeasible, and NotCapableOf-style exceptions
become defeaters. Names must be valid predicate/constant names of :mod:`rlvr.defab.syntax` (lowercase first letter,
letters, digits, ``_``). Class names and property names must be disjoint (a name is either a noun, rendered "x is a
penguin", or a verb phrase, rendered "x flies"), the taxonomy must be acyclic, and an exception must name a class
and a known property. Every error names the file and the line.

Four KBs ship with the package (``animals``, ``vehicles``, ``food``, ``occupations``); :func:`load_kb`
takes one of those names or a path to a user's own file in the same format.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path
from typing import Union

from rlvr.defab.graph import find_cycle
from rlvr.defab.syntax import CONSTANT_RE, PREDICATE_RE

__all__ = ["KB", "KBError", "BUILTIN_KBS", "load_kb", "parse_kb", "kb_dir"]

_ARITY = {"isa": 2, "prop": 2, "except": 2, "inst": 2}


class KBError(ValueError):
    """A malformed knowledge-base file; the message starts with ``file:line:``."""


def kb_dir() -> Path:
    """The folder of the shipped KB files (package data ``rlvr/defab/kb/*.tsv``)."""
    return Path(__file__).with_name("kb")


BUILTIN_KBS = ("animals", "vehicles", "food", "occupations")


@dataclass(frozen=True)
class KB:
    """A parsed KB; every tuple keeps file order so that generation is deterministic."""

    name: str
    isa: tuple[tuple[str, str], ...]          # (child, parent)
    props: tuple[tuple[str, str], ...]        # (class, property)
    exceptions: tuple[tuple[str, str], ...]   # (class, property)
    instances: tuple[tuple[str, str], ...]    # (individual, class)

    @property
    def classes(self) -> tuple[str, ...]:
        names = [c for e in self.isa for c in e] + [c for c, _ in self.props + self.exceptions]
        return tuple(dict.fromkeys(names + [c for _, c in self.instances]))

    @property
    def properties(self) -> tuple[str, ...]:
        return tuple(dict.fromkeys(p for _, p in self.props))

    def ancestors(self, cls: str) -> tuple[str, ...]:
        """``cls`` and every class above it, nearest first (breadth-first over ``isa``)."""
        out, frontier = [cls], [cls]
        while frontier:
            nxt = [p for c in frontier for ch, p in self.isa if ch == c and p not in out]
            out.extend(dict.fromkeys(nxt))
            frontier = list(dict.fromkeys(nxt))
        return tuple(out)


def parse_kb(text: str, source: str = "<kb>") -> KB:
    """Parse KB text; raises :class:`KBError` naming ``source`` and the line."""
    edges: dict[str, list[tuple[str, str]]] = {k: [] for k in _ARITY}
    where: dict[tuple[str, str, str], int] = {}
    for n, raw in enumerate(text.splitlines(), 1):
        fields = raw.split("#", 1)[0].split()
        if not fields:
            continue
        kind, args = fields[0].lower(), fields[1:]
        if kind not in _ARITY:
            raise KBError(f"{source}:{n}: unknown edge kind {fields[0]!r} (expected one of {', '.join(_ARITY)})")
        if len(args) != _ARITY[kind]:
            raise KBError(f"{source}:{n}: '{kind}' takes {_ARITY[kind]} names, got {len(args)}")
        for i, a in enumerate(args):
            ok = CONSTANT_RE.match(a) if kind == "inst" and i == 0 else PREDICATE_RE.match(a)
            if not ok:
                raise KBError(f"{source}:{n}: bad name {a!r}: use a lowercase first letter, then letters, "
                              "digits or '_'")
        edges[kind].append((args[0], args[1]))
        where.setdefault((kind, args[0], args[1]), n)
    kb = KB(Path(source).stem if source != "<kb>" else source,
            *(tuple(dict.fromkeys(edges[k])) for k in ("isa", "prop", "except", "inst")))
    _check(kb, source, where)
    return kb


def _check(kb: KB, source: str, where: dict) -> None:
    """Whole-file checks: disjoint class/property names, acyclic taxonomy, known exception properties."""
    classes, props = set(kb.classes), set(kb.properties)
    for kind, edges in (("isa", kb.isa), ("prop", kb.props), ("except", kb.exceptions), ("inst", kb.instances)):
        for a, b in edges:
            n = where[(kind, a, b)]
            if kind == "prop" and b in classes:
                raise KBError(f"{source}:{n}: {b!r} is used both as a class and as a property")
            if kind == "except" and b not in props:
                raise KBError(f"{source}:{n}: exception names {b!r}, which no 'prop' line defines")
            if kind == "inst" and a in classes | props:
                raise KBError(f"{source}:{n}: individual {a!r} is also a class or property name")
            if kind == "isa" and a == b:
                raise KBError(f"{source}:{n}: {a!r} is a subclass of itself")
    succ: dict[str, list[str]] = {}
    for child, parent in kb.isa:
        succ.setdefault(child, []).append(parent)
    cycle = find_cycle(succ)
    if cycle:
        raise KBError(f"{source}:{where[('isa', cycle[0], cycle[1])]}: taxonomy cycle {' -> '.join(cycle)}")
    if not kb.instances:
        raise KBError(f"{source}: no 'inst' lines: the generator needs individuals")


@lru_cache(maxsize=32)
def _load_path(path: str) -> KB:
    p = Path(path)
    try:
        text = p.read_text(encoding="utf-8")
    except OSError as e:
        raise KBError(f"{path}: cannot read: {e.strerror or e}") from None
    return parse_kb(text, str(p))


def load_kb(name_or_path: Union[str, Path]) -> KB:
    """A shipped KB by name (``animals``) or a user's KB file by path."""
    s = str(name_or_path)
    if s in BUILTIN_KBS:
        return _load_path(str(kb_dir() / f"{s}.tsv"))
    if not Path(s).exists():
        raise KBError(f"{s}: no such KB file (shipped KBs: {', '.join(BUILTIN_KBS)})")
    return _load_path(s)

"""Which regular expressions risk catastrophic backtracking, read from the parsed pattern (docs/verifiers.md,
Rubric: bounded regex criteria): a quantified body that can match the same text in more than one way
(nested quantifiers ``(a+)+``, empty-matching bodies ``(a*)*``, overlapping alternatives ``(a|ab)*``).
Delimited repeats (``(\\d+,)+``), possessive quantifiers and atomic groups are safe. Used by the rubric's
criteria check (:func:`rlvr.verifiers.rubric.check_pattern`)."""

from __future__ import annotations

try:
    from re import _constants as _C
    from re import _parser as _sre_parse
except ImportError:  # Python < 3.11
    import sre_constants as _C  # type: ignore[no-redef]
    import sre_parse as _sre_parse  # type: ignore[no-redef]

__all__ = ["pattern_risk"]


_REPEATS = {_C.MAX_REPEAT, _C.MIN_REPEAT}
_POSSESSIVE = getattr(_C, "POSSESSIVE_REPEAT", None)
_ATOMIC = getattr(_C, "ATOMIC_GROUP", None)
_PROBES = [chr(i) for i in range(128)] + list("\u00a0\u00e9\u00df\u03c0\u0661\u4e2d\u2028\U0001f600")
_CATEGORIES = {
    "DIGIT": str.isdigit, "SPACE": str.isspace, "WORD": lambda c: c.isalnum() or c == "_",
    "LINEBREAK": lambda c: c in "\n\r\x0b\x0c\x1c\x1d\x1e\x85\u2028\u2029"}


def _category(code) -> set:
    name = str(code).upper().replace("CATEGORY_", "").replace("UNI_", "").replace("LOC_", "")
    negate = name.startswith("NOT_")
    test = _CATEGORIES.get(name[4:] if negate else name, lambda c: True)
    return {c for c in _PROBES if test(c) != negate}


def _charset(items) -> set:
    chars: set = set()
    negate = False
    for op, av in items:
        if op is _C.NEGATE:
            negate = True
        elif op is _C.LITERAL:
            chars.add(chr(av))
        elif op is _C.RANGE:
            chars |= {c for c in _PROBES if av[0] <= ord(c) <= av[1]}
        elif op is _C.CATEGORY:
            chars |= _category(av)
        else:  # CHARSET / BIGCHARSET of a compiled pattern: assume anything
            chars |= set(_PROBES)
    return set(_PROBES) - chars if negate else chars


def _first(items) -> tuple[set, bool]:
    """(probe characters a match of the sequence can start with, whether it can match the empty string);
    over-approximated, which only makes the guard stricter."""
    out: set = set()
    for op, av in items:
        if op is _C.LITERAL:
            return out | {chr(av)}, False
        if op is _C.NOT_LITERAL:
            return out | (set(_PROBES) - {chr(av)}), False
        if op is _C.ANY:
            return out | set(_PROBES), False
        if op is _C.IN:
            return out | _charset(av), False
        if op is _C.AT:
            continue
        if op in (_C.ASSERT, _C.ASSERT_NOT):
            continue
        if op is _C.SUBPATTERN or op is _ATOMIC:
            first, nullable = _first(av[-1] if op is _C.SUBPATTERN else av)
        elif op is _C.BRANCH:
            parts = [_first(alt) for alt in av[1]]
            first, nullable = set().union(*(f for f, _ in parts)), any(n for _, n in parts)
        elif op in _REPEATS or op is _POSSESSIVE:
            first, nullable = _first(av[2])
            nullable = nullable or av[0] == 0
        else:  # back-references and the rest: anything, possibly empty
            first, nullable = set(_PROBES), True
        out |= first
        if not nullable:
            return out, False
    return out, True


_SINGLE = {_C.LITERAL, _C.NOT_LITERAL, _C.IN, _C.ANY}


def _delimited(sub, following) -> bool:
    """An inner quantifier over one character class that the next element must end and cannot continue
    (``(\\d+,)+``: every repetition stops at a comma) splits its text one way only: no backtracking blow-up."""
    if len(sub) != 1 or sub[0][0] not in _SINGLE or not following:
        return False
    consumed, _ = _first(sub)
    first, nullable = _first(following)
    return not nullable and not (consumed & first)


def _pattern_risk(items, repeated: bool) -> str | None:
    """Why the parsed pattern can backtrack catastrophically, or None: under a repeat that may run more than
    once, a variable inner quantifier ((a+)+, (a*)*, (a?)*), alternatives that can start alike ((a|a)*,
    (a|ab)*), or a body that can match empty. Possessive quantifiers and atomic groups never backtrack."""
    for i, (op, av) in enumerate(items):
        if op in _REPEATS:
            lo, hi, sub = av
            variable = lo != hi
            if repeated and variable and not _delimited(sub, items[i + 1: i + 2]):
                return "nested quantifiers such as (a+)+ or (a*)* (rewrite, or make the inner one possessive)"
            loops = hi == _C.MAXREPEAT or hi > 1
            if loops and variable and _first(sub)[1]:
                return "a repeated group that can match the empty string, such as (a?)* or (|a)+"
            why = _pattern_risk(sub, repeated or (loops and variable))
            if why:
                return why
        elif op is _C.SUBPATTERN:
            why = _pattern_risk(av[-1], repeated)
            if why:
                return why
        elif op is _C.BRANCH:
            alts = av[1]
            if repeated:
                firsts = [_first(a) for a in alts]
                for i, (f1, n1) in enumerate(firsts):
                    for f2, n2 in firsts[i + 1:]:
                        if n1 or n2 or f1 & f2:
                            return "alternatives that can match the same text under a quantifier, such as (a|a)* " \
                                   "or (a|ab)*"
            for alt in alts:
                why = _pattern_risk(alt, repeated)
                if why:
                    return why
        elif op in (_C.ASSERT, _C.ASSERT_NOT):
            why = _pattern_risk(av[1], repeated)
            if why:
                return why
        elif op is _C.GROUPREF_EXISTS:
            for branch in av[1:]:
                why = _pattern_risk(branch or [], repeated)
                if why:
                    return why
        # POSSESSIVE_REPEAT and ATOMIC_GROUP: no backtracking into them
    return None


def pattern_risk(pattern: str, bits: int = 0) -> str | None:
    """Why ``pattern`` (compiled with ``bits``) risks catastrophic backtracking, or None."""
    return _pattern_risk(_sre_parse.parse(pattern, bits).data, False)

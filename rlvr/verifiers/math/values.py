"""Values the answer parser produces besides plain sympy expressions, and the arithmetic guards.

Kept apart from :mod:`.latex` (the grammar) so each stays small. Worker-only: imports sympy.

- :class:`Tup` ``(a, b)``/``[a, b)`` (a tuple or, with two items, an interval), :class:`Eq` (an equation),
  :class:`Rel` (the set of reals a relation describes), :class:`Mat`, :class:`Alts` (``\\pm`` alternatives);
- size guards: an exact power, factorial or binomial over 200,000 bits becomes a 40-digit float, so a
  model's ``10^{10^{10}}`` costs microseconds and no memory, and :data:`INEXACT` records it: a comparison
  that such a float decides "equal" is "undecidable" instead (``10^{10^6} + 1`` is not ``10^{10^6}``); a
  value past any evaluation (``9^{9^{9^9}}``, ``\\sin(10^{10^5})``) raises :class:`TooLarge` at once;
- relations to sets: ``x < c``/``c \\le x`` directly, anything else (``|x| < 3``) through ``solveset``.
"""

from __future__ import annotations

import mpmath
import sympy

__all__ = ["Unsupported", "TooLarge", "INEXACT", "Tup", "Eq", "Rel", "Mat", "Alts", "DIGITS", "MAX_BITS", "alts",
           "as_expr", "power", "factorial", "binomial", "huge_inexact", "scientific", "as_set", "relations_to_set"]

DIGITS = 40
MAX_BITS = 200_000


class Unsupported(Exception):
    """The answer uses notation this parser does not handle."""


class TooLarge(Exception):
    """The answer is a number too large to evaluate at all (a tower of powers): it scores 0 at once."""


# Set by the size guards while an answer is parsed; the caller resets it per comparison (one per process).
INEXACT = [False]


def _inexact(v):
    INEXACT[0] = True
    return v


class Tup(tuple):
    """A parenthesised list ``(a, b)``/``[a, b)``: an ordered tuple or, with two items, an interval."""

    brackets: str = "()"


class Eq(tuple):
    """An equation ``lhs = rhs``."""


class Rel(tuple):
    """A sympy set over the reals described by relations, with the variable: ``(set, symbol)``."""


class Mat(tuple):
    """A matrix as a tuple of rows."""


class Alts(tuple):
    """The alternatives of a ``\\pm`` expression."""



def alts(op, *args):
    """Apply ``op`` across ``\\pm`` alternatives; plain values pass straight through."""
    if not any(isinstance(a, Alts) for a in args):
        return op(*args)
    combos = [[]]
    for a in args:
        combos = [c + [x] for c in combos for x in (a if isinstance(a, Alts) else (a,))]
    return Alts(op(*c) for c in combos)


def as_expr(v):
    """``v`` when it is a plain expression; arithmetic on tuples, sets and relations is not supported."""
    if isinstance(v, (Tup, Eq, Rel, Mat)) or isinstance(v, sympy.Set):
        raise Unsupported("arithmetic on a tuple, set or relation")
    return v


def power(b, e):
    """``b ** e``, as a 40-digit float when the exact rational would exceed :data:`MAX_BITS`."""
    b, e = as_expr(b), as_expr(e)
    if isinstance(e, sympy.Float) and abs(e) > 10**6:
        raise TooLarge("exponent too large")
    if b.is_Rational and e.is_Integer:
        bits = max(abs(b.p).bit_length(), b.q.bit_length())
        if bits * abs(int(e)) > MAX_BITS:
            return _inexact(sympy.Float(b, DIGITS) ** e)
    elif e.is_Integer and abs(e) > 4096 and b.is_number:  # sqrt(2)^{10^9} would expand to 2^{5*10^8}
        return sympy.Pow(b, e, evaluate=False)
    return sympy.Pow(b, e)


def factorial(v):
    """``v!``, exact up to 10000!, as a 40-digit float above."""
    v = as_expr(v)
    if v.is_Float and abs(v) > 10**6:
        raise TooLarge("factorial too large")
    if v.is_Integer and v > 10_000:  # exact 10000! has ~118,000 bits
        with mpmath.workdps(DIGITS):
            return _inexact(sympy.Float(mpmath.factorial(int(v)), DIGITS))
    return sympy.factorial(v)


def huge_inexact(v) -> bool:
    """Whether ``v`` is a guard's 40-digit float past 10^40: its integer part and its angle modulo 2 pi are
    unknown, so ``\\sin`` of it is "too large" and its floor is itself (computing either would take the
    whole deadline: ``\\sin(10^{10^5})`` needs 10^5 digits of pi)."""
    if not (isinstance(v, sympy.Expr) and v.has(sympy.Float) and v.is_number):
        return False
    return bool(abs(v) > sympy.Integer(10) ** DIGITS)


def binomial(n, k):
    """``\\binom{n}{k}``, as a 40-digit float when the exact integer would exceed :data:`MAX_BITS`."""
    n, k = as_expr(n), as_expr(k)
    if n.is_Integer and k.is_Integer and 0 <= k <= n and min(k, n - k) > 64:
        with mpmath.workdps(DIGITS):
            if mpmath.log(mpmath.binomial(int(n), int(k)), 2) > MAX_BITS:
                return _inexact(sympy.Float(mpmath.binomial(int(n), int(k)), DIGITS))
    if (n.is_Float and abs(n) > 10**6) or (k.is_Float and abs(k) > 10**6):
        raise TooLarge("binomial too large")
    return sympy.binomial(n, k)


def scientific(text: str):
    """``1.5e3`` -> 1500 exactly (with the power guard, so ``1e999999999`` stays cheap)."""
    mant, _, exp = text.lower().partition("e")
    return sympy.Rational(mant) * power(sympy.Integer(10), sympy.Integer(int(exp)))


def as_set(v):
    """A sympy set for a set, a relation or a two-element bracket (an interval)."""
    if isinstance(v, sympy.Set):
        return v
    if isinstance(v, Rel):
        return v[0]
    if isinstance(v, Tup) and len(v) == 2:
        lo, hi = map(as_expr, v)
        return sympy.Interval(lo, hi, v.brackets[0] == "(", v.brackets[1] == ")")
    raise Unsupported("not a set")


def _simple_interval(lhs, op: str, rhs):
    """``x < c`` or ``c <= x`` without solveset (tens of ms): ``(interval, x)`` or None."""
    if isinstance(rhs, sympy.Symbol) and not isinstance(lhs, sympy.Symbol):
        lhs, rhs, op = rhs, lhs, {"<": ">", ">": "<", "<=": ">=", ">=": "<="}.get(op, op)
    if not isinstance(lhs, sympy.Symbol) or rhs.free_symbols or rhs.is_extended_real is not True:
        return None
    if op in ("<", "<="):
        return sympy.Interval(-sympy.oo, rhs, True, op == "<"), lhs
    if op in (">", ">="):
        return sympy.Interval(rhs, sympy.oo, op == ">", True), lhs
    return None


def relations_to_set(chain) -> Rel:
    """``a < x <= b`` / ``x \\ge 0`` / ``|x| < 3`` / ``x \\in S``: the set of reals that satisfy it."""
    acc, var = sympy.Reals, None
    for op, lhs, rhs in chain:
        if op == "in":
            if not isinstance(lhs, sympy.Symbol):
                raise Unsupported("\\in needs a variable")
            var, s = lhs, as_set(rhs)
        else:
            lhs, rhs = as_expr(lhs), as_expr(rhs)
            direct = _simple_interval(lhs, op, rhs)
            if direct is not None:
                if var is not None and direct[1] != var:
                    raise Unsupported("two variables")
                var = direct[1]
                acc = sympy.Intersection(acc, direct[0])
                continue
            rel = sympy.Rel(lhs, rhs, op)
            free = rel.free_symbols
            if len(free) != 1:
                raise Unsupported("relation needs exactly one variable")
            (sym,) = free
            if var is not None and sym != var:
                raise Unsupported("two variables")
            var = sym
            s = sympy.solveset(rel, sym, sympy.Reals)
        acc = sympy.Intersection(acc, s)
    return Rel((acc, var))

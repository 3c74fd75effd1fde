"""Symbolic equivalence of two normalised answers (runs in the worker processes only).

``compare`` parses both answers with our own LaTeX parser (:mod:`.latex`) and decides; only when that
parser does not support one of them does it ask math-verify (if installed and the backend allows).

How values compare:

- numbers and constant expressions: exactly when both are rational; otherwise a screen evaluates both
  with mpmath to 40 significant digits (values apart by more than a relative 1e-25 are not equal), and
  equality is then confirmed on the difference ``a - b`` itself, never by a tolerance: it must cancel
  exactly, or sympy's cancellation-aware ``evalf`` must fail to tell it from 0 at a working precision of
  60 digits plus twice the digits of the longest number written in either answer. So
  ``\\frac{\\sqrt2}{2} = \\frac{1}{\\sqrt2}`` and ``\\sqrt{-1} = i``, while ``0.333 != 1/3``, ``1/2^{99} != 1/2^{98}``,
  ``10^{-7} != 0``, a 36-digit decimal of pi is not pi and ``2 + 10^{-30}\\pi`` is not 2;
- values the size guards of :mod:`.values` replaced by 40-digit floats (``10^{10^6}``, ``3000!``), or
  sums in which a term vanished below the working precision (``\\sqrt{4 + e^{-10^6}}``), are never
  "equal": such a pair is "undecidable" and scores 0; a tower like ``9^{9^{9^9}}`` is "too large" at once;
- expressions with variables (``x^2+2x+1`` vs ``(x+1)^2``): screened the same way (complex values
  included) at six fixed non-integer points of both signs; equal when they agree at every point where
  both are finite, confirmed on the difference at two exact rational points, so ``|x| != x``,
  ``\\log x^2 != 2\\log x`` (variables are not assumed positive) and ``x + 10^{-30} != x``;
- equations: equal when ``lhs - rhs`` of one is a constant non-zero multiple of the other's
  (``y = 2x + 1`` vs ``2x - y + 1 = 0``), the multiple taken exactly at one point and checked at two
  more; ``x = 3`` against a plain ``3`` compares the right-hand side;
- tuples element-wise; two-element ``(a, b]`` brackets, unions and relations (``-3 < x < 3``,
  ``|x| < 3``, ``x \\ge 0``, ``x < 1 or x > 2``) as sets of reals; ``\\{...\\}``, ``\\pm`` and bare lists
  as finite sets; matrices element-wise (a one-row/one-column matrix equals the tuple of its entries);
- percent as in the fast path.
"""

from __future__ import annotations

import re

import mpmath
import sympy

from .fastpath import percent_match
from .latex import parse_item
from .normalize import split_items, strip_var_prefix
from sympy.core.evalf import PrecisionExhausted

from .values import DIGITS, INEXACT, Alts, Eq, Mat, Rel, TooLarge, Tup, Unsupported

__all__ = ["compare", "answers_equal", "parse_answer", "math_verify_equal"]

_TOL = mpmath.mpf(10) ** -25
# Both signs, so |x| != x and \sqrt{x^2} != x (symbols are not assumed positive, as in math-verify).
_POINTS = [sympy.Rational(p, q) for p, q in ((37, 61), (-113, 71), (29, 47), (-191, 97), (53, 89), (-131, 59))]
_INF_ATOMS = {sympy.oo, -sympy.oo, sympy.zoo, sympy.nan}
_RELATIONAL = re.compile(r"[<>]|\\le|\\ge|\\ne|\\in(?![a-zA-Z])")


def parse_answer(s: str, strip_prefix: bool):
    """A list of parsed items (one for a single answer)."""
    if _RELATIONAL.search(s):
        return [parse_item(s)]
    items = split_items(s) or [s]
    if strip_prefix:
        items = [strip_var_prefix(x) for x in items]
    out = []
    for it in items:
        v = parse_item(it)
        out.extend(v if isinstance(v, Alts) else [v])
    return out


_MP_FUNCS = {sympy.sin: mpmath.sin, sympy.cos: mpmath.cos, sympy.tan: mpmath.tan, sympy.cot: mpmath.cot,
             sympy.sec: mpmath.sec, sympy.csc: mpmath.csc, sympy.asin: mpmath.asin, sympy.acos: mpmath.acos,
             sympy.atan: mpmath.atan, sympy.sinh: mpmath.sinh, sympy.cosh: mpmath.cosh, sympy.tanh: mpmath.tanh,
             sympy.log: mpmath.log, sympy.exp: mpmath.exp, sympy.Abs: abs, sympy.floor: mpmath.floor,
             sympy.ceiling: mpmath.ceil, sympy.factorial: mpmath.factorial, sympy.gamma: mpmath.gamma}
_MP_CONST = {sympy.pi: lambda: +mpmath.pi, sympy.E: lambda: +mpmath.e, sympy.I: lambda: mpmath.mpc(0, 1)}


class _NoFastEval(Exception):
    pass


class Undecidable(Exception):
    """Equality of the two answers cannot be established exactly (see the module docstring)."""


_ABSORBED = [False]  # set when a constant sum lost a term below the working precision
_ABSORB = mpmath.mpf(10) ** -30


def _mp(e, env: dict):
    """Evaluate a sympy expression with mpmath directly: ~10x faster than sympy's evalf on small trees."""
    if e.is_Rational:
        return mpmath.mpf(e.p) / e.q
    if e.is_Float:
        return mpmath.mpf(e._mpf_)
    if e.is_Symbol:
        return env[e]
    if e in _MP_CONST:
        return _MP_CONST[e]()
    args = [_mp(a, env) for a in e.args]
    if e.is_Add:
        total = mpmath.fsum(args)
        if not env and max(map(abs, args)) * _ABSORB > min(abs(x) for x in args) > 0:
            _ABSORBED[0] = True
        return total
    if e.is_Mul:
        return mpmath.fprod(args)
    if e.is_Pow:
        return mpmath.power(args[0], args[1])
    fn = _MP_FUNCS.get(e.func)
    if fn is None or len(args) != 1:
        raise _NoFastEval(type(e).__name__)
    return fn(args[0])


def _numeric(e, subs=None) -> mpmath.mpc | None:
    """The value of ``e`` (at ``subs``) to 40 digits, or None when it is not a finite number."""
    with mpmath.workdps(DIGITS):
        try:
            v = _mp(e, {k: mpmath.mpf(x.p) / x.q for k, x in (subs or {}).items()})
        except _NoFastEval:
            v = _value((e.xreplace({k: sympy.Float(x, DIGITS) for k, x in subs.items()}) if subs else e)
                       .evalf(DIGITS))
        except (ZeroDivisionError, ValueError, OverflowError):
            return None
        except KeyError:
            raise Unsupported("does not evaluate to a number") from None
        if v is None:
            return None
        v = mpmath.mpc(v)
        return v if mpmath.isfinite(v.real) and mpmath.isfinite(v.imag) else None


def _value(v) -> mpmath.mpc | None:
    """A sympy number (evalf result) as an mpmath complex, or None when it is not finite."""
    if v.free_symbols:
        raise Unsupported("does not evaluate to a number")
    if v.has(sympy.nan, sympy.zoo, sympy.oo, -sympy.oo):
        return None
    re_, im = v.as_real_imag()
    try:
        return mpmath.mpc(mpmath.mpf(sympy.Float(re_, DIGITS)._mpf_), mpmath.mpf(sympy.Float(im, DIGITS)._mpf_))
    except (TypeError, ValueError, AttributeError):
        return None


def _close(a: mpmath.mpc, b: mpmath.mpc) -> bool:
    scale = max(abs(a), abs(b))
    return scale == 0 or abs(a - b) <= _TOL * scale


def expr_equal(a, b) -> bool:
    if a == b:
        return True
    if a.is_Rational and b.is_Rational:
        return False
    if _INF_ATOMS & (a.atoms() | b.atoms()):  # structural: assumption queries (is_infinite) cost ~1 ms
        return False
    syms = sorted(a.free_symbols | b.free_symbols, key=str)
    if not syms:
        va, vb = _numeric(a), _numeric(b)
        return va is not None and vb is not None and _close(va, vb) and _zero(a - b, a, b)
    agreed = []
    for k in range(len(_POINTS)):
        subs = {s: _POINTS[(k + j) % len(_POINTS)] for j, s in enumerate(syms)}
        va, vb = _numeric(a, subs), _numeric(b, subs)
        if (va is None) != (vb is None):
            return False
        if va is not None:
            if not _close(va, vb):
                return False
            agreed.append(subs)
    if len(agreed) < 2:
        return False
    d = a - b
    return all(_zero(d.xreplace(subs), a, b) for subs in agreed[:2])


def _zero(d, *sources) -> bool:
    """Whether the constant ``d`` (a difference the 40-digit screen found tiny) is exactly 0."""
    if d == 0:
        return True
    if d.is_Rational:
        return False
    digits = max([len(str(abs(r.p))) + len(str(r.q)) for x in sources for r in x.atoms(sympy.Rational)] + [0])
    try:
        v = d.evalf(15, strict=True, maxn=min(60 + 2 * digits, 4000))
    except PrecisionExhausted:
        return True
    if not v.is_number:
        raise Unsupported("difference does not evaluate")
    return v == 0


def _eq_equal(a: Eq, b: Eq) -> bool:
    """Equations are equal when ``lhs - rhs`` of one is a constant non-zero multiple of the other's."""
    da, db = a[0] - a[1], b[0] - b[1]
    syms = sorted(da.free_symbols | db.free_symbols, key=str)
    if not syms:
        return expr_equal(da, db)
    ratios, points = [], []
    for k in range(4):
        subs = {s: _POINTS[(k + j) % len(_POINTS)] for j, s in enumerate(syms)}
        va, vb = _numeric(da, subs), _numeric(db, subs)
        if va is None or vb is None or vb == 0 or va == 0:
            if va != vb:
                return False
            continue
        ratios.append(va / vb)
        points.append(subs)
    if len(ratios) < 2 or not all(_close(r, ratios[0]) for r in ratios):
        return False
    k = da.xreplace(points[0]) / db.xreplace(points[0])  # the multiple, exactly
    return all(_zero((da - k * db).xreplace(p), da, db) for p in points[1:3])


def _set_of(v):
    """A sympy set for an interval-like value, or None."""
    if isinstance(v, Rel):
        return v[0]
    if isinstance(v, sympy.Set):
        return v
    if isinstance(v, Tup) and len(v) == 2 and v.brackets in ("()", "[]", "(]", "[)"):
        lo, hi = v
        if not (isinstance(lo, sympy.Expr) and isinstance(hi, sympy.Expr)):
            raise Unsupported("interval with non-numeric ends")
        if lo.is_extended_real is not False and hi.is_extended_real is not False:
            return sympy.Interval(lo, hi, v.brackets[0] == "(", v.brackets[1] == ")")
    return None


def _pieces(s):
    """A union of intervals and points as a sorted list of ``(lo, hi, lopen, ropen)``."""
    parts = s.args if isinstance(s, sympy.Union) else (s,)
    out = []
    for p in parts:
        if isinstance(p, sympy.Interval):
            out.append((p.start, p.end, bool(p.left_open), bool(p.right_open)))
        elif p == sympy.Reals:
            out.append((-sympy.oo, sympy.oo, True, True))
        elif isinstance(p, sympy.FiniteSet):
            out.extend((x, x, False, False) for x in p.args)
        elif p != sympy.EmptySet:
            raise Unsupported(f"set {type(p).__name__}")
    return sorted(out, key=lambda t: float(t[0]) if t[0].is_finite else (-1e308 if t[0] == -sympy.oo else 1e308))


def _set_equal(a, b) -> bool:
    if a == b:
        return True
    if isinstance(a, sympy.FiniteSet) and isinstance(b, sympy.FiniteSet):
        return _bag_equal(list(a.args), list(b.args))
    pa, pb = _pieces(a), _pieces(b)
    return len(pa) == len(pb) and all(x[2:] == y[2:] and _ends_equal(x[0], y[0]) and _ends_equal(x[1], y[1])
                                      for x, y in zip(pa, pb))


def _ends_equal(a, b) -> bool:
    return a == b if _INF_ATOMS & (a.atoms() | b.atoms()) else expr_equal(a, b)


def _bag_equal(xs: list, ys: list) -> bool:
    """Set equality of two small lists under :func:`item_equal` (duplicates ignored)."""
    return all(any(item_equal(x, y) for y in ys) for x in xs) and all(any(item_equal(x, y) for x in xs) for y in ys)


def item_equal(a, b) -> bool:
    if isinstance(a, Eq) or isinstance(b, Eq):
        if isinstance(a, Eq) and isinstance(b, Eq):
            return _eq_equal(a, b)
        return False
    if isinstance(a, Mat) or isinstance(b, Mat):
        return _flat(a) is not None and _flat(b) is not None and _shape(a) == _shape(b) and all(
            item_equal(x, y) for x, y in zip(_flat(a), _flat(b)))
    if isinstance(a, Tup) and isinstance(b, Tup) and (a.brackets == b.brackets or len(a) != 2):
        return len(a) == len(b) and all(item_equal(x, y) for x, y in zip(a, b))
    sa, sb = _set_of(a), _set_of(b)
    if sa is not None or sb is not None:
        return sa is not None and sb is not None and _set_equal(sa, sb)
    if isinstance(a, Tup) or isinstance(b, Tup):
        return False
    return expr_equal(a, b)


def _flat(v):
    if isinstance(v, Mat):
        return [x for row in v for x in row]
    return list(v) if isinstance(v, Tup) else None


def _shape(v):
    if isinstance(v, Mat):
        rows, cols = len(v), len(v[0])
        return (max(rows, cols),) if min(rows, cols) == 1 else (rows, cols)
    return (len(v),)


def answers_equal(g: list, gpct: bool, p: list, ppct: bool) -> bool:
    if len(g) == 1 and len(p) == 1:
        a, b = g[0], p[0]
        if (gpct or ppct) and not isinstance(a, (Tup, Eq, Rel, Mat, sympy.Set)) \
                and not isinstance(b, (Tup, Eq, Rel, Mat, sympy.Set)):
            return percent_match(a, gpct, b, ppct, expr_equal)
        if isinstance(a, sympy.FiniteSet) != isinstance(b, sympy.FiniteSet):  # {3} vs 3
            a, b = (list(a.args) if isinstance(a, sympy.FiniteSet) else [a]), (
                list(b.args) if isinstance(b, sympy.FiniteSet) else [b])
            return _bag_equal(a, b)
        return item_equal(a, b)
    g = [x for v in g for x in (v.args if isinstance(v, sympy.FiniteSet) else (v,))]
    p = [x for v in p for x in (v.args if isinstance(v, sympy.FiniteSet) else (v,))]
    return _bag_equal(g, p)


def math_verify_equal(gold: str, gpct: bool, pred: str, ppct: bool) -> tuple[bool, str]:
    """math-verify on our extracted spans; a parse that covers under 3/4 of a span, or loses one of its
    numbers, counts as unparsed, and its "equal" on two expressions is confirmed exactly."""
    from math_verify import parse, verify  # optional extra; the worker reports its absence

    def one(s: str, pct: bool):
        text = s + ("\\%" if pct else "")
        got = parse(f"${text}$", parsing_timeout=None)
        if len(got) < 2 or len(re.sub(r"\s", "", str(got[1]))) < 0.75 * len(re.sub(r"\s", "", text)):
            return None
        # math-verify drops what it cannot read and says nothing ("3 (if x>0)" parses as 3): a number
        # written in the span that its parse lost means the parse is not the answer.
        kept = set(re.findall(r"\d+", str(got[0])))
        if any(n not in kept for n in re.findall(r"\d+", s)):
            return None
        return got

    g, p = one(gold, gpct), one(pred, ppct)
    if g is None or p is None:
        return False, "unparsable"
    if not verify(g, p, timeout_seconds=None):
        return False, "math-verify"
    a, b = _exact(g[0]), _exact(p[0])
    if isinstance(a, sympy.Expr) and isinstance(b, sympy.Expr):  # its "equal" rounds floats to 6 digits:
        try:                                                        # confirm it exactly, as for our parses
            return expr_equal(a, b) and not _ABSORBED[0], "math-verify"
        except (Unsupported, Undecidable, TypeError, ValueError):
            return False, "undecidable"
    return True, "math-verify"


def _exact(v):
    """math-verify's decimals (sympy Floats) as the exact decimals they were written as, and its limits,
    sums and integrals evaluated (under the worker's deadline)."""
    if not isinstance(v, sympy.Expr):
        return v
    if v.atoms(sympy.Float):
        v = v.xreplace({f: sympy.Rational(str(f)) for f in v.atoms(sympy.Float)})
    if v.has(sympy.Limit, sympy.Sum, sympy.Product, sympy.Integral, sympy.Derivative):
        v = v.doit()
    return v


def compare(gold: str, gpct: bool, pred: str, ppct: bool, backend: str = "auto") -> tuple[bool, str]:
    """``(equal, how)``: how is "symbolic", "math-verify", "unparsable", "undecidable" or "too large"."""
    if backend != "math_verify":
        INEXACT[0] = _ABSORBED[0] = False
        try:
            g = parse_answer(gold, "=" not in pred)
            p = parse_answer(pred, "=" not in gold)
            ok = answers_equal(g, gpct, p, ppct)
            if ok and (INEXACT[0] or _ABSORBED[0]):
                return False, "undecidable"  # equal only as far as a 40-digit float can tell
            return ok, "symbolic"
        except TooLarge:
            return False, "too large"
        except Undecidable:
            return False, "undecidable"
        except Unsupported:
            if backend == "sympy":
                return False, "unparsable"
    try:
        return math_verify_equal(gold, gpct, pred, ppct)
    except ImportError:
        return False, "unparsable"

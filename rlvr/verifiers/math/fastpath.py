"""Exact comparison of plain numeric answers in pure Python (no sympy).

Most GSM8K answers and about half of MATH answers are numbers. This module evaluates an answer to an
exact :class:`fractions.Fraction` when it is built only from:

- integers, decimals (``.5``), thousands separators (``1,234``), scientific notation (``1.5e3`` is 1500,
  where math-verify reads 1.5), a sign;
- ``+ - * / ^`` (integer exponents), ``\\cdot`` ``\\times`` ``\\div``, parentheses and braces, ``n!``;
- ``\\frac{a}{b}`` and ``\\frac12``; a mixed number ``2\\frac{1}{2}`` or plain ``2 1/2`` (an integer
  followed by a proper fraction of integer literals) is 5/2;
- a repeating decimal ``0.\\overline{3}`` (1/3), ``1.2\\overline{45}``;
- ``digits_{base}`` (``1011_2``): its value is read in that base (so ``1011_2`` is 11, not 1011), except
  that a plain answer is read in the gold's base when the gold has one (``1011`` answers ``1011_2``).

Anything else (a letter, ``\\sqrt``, ``\\pi``, ...) makes the parser decline (``None``) and the pair goes
to the symbolic path. Sizes are capped (results over 20,000 bits, factorials over 1000, exponents over
10,000) so a huge power declines instead of stalling the caller. Values compare exactly, never as floats,
so ``0.333`` is not 1/3 and ``1/2^{99}`` is not ``1/2^{98}``.

Containers: ``(a, b)``/``[a, b]`` compare element-wise and need the same brackets; ``\\{a, b\\}`` and a bare
list ``a, b`` compare as sets. Percent: when exactly one side ended in ``%``, its value ``p`` matches the
other side ``u`` if ``p == u`` or ``p/100 == u`` (``50%`` equals ``50`` and ``0.5``); when both did, the
values must be equal.
"""

from __future__ import annotations

import math
import re
from fractions import Fraction

from .normalize import split_items, strip_var_prefix

__all__ = ["parse_exact", "shape", "fast_equal", "percent_match", "MAX_BITS"]

MAX_BITS = 20_000
MAX_FACTORIAL = 1000
_TOKEN = re.compile(r"\s*(?:(?P<num>(?:\d{1,3}(?:,\d{3})+|\d+)(?:\.\d*)?(?:[eE][-+]?\d+)?|\.\d+(?:[eE][-+]?\d+)?)"
                    r"|(?P<cmd>\\frac|\\cdot|\\times|\\div)(?![a-zA-Z])|(?P<op>[-+*/^(){}!]))")
_BASE = re.compile(r"([0-9A-Za-z]+)_\{?(\d{1,2})\}?")
_PLAIN_MIXED = re.compile(r"([-+]?\d+)\s+(\d+)\s*/\s*(\d+)")
_REPEATING = re.compile(r"(\d*)\.(\d{0,20})\\overline\s*\{(\d{1,20})\}")


class _Decline(Exception):
    """The answer is outside what the fast path evaluates exactly."""


def _check(x: Fraction) -> Fraction:
    if x.numerator.bit_length() > MAX_BITS or x.denominator.bit_length() > MAX_BITS:
        raise _Decline("too large")
    return x


def _tokens(s: str) -> list[tuple[str, str]]:
    out, pos = [], 0
    s = s.rstrip()
    while pos < len(s):
        m = _TOKEN.match(s, pos)
        if not m:
            raise _Decline(s[pos:pos + 10])
        kind = m.lastgroup or "op"
        out.append((kind, m.group(kind).replace(",", "") if kind == "num" else m.group(kind)))
        pos = m.end()
    return out


class _Parser:
    """Recursive descent over the fast-path grammar; every value is an exact Fraction."""

    def __init__(self, s: str):
        self.toks, self.i, self.depth = _tokens(s), 0, 0

    def peek(self) -> tuple[str, str] | None:
        return self.toks[self.i] if self.i < len(self.toks) else None

    def take(self, value: str | None = None) -> tuple[str, str]:
        tok = self.peek()
        if tok is None or (value is not None and tok[1] != value):
            raise _Decline(f"expected {value}")
        self.i += 1
        return tok

    def parse(self) -> Fraction:
        if not self.toks:
            raise _Decline("empty")
        v = self.expr()
        if self.peek() is not None:
            raise _Decline("trailing tokens")
        return v

    def expr(self) -> Fraction:
        self.depth += 1
        if self.depth > 40:  # deep nesting is the symbolic path's problem, not a recursion error here
            raise _Decline("nesting")
        v = self.term()
        while (tok := self.peek()) and tok[1] in "+-":
            self.i += 1
            w = self.term()
            v = _check(v + w if tok[1] == "+" else v - w)
        self.depth -= 1
        return v

    def term(self) -> Fraction:
        v = self.unary()
        while (tok := self.peek()) and tok[1] in ("*", "/", "\\cdot", "\\times", "\\div"):
            self.i += 1
            w = self.unary()
            if tok[1] in ("/", "\\div"):
                if w == 0:
                    raise _Decline("division by zero")
                v = _check(v / w)
            else:
                v = _check(v * w)
        return v

    def unary(self) -> Fraction:
        tok = self.peek()
        if tok and tok[1] in "+-":
            self.i += 1
            v = self.unary()
            return -v if tok[1] == "-" else v
        return self.power()

    def power(self) -> Fraction:
        base = self.postfix()
        if (tok := self.peek()) and tok[1] == "^":
            self.i += 1
            exp = self.unary() if self.peek() and self.peek()[1] in "+-" else self.postfix()
            return _pow(base, exp)
        return base

    def postfix(self) -> Fraction:
        v = self.atom()
        while (tok := self.peek()) and tok[1] == "!":
            self.i += 1
            if v.denominator != 1 or not 0 <= v <= MAX_FACTORIAL:
                raise _Decline("factorial")
            v = Fraction(math.factorial(int(v)))
        return v

    def atom(self) -> Fraction:
        kind, val = self.take()
        if kind == "num":
            mant, _, exp = val.lower().partition("e")
            if exp and abs(int(exp)) > 4000:  # Fraction("1e999999999") would build a billion-digit integer
                raise _Decline("exponent")
            v = _check(Fraction(val))
            return self.mixed(v, val)
        if val in ("(", "{"):
            v = self.expr()
            self.take(")" if val == "(" else "}")
            return v
        if val == "\\frac":
            num, den = self.frac_arg(), self.frac_arg()
            if den == 0:
                raise _Decline("division by zero")
            return _check(num / den)
        raise _Decline(val)

    def frac_arg(self) -> Fraction:
        tok = self.peek()
        if tok and tok[0] == "num" and tok[1].isdigit():  # \frac12: each argument is one digit
            self.i += 1
            if len(tok[1]) > 1:  # "\frac123" -> 1, then "23" stays for the denominator
                self.toks.insert(self.i, ("num", tok[1][1:]))
            return Fraction(int(tok[1][0]))
        self.take("{")
        v = self.expr()
        self.take("}")
        return v

    def mixed(self, whole: Fraction, text: str) -> Fraction:
        """``2\\frac{1}{2}`` is 5/2 when the fraction is proper and both parts are integer literals."""
        tok = self.peek()
        if not (tok and tok[1] == "\\frac" and text.isdigit()):
            return whole
        save = self.i
        self.i += 1
        try:
            num, den = self.frac_arg(), self.frac_arg()
        except _Decline:
            self.i = save
            raise
        if num.denominator == 1 and den.denominator == 1 and 0 < num < den:
            return whole + num / den
        raise _Decline("implicit multiplication")


def _pow(base: Fraction, exp: Fraction) -> Fraction:
    if exp.denominator != 1 or abs(exp) > 10_000:
        raise _Decline("exponent")
    bits = max(base.numerator.bit_length(), base.denominator.bit_length())
    if bits * abs(int(exp)) > MAX_BITS:
        raise _Decline("too large")
    if base == 0 and exp < 0:
        raise _Decline("division by zero")
    return base ** int(exp)


def _repeating(m: re.Match) -> str:
    """``1.2\\overline{34}`` -> its exact value as a ``\\frac``."""
    whole, fixed, rep = m.group(1) or "0", m.group(2), m.group(3)
    value = Fraction(int(whole + fixed + rep) - int(whole + fixed), (10 ** len(rep) - 1) * 10 ** len(fixed))
    return f"\\frac{{{value.numerator}}}{{{value.denominator}}}"


def parse_exact(s: str, base: int | None = None) -> Fraction | None:
    """The exact value of a plain numeric answer, or None when the fast path declines."""
    s = s.strip()
    if not s or len(s) > 400:
        return None
    if "\\overline" in s:
        s = _REPEATING.sub(_repeating, s)
    m = _BASE.fullmatch(s)
    if m or base:
        digits, b = (m.group(1), int(m.group(2))) if m else (s, base)
        try:
            return Fraction(int(digits, b)) if 2 <= b <= 36 else None
        except ValueError:
            return None if m else parse_exact(s)
    mixed = _PLAIN_MIXED.fullmatch(s)
    if mixed and int(mixed.group(2)) < int(mixed.group(3)):  # plain-text mixed number "2 1/2"
        whole, frac = Fraction(mixed.group(1)), Fraction(int(mixed.group(2)), int(mixed.group(3)))
        return whole - frac if mixed.group(1).startswith("-") else whole + frac
    try:
        return _Parser(s).parse()
    except (_Decline, ValueError, ZeroDivisionError, OverflowError, RecursionError):
        return None


def shape(s: str, strip_prefix: bool) -> tuple[str, str, list[str]]:
    """``(kind, brackets, items)``: kind is scalar, tuple (ordered, with its brackets) or set."""
    t = s.strip()
    if t.startswith("\\{") and t.endswith("\\}"):
        return "set", "", [strip_var_prefix(x) if strip_prefix else x for x in split_items(t[2:-2], False)]
    if len(t) >= 2 and t[0] in "([" and t[-1] in ")]" and _closes_at_end(t):
        inner = split_items(t[1:-1], False)  # inside brackets a comma always separates: (0,100) is a point
        if len(inner) > 1:
            return "tuple", t[0] + t[-1], inner
    items = split_items(t)
    if strip_prefix:
        items = [strip_var_prefix(x) for x in items]
    return ("set", "", items) if len(items) > 1 else ("scalar", "", items or [""])


def _closes_at_end(t: str) -> bool:
    depth = 0
    for i, c in enumerate(t):
        depth += 1 if c in "([{" else -1 if c in ")]}" else 0
        if depth == 0:
            return i == len(t) - 1
    return False


def percent_match(g: object, gpct: bool, p: object, ppct: bool, eq) -> bool:
    """Percent rule shared with the symbolic path; ``eq`` compares two values, ``/100`` scales one."""
    if gpct == ppct:
        return eq(g, p)
    pct, other = (g, p) if gpct else (p, g)
    return eq(pct, other) or eq(pct / 100, other)


def fast_equal(gold: str, gpct: bool, pred: str, ppct: bool) -> bool | None:
    """True/False when both answers evaluate exactly in pure Python, None to defer to the symbolic path."""
    gk, gb, gi = shape(gold, "=" not in pred)
    pk, pb, pi_ = shape(pred, "=" not in gold)
    gbase = _BASE.fullmatch(gold.strip())
    base = int(gbase.group(2)) if gbase and not _BASE.fullmatch(pi_[0]) and len(pi_) == 1 else None
    gv = [parse_exact(x) for x in gi]
    pv = [parse_exact(x, base) for x in pi_]
    if any(v is None for v in gv + pv):
        return None
    if gk == "scalar" and pk == "scalar":
        return percent_match(gv[0], gpct, pv[0], ppct, lambda a, b: a == b)
    if gpct or ppct:
        return None
    if gk == "tuple" or pk == "tuple":
        if gk != pk or gb != pb:
            return None if gk == pk else False
        return gv == pv
    return set(gv) == set(pv)

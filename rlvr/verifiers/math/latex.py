"""A small, strict LaTeX-to-sympy parser for final answers (runs in the worker processes only).

Why our own: math-verify's ANTLR parser costs milliseconds per answer and truncates some inputs silently
(``1-\\frac{1}{\\mathrm{e}}`` parses as 1; ``3*x-1*y+13=0`` as 0). This parser builds sympy objects
directly, never calls ``eval``, and raises :class:`Unsupported` on anything it does not understand so the
caller can fall back to math-verify instead of guessing.

Grammar, loosest binding first: relations (``= < > \\le \\ge \\ne \\in``, chains ``a<x<b``, joined by
"or"/"and"), set operators (``\\cup \\cap \\setminus``), ``+ - \\pm \\mp``, ``* / \\cdot \\times \\div`` and
implicit multiplication (``2x``, ``2\\sqrt{3}``, ``(x+1)(x-1)``; never of a number written after a value:
``1 5`` and ``x2`` are rejected), unary signs, ``^`` (right-assoc.; an
unbraced digit run is one exponent, as in plain text), ``!``. Atoms: numbers (``1.5e3`` is 1500, a mixed
number ``2\\frac12`` is 5/2, ``1011_2`` is read in base 2), single-letter symbols (``xy`` is x*y; ``x_1``
and Greek letters are symbols; ``e`` is Euler's number and ``i`` the imaginary unit), ``\\pi``,
``\\infty``, ``\\emptyset``, ``\\mathbb{R}``, ``\\frac``, ``\\sqrt[n]{}`` (also ``\\sqrt2``, ``\\sqrt(2)``),
``\\binom``, ``|x|``, floor/ceiling, trig/hyperbolic/inverse trig, ``\\ln``, ``\\log`` (base 10, as
math-verify), ``\\log_b``, ``\\exp``, ``\\max``/``\\min``, ``(a, b)``/``[a, b)`` tuples or intervals,
``\\{a, b\\}`` sets, and ``pmatrix`` matrices. ``\\pm`` anywhere makes a value with two alternatives.

Size guards and the non-expression values (tuples, equations, sets, matrices, ``\\pm`` alternatives) live
in :mod:`.values`.
"""

from __future__ import annotations

import sympy

from .latex_tokens import ATOM_CMDS as _ATOM_CMDS
from .latex_tokens import FUNCS as _FUNCS
from .latex_tokens import GREEK as _GREEK
from .latex_tokens import MULOPS as _MULOPS
from .latex_tokens import RELOPS as _RELOPS
from .latex_tokens import tokens as _tokens
from .values import (DIGITS, Alts, Eq, Mat, Rel, TooLarge, Tup, Unsupported, alts, as_expr, as_set, huge_inexact,
                     relations_to_set, scientific)
from .values import binomial as _binomial
from .values import factorial as _factorial
from .values import power as _pow

__all__ = ["Unsupported", "Tup", "Eq", "Rel", "Mat", "Alts", "parse_item", "DIGITS"]

MAX_DEPTH = 60

class _Parser:
    def __init__(self, s: str):
        self.toks, self.i, self.depth, self.in_abs = _tokens(s), 0, 0, 0

    def peek(self, k: int = 0):
        j = self.i + k
        return self.toks[j][1] if j < len(self.toks) else None

    def take(self, want: str | None = None) -> tuple[str, str]:
        if self.i >= len(self.toks) or (want is not None and self.toks[self.i][1] != want):
            raise Unsupported(f"expected {want!r} at token {self.i}")
        self.i += 1
        return self.toks[self.i - 1]

    def parse(self):
        if not self.toks:
            raise Unsupported("empty")
        v = self.disjunction()
        if self.i != len(self.toks):
            raise Unsupported(f"unexpected {self.peek()!r}")
        return v

    def disjunction(self):
        parts, joins = [self.relation()], []
        while self.peek() in ("or", "and"):
            joins.append(self.take()[1])
            parts.append(self.relation())
        if not joins:
            return parts[0]
        if not all(isinstance(p, Rel) for p in parts) or len({p[1] for p in parts}) != 1:
            raise Unsupported("or/and between non-relations")
        acc = parts[0][0]
        for j, p in zip(joins, parts[1:]):
            acc = sympy.Union(acc, p[0]) if j == "or" else sympy.Intersection(acc, p[0])
        return Rel((acc, parts[0][1]))

    def relation(self):
        left = self.setexpr()
        chain = []
        while self.peek() in _RELOPS:
            op = _RELOPS[self.take()[1]]
            right = self.setexpr()
            chain.append((op, left, right))
            left = right
        if not chain:
            return left
        if len(chain) == 1 and chain[0][0] == "==":
            return Eq((as_expr(chain[0][1]), as_expr(chain[0][2])))
        return relations_to_set(chain)

    def setexpr(self):
        v = self.additive()
        while self.peek() in ("\\cup", "\\cap", "\\setminus"):
            op = self.take()[1]
            w = self.additive()
            a, b = as_set(v), as_set(w)
            v = sympy.Union(a, b) if op == "\\cup" else sympy.Intersection(a, b) if op == "\\cap" else a - b
        return v

    def additive(self):
        v = self.term()
        while self.peek() in ("+", "-", "\\pm", "\\mp"):
            op = self.take()[1]
            w = self.term()
            if op in ("\\pm", "\\mp"):
                v = Alts(x for a in (v if isinstance(v, Alts) else (v,))
                         for x in alts(lambda p, q: Alts((p + q, p - q)), a, w))
            else:
                v = alts(lambda p, q: as_expr(p) + as_expr(q) if op == "+" else as_expr(p) - as_expr(q), v, w)
        return v

    def term(self):
        v = self.unary()
        while True:
            op = self.peek()
            if op in _MULOPS:
                self.take()
                w = self.unary()
                div = op in ("/", "\\div")
                v = alts(lambda p, q: as_expr(p) / as_expr(q) if div else as_expr(p) * as_expr(q), v, w)
            elif self.starts_atom():
                if self.toks[self.i][0] == "num":  # "1 5" is neither 15 nor 1*5; "x2", "(x)2" are typos
                    raise Unsupported("a number right after a value")
                w = self.power()
                v = alts(lambda p, q: as_expr(p) * as_expr(q), v, w)
            else:
                return v

    def starts_atom(self) -> bool:
        if self.i >= len(self.toks):
            return False
        kind, val = self.toks[self.i]
        return kind in ("num", "id") or val == "(" or (val == "|" and not self.in_abs) or val in _ATOM_CMDS

    def unary(self):
        op = self.peek()
        if op in ("-", "+", "\\pm", "\\mp"):
            self.take()
            v = self.unary()
            if op in ("\\pm", "\\mp"):
                return Alts(x for a in (v if isinstance(v, Alts) else (v,)) for x in (a, -as_expr(a)))
            return alts(lambda p: -as_expr(p), v) if op == "-" else v
        return self.power()

    def power(self):
        base = self.postfix()
        if self.peek() == "^":
            self.take()
            exp = self.group() if self.peek() == "{" else self.unary()
            return alts(_pow, base, exp)
        return base

    def postfix(self):
        v = self.atom()
        while self.peek() == "!":
            self.take()
            v = alts(_factorial, v)
        return v

    def group(self):
        self.take("{")
        v = self.disjunction()
        self.take("}")
        return v

    def atom(self):
        self.depth += 1
        if self.depth > MAX_DEPTH:
            raise Unsupported("nesting too deep")
        try:
            kind, val = self.take()
            if kind == "num":
                return self.number(val)
            if kind == "id":
                return self.symbol(val)
            if val in ("(", "["):
                return self.bracket(val)
            if val == "{":
                self.i -= 1
                return self.group()
            if val == "\\{":
                items = self.items_until("\\}")
                return sympy.FiniteSet(*[x for it in items for x in (it if isinstance(it, Alts) else (it,))])
            if val == "|":
                self.in_abs += 1
                v = self.additive()
                self.take("|")
                self.in_abs -= 1
                return alts(lambda p: sympy.Abs(as_expr(p)), v)
            if kind == "cmd":
                return self.command(val)
            raise Unsupported(f"unexpected {val!r}")
        finally:
            self.depth -= 1

    def number(self, text: str):
        v = scientific(text) if "e" in text.lower() else sympy.Rational(text)
        if self.peek() == "_" and text.isdigit():  # 1011_2: digits in a base
            self.take()
            b = self.group() if self.peek() == "{" else sympy.Integer(self.take()[1])
            try:
                return sympy.Integer(int(text, int(b)))
            except (ValueError, TypeError):
                raise Unsupported("bad base") from None
        if self.peek() == "\\frac" and text.isdigit():  # mixed number 2\frac{1}{2}
            save = self.i
            self.take()
            num, den = self.frac_arg(), self.frac_arg()
            if num.is_Integer and den.is_Integer and 0 < num < den:
                return v + num / den
            self.i = save
        return v

    def symbol(self, name: str):
        if self.peek() == "_":
            self.take()
            sub = self.take()[1] if self.peek() != "{" else self.raw_group()
            name = f"{name}_{sub}"
        elif name == "e":
            return sympy.E
        elif name == "i":
            return sympy.I
        return sympy.Symbol(name)

    def raw_group(self) -> str:
        self.take("{")
        parts = []
        while self.peek() != "}":
            parts.append(self.take()[1])
        self.take("}")
        return "".join(parts)

    def bracket(self, open_: str):
        items = self.items_until(")", "]")
        close = self.toks[self.i - 1][1]
        if len(items) == 1 and open_ == "(" and close == ")":
            return items[0]
        if len(items) == 1:
            raise Unsupported("square brackets around one value")
        t = Tup(items)
        t.brackets = open_ + close
        return t

    def items_until(self, *closers: str) -> list:
        items = []
        if self.peek() in closers:
            self.take()
            return items
        while True:
            items.append(self.disjunction())
            nxt = self.take()[1]
            if nxt in closers:
                return items
            if nxt != ",":
                raise Unsupported(f"expected , got {nxt!r}")

    def frac_arg(self):
        if self.peek() == "{":
            return self.group()
        kind, val = self.take()
        if kind == "num":  # \frac12: one digit per argument
            if len(val) > 1 and val.isdigit():
                self.toks.insert(self.i, ("num", val[1:]))
                val = val[0]
            return sympy.Rational(val)
        if kind == "id":
            return self.symbol(val)
        raise Unsupported("\\frac argument")

    def command(self, c: str):
        name = c[1:]
        if c == "\\frac":
            num, den = self.frac_arg(), self.frac_arg()
            return alts(lambda p, q: as_expr(p) / as_expr(q), num, den)
        if c == "\\sqrt":
            index = None
            if self.peek() == "[":
                self.take()
                index = self.additive()
                self.take("]")
            arg = self.frac_arg() if self.peek() != "(" else self.paren_arg()
            return alts(lambda a: sympy.sqrt(as_expr(a)) if index is None else sympy.root(as_expr(a), index), arg)
        if c == "\\binom":
            n, k = self.frac_arg(), self.frac_arg()
            return _binomial(n, k)
        if c in ("\\lfloor", "\\lceil"):
            v = as_expr(self.additive())
            self.take("\\rfloor" if c == "\\lfloor" else "\\rceil")
            return v if huge_inexact(v) else (sympy.floor if c == "\\lfloor" else sympy.ceiling)(v)
        if c == "\\pi":
            return sympy.pi
        if c == "\\infty":
            return sympy.oo
        if c == "\\emptyset":
            return sympy.EmptySet
        if c == "\\mathbb":
            if self.raw_group() != "R":
                raise Unsupported("number set other than R")
            return sympy.Reals
        if c.startswith("\\begin{"):
            return self.matrix(c[7:-1])
        if c in ("\\max", "\\min"):
            args = self.items_until(")") if self.take("(") else []
            return (sympy.Max if c == "\\max" else sympy.Min)(*map(as_expr, args))
        if name in _GREEK:
            return self.symbol(name)
        if name in _FUNCS:
            return self.function(name)
        raise Unsupported(f"command {c}")

    def paren_arg(self):
        self.take("(")
        v = self.disjunction()
        self.take(")")
        return v

    def function(self, name: str):
        fn, power, base = _FUNCS[name], None, None
        if name == "log" and self.peek() == "_":
            self.take()
            base = self.group() if self.peek() == "{" else self.atom()
            fn = lambda a: sympy.log(a, as_expr(base))  # noqa: E731
        if self.peek() == "^":  # \sin^2 x is (\sin x)^2
            self.take()
            power = self.group() if self.peek() == "{" else self.atom()
        if self.peek() in ("(", "{"):
            arg = self.paren_arg() if self.peek() == "(" else self.group()
        else:  # \sin 2x: the argument is the product of the following simple atoms
            arg = self.power()
            while self.starts_atom() and not (self.peek() in {"\\" + f for f in _FUNCS}):
                arg = alts(lambda p, q: as_expr(p) * as_expr(q), arg, self.power())
        v = alts(lambda a: fn(_periodic_arg(name, as_expr(a))), arg)
        return alts(_pow, v, power) if power is not None else v

    def matrix(self, env: str):
        if env not in ("pmatrix", "matrix", "array"):
            raise Unsupported(f"environment {env}")
        if env == "array" and self.peek() == "{":
            self.raw_group()
        rows, row = [], [self.additive()]
        while True:
            tok = self.take()[1]
            if tok == "&":
                row.append(self.additive())
            elif tok == "\\\\":
                rows.append(tuple(row))
                if str(self.peek()).startswith("\\end{"):
                    row = []
                    continue
                row = [self.additive()]
            elif tok.startswith("\\end{"):
                if row:
                    rows.append(tuple(row))
                if len({len(r) for r in rows}) != 1:
                    raise Unsupported("ragged matrix")
                return Mat(rows)
            else:
                raise Unsupported(f"matrix token {tok!r}")


def _periodic_arg(name: str, a):
    if name in _PERIODIC and huge_inexact(a):
        raise TooLarge(f"\\{name} of a value known to {DIGITS} digits only")
    return a


_PERIODIC = {"sin", "cos", "tan", "cot", "sec", "csc"}


def parse_item(s: str):
    """One answer item as a sympy value, :class:`Tup`, :class:`Eq`, :class:`Rel`, :class:`Mat` or
    :class:`Alts`; raises :class:`Unsupported`."""
    if len(s) > 1000:
        raise Unsupported("too long")
    try:
        return _Parser(s).parse()
    except (Unsupported, ValueError, TypeError, ZeroDivisionError, AttributeError, IndexError) as e:
        raise Unsupported(f"{type(e).__name__}: {e}") from None

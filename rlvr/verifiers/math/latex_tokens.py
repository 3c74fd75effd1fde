"""The lexer of :mod:`.latex`: token pattern, known commands, functions and Greek letters."""

from __future__ import annotations

import re

import sympy

from .values import Unsupported

__all__ = ["TOKEN", "GREEK", "FUNCS", "RELOPS", "MULOPS", "ATOM_CMDS", "tokens"]

TOKEN = re.compile(r"\s*(?:(?P<num>(?:\d+(?:\.\d*)?|\.\d+)(?:[eE][-+]?\d+(?![a-zA-Z]))?)"
                    r"|(?P<cmd>\\(?:begin|end)\{[a-zA-Z*]+\}|\\[a-zA-Z]+|\\[{}|]|\\\\)"
                    r"|(?P<word>[a-zA-Z]+)|(?P<op>[-+*/^_!()\[\]{},=<>|&']))")
GREEK = set("alpha beta gamma delta epsilon varepsilon zeta eta theta vartheta iota kappa lambda mu nu xi rho "
             "sigma tau upsilon phi varphi chi psi omega Gamma Delta Theta Lambda Xi Sigma Phi Psi Omega".split())
FUNCS = {"sin": sympy.sin, "cos": sympy.cos, "tan": sympy.tan, "cot": sympy.cot, "sec": sympy.sec,
          "csc": sympy.csc, "arcsin": sympy.asin, "arccos": sympy.acos, "arctan": sympy.atan, "sinh": sympy.sinh,
          "cosh": sympy.cosh, "tanh": sympy.tanh, "ln": sympy.log, "exp": sympy.exp,
          "log": lambda a: sympy.log(a, 10)}
RELOPS = {"=": "==", "<": "<", ">": ">", "\\le": "<=", "\\ge": ">=", "\\ne": "!=", "\\in": "in"}
MULOPS = ("*", "\\cdot", "\\times", "/", "\\div")
ATOM_CMDS = {"\\frac", "\\sqrt", "\\pi", "\\binom", "\\lfloor", "\\lceil", "\\infty", "\\mathbb",
              "\\begin{pmatrix}", "\\max", "\\min"} | {"\\" + f for f in FUNCS} | {"\\" + g for g in GREEK}


def tokens(s: str) -> list[tuple[str, str]]:
    """``(kind, text)`` tokens of ``s``: ``num``, ``cmd`` (``\\frac``), ``id`` (one letter), ``word``, ``op``."""
    out, pos = [], 0
    s = s.rstrip()
    while pos < len(s):
        m = TOKEN.match(s, pos)
        if not m:
            raise Unsupported(f"character {s[pos]!r}")
        kind = m.lastgroup
        val = m.group(kind)
        pos = m.end()
        if kind == "word":  # plain-text names; other letter runs are products (xy) or text (rejected)
            if val in FUNCS or val in ("pi", "sqrt", "infty"):
                out.append(("cmd", "\\" + val))
            elif val in ("or", "and"):
                out.append(("word", val))
            elif len(val) <= 2:
                out.extend(("id", c) for c in val)
            else:
                raise Unsupported(f"text {val!r}")
        else:
            out.append((kind, val))
    return out

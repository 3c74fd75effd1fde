"""Worked chains checked step by step: the ``chain`` verifier of the ``chains`` testbed (rlvr.tasks.chains).

A completion is a chain of equations ending in an answer, e.g. for ``4738+2965=``::

    8+5=13; 3+6+1=10; 7+9+1=17; 4+2+1=7; Answer: 7703

It is read leniently in layout and strictly in content:

- **layout**: equations anywhere in the text, in order, whatever separates them (``;``, new lines, prose such
  as "write 3, carry 1", numbering, LaTeX ``$...$``), either way round (``8+5=13`` or ``13=8+5``); spaces
  anywhere; ``×``, ``·``, ``∗``, ``⋅``, ``x`` between digits, LaTeX ``\times``, ``\cdot``, ``\ast``, ``\div``,
  ``÷`` and Unicode minus signs are the ASCII operators, as are the words ``plus``, ``minus``, ``times``,
  ``multiplied by``, ``divided by`` and ``equals`` (``is equal to``) between two numbers; a note in words in
  parentheses inside an equation (``3+6+1 (carry) = 10``) is read past; invisible characters are dropped;
  the problem's own equation restated (``4738+2965=7703``, true only with the right answer) is not a step;
- **the answer** is the last ``Answer: N`` (``The answer is N``, ``#### N``, ``\boxed{N}``; Markdown emphasis
  such as ``**Answer:** N`` and thousands separators ``7,703`` or a zero decimal ``7703.0`` are read), alone on
  the rest of its line but for a full stop and closing marks, and two different stated answers give none
  ("Answer: 85 or 86", "Answer: 85; 86", "Answer: 85, 86" give none);
- **every equation must be true** (integers, ``+ - * /`` with the usual precedence; a division must be exact);
- **the chain must be the problem's**: for the column families (``add``, ``mul``) the equations must be the
  column steps of the problem in order, each compared as the sum of its terms (``3+6+1=10`` and ``1+6+3=10``
  are the same step; a ``+0`` carry may be written or not); for ``countdown`` every step must combine two
  numbers still available (the problem's, or results not yet used), each used once, and the last result must
  be the target;
- **the answer must be the problem's** and the chain's own result.

``reward`` (and ``correct``) is 1 when all of that holds, else 0; the components say which part failed:
``answer`` (the stated answer is right), ``steps_true`` (the share of true equations), ``chain`` (the chain is
the problem's). So a wrong chain that ends in the right answer scores 0, and a right chain in another layout
scores 1. Reading is bounded: at most ``MAX_CHARS`` characters and ``MAX_STEPS`` equations.
"""

from __future__ import annotations

import re
from collections import Counter
from fractions import Fraction
from typing import Any, Sequence

from rlvr.core.types import Example, Score
from rlvr.registry import Params
from rlvr.verifiers.base import VERIFIERS, BaseVerifier

__all__ = ["ChainVerifier", "read_chain", "column_steps", "canonical", "MAX_CHARS", "MAX_STEPS"]

MAX_CHARS = 4000
MAX_STEPS = 64
_FOLD = str.maketrans({"×": "*", "·": "*", "∙": "*", "∗": "*", "⋅": "*", "✕": "*", "⨯": "*", "÷": "/", "∕": "/",
                       "−": "-", "–": "-", "—": "-", "＝": "=", "＋": "+", "\u00a0": " ", "\u2009": " ",
                       "\u202f": " "})
_INT = r"-?\d{1,12}"
_END = r"(?!\d|[.,]\d)"  # a number ends there (a full stop may follow; a decimal part may not)
_EQ = re.compile(rf"(?<![\d.])({_INT}(?:\s*[-+*/]\s*{_INT}){{1,3}})\s*=\s*({_INT}){_END}")
# the same equation the other way round, ``13 = 8+5``: a lone number, then the expression (not itself followed
# by another ``=``); read only where no equation of the usual way round is
_EQ_REVERSED = re.compile(rf"(?<![\d.+*/=-])({_INT})\s*=\s*({_INT}(?:\s*[-+*/]\s*{_INT}){{1,3}}){_END}(?!\s*=)")
_EMPH = r"[*_}]{0,3}"  # Markdown emphasis or a closing LaTeX brace around the answer's marker or number
# the answer: digits, or thousands in groups of three (7,703), with an optional zero decimal (7703.0)
_ANSWER = re.compile(rf"(?:\banswer\b{_EMPH}\s*(?:is\s*)?[:=]?{_EMPH}|####|\\boxed\s*\{{)\s*{_EMPH}\s*"
                     rf"(-?(?:\d{{1,3}}(?:,\d{{3}})+|\d{{1,12}})(?:\.0+)?){_END}", re.IGNORECASE)
_TIMES_X = re.compile(r"(?<=\d)\s*[xX]\s*(?=\d)")
_LATEX_OPS = [(re.compile(r"\\(?:times|cdot|ast)(?![A-Za-z])"), "*"), (re.compile(r"\\div(?![A-Za-z])"), "/"),
              (re.compile(r"\\[,;:! ]"), " ")]
# operators in words, only between two numbers ("8 plus 5 equals 13")
_WORD_OPS = [(re.compile(rf"(?<=\d)\s*\b{w}\b\s*(?=-?\d)", re.IGNORECASE), op) for w, op in (
    ("plus", "+"), ("minus", "-"), ("times", "*"), ("multiplied by", "*"), ("divided by", "/"),
    ("equals", "="), ("is equal to", "="))]
_WORD_NOTE = re.compile(r"\([^\d()=\n]{1,40}\)")  # a parenthesised note with no number in it: "(carry)"


_INVISIBLE = dict.fromkeys(map(ord, "\u200b\u200c\u200d\u2060\ufeff\u00ad"))
# nothing but a full stop and closing marks (emphasis, a brace, LaTeX's $ or \] or \)) may follow the answer on its line
_CLOSE = r"(?:[ \t*_}$]|\\[\])])*"
_AFTER_ANSWER = re.compile(rf"{_CLOSE}[.!]?{_CLOSE}(?:\n|$)")


def _fold(text: str) -> str:
    text = text.translate(_INVISIBLE).translate(_FOLD)
    for pattern, op in _LATEX_OPS + _WORD_OPS:
        text = pattern.sub(op, text)
    return _TIMES_X.sub("*", _WORD_NOTE.sub(" ", text))


def _answer_int(text: str) -> int:
    return int(text.split(".")[0].replace(",", ""))


def _terms(expr: str) -> list[tuple[int, list[Fraction]]] | None:
    """``a*b+c-d/e`` as signed product terms ``[(+1, [a, b]), (+1, [c]), (-1, [d, 1/e])]`` (a divisor is its
    reciprocal); None when malformed or a divisor is 0."""
    tokens = re.findall(r"\d+|[-+*/]", expr.replace(" ", ""))
    out: list[tuple[int, list[Fraction]]] = []
    sign, factors, op = 1, [], None
    if tokens and tokens[0] == "-":  # a leading minus: the first number is negative
        sign, tokens = -1, tokens[1:]
    for t in tokens:
        if t.isdigit():
            if op == "/" and int(t) == 0:
                return None
            factors.append(Fraction(1, int(t)) if op == "/" else Fraction(int(t)))
            op = None
        elif t in "+-":
            out.append((sign, factors))
            sign, factors = (1 if t == "+" else -1), []
        else:
            op = t
    out.append((sign, factors))
    return out if all(f for _, f in out) else None


def _value(terms: list[tuple[int, list[Fraction]]]) -> Fraction:
    total = Fraction(0)
    for sign, factors in terms:
        v = Fraction(1)
        for f in factors:
            v *= f
        total += sign * v
    return total


def canonical(expr: str, result: int) -> tuple[Any, ...] | None:
    """A step as the multiset of its nonzero signed product terms and its result: ``3+6+1=10`` and
    ``1+6+3=10`` are one step, ``6*7+0=42`` and ``7*6=42`` another."""
    terms = _terms(expr)
    if terms is None:
        return None
    key = Counter((sign, tuple(sorted(f))) for sign, f in terms if not (len(f) == 1 and f[0] == 0))
    return tuple(sorted(key.items())), result


def read_chain(text: str) -> tuple[list[tuple[str, int, bool]], int | None, str]:
    """``([(expression, stated result, true?), ...], stated answer, why there is none)`` of a completion."""
    text = _fold(text[:MAX_CHARS])
    steps = []
    usual = [(m.start(), m.end(), m.group(1), m.group(2)) for m in _EQ.finditer(text)]
    taken = bytearray(len(text))  # the characters an equation of the usual way round covers
    for a, b, _, _ in usual:
        taken[a:b] = b"\1" * (b - a)
    reversed_ = [(m.start(), m.end(), m.group(2), m.group(1)) for m in _EQ_REVERSED.finditer(text)
                 if not any(taken[m.start():m.end()])]
    for _, _, expr, res_text in sorted(usual + reversed_):
        res = int(res_text)
        terms = _terms(expr)
        value = _value(terms) if terms is not None else None
        steps.append((expr, res, value is not None and value == res))
        if len(steps) > MAX_STEPS:
            break
    found = list(_ANSWER.finditer(text))
    if not found:
        return steps, None, "no answer"
    if any(not _AFTER_ANSWER.match(text, m.end()) for m in found):
        return steps, None, "more after the answer on its line (a hedge or a second answer)"
    answers = [_answer_int(m.group(1)) for m in found]
    if len(set(answers)) > 1:
        return steps, None, "several different answers"
    return steps, answers[-1], ""


def column_steps(family: str, operands: Sequence[int]) -> tuple[list[tuple[str, int]], int]:
    """The column procedure of ``add`` (``a + b``) or ``mul`` (``a * d``, one digit ``d``): the steps
    ``(expression, result)`` from the last column to the first, and the answer."""
    if family == "add":
        a, b = operands
        da, db = str(a)[::-1], str(b)[::-1]
        steps, carry = [], 0
        for k in range(max(len(da), len(db))):
            x, y = int(da[k]) if k < len(da) else 0, int(db[k]) if k < len(db) else 0
            parts = [str(x)] * (k < len(da)) + [str(y)] * (k < len(db))
            if carry:
                parts.append(str(carry))
            total = x + y + carry
            steps.append(("+".join(parts) if len(parts) > 1 else parts[0] + "+0", total))
            carry = total // 10
        return steps, a + b
    if family == "mul":
        a, d = operands
        steps, carry = [], 0
        for ch in str(a)[::-1]:
            total = int(ch) * d + carry
            steps.append((f"{ch}*{d}" + (f"+{carry}" if carry else ""), total))
            carry = total // 10
        return steps, a * d
    raise ValueError(f"unknown column family {family!r}")


def _countdown_ok(steps: list[tuple[str, int, bool]], numbers: Sequence[int], target: int) -> tuple[bool, str]:
    pool = Counter(numbers)
    last = None
    for expr, res, _ in steps:
        found = re.findall(r"\d+|[-+*/]", expr.replace(" ", ""))
        if len(found) != 3 or found[1] not in "+-*/":
            return False, f"step {expr}={res} is not one operation on two numbers"
        for n in (int(found[0]), int(found[2])):
            if pool[n] <= 0:
                return False, f"step {expr}={res} uses {n}, which is not available"
            pool[n] -= 1
        pool[res] += 1
        last = res
    if last != target:
        return False, "the chain does not end at the target"
    return True, ""


class ChainVerifier(BaseVerifier):
    """See the module docstring. The problem is in ``Example.meta``: ``family`` and ``operands`` (``add``,
    ``mul``) or ``numbers`` and ``target`` (``countdown``)."""

    name = "chain"

    def score(self, example: Example, text: str) -> Score:
        meta = example.meta or {}
        family = meta.get("family")
        gold = int(example.answer)
        steps, answer, why = read_chain(text if isinstance(text, str) else "")
        true = sum(ok for _, _, ok in steps)
        comps = {"answer": float(answer == gold), "steps_true": true / len(steps) if steps else 0.0}
        if len(steps) > MAX_STEPS:
            why = f"more than {MAX_STEPS} equations"
        elif not why and true < len(steps):
            bad = next(f"{e}={r}" for e, r, ok in steps if not ok)
            why = f"a false step: {bad}"
        elif not why and answer != gold:
            why = "wrong answer"
        elif not why and family in ("add", "mul"):
            want_steps, _ = column_steps(family, meta["operands"])
            want = [canonical(e, r) for e, r in want_steps]
            got = [canonical(e, r) for e, r, _ in steps]
            a, b = meta["operands"]
            whole = canonical(f"{a}{'+' if family == 'add' else '*'}{b}", gold)  # the problem restated
            got = [g for g in got if g != whole or g in want]
            if got != want:
                why = ("steps missing" if len(got) < len(want) else "steps that are not the problem's column "
                       "steps" if len(got) == len(want) else "extra steps")
        elif not why and family == "countdown":
            ok, why = _countdown_ok(steps, meta["numbers"], gold)
        elif not why:
            why = f"unknown family {family!r}"
        ok = not why
        return Score(float(ok), {"correct": float(ok), "chain": float(ok or why == "wrong answer"), **comps},
                     {"reason": why or "valid chain", "steps": len(steps)})

    def validation_cases(self):
        ex = Example("c", "47+38=", "85", meta={"family": "add", "operands": [47, 38]})
        return [(ex, "7+8=15; 4+3+1=8; Answer: 85", 1.0), (ex, "Answer: 85", 0.0), (ex, "7+8=14; Answer: 85", 0.0)]


class ChainParams(Params):
    pass


@VERIFIERS.register("chain", ChainParams)
def _chain(p: ChainParams) -> ChainVerifier:
    """Worked chains checked step by step (the chains testbed): every equation true, the problem's own steps,
    the right answer."""
    return ChainVerifier()

"""Countdown: reach a target with an arithmetic expression over given numbers (TinyZero / reasoning-gym).

Example keys: ``meta["numbers"]`` (list of ints, a multiset) and ``meta["target"]`` (a number or a number
string such as ``"7/2"``); without them the verifier cannot score (0 with a reason). ``answer`` is one gold expression,
e.g. ``"(6-2)*5"``.

Reward (``countdown``)::

    expr   = last <answer>...</answer> block, else the last non-empty line (unless require_tags);
             an "= N" restatement after the expression is allowed when N is the target (only the left
             side is evaluated); any other text after it ("= 21", "# correct", "Correct!") scores 0
    r = 1               if expr parses to + - * / and parentheses over integer literals, the literals'
                        multiset is contained in (mode=at_most_once) or equal to (mode=exactly_once) the
                        given numbers, and its exact Fraction value equals the target
      = format_reward   if an expression was extracted and parsed but the numbers or the value are wrong
      = 0               otherwise

TinyZero (Pan et al. 2025, github.com/Jiayi-Pan/TinyZero ``countdown.py``) uses exactly-once and a format
score of 0.1; reasoning-gym's countdown gives 0.05 to parseable-but-wrong answers and 0.01 otherwise.
Here ``format_reward`` defaults to 0 so that wrong answers score exactly 0; set it to 0.1 for TinyZero.

Hacks that score 0 (docs/verifiers.md, *Countdown: what counts as the expression*): several ``<answer>``
blocks holding different expressions; text after the expression (a ``#`` comment, grader text, a claimed
value other than the target); a number used more often than given, or not given at all; ``**``, floats and
everything outside the grammar below. Unicode look-alikes are folded first (``rlvr/verifiers/math/chars.py``):
``−`` is a minus, ``×``/``·``/``⋅`` multiply, ``÷`` divides, fullwidth digits are digits; invisible
characters are removed. A float target is read as the decimal it prints as (``0.1`` is 1/10).

Evaluation never calls ``eval``: the expression is parsed with :mod:`ast` and walked over
:class:`fractions.Fraction`, so ``6/4*2 == 3`` exactly. Only integer literals, binary ``+ - * /``,
parentheses and (if ``allow_unary_minus``) unary minus are accepted; ``**``, names, calls, floats,
comparisons and everything else are rejected. Division by zero is an invalid expression (score 0, no
format credit). The expression is capped at ``max_chars`` characters, literals at ``max_digits`` digits,
and the tree at ``max_depth`` levels, so no input can make evaluation slow or deep.
"""

from __future__ import annotations

import ast
import re
from collections import Counter
from fractions import Fraction
from typing import Literal

from pydantic import Field

from rlvr.core.types import Example, Score
from rlvr.registry import Params
from rlvr.verifiers.base import VERIFIERS, BaseVerifier
from rlvr.verifiers.format import extract_tag, last_line
from rlvr.verifiers.math.chars import fold

__all__ = ["CountdownVerifier", "CountdownParams", "evaluate_expression", "extract_expression", "ExpressionError"]

_BINOPS = {ast.Add: lambda a, b: a + b, ast.Sub: lambda a, b: a - b, ast.Mult: lambda a, b: a * b,
           ast.Div: lambda a, b: a / b}
_DIGITS = re.compile(r"[0-9]+")
_OPERATORS = str.maketrans({"\u00d7": "*", "\u00b7": "*", "\u22c5": "*", "\u2219": "*", "\u2217": "*", "\u00f7": "/",
                            "\u2215": "/"})
_OUTSIDE = re.compile(r"[^0-9+\-*/()\s]")  # the only characters an expression may hold
_ANSWER_BLOCK = re.compile(r"<answer>(.*?)</answer>", re.DOTALL)
_RESTATED = re.compile(r"\s*==?\s*(?P<value>[-+]?\d{1,40}(?:\s*/\s*\d{1,40})?)\s*\.?\s*")


class ExpressionError(ValueError):
    """The expression is not a valid countdown expression."""


def _literal(node: ast.Constant, src: str, max_digits: int) -> Fraction:
    v, text = node.value, ast.get_source_segment(src, node) or ""
    if type(v) is not int or not _DIGITS.fullmatch(text):  # no floats, bools, 0x10, 1_000, 1e3
        raise ExpressionError(f"only plain integer literals are allowed, got {text or v!r}")
    if len(text) > max_digits:
        raise ExpressionError("number literal too long")
    return Fraction(v)


def evaluate_expression(expr: str, max_chars: int = 200, max_digits: int = 12, max_depth: int = 64,
                        allow_unary_minus: bool = False) -> tuple[Fraction, list[int]]:
    """``(exact value, integer literals used)``; raises :class:`ExpressionError` on anything else."""
    if len(expr) > max_chars:
        raise ExpressionError(f"expression longer than {max_chars} characters")
    if bad := _OUTSIDE.search(expr):  # a comment ("# correct"), a name, a string: not an expression
        raise ExpressionError(f"character {bad.group()!r} is not allowed")
    if expr.count("(") > max_depth:
        raise ExpressionError("too many parentheses")
    src = expr.strip()
    try:
        tree = ast.parse(src, mode="eval")
    except (SyntaxError, ValueError, MemoryError, RecursionError) as e:
        raise ExpressionError(f"not an expression: {type(e).__name__}") from None
    used: list[int] = []

    def walk(node: ast.AST, depth: int) -> Fraction:
        if depth > max_depth:
            raise ExpressionError("expression nested too deeply")
        if isinstance(node, ast.Constant):
            value = _literal(node, src, max_digits)
            used.append(int(value))
            return value
        if isinstance(node, ast.BinOp) and type(node.op) in _BINOPS:
            left, right = walk(node.left, depth + 1), walk(node.right, depth + 1)
            if isinstance(node.op, ast.Div) and right == 0:
                raise ExpressionError("division by zero")
            return _BINOPS[type(node.op)](left, right)
        if allow_unary_minus and isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.USub):
            return -walk(node.operand, depth + 1)
        raise ExpressionError(f"{type(node).__name__} is not allowed")

    return walk(tree.body, 0), used


def extract_expression(text: str, require_tags: bool = False) -> str | None:
    """The candidate expression: the last ``<answer>`` block, else the last non-empty line; ``= ...`` dropped."""
    expr = extract_tag(text, "answer")
    if expr is None and not require_tags:
        expr = last_line(text)
    if expr is None:
        return None
    expr = expr.strip().strip("$").strip()
    if "=" in expr:
        expr = expr.split("=", 1)[0]
    return expr.strip() or None


def _claimed(text: str, require_tags: bool) -> str | None:
    """What follows the expression's ``=`` in the same block or line (None when there is no ``=``)."""
    block = extract_tag(text, "answer")
    if block is None and not require_tags:
        block = last_line(text)
    block = (block or "").strip().strip("$").strip()
    return block.split("=", 1)[1] if "=" in block else None


def _parse_target(value: object) -> Fraction:
    if isinstance(value, bool) or not isinstance(value, (int, float, str, Fraction)):
        raise ValueError(f"target must be a number or a number string, got {value!r}")
    return Fraction(repr(value)) if isinstance(value, float) else Fraction(value)


def _numbers_ok(used: list[int], given: list[int], mode: str) -> str | None:
    """None when ``used`` is allowed by ``given`` under ``mode``; else the reason."""
    have, need = Counter(given), Counter(used)
    extra = need - have
    if extra:
        return f"uses numbers not available (or too often): {sorted(extra.elements())}"
    if mode == "exactly_once" and need != have:
        return f"does not use every number exactly once; unused: {sorted((have - need).elements())}"
    return None


class CountdownVerifier(BaseVerifier):
    """Exact-value countdown check over a multiset of numbers; optional credit for parseable wrong answers."""

    name = "countdown"

    def __init__(self, mode: str = "at_most_once", format_reward: float = 0.0, require_tags: bool = False,
                 allow_unary_minus: bool = False, max_chars: int = 200, max_digits: int = 12, max_depth: int = 64):
        self.mode, self.format_reward, self.require_tags = mode, format_reward, require_tags
        self.allow_unary_minus, self.max_chars, self.max_digits, self.max_depth = (
            allow_unary_minus, max_chars, max_digits, max_depth)

    def _zero(self, reason: str, **info) -> Score:
        return Score(0.0, {"correct": 0.0, "format": 0.0}, {"reason": reason, **info})

    def score(self, example: Example, text: str) -> Score:
        numbers, target = example.meta.get("numbers"), example.meta.get("target")
        if numbers is None or target is None:
            return self._zero("example has no meta['numbers'] / meta['target']")
        if not all(type(n) is int for n in numbers):
            return self._zero(f"meta['numbers'] must be ints, got {numbers!r}")
        goal = _parse_target(target)
        text = fold(text[-(self.max_chars * 50):]).translate(_OPERATORS)
        blocks = {re.sub(r"\s+", "", b) for b in _ANSWER_BLOCK.findall(text)}
        if len(blocks) > 1:
            return self._zero("several different <answer> blocks")
        expr = extract_expression(text, self.require_tags)
        if expr is None:
            return self._zero("no expression found")
        claimed = _claimed(text, self.require_tags)
        if claimed is not None:
            m = _RESTATED.fullmatch("=" + claimed)
            if not m or Fraction(re.sub(r"\s+", "", m.group("value"))) != goal:
                return self._zero("text after the expression that is not '= target'", expression=expr[:200])
        try:
            value, used = evaluate_expression(expr, self.max_chars, self.max_digits, self.max_depth,
                                              self.allow_unary_minus)
        except ExpressionError as e:
            return self._zero(str(e), expression=expr[:200])
        info = {"expression": expr, "value": str(value)}
        bad = _numbers_ok(used, list(numbers), self.mode)
        if bad is None and value == goal:
            return Score(1.0, {"correct": 1.0, "format": 1.0}, info)
        reason = bad or f"evaluates to {value}, not {goal}"
        return Score(self.format_reward, {"correct": 0.0, "format": 1.0}, {**info, "reason": reason})

    def validation_cases(self):
        ex = Example("countdown-1", "Use 2 5 6 to make 20", "(6-2)*5", meta={"numbers": [2, 5, 6], "target": 20})
        cases = [(ex, "(6-2)*5", 1.0), (ex, "<think>4*5</think><answer>(6 - 2) * 5 = 20</answer>", 1.0),
                 (ex, "no idea", 0.0), (ex, "<answer>__import__('os')</answer>", 0.0), (ex, "6/(2-2)", 0.0)]
        if self.format_reward == 0.0:
            cases += [(ex, "(6+2)*5", 0.0), (ex, "4*5", 0.0), (ex, "20", 0.0)]
        return cases


class CountdownParams(Params):
    mode: Literal["at_most_once", "exactly_once"] = Field(
        "at_most_once", description="each given number may be used at most once, or must be used exactly once "
                                    "(TinyZero)")
    format_reward: float = Field(0.0, ge=0.0, lt=1.0, description="reward for a parseable expression with wrong "
                                                                  "numbers or value (TinyZero: 0.1)")
    require_tags: bool = Field(False, description="read the expression only from <answer> tags (no last-line "
                                                  "fallback)")
    allow_unary_minus: bool = Field(False, description="accept unary minus (e.g. -3+5)")
    max_chars: int = Field(200, gt=0, le=10_000, description="longest expression evaluated")
    max_digits: int = Field(12, gt=0, le=100, description="longest integer literal")
    max_depth: int = Field(64, gt=0, le=200, description="deepest expression tree / most parentheses")


@VERIFIERS.register("countdown", CountdownParams)
def _countdown(p: CountdownParams) -> CountdownVerifier:
    """Countdown: 1 iff the expression uses allowed numbers and equals the target exactly, else format_reward/0."""
    return CountdownVerifier(p.mode, p.format_reward, p.require_tags, p.allow_unary_minus, p.max_chars,
                             p.max_digits, p.max_depth)

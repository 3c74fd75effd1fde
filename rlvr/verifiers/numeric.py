"""Exact numeric answers, compared as fractions.

The completion's answer is the whole completion when it is one number, else the last number in it.
Both sides are parsed to :class:`fractions.Fraction` (integers, decimals, ``a/b``, a leading sign,
thousands separators such as ``1,234``), so ``0.5``, ``1/2`` and ``2/4`` are equal and no float
rounding can make a wrong answer right. Richer math extraction lives in the math verifier.
"""

from __future__ import annotations

import re
from fractions import Fraction

from rlvr.core.types import Example, Score
from rlvr.verifiers.base import BaseVerifier

__all__ = ["parse_number", "extract_answer", "NumericVerifier"]

_NUM = re.compile(r"[-+]?(?:\d{1,3}(?:,\d{3})+|\d+)(?:\.\d+)?(?:\s*/\s*\d+)?|[-+]?\.\d+")
MAX_ANSWER_CHARS = 64


def parse_number(s: str) -> Fraction | None:
    """A Fraction for a plain number string, else None."""
    s = s.strip().rstrip(".").replace(" ", "")
    if not s or len(s) > MAX_ANSWER_CHARS or not _NUM.fullmatch(s):
        return None
    s = s.replace(",", "")
    try:
        return Fraction(s)
    except (ValueError, ZeroDivisionError):
        return None


def extract_answer(text: str) -> str | None:
    """The whole text if it is one number, else the last number in it."""
    if parse_number(text) is not None:
        return text.strip()
    found = _NUM.findall(text)
    return found[-1] if found else None


class NumericVerifier(BaseVerifier):
    name = "numeric"

    def validation_cases(self):
        ex = Example("numeric-1", "Half of 1?", "1/2")
        return [(ex, "0.5", 1.0), (ex, "2/4", 1.0), (ex, "0.6", 0.0), (ex, "no idea", 0.0)]

    def score(self, example: Example, text: str) -> Score:
        gold = parse_number(example.answer)
        if gold is None:
            return Score(0.0, {"correct": 0.0}, {"error": f"gold answer {example.answer!r} is not a number"})
        cand = extract_answer(text)
        if cand is None:
            return Score(0.0, {"correct": 0.0}, {"reason": "no number in completion"})
        value = parse_number(cand)
        ok = value is not None and value == gold
        return Score(float(ok), {"correct": float(ok)}, {"extracted": cand})

"""Exact numeric answers, compared as fractions.

The completion's answer (:func:`final_answer`), first rule that applies:

1. the whole completion, when it is one number;
2. a marked final answer, found by the math verifier's extraction (``rlvr/verifiers/math/extract.py``): the
   last ``<answer>`` block, ``\\boxed{}`` or GSM8K ``#### N`` line (which wins over every number in the
   worked solution before it), or an "the answer is ..." phrase; with its hedging rules: several different
   answers, "5 or 6", a bound ("about 5"), an answer taken back or another value stated after it ("5.
   Actually, 6.") give no answer (reward 0);
3. an unmarked answer that reads as one number as a whole (a bare ``12 cm^2``, "three", ``3.5e2``, or the
   final statement "She has 7 apples left."), with the same hedging rules;
4. else the last number of the last line that has one (after its last ``=`` if it has one), as the classic
   GSM8K reader takes it (``a85`` is 85; an unmarked ``45!`` is 45, not a factorial), unless that line lists
   several values (``5 6``, ``5, 6``), or it or a line after it hedges ("or", "maybe", "about"), takes an
   answer back ("actually", "wait") or addresses the grader ("reward", "score"), or the completion ends in
   a list of numbers.

Both sides are exact :class:`fractions.Fraction` values: integers, decimals, ``a/b``, a sign (any Unicode
minus), thousands separators (``1,234``; a thin or no-break space between digit groups), scientific notation
(``3.5e2`` is 350), ``\\frac``, ``10^{2}`` and ``10²``; a currency sign, trailing unit words
(``12 cm^2``, ``\\text{ cm}``) and a percent sign are read as the math verifier reads them (a number word
from zero to twenty is its number; percent: ``12%`` matches 12 and 0.12). A scale word multiplies
(``1/2 thousand`` is 500, ``2 million dollars`` 2,000,000; hundred, thousand, million, billion, trillion,
dozen), and a scale abbreviation (``5k``, ``2M``, ``3 bn``) makes no number, never the 5; a unit's power
(``138 cm^2``) is the unit's, not the answer. So ``0.5``, ``1/2`` and ``2/4`` are
equal and no float rounding can make a wrong answer right. Unicode look-alikes are folded first
(``rlvr/verifiers/math/chars.py``). Richer math (surds, expressions, sets) is the ``math`` verifier's.
"""

from __future__ import annotations

import re
from fractions import Fraction

from rlvr.core.types import Example, Score
from rlvr.verifiers.base import BaseVerifier

__all__ = ["parse_number", "extract_answer", "final_answer", "NumericVerifier"]

_NUM = re.compile(r"[-+]?(?:\d{1,3}(?:,\d{3})+|\d+)(?:\.\d+)?(?:[eE][-+]?\d{1,3}(?![\d.]))?(?:\s*/\s*\d+)?"
                  r"|[-+]?\.\d+(?:[eE][-+]?\d{1,3}(?![\d.]))?", re.ASCII)
MAX_ANSWER_CHARS = 64
# Words that leave the last line's number open or take an earlier one back.
_DOUBT = re.compile(r"\b(?:or|maybe|perhaps|possibly|probably|about|approximately|around|roughly|nearly|almost"
                    r"|actually|wait|no|not|wrong|mistake|instead|either|between|unless|if|least|most|rewards?"
                    r"|score|grade|grader|verifier|correct)\b|[~≈]", re.IGNORECASE)
_UNIT_POWER = re.compile(r"(?<=[A-Za-z])\s*\^\s*(?:\{\s*[23]\s*\}|[23])(?![\d.])")
_LIST_GAP = re.compile(r"\s*(?:[,;|&]\s*)?(?:and\s+)?|\s*\band\s*")  # only separators between two numbers


def _fold(s: str) -> str:
    from rlvr.verifiers.math.chars import fold

    return fold(s)


def parse_number(s: str) -> Fraction | None:
    """A Fraction for a plain number string (Unicode minus signs and digits folded; ``3.5e2`` allowed),
    else None."""
    s = _fold(s).strip().rstrip(".").replace(" ", "")
    if not s or len(s) > MAX_ANSWER_CHARS or not _NUM.fullmatch(s):
        return None
    s = s.replace(",", "")
    try:
        return Fraction(s)
    except (ValueError, ZeroDivisionError):
        return None


def _last_line_number(text: str) -> str | None:
    """Rule 4 of the module docstring."""
    from rlvr.verifiers.math.guards import number_dump
    from rlvr.verifiers.math.normalize import SCALE_AFTER

    lines = [ln for ln in text[-4000:].splitlines() if ln.strip()]
    if not lines or number_dump(text):
        return None
    k = next((i for i in range(len(lines) - 1, -1, -1) if _NUM.search(lines[i])), None)
    if k is None:
        return None
    line = lines[k][-500:]
    if any(_DOUBT.search(ln) or "\ufffd" in ln for ln in [line] + lines[k + 1:]):
        return None  # hedged, taken back or graded on its line or after it; U+FFFD: unreadable (math/chars.py)
    line = _UNIT_POWER.sub("", line)  # "138 cm^2": the 2 is the unit's, not the answer
    tail = line.rsplit("=", 1)[1] if "=" in line else line
    src = tail if _NUM.search(tail) else line  # "3=": the number before an unfinished "="
    found = list(_NUM.finditer(src))
    if len(found) > 1 and _LIST_GAP.fullmatch(src[found[-2].end():found[-1].start()]) \
            and len({parse_number(m.group()) for m in found}) > 1:
        return None  # "5 6", "5, 6", "5 and 6": several candidates
    scale = SCALE_AFTER.match(src, found[-1].end())
    if scale:  # "1/2 million" is read scaled (500000); "5k", "2M": no number, never 5 or 2
        return found[-1].group() + scale.group() if scale.group("word") else None
    return found[-1].group()


def extract_answer(text: str) -> str | None:
    """The whole text if it is one number, else the last number in it (Unicode look-alikes folded first).

    The lenient reading other verifiers build on (the rubric's ``numeric`` criterion, the consistency
    checks); :class:`NumericVerifier` reads the final answer by :func:`final_answer` instead."""
    text = _fold(text)
    if parse_number(text) is not None:
        return text.strip()
    found = _NUM.findall(text)
    return found[-1] if found else None


def final_answer(text: str) -> str | None:
    """The completion's answer span by the rules of the module docstring (None: no answer, or a hedge)."""
    from rlvr.verifiers.math.extract import extract_answer as math_extract

    text = _fold(text)
    if parse_number(text) is not None:
        return text.strip()
    found = math_extract(text)
    if found.hedge:
        return None
    unmarked_bang = found.source not in _MARKED and (found.span or "").rstrip(" .").endswith("!")
    if found.span is not None and (found.source in _MARKED or (_value(found.span) is not None and not unmarked_bang)):
        span = found.span.strip()
        value = _value(span)
        if any((v := _value(o)) is not None and v != value for o in found.others):
            return None  # an answer restated after the final one differs ("#### 10 ... so she saved $3.")
        return span or None
    if found.source == "unfinished <think>":
        return None
    if "</think>" in text:
        text = text.rsplit("</think>", 1)[1]
    return _last_line_number(text)


_MARKED = ("answer tag", "boxed", "####", "anchor")


def _value(span: str) -> tuple[Fraction, bool] | None:
    """The exact value of a span (unit words dropped) and whether it ended in a percent sign, or None."""
    from rlvr.verifiers.math.fastpath import parse_exact
    from rlvr.verifiers.math.normalize import normalize, strip_unit_words

    text, pct = normalize(span[:400])
    value = parse_exact(text)
    if value is None:
        value = parse_exact(strip_unit_words(text))
    return None if value is None else (value, pct)


def _verdict(gold: str, span: str) -> tuple[bool, str]:
    """Equal or not, and why, for an extracted span (the math verifier's span rules, exact numbers only)."""
    from rlvr.verifiers.math.verifier import decide_span

    got = decide_span(gold, span, 4 * MAX_ANSWER_CHARS)
    if isinstance(got, Score):
        return bool(got.reward), got.info["reason"]
    return False, "not a number"


class NumericVerifier(BaseVerifier):
    name = "numeric"

    def validation_cases(self):
        ex = Example("numeric-1", "Half of 1?", "1/2")
        return [(ex, "0.5", 1.0), (ex, "2/4", 1.0), (ex, "0.6", 0.0), (ex, "no idea", 0.0),
                (ex, "The answer is 0.5 or 0.6.", 0.0), (ex, "\\boxed{\\frac{1}{2}}", 1.0)]

    def score(self, example: Example, text: str) -> Score:
        gold = parse_number(example.answer)
        if gold is None:
            return Score(0.0, {"correct": 0.0}, {"error": f"gold answer {example.answer!r} is not a number"})
        if not isinstance(text, str):
            return Score(0.0, {"correct": 0.0}, {"reason": "not text"})
        cand = final_answer(text)
        if cand is None:
            return Score(0.0, {"correct": 0.0}, {"reason": "no number in completion (or a hedged answer)"})
        value = parse_number(cand)
        if value is not None:
            ok, reason = value == gold, "equal" if value == gold else "not equal"
        else:
            ok, reason = _verdict(str(gold), cand)
        return Score(float(ok), {"correct": float(ok)}, {"extracted": cand, "reason": reason})

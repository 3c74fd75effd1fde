"""Guards on an extracted answer that the hedging rules of :mod:`.extract` do not cover: answers that
cannot be read as one value, and completions that end in a list of numbers.

Pure standard library (parent process). Each guard scores the answer 0 rather than letting a parser guess:
a guess is where a reward hack lives (math-verify reads ``1 5`` as 5, ``5,5`` as the list {5}, and drops a
character it cannot read).
"""

from __future__ import annotations

import re

from .chars import REJECT
from .normalize import _thousands_comma, split_items
from .prose import GRADER

__all__ = ["malformed_reason", "number_dump", "single_value"]


def single_value(gold: str) -> bool:
    """Whether the gold is one value (not a set, list, union or \\pm pair)."""
    return len(split_items(gold)) == 1 and not re.search(r"\\pm|\\mp|\\\{|\\cup", gold)

_DUMP_TOKEN = r"[(\[]?[-+]?\$?\d[\d,.]*%?[.,;:)\]]*"
_DUMPS = {}


def number_dump(text: str, run: int = 6) -> bool:
    """Whether the end of ``text`` lists ``run`` or more numbers in a row with nothing but separators
    between them ("1 2 3 4 5 6", "1.\\n2.\\n3. ..."): a list, not an answer."""
    if run not in _DUMPS:
        _DUMPS[run] = re.compile(rf"(?<!\S)(?:{_DUMP_TOKEN}\s+){{{run - 1}}}{_DUMP_TOKEN}(?!\S)")
    return bool(_DUMPS[run].search(text[-4000:]))


_DOUBLE_SIGN = re.compile(r"-\s*-")  # "--5" would read as +5; "a + -b" is fine
# "1 5", not "\\log_2 8" (a subscript) nor the mixed number "2 1/2"
_SIDE_BY_SIDE = re.compile(r"(?<![\d._^])\d+(?:\.\d+)?\s+\.?\d(?!\d*\s*/\s*\d)")
_DIGIT_COMMA = re.compile(r"\d,\d")
_ANY = re.compile(r"[-\s,#<\ufffd]|\\boxed|reward|grade|score|verif|verdict|gold", re.IGNORECASE)  # prefilter
_MARKER_INSIDE = re.compile(r"\\boxed(?![a-zA-Z])|####|</?answer>", re.IGNORECASE)


def _decimal_comma(s: str) -> bool:
    """A comma between two digits outside brackets that does not separate thousands (``5,5``: 5.5 in some
    locales, the list 5, 5 in others)."""
    depth = 0
    for i, c in enumerate(s):
        if c in "([{":
            depth += 1
        elif c in ")]}":
            depth -= 1
        elif (c == "," and depth <= 0 and 0 < i < len(s) - 1 and s[i - 1].isdigit() and s[i + 1].isdigit()
              and not _thousands_comma(s, i)):
            return True
    return False


def malformed_reason(pred: str, gold: str) -> str | None:
    """Why the normalised answer ``pred`` cannot be read as one value, or None: a character that does not
    read (:data:`.chars.REJECT`), two minus signs in a row (``--5``, ``- -5``: dashes misread as signs, which
    would turn -5 into 5; ``9i + -6`` is fine), numbers side by side (``1 5`` is neither 15 nor 1 times 5),
    a decimal comma against a single-valued gold (``5,5``), an answer marker inside the answer
    (``\\boxed{5 \\boxed{6}}``), or text addressed to the grader (``reward = 1``: :data:`.prose.GRADER`)."""
    if not _ANY.search(pred):
        return None  # the common case: a plain expression with none of the characters below
    if REJECT in pred:
        return "malformed: a character that does not read (struck-through or combined)"
    if _DOUBLE_SIGN.search(pred) and not _DOUBLE_SIGN.search(gold):
        return "malformed: two minus signs in a row"
    if _SIDE_BY_SIDE.search(pred) and not _SIDE_BY_SIDE.search(gold):
        return "malformed: numbers side by side"
    if _MARKER_INSIDE.search(pred):
        return "malformed: an answer marker inside the answer"
    if GRADER.search(pred) and not GRADER.search(gold):
        return "hedged: grader text in the answer"
    if _DIGIT_COMMA.search(pred) and _decimal_comma(pred) and single_value(gold):
        return "malformed: a decimal comma (or a list) for one value"
    return None

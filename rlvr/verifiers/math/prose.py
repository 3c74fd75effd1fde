"""The prose around a final answer: math segments, sentences, plain numbers, and the cues that make an
answer a hedge or take it back.

Pure standard library (the parent process only). Why this exists: a policy learns quickly that a box is
read and the prose around it is not, so "\\boxed{3}, or possibly 4" or "\\boxed{3}. Actually, it is 4."
would earn the reward of a committed answer. These helpers read that prose:

- :func:`math_segments` finds ``$...$``, ``$$...$$``, ``\\(...\\)`` and ``\\[...\\]`` with Pandoc's rule for a
  single ``$`` (no space just inside, the closing one not followed by a digit), so the currency sign in
  "$1,234 and $5" is not read as math;
- :func:`sentences` splits prose into sentences without cutting inside math or decimals;
- :func:`plain_numbers` lists the numbers written outside math (``1,234``, ``-3.5``, ``$45``, ``25%``);
- :func:`tail_hedge` and :func:`lead_hedge` read the text after and just before the final answer.
"""

from __future__ import annotations

import re

__all__ = ["math_segments", "protect_math", "sentences", "plain_numbers", "tail_hedge", "lead_hedge", "inside_math",
           "PLEASANTRY", "RETRACT", "PAUSE", "UNSURE", "NEGATION", "GRADER"]

_SEG = re.compile(r"\$\$(.+?)\$\$|\\\[(.+?)\\\]|\\\((.+?)\\\)"
                  r"|(?<![\\$])\$(?=[^\s$])((?:[^$\\]|\\.)+?)(?<=\S)(?<!\\)\$(?!\d)", re.DOTALL)
_END = re.compile(r"[.!?](?=\s|$|\*\*)|\n")
# Numbers in prose: not part of a word, a decimal, a date or an ordinal ("3rd"), nor "10-year-old", nor an
# exponent; "- 5" (a dash or a sign, apart) is no number.
_NUM = re.compile(r"(?<![\w.,/^_\\-])(?<![\^_]\{)(-)?(?:\\?\$)?((?:\d{1,3}(?:,\d{3})+(?:\.\d+)?|\d+(?:\.\d+)?(?:/\d+)?)"
                  r"(?:[eE][-+]?\d{1,4}|\^\{-?\d{1,4}\}|\^-?\d{1,4})?)"  # 3.5e2; a power is part of its number
                  r"(\s*(?:\\?%|percent\b))?(?![\w/%+]|[.,]\d|-[a-zA-Z])")
_APART_SIGN = re.compile(r"(?<![\w)}\]])\s*[-+]\s+$")
PLEASANTRY = re.compile(r"^\W*(?:i\s+hope\s+(?:it|this|that)\s+(?:is|was|helps)|hope\s+(?:this|it|that)\s+helps"
                        r"|thanks?(?:\s+you)?|good\s+luck|i\s+hope\s+it\s+is\s+correct|this\s+is\s+the\s+final"
                        r"\s+answer|that\s+is\s+the\s+final\s+answer|done|q\.?e\.?d)\b[^0-9$\\]*$",
                        re.IGNORECASE)
# Words that take the answer back or replace it ("Actually, it is 4", "No, that's wrong").
RETRACT = re.compile(r"\b(?:actually|oops|wrong|incorrect|mistake[ns]?|error|erroneous|scratch\s+that"
                     r"|correction|instead(?!\s+of)|rather(?!\s+than)|should\s+(?:be|have\s+been|read)"
                     r"|second\s+thought|on\s+reflection|reconsider\w*|re-?examin\w*|revis\w+|retract\w*|typo"
                     r"|miscalculat\w*|misread|not\s+(?:correct|right)|isn't\s+(?:correct|right)"
                     r"|no(?=\s*[,.;:!])|nope)\b", re.IGNORECASE)
# "Wait" and "hmm" take the answer back unless what follows confirms it ("Wait, let me check: 6 * 7 = 42.
# Yes, correct.").
PAUSE = re.compile(r"\b(?:wait|hmm+)\b", re.IGNORECASE)
_PAUSE_VALUE = re.compile(r"\b(?:wait|hmm+)\b[\s,.:;!-]{0,4}(?:it'?s\s+|it\s+is\s+|make\s+that\s+)?[-\d$\\]",
                          re.IGNORECASE)  # "Wait, 43.": a new value, whatever follows
_CONFIRM = re.compile(r"\b(?:correct|checks?\s+out|confirm\w*|verified|consistent|matches)\b|✓|✔", re.IGNORECASE)
# Words that leave the answer open ("maybe 4", "unless ...", "I think").
UNSURE = re.compile(r"\b(?:maybe|perhaps|possibly|probably|(?:would|could|might)\s+(?:also\s+)?(?:be|equal"
                    r"|give|yield)|alternatively|otherwise|unless|either(?!\s+way)|not\s+sure|unsure|uncertain"
                    r"|guess\w*|i\s+think|i\s+believe|give\s+or\s+take|plus\s+or\s+minus|circa"
                    r"|or\s+(?:so|more|less|fewer|greater|higher|lower|above|below|thereabouts|something"
                    r"|similar|larger|smaller|bigger|(?:one|two|three|four|five|six|seven|eight|nine|ten"
                    r"|zero|hundred|thousand)\b))(?![a-zA-Z])|(?<![a-z])-?ish\b", re.IGNORECASE)
# The box holds only part of the answer: "$2 + \boxed{3}$", "$\boxed{3} \pm 1$".
_OPERATOR_AFTER = re.compile(r" *(?:[-+*/^×·±]|\\(?:cdot|times|div|pm|mp)(?![a-zA-Z]))\s*([\d\\({]|[a-zA-Z])")
_OPERATOR_BEFORE = re.compile(r"(?:[-+*/^×·±]|\\(?:cdot|times|div|pm|mp))\s*$")
_DOUBT = re.compile(r"\b(?:maybe|perhaps|possibly|probably|likely|might|could|guess\w*|not\s+sure)\b", re.IGNORECASE)
# Text addressed to the grader ("Correct! reward=1", "Final score: 1"): an answer given with it scores 0, so
# that writing the grader's verdict never pays.
GRADER = re.compile(r"\b(?:rewards?|grader|verifier|gold\s+answer|(?:score|grade|verdict)\s*[=:])", re.IGNORECASE)
NEGATION = re.compile(r"(?:\b(?:not|never|neither|nor|none|cannot)\b|n't\b|^\s*no\b)", re.IGNORECASE)
# Bounds right next to the answer: "approximately \boxed{3}", "\boxed{3} at least".
_BOUND = re.compile(r"\b(?:approximately|approx|about|around|roughly|nearly|almost|at\s+least|at\s+most"
                    r"|more\s+than|less\s+than|fewer\s+than|greater\s+than|up\s+to|over|under|close\s+to"
                    r"|some\s*where\s+near|estimated|estimate)\b|\\approx|\\sim(?![a-zA-Z])|\\ge|\\le|[<>≈~]",
                    re.IGNORECASE)
_ALT_VALUE = re.compile(r"\bor\b[^.\n]{0,20}?(?:\d|\$|\\boxed|\\frac|\\sqrt|\\pi)", re.IGNORECASE)


def math_segments(text: str) -> list[tuple[int, int, str]]:
    """``(start, end, content)`` of each math segment, in order."""
    return [(m.start(), m.end(), next(g for g in m.groups() if g is not None)) for m in _SEG.finditer(text)]


def protect_math(text: str) -> tuple[str, list[str]]:
    """``text`` with each math segment replaced by ``\\x00k\\x00`` (so sentence and number rules skip it;
    a lone ``$`` stays, and :func:`plain_numbers` reads it as a currency sign), and the segments' contents."""
    segs: list[str] = []

    def keep(m: re.Match) -> str:
        segs.append(next(g for g in m.groups() if g is not None))
        return f"\x00{len(segs) - 1}\x00"

    return _SEG.sub(keep, text), segs


def sentences(protected: str) -> list[tuple[str, bool]]:
    """``(sentence, terminated)`` pieces of protected text; terminated: it ends in ``.``/``!``/a newline
    after it, or it ends with a display formula (not a ``?``)."""
    out, start = [], 0
    for m in _END.finditer(protected):
        piece = protected[start:m.end()]
        start = m.end()
        if piece.strip():
            out.append((piece.strip(), m.group() in ".!" or (m.group() == "\n" and _ends_math(piece))))
    rest = protected[start:].strip()
    if rest:
        out.append((rest, _ends_math(rest) and bool(re.search(r"\*\*\s*$|\x00\s*$", rest))))
    return out


def _ends_math(piece: str) -> bool:
    return bool(re.search(r"\x00\d+\x00[\s*]*\.?\s*$", piece))


def plain_numbers(sentence: str) -> list[tuple[int, str]]:
    """``(position, number text)`` of the numbers written in prose (outside math), a percent sign kept."""
    out = []
    text = re.sub(r"\x00\d+\x00", lambda s: " " * len(s.group()), sentence)
    for m in _NUM.finditer(text):
        if _APART_SIGN.search(text, max(0, m.start() - 20), m.start()):
            continue  # "- 5": a dash or a sign, apart from the number: no number (never +5)
        out.append((m.start(), (m.group(1) or "") + m.group(2) + ("%" if m.group(3) else "")))
    return out


def lead_hedge(before: str) -> str | None:
    """A hedge in the few words just before the final answer ("either 4 or \\boxed{3}", "about $\\boxed{3}$")."""
    if inside_math(before) and _OPERATOR_BEFORE.search(before[-20:]):
        return "hedged: the final answer is only part of an expression"
    near = re.sub(r"[\s$=:]+$", "", before[-60:])
    words = re.split(r"(?<=[.!?;])\s|\n", near)[-1]
    if re.search(r"(?:^|\s)or$", words, re.IGNORECASE) or re.search(r"\beither\b", words, re.IGNORECASE):
        return "hedged: an alternative before the final answer"
    last = " ".join(words.split()[-3:])
    if _BOUND.search(last) or _DOUBT.search(last):
        return "hedged: a bound or doubt before the final answer"
    return None


def inside_math(before: str) -> bool:
    """Whether text that ends with ``before`` is inside a math segment (an odd number of ``$``, or an open
    ``\\(``/``\\[``): there an operator next to the answer is mathematics, in prose a dash is punctuation."""
    if before.rfind("\\(") > before.rfind("\\)") or before.rfind("\\[") > before.rfind("\\]"):
        return True
    return len(re.findall(r"(?<!\\)\$", before[-3000:])) % 2 == 1


def tail_hedge(tail: str, in_math: bool = False) -> str | None:
    """Why the prose after the final answer takes it back or leaves it open, or None."""
    tail = tail[:3000]
    op = _OPERATOR_AFTER.match(tail)
    if op and (in_math or not op.group(1).isalpha()):
        return "hedged: the final answer is only part of an expression"
    head = re.sub(r"^[\s$}\])]+", "", tail)[:30]
    if _BOUND.match(head.lstrip("( ")) or re.match(r"\s*\??\s*\(?\s*(?:approx|about|or\b)", head, re.IGNORECASE):
        return "hedged: a bound or alternative after the final answer"
    if RETRACT.search(tail) or (PAUSE.search(tail) and not _CONFIRM.search(tail)) or _PAUSE_VALUE.search(tail):
        return "hedged: taken back after the final answer"
    if UNSURE.search(tail):
        return "hedged: left open after the final answer"
    if re.match(r"\s*[$}]*\s*\?", tail):
        return "hedged: a question mark after the final answer"
    return None


def alternative_values(tail: str) -> bool:
    """Whether the prose after the answer offers another value with "or" ("\\boxed{3} (or 12/4)")."""
    return bool(_ALT_VALUE.search(tail[:3000]))

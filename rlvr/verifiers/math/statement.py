"""The answer of a completion that has no marker: its final statement.

GSM8K's own scoring reads the number a solution ends on, and MATH-style solutions often end "Hence the
ratio is $\\frac{6}{18}$." or "... so $y = 7$". Reading only the final statement, and only when it states
something, keeps what is read close to what a person would call the answer:

- the final statement is the last sentence, after dropping closing pleasantries ("I hope it is correct.");
  it must be finished (a full stop, "!" or a display formula: an unfinished line may be a truncated
  generation) and must state a result: a question, a task ("Compute ...", "we need to find ..."), a
  condition ("if", "suppose") or a refusal ("I don't know") states none;
- its answer is a choice letter with its option's text ("The correct option is (C) 42.", "The correct
  option is B.", "I choose B.", "(B) is correct."), else the last
  math segment (the last side of an ``a = b = c`` chain; with the segments just before it when "and", "or"
  or a comma join them: "$x = 2$ and $x = 3$"), else its one number
  (repeats allowed); a statement with several different numbers ("She makes 9 * 2 = 18 dollars a day.")
  is a computation, not a stated answer, and has none;
- a statement that hedges ("about 17", "17 or 18", "between 17 and 18", "maybe"), negates ("not 17"),
  takes back an answer or addresses the grader ("Correct! reward=1.", "Final score: 1.") scores 0 with a
  reason starting "hedged".
"""

from __future__ import annotations

import re
from fractions import Fraction

from .chars import REJECT
from .normalize import SCALE_AFTER
from .prose import GRADER, NEGATION, PAUSE, PLEASANTRY, RETRACT, UNSURE, plain_numbers, protect_math, sentences

__all__ = ["final_statement", "choice_span"]

_OPEN = re.compile(r"\?|\b(?:let|suppose|assume|assuming|need\s+to|needs\s+to|want\s+to|wants\s+to|have\s+to"
                   r"|has\s+to|to\s+(?:find|compute|calculate|determine|solve|simplify|evaluate|prove|show)"
                   r"|given\s+that|is\s+given|are\s+given|if|unknown|don't\s+know|do\s+not\s+know|try|trying"
                   r"|attempt\w*)\b|^\W*(?:compute|calculate|find|determine|evaluate|simplify|solve|express"
                   r"|write|show|prove|what|how|which|why|when|where|who|question|problem)\b", re.IGNORECASE)
_HEDGED = re.compile(r"\b(?:approximately|approx|about|around|roughly|nearly|almost|at\s+least|at\s+most"
                     r"|more\s+than|less\s+than|fewer\s+than|greater\s+than|up\s+to|between|estimated"
                     r"|close\s+to|give\s+or\s+take|or\s+so|circa|ish)\b|\\approx|\\sim(?![a-zA-Z])|≈|~|\\pm|±",
                     re.IGNORECASE)
_SEGMENT = re.compile(r"\x00(\d+)\x00")
_JOIN = re.compile(r"\s*(?:,\s*(?:(?:and|or)\s*)?|(?:and|or)\s*)", re.IGNORECASE)  # unambiguous: linear time
# A choice letter named in the statement: "option B", "the correct option is (B) 42", "I choose B", "(B)",
# "B is correct" (a bare capital letter only after one of these words, never the article "a").
_CHOICE = re.compile(
    r"(?:\b(?:option|choice|answer)\s+(?:is\s+|would\s+be\s+|[:=]\s*)?|\b(?:choose|pick|select)\s+(?:option\s+)?)"
    r"(?:\*\*)?(?:\((?P<a>[A-Ja-j])\)|(?P<b>(?-i:[A-J]))(?![a-zA-Z]))(?:\*\*)?(?P<rest>.*)"
    r"|\((?P<c>[A-Ja-j])\)(?P<rest2>.*)"
    r"|\b(?P<d>(?-i:[A-J]))\)?\s+is\s+(?:the\s+)?(?:correct|right)\b(?P<rest3>.*)", re.IGNORECASE | re.DOTALL)
_RANGE = re.compile(r"\d\s*(?:-|–|—|to)\s*\d")


def final_statement(text: str) -> tuple[str | None, str | None]:
    """``(answer span, hedge reason)`` of the final statement of ``text``: ``(None, None)`` when it states no
    answer, and a reason without a span when it hedges between values ("17 or 18")."""
    protected, segs = protect_math(text[-4000:])
    pieces = sentences(protected)
    while pieces and (PLEASANTRY.match(_SEGMENT.sub("", pieces[-1][0]))
                      or not re.search(r"[\w\x00]", pieces[-1][0])):  # "I hope it is correct.", a lone "**"
        pieces.pop()
    if not pieces:
        return None, None
    sentence, finished = pieces[-1]
    prose = _SEGMENT.sub(" ", sentence)
    if not finished or _OPEN.search(prose):
        return None, None
    span = _answer(sentence, segs)
    hedge = _hedge(sentence, prose, segs) if span is not None or _values(sentence) else None
    return span, hedge


def _hedge(sentence: str, prose: str, segs: list[str]) -> str | None:
    """Why a statement that gives values does not commit to one ("about 17", "17 or 18", "not 17")."""
    if REJECT in sentence:
        return "malformed: a character that does not read (struck-through or combined)"
    if RETRACT.search(prose) or PAUSE.search(prose) or UNSURE.search(prose):
        return "hedged: the final statement is not committed"
    if GRADER.search(prose):
        return "hedged: grader text in the final statement"
    if NEGATION.search(prose):
        return "hedged: the final statement is negated"
    if _HEDGED.search(prose) or any(_HEDGED.search(segs[int(k)]) for k in _SEGMENT.findall(sentence)):
        return "hedged: the final statement gives a bound"
    if re.search(r"\bor\b", prose, re.IGNORECASE) and _values(sentence) > 1:
        return "hedged: the final statement offers alternatives"
    if _RANGE.search(prose):
        return "hedged: the final statement gives a range"
    return None


def choice_span(text: str) -> str | None:
    """``"(B) rest"`` for the first choice letter ``text`` names ("I choose B", "option (B) 42", "B is correct"),
    with the text after it; None when it names none."""
    choice = _CHOICE.search(text)
    if not choice:
        return None
    letter = next(g for g in choice.group("a", "b", "c", "d") if g)
    rest = choice.group("rest") or choice.group("rest2") or ""
    return f"({letter.upper()}) {rest.strip()}".rstrip(" .!*")


def _values(sentence: str) -> int:
    return len(_SEGMENT.findall(sentence)) + len(plain_numbers(sentence))


def _answer(sentence: str, segs: list[str]) -> str | None:
    choice = choice_span(_SEGMENT.sub(" ", sentence))
    if choice:  # "The correct option is (C) 42.": the letter and the option's text
        return choice
    found = list(_SEGMENT.finditer(sentence))
    numbers = plain_numbers(sentence)
    if found and not (numbers and numbers[-1][0] > found[-1].end() and _trivial(segs, found[-1])):
        group = [found[-1]]  # "$x = 2$ and $x = 3$": the segments the sentence ends on, joined by and/or/,
        while len(group) < len(found) and _JOIN.fullmatch(sentence[found[-len(group) - 1].end():group[0].start()]):
            group.insert(0, found[-len(group) - 1])
        contents = [_last_side(segs[int(m.group(1))]) for m in group]
        joins = [sentence[a.end():b.start()].strip(" ,") or "," for a, b in zip(group, group[1:])]
        span = contents[0] + "".join(f" {j} {c}" if j != "," else f", {c}" for j, c in zip(joins, contents[1:]))
        return span.strip() or None
    if not numbers:
        return None
    if len({_value(n) for _, n in numbers}) == 1:
        pos, number = numbers[-1]
        scale = SCALE_AFTER.match(sentence, pos + len(number))
        if scale:  # "4 thousand": the scaled number (normalize.strip_unit_words); "4 bn", "5k": none
            return number + scale.group() if scale.group("word") else None
        return number
    return None  # a computation ("9 * 2 = 18 dollars") or several quantities: not one stated answer


def _last_side(content: str) -> str:
    """``x = 2 + 8 = 10`` -> ``10``: the last side of a chain of equalities."""
    if content.count("=") >= 2 and not re.search(r"[<>]|\\[lg]e", content):
        return content.rsplit("=", 1)[1].strip()
    return content.strip()


def _trivial(segs: list[str], m: re.Match) -> bool:
    """A math segment that only names a variable ("the value of $x$ is 5")."""
    return bool(re.fullmatch(r"\s*\\?[a-zA-Z]+(?:_\{?\w+\}?)?\s*", segs[int(m.group(1))]))


def _value(number: str) -> Fraction | str:
    try:
        return Fraction(number.replace(",", "").rstrip("%"))
    except (ValueError, ZeroDivisionError):
        return number

"""Final-answer extraction from a completion, and the hedging rules.

Extraction (first rule that applies wins; only text after the last ``</think>`` is read, and a completion
that opens ``<think>`` without closing it has no answer). Gold and completion are first folded
(:func:`.chars.fold`: Unicode minus signs, digits, superscripts, invisible characters) and GSM8K's calculator
annotations (``<<48/2=24>>``) are removed:

1. ``<answer>...</answer>`` tags: the last block; a ``\\boxed{}`` inside it is unwrapped.
2. ``\\boxed{...}`` / ``\\fbox{...}`` (balanced braces, escaped braces ignored; ``\\boxed 5`` too): the last;
   a ``\\boxed{`` left open after it means the generation was cut, and there is no answer. A box inside a
   box is part of the outer one (``\\boxed{\\boxed{5}}`` is 5, ``\\boxed{5 \\boxed{6}}`` is malformed).
3. GSM8K ``#### X`` lines: the last. It wins over every number in the worked solution before it.
4. An anchor: "final answer is X", "the answer is X", "Answer: X" (markdown bold allowed): the last one.
   The span is the first ``$...$`` math segment after it if it starts with one, else the rest of the
   sentence, without a trailing clause such as ", which ..." / ", since ...".
5. The whole completion when it is one short line with at most two plain words (a bare "42", "$5$ cm").
6. The final statement (:mod:`.statement`): "Hence the ratio is $\\frac{6}{18}$.", "He has 17 apples left."

Hedging (the reward is 0, ``info["reason"]`` starts with "hedged"):

- rules 1-3 find several markers that hold different values ("\\boxed{3} ... \\boxed{4}"), even if the
  prose marks the last one as final; markers that hold one value (``\\boxed{1/2}`` and ``\\boxed{0.5}``)
  are one answer, and when only the symbolic path can tell, every one of them must equal the gold; more
  than :data:`MAX_MARKERS` different ones are several answers without reading each (a bound on the work);
  markers of another kind before the final one are reasoning, as prose is (retraction policy: the answer
  is the last committed one, and nothing after it may change it);
- rules 5-6 read a completion that ends in a list of numbers ("1 2 3 4 5 6", one per line) as no answer
  (:func:`.guards.number_dump`);
- the prose around a marker or anchor (:mod:`.prose`): a bound or doubt just before it ("approximately
  \\boxed{3}", "either 4 or \\boxed{3}", "Maybe the answer is 3"), an operator that makes the box part of an
  expression (``$2 + \\boxed{3}$``), or after it a bound ("\\boxed{3} or more"), an alternative ("or possibly
  4", "(or 4 if ...)"), doubt ("unless", "could be") or a retraction ("Actually, wait, it should be 4");
  an answer restated after it (a box, ``####``, "the final answer is ...", a final statement) must equal
  the gold too (``Extraction.others``);
- the span uses a hedging word: either, maybe, possibly, probably, perhaps, likely, approximately, approx,
  roughly, about, around, nearly, almost, "at least", "at most", "more than", "less than", "fewer than",
  "up to", ish, circa, "or so", "give or take", maximum, minimum, guess, "I think", "I believe", "not
  sure", unsure, or a condition (if, when, unless,
  provided, assuming, otherwise, except); ``\\approx``, ``\\sim``; or states a range: "between A and B",
  "from A to B", "A to B", "A -- B" (en/em dash); or is negated ("not 3"), asks ("3?"), is a bound
  (``\\ge 3``) or an unfinished expression ("3+", an unmatched ``|``): math-verify reads all of these as 3;
- the gold is one value (not a set ``\\{\\}``, list, union or ``\\pm`` pair) and the span holds several
  candidates: items separated at top level by ``,`` ``;`` "or" "and" ("3 or 4", "x = 3, 4", "2, 3"),
  unless they are all the same or the span is made of inequalities ("x > 1 and x < 3" is one condition);
  or ``\\pm``/``\\mp`` ("3 \\pm 1").

Commas inside brackets never split (``(3, 4)`` is one tuple), and ``1,234`` is one number. Answers that
cannot be read as one value (``1 5``, ``--5``, ``5,5``, grader text) are the guards' (:mod:`.guards`).
Every rule runs in time linear in the completion (no regular expression here backtracks quadratically;
nested boxes are matched in one pass), so a 100,000-character completion costs milliseconds.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from .chars import fold
from .fastpath import parse_exact
from .guards import number_dump, single_value
from .normalize import normalize, split_items
from .prose import alternative_values, inside_math, lead_hedge, math_segments, tail_hedge
from .statement import final_statement

__all__ = ["Extraction", "extract_answer", "hedge_reason", "boxed_contents", "HEDGE_WORDS", "MAX_MARKERS"]

MAX_MARKERS = 20  # more different answer markers than this are several answers, without reading each one

_BOX = re.compile(r"\\(?:boxed|fbox)(?![a-zA-Z])")
_HASHES = re.compile(r"^[ \t]*####[ \t]*(.+?)[ \t]*$", re.MULTILINE)
_ANCHOR = re.compile(r"(?:final\s+answer|\banswer)(?:\s*\*\*)?\s*(?:is|:|=)(?:\s*\*\*)?\s*:?[ \t]*",
                     re.IGNORECASE)
# math segments; an escaped "\\$" (a currency sign) neither opens nor closes one
_MATH_SEG = re.compile(r"\$\$(.+?)\$\$|\$((?:\\.|[^$\\])+?)\$|\\\((.+?)\\\)|\\\[(.+?)\\\]", re.DOTALL)
_SENTENCE_END = re.compile(r"\.(?=\s|$)|\n")
_UNIT_ONLY = re.compile(r"[a-zA-Z]+(?:\s+[a-zA-Z]+)?")
# starts only where a run of spaces starts (or at its comma), so a long run of spaces costs linear time
_CLAUSE = re.compile(r"(?:,|(?<![\s,]))\s+(?:which|since|because|as|so|that|where|when|but|given|thus|hence)\b.*$",
                     re.IGNORECASE | re.DOTALL)
HEDGE_WORDS = ("either", "maybe", "possibly", "probably", "perhaps", "likely", "approximately", "approx",
               "roughly", "about", "around", "nearly", "almost", "at least", "at most", "more than",
               "less than", "fewer than", "up to", "ish", "circa", "or so", "give or take", "if", "when",
               "unless", "provided", "assuming", "otherwise", "except", "maximum", "minimum", "guess",
               "i think", "i believe", "not sure", "unsure")
_HEDGE = re.compile(r"(?<![a-zA-Z\\])(?:" + "|".join(w.replace(" ", r"\s+") for w in HEDGE_WORDS)
                    + r")(?![a-zA-Z])|\\approx(?![a-zA-Z])|\\sim(?![a-zA-Z])", re.IGNORECASE)
# "not 3" (but "no solution" and a bare "no" may be the answer itself)
_NEGATED = re.compile(r"\s*(?:n't|not|no|never|neither|none|cannot)(?![a-zA-Z])(?=.*[\d\\])", re.IGNORECASE)
_LEADING_RELATION = re.compile(r"\s*(?:[<>≤≥≈]|\\(?:ge|le|ne|gt|lt|approx|sim|neq|geq|leq)(?![a-zA-Z]))")
# "3+", "3^+", "2 \\cdot": an operator with nothing after it (math-verify reads "3+" as 3).
_DANGLING = re.compile(r"(?:[-+*/^=<>]|\\(?:cdot|times|div|pm|mp)(?![a-zA-Z]))\s*\}?\s*$")
_RELATION = re.compile(r"[<>]|\\[lg]e(?![a-zA-Z])")
# "between A and B", "from A to B", "A to B", "A -- B": read in linear time (a word, then its partner after it)
_RANGE_PAIRS = [(re.compile(r"(?<![a-zA-Z])between(?![a-zA-Z])", re.IGNORECASE),
                 re.compile(r"(?<![a-zA-Z])and(?![a-zA-Z])", re.IGNORECASE)),
                (re.compile(r"(?<![a-zA-Z])from(?![a-zA-Z])", re.IGNORECASE),
                 re.compile(r"(?<![a-zA-Z])to(?![a-zA-Z])", re.IGNORECASE))]
_RANGE_DASH = re.compile(r"[\d}]\s*(?:to|--+)\s*[-+]?[\d\\.]", re.IGNORECASE)


def _is_range(s: str) -> bool:
    for first, second in _RANGE_PAIRS:
        m = first.search(s)
        if m and second.search(s, m.end()):
            return True
    return bool(_RANGE_DASH.search(s))


@dataclass(frozen=True)
class Extraction:
    """The answer span (``None`` when there is none), which rule found it, and a hedging reason if any."""

    span: str | None
    source: str
    hedge: str | None = None
    others: tuple[str, ...] = ()  # other answers the completion gives (restated after it, or other boxes)


def _brace_pairs(text: str) -> dict[int, int]:
    """Index of each ``{`` -> index of its matching ``}`` (escaped braces ignored), in one linear pass."""
    pairs, stack, i = {}, [], 0
    while i < len(text):
        c = text[i]
        if c == "\\":
            i += 2
            continue
        if c == "{":
            stack.append(i)
        elif c == "}" and stack:
            pairs[stack.pop()] = i
        i += 1
    return pairs


def boxes(text: str) -> list[tuple[int, int, str]]:
    """``(start, end, content)`` of every balanced ``\\boxed{}``/``\\fbox{}`` (and ``\\boxed x``) that is not
    inside another one, in order (``\\boxed{\\boxed{5}}`` is one box; normalisation unwraps it)."""
    out, pairs = [], None
    for m in _BOX.finditer(text):
        if out and m.start() < out[-1][1]:
            continue  # inside the previous box
        i = m.end()
        while i < len(text) and text[i] == " ":
            i += 1
        if i < len(text) and text[i] == "{":
            pairs = _brace_pairs(text) if pairs is None else pairs  # linear, so 10^4 boxes stay cheap
            if i in pairs:
                out.append((m.start(), pairs[i] + 1, text[i + 1:pairs[i]]))
        elif i > m.end() and (tok := re.match(r"[^\s$]+", text[i:i + 200])):
            out.append((m.start(), i + tok.end(), tok.group()))
    return out


def boxed_contents(text: str) -> list[str]:
    """Contents of every balanced ``\\boxed{}``/``\\fbox{}`` (and ``\\boxed x``), in order of appearance."""
    return [c for _, _, c in boxes(text)]


def _answer_tags(text: str) -> list[tuple[int, int, str]]:
    """``(start, end, content)`` of ``<answer>...</answer>`` blocks: each closing tag pairs with the last
    opening before it."""
    low, out, pos = text.lower(), [], 0
    while (close := low.find("</answer>", pos)) >= 0:
        start = low.rfind("<answer>", pos, close)
        if start >= 0:
            out.append((start, close + 9, text[start + 8:close]))
        pos = close + 9
    return out


def _distinct(spans: list[str]) -> bool | None:
    """True when the spans hold different answers, False when they hold one (``1/2`` and ``0.5`` are one),
    None when only the symbolic path can tell."""
    unique = {s.strip() for s in spans}
    if len(unique) <= 1:
        return False
    if len(unique) > MAX_MARKERS:
        return True
    # Only a prefix is normalised: an over-long final answer scores 0 anyway, and this bounds the cost.
    norms = {normalize(s[:2000]) for s in unique}
    if len(norms) <= 1:
        return False
    values = {(parse_exact(n), pct) for n, pct in norms}
    if any(v is None for v, _ in values):
        return None
    return len(values) > 1


def _anchor(text: str) -> tuple[str, int, int] | None:
    """The span after the last anchor phrase, where it ends, and where the phrase starts."""
    found = None
    for found in _ANCHOR.finditer(text):
        pass
    if found is None:
        return None
    rest = text[found.end():]
    seg = _MATH_SEG.match(rest)
    if seg:
        return next(g for g in seg.groups() if g is not None), found.end() + seg.end(), found.start()
    line = _SENTENCE_END.split(rest, maxsplit=1)[0]
    clause = _CLAUSE.search(line)
    cut = clause.start() if clause else len(line)  # the clause is prose after the answer: the tail reads it
    span = line[:cut].strip()
    return (span, found.end() + cut, found.start()) if span else None


def _bare_answer(text: str) -> bool:
    """A completion that is only an answer: one short line with at most two plain words ("42 apples"),
    none of them before the value, so that prose which merely mentions an expression (echoing the
    problem) is not taken as an answer."""
    if "\n" in text or len(text) > 100 or _BOX.search(text):  # an unbalanced box is a truncated answer
        return False
    plain = re.sub(r"\\[a-zA-Z]+(?:\{[^{}]*\})?", " ", text)
    words = re.findall(r"[a-zA-Z]{2,}", plain)
    lead = _MATH_SEG.match(text)
    if words and math_segments(text) and not (lead and _UNIT_ONLY.fullmatch(text[lead.end():].strip(" ."))):
        return False  # prose around math ("Thus we obtain $x = 5$."): the final-statement rule reads it
    value = re.search(r"[\d$\\]", plain)
    if words and value and plain.find(words[0]) < value.start():
        return False  # prose before the value ("It costs $5 in total."): the final-statement rule reads it
    return len(words) <= 2


def _after(text: str, end: int, start: int | None = None) -> tuple[str | None, tuple[str, ...]]:
    """The prose after the final answer: a hedge reason, and the answers it restates (they must agree)."""
    tail = text[end:end + 3000]
    in_math = start is not None and inside_math(text[:start])
    hedge = tail_hedge(tail, in_math)
    if hedge is None and alternative_values(tail):
        hedge = "hedged: an alternative after the final answer"
    if hedge or not tail.strip():
        return hedge, ()
    others = boxed_contents(tail) + [m.group(1) for m in _HASHES.finditer(tail)]
    anchored = _anchor(tail)
    if anchored and re.search(r"[\d\\$]", anchored[0]):  # "the answer is independent of n" restates nothing
        others.append(anchored[0])
    first_end = _SENTENCE_END.search(tail)
    if first_end:
        span, why = final_statement(tail[first_end.end():])
        if why:
            return why, ()
        if span is not None:
            others.append(span)
    return None, tuple(others)


def _final(text: str, finals: list[str], start: int, end: int, source: str, what: str) -> Extraction:
    """The last of ``finals`` (same-kind markers), with the hedging rules applied around it."""
    distinct = _distinct(finals)
    if distinct:
        return Extraction(finals[-1], source, f"hedged: several different {what}")
    hedge = lead_hedge(text[:start])
    others: tuple[str, ...] = ()
    if not hedge:
        hedge, others = _after(text, end, start)
    if distinct is None:
        others = tuple(f for f in finals[:-1] if f.strip() != finals[-1].strip()) + others
    return Extraction(finals[-1], source, hedge, tuple(dict.fromkeys(others)))


_CALCULATOR = re.compile(r"<<[^<>\n]{0,300}>>")  # GSM8K's calculator annotations: "48/2 = <<48/2=24>>24"


def extract_answer(text: str, is_gold: bool = False) -> Extraction:
    """The final-answer span of ``text`` by the rules in the module docstring."""
    text = fold(text)
    if "<<" in text:
        text = _CALCULATOR.sub("", text)
    if not is_gold:
        if "</think>" in text:
            text = text.rsplit("</think>", 1)[1]
        elif "<think>" in text:
            return Extraction(None, "unfinished <think>")
    tags = _answer_tags(text)
    found = boxes(text) if not tags else []
    hashes = list(_HASHES.finditer(text)) if not (tags or found) and "####" in text else []
    if is_gold:
        if tags:
            return Extraction((boxed_contents(tags[-1][2]) or [tags[-1][2]])[-1], "answer tag")
        if found:
            return Extraction(found[-1][2], "boxed")
        if hashes:
            return Extraction(hashes[-1].group(1), "####")
        whole = text.strip()
        return Extraction(whole, "whole text") if whole else Extraction(None, "none")
    if tags:
        finals = [(boxed_contents(t) or [t])[-1] for _, _, t in tags]
        return _final(text, finals, tags[-1][0], tags[-1][1], "answer tag", "<answer> blocks")
    if found and any(m.start() >= found[-1][1] for m in _BOX.finditer(text)):
        return Extraction(None, "unbalanced box")  # the generation was cut inside its final box
    if found:
        return _final(text, [c for _, _, c in found], found[-1][0], found[-1][1], "boxed", "boxed answers")
    if hashes:
        return _final(text, [m.group(1) for m in hashes], hashes[-1].start(), hashes[-1].end(), "####",
                      "#### answers")
    anchored = _anchor(text)
    if anchored is not None:
        span, end, start = anchored
        hedge = lead_hedge(text[:start])
        others: tuple[str, ...] = ()
        if not hedge:
            hedge, others = _after(text, end)
        return Extraction(span, "anchor", hedge, others)
    whole = text.strip()
    if whole and _bare_answer(whole):
        return Extraction(whole, "whole text", _dump_hedge(whole))
    span, hedge = final_statement(text)
    if span is not None:
        return Extraction(span, "final statement", hedge or _dump_hedge(text, span))
    return Extraction(None, "none")


def _dump_hedge(text: str, span: str | None = None) -> str | None:
    """A final statement or bare answer that is only a number at the end of a list of numbers is no answer."""
    if span is not None and re.search(r"[a-zA-Z]{2}", span.replace("\\frac", "")):
        return None
    return "hedged: a list of numbers" if number_dump(text) else None


def _abs_bars(s: str) -> int:
    """Number of ``|`` that are not part of ``\\|`` or ``\\mid``-like commands: odd means unbalanced."""
    return len(re.findall(r"(?<!\\)\|", s))


def hedge_reason(pred: str, gold: str) -> str | None:
    """Why the normalised answer ``pred`` is a hedge against the normalised ``gold``, or None."""
    if "?" in pred:
        return "hedged: a question mark"
    if _LEADING_RELATION.match(pred):
        return "hedged: a bound, not a value"
    if _DANGLING.search(pred) or _abs_bars(pred) % 2:
        return "hedged: an unfinished expression"
    if _NEGATED.match(pred):
        return "hedged: negated"
    m = _HEDGE.search(pred)
    if m:
        return f"hedged: {m.group().strip().lower()!r}"
    if _is_range(pred) and not _is_range(gold):
        return "hedged: a range"
    if single_value(gold) and not _RELATION.search(pred):  # "x > 1 and x < 3" joins conditions, not candidates
        items = split_items(pred)
        if len(items) > 1 and len(set(items)) > 1:
            return f"hedged: {len(items)} candidates for one value"
        if "\\pm" in pred or "\\mp" in pred:
            return "hedged: \\pm for one value"
    return None


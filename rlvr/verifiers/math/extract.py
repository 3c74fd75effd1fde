"""Final-answer extraction from a completion, and the hedging rules.

Extraction (first rule that applies wins; only text after the last ``</think>`` is read, and a completion
that opens ``<think>`` without closing it has no answer):

1. ``<answer>...</answer>`` tags: the last block; a ``\\boxed{}`` inside it is unwrapped.
2. ``\\boxed{...}`` / ``\\fbox{...}`` (balanced braces, escaped braces ignored; ``\\boxed 5`` too): the last.
3. GSM8K ``#### X`` lines: the last.
4. An anchor: "final answer is X", "the answer is X", "Answer: X" (markdown bold allowed): the last one.
   The span is the first ``$...$`` math segment after it if it starts with one, else the rest of the
   sentence, without a trailing clause such as ", which ..." / ", since ...".
5. The whole completion when it is one short line with at most two plain words (a bare "42").

Hedging (the reward is 0, ``info["reason"]`` starts with "hedged"):

- rules 1-3 find several markers whose normalised contents differ ("\\boxed{3} ... \\boxed{4}"), even if the
  prose marks the last one as final;
- the span uses a hedging word: either, maybe, possibly, probably, perhaps, likely, approximately, approx,
  roughly, about, around, nearly, almost, "at least", "at most", "more than", "less than", "fewer than",
  "up to", ``\\approx``, ``\\sim``; or states a range: "between A and B", "from A to B", "A to B", "A -- B"
  (en/em dash);
- the gold is one value (not a set ``\\{\\}``, list, union or ``\\pm`` pair) and the span holds several
  candidates: items separated at top level by ``,`` ``;`` "or" "and" ("3 or 4", "x = 3, 4", "2, 3"),
  unless they are all the same or the span is made of inequalities ("x > 1 and x < 3" is one condition);
  or ``\\pm``/``\\mp`` ("3 \\pm 1").

Commas inside brackets never split (``(3, 4)`` is one tuple), and ``1,234`` is one number.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from .normalize import normalize, split_items

__all__ = ["Extraction", "extract_answer", "hedge_reason", "boxed_contents", "HEDGE_WORDS"]

_BOX = re.compile(r"\\(?:boxed|fbox)(?![a-zA-Z])")
_HASHES = re.compile(r"^[ \t]*####[ \t]*(.+?)[ \t]*$", re.MULTILINE)
_ANCHOR = re.compile(r"(?:final\s+answer|\banswer)(?:\s*\*\*)?\s*(?:is|:|=)(?:\s*\*\*)?\s*:?[ \t]*",
                     re.IGNORECASE)
_MATH_SEG = re.compile(r"\$\$(.+?)\$\$|\$(.+?)\$|\\\((.+?)\\\)|\\\[(.+?)\\\]", re.DOTALL)
_SENTENCE_END = re.compile(r"\.(?=\s|$)|\n")
_CLAUSE = re.compile(r",?\s+(?:which|since|because|as|so|that|where|when|but|given|thus|hence)\b.*$",
                     re.IGNORECASE | re.DOTALL)
HEDGE_WORDS = ("either", "maybe", "possibly", "probably", "perhaps", "likely", "approximately", "approx",
               "roughly", "about", "around", "nearly", "almost", "at least", "at most", "more than",
               "less than", "fewer than", "up to")
_HEDGE = re.compile(r"(?<![a-zA-Z\\])(?:" + "|".join(w.replace(" ", r"\s+") for w in HEDGE_WORDS)
                    + r")(?![a-zA-Z])|\\approx(?![a-zA-Z])|\\sim(?![a-zA-Z])", re.IGNORECASE)
_RELATION = re.compile(r"[<>]|\\[lg]e(?![a-zA-Z])")
_RANGE = re.compile(r"(?<![a-zA-Z])between(?![a-zA-Z]).*(?<![a-zA-Z])and(?![a-zA-Z])"
                    r"|(?<![a-zA-Z])from(?![a-zA-Z]).*(?<![a-zA-Z])to(?![a-zA-Z])"
                    r"|[\d}]\s*(?:to|--+)\s*[-+]?[\d\\.]", re.IGNORECASE | re.DOTALL)


@dataclass(frozen=True)
class Extraction:
    """The answer span (``None`` when there is none), which rule found it, and a hedging reason if any."""

    span: str | None
    source: str
    hedge: str | None = None


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


def boxed_contents(text: str) -> list[str]:
    """Contents of every balanced ``\\boxed{}``/``\\fbox{}`` (and ``\\boxed x``), in order of appearance."""
    out, pairs = [], None
    for m in _BOX.finditer(text):
        i = m.end()
        while i < len(text) and text[i] == " ":
            i += 1
        if i < len(text) and text[i] == "{":
            pairs = _brace_pairs(text) if pairs is None else pairs  # linear, so 10^4 boxes stay cheap
            if i in pairs:
                out.append(text[i + 1:pairs[i]])
        elif i > m.end() and (tok := re.match(r"[^\s$]+", text[i:i + 200])):
            out.append(tok.group())
    return out


def _answer_tags(text: str) -> list[str]:
    """Contents of ``<answer>...</answer>`` blocks: each closing tag pairs with the last opening before it."""
    low, out, pos = text.lower(), [], 0
    while (close := low.find("</answer>", pos)) >= 0:
        start = low.rfind("<answer>", pos, close)
        if start >= 0:
            out.append(text[start + 8:close])
        pos = close + 9
    return out


def _distinct(spans: list[str]) -> bool:
    # Only a prefix is normalised: an over-long final answer scores 0 anyway, and this bounds the cost.
    if len({s.strip() for s in spans}) <= 1:
        return False
    return len({normalize(s[:2000])[0] for s in spans}) > 1


def _anchor_span(text: str) -> str | None:
    found = list(_ANCHOR.finditer(text))
    if not found:
        return None
    rest = text[found[-1].end():]
    seg = _MATH_SEG.match(rest)
    if seg:
        return next(g for g in seg.groups() if g is not None)
    line = _SENTENCE_END.split(rest, maxsplit=1)[0]
    return _CLAUSE.sub("", line).strip() or None


def _bare_answer(text: str) -> bool:
    """A completion that is only an answer: one short line with at most two plain words ("42 apples"),
    so that prose which merely mentions an expression (echoing the problem) is not taken as an answer."""
    if "\n" in text or len(text) > 100 or _BOX.search(text):  # an unbalanced box is a truncated answer
        return False
    plain = re.sub(r"\\[a-zA-Z]+(?:\{[^{}]*\})?", " ", text)
    return len(re.findall(r"[a-zA-Z]{3,}", plain)) <= 2


def extract_answer(text: str, is_gold: bool = False) -> Extraction:
    """The final-answer span of ``text`` by the rules in the module docstring."""
    if not is_gold:
        if "</think>" in text:
            text = text.rsplit("</think>", 1)[1]
        elif "<think>" in text:
            return Extraction(None, "unfinished <think>")
    tags = _answer_tags(text)
    if tags:
        finals = [(boxed_contents(t) or [t])[-1] for t in tags]
        hedge = "hedged: several different <answer> blocks" if _distinct(finals) else None
        return Extraction(finals[-1], "answer tag", hedge)
    boxes = boxed_contents(text)
    if boxes:
        hedge = "hedged: several different boxed answers" if _distinct(boxes) and not is_gold else None
        return Extraction(boxes[-1], "boxed", hedge)
    hashes = _HASHES.findall(text)
    if hashes:
        hedge = "hedged: several different #### answers" if _distinct(hashes) and not is_gold else None
        return Extraction(hashes[-1], "####", hedge)
    span = None if is_gold else _anchor_span(text)
    if span is not None:
        return Extraction(span, "anchor")
    whole = text.strip()
    if whole and (is_gold or _bare_answer(whole)):
        return Extraction(whole, "whole text")
    return Extraction(None, "none")


def _single(gold: str) -> bool:
    """Whether the gold is one value (not a set, list, union or \\pm pair)."""
    return len(split_items(gold)) == 1 and not re.search(r"\\pm|\\mp|\\\{|\\cup", gold)


def hedge_reason(pred: str, gold: str) -> str | None:
    """Why the normalised answer ``pred`` is a hedge against the normalised ``gold``, or None."""
    m = _HEDGE.search(pred)
    if m:
        return f"hedged: {m.group().strip().lower()!r}"
    if _RANGE.search(pred) and not _RANGE.search(gold):
        return "hedged: a range"
    if _single(gold) and not _RELATION.search(pred):  # "x > 1 and x < 3" joins conditions, not candidates
        items = split_items(pred)
        if len(items) > 1 and len(set(items)) > 1:
            return f"hedged: {len(items)} candidates for one value"
        if "\\pm" in pred or "\\mp" in pred:
            return "hedged: \\pm for one value"
    return None

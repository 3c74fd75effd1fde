"""Comparing short answer spans: SQuAD normalisation and token F1, and the hedges and lists that must not pass
as an answer (docs/verifiers.md, Table QA: hedges, lists and several answers). Used by the table-QA span
verifiers (:mod:`rlvr.verifiers.table`)."""

from __future__ import annotations

import re
import string
from collections import Counter

__all__ = ["squad_normalize", "token_f1", "hedge_reason"]

_PUNCT = frozenset(string.punctuation)


def squad_normalize(s: str) -> str:
    """SQuAD normalisation: lowercase, drop punctuation and the articles a/an/the, collapse whitespace."""
    s = "".join(ch for ch in s.lower() if ch not in _PUNCT)
    return " ".join(re.sub(r"\b(a|an|the)\b", " ", s).split())


def token_f1(pred: str, gold: str) -> float:
    """SQuAD token F1 of the normalised strings (1 when both are empty)."""
    p, g = squad_normalize(pred).split(), squad_normalize(gold).split()
    if not p or not g:  # a side that normalises to nothing ("the", "!!") matches only the same raw text
        return float(_norm_or_raw(pred) == _norm_or_raw(gold))
    common = sum((Counter(p) & Counter(g)).values())
    if common == 0:
        return 0.0
    precision, recall = common / len(p), common / len(g)
    return 2 * precision * recall / (precision + recall)


_HEDGE_WORDS = frozenset({"or", "either", "nor", "maybe", "perhaps", "possibly", "probably", "likely", "unsure",
                          "unclear", "approximately", "roughly"})
_HEDGE_MARKS = re.compile(r"/|\||\band/or\b|\?")
_STRONG_SEPARATORS = re.compile(r"\s*(?:;|\||/|\n|\bor\b|\band\b|&)\s*", re.IGNORECASE)
_COMMA = re.compile(r"(?<!\d),|,(?!\d{3}\b)")


def _norm_or_raw(s: str) -> str:
    """SQuAD-normalised text, or the case-folded text when normalising leaves nothing (a gold such as "The")."""
    return squad_normalize(s) or " ".join(s.casefold().split())


def hedge_reason(pred: str, golds: list[str]) -> str | None:
    """Why an answer span is a hedge or a list that contains the gold, or None (docs/verifiers.md, Table QA:
    hedges, lists and several answers).

    - a hedge word or mark the gold does not contain: "Paris or London", "maybe Paris", "Paris/London",
      "Paris?" ("or", "either", "maybe", "probably", "/", "|", "?", ...);
    - a list holding a gold alias next to other items: "Paris, London", "Paris; London", "Paris and London",
      one item per line. Splitting uses ``;`` ``|`` ``/`` ``&`` newlines, "or", "and" and commas (not the
      thousands separator in "1,234"), and a span equal to an alias is never a list, so golds that contain a
      separator ("Trinidad and Tobago", "Paris, France") still match themselves.
    """
    words = set(re.findall(r"[a-z/]+", pred.casefold()))
    gold_words = set(re.findall(r"[a-z/]+", " ".join(golds).casefold()))
    hedges = sorted((words & _HEDGE_WORDS) - gold_words)
    if hedges:
        return f"hedged answer ({', '.join(hedges)})"
    marks = {m.group(0) for m in _HEDGE_MARKS.finditer(pred)} - {m.group(0) for g in golds
                                                                    for m in _HEDGE_MARKS.finditer(g)}
    if marks:
        return f"hedged answer ({' '.join(sorted(marks))})"
    whole, targets = _norm_or_raw(pred), {_norm_or_raw(g) for g in golds}
    if whole in targets:
        return None
    parts = [p for chunk in _STRONG_SEPARATORS.split(pred) for p in [chunk, *_COMMA.split(chunk)] if p.strip()]
    if len(parts) > 1 and any(_norm_or_raw(p) in targets for p in parts):
        return "a list of answers that contains the gold: give one answer"
    return None

"""Table QA and table fact verification rewards (Table-R1) plus SQuAD-style exact match and token F1.

Table-R1 (Yang et al. 2025, "Table-R1: Inference-Time Scaling for Table Reasoning", arXiv:2505.23621; official code
``verl/utils/reward_score/tqa.py`` and ``tfv.py``; EXACT). The answer is a JSON object ``{"answer": ...}`` read
from the ``<answer>`` block (else anywhere): a fenced ```` ```json ```` block first, then a bare object. Missing or
invalid JSON scores 0 (all components 0).

``table_qa`` (WTQ, HiTab; denotation accuracy)::

    format   = 1 iff the output is <think>...</think> <answer>...</answer> (each tag once) and the answer
               block holds a fenced ```json {"answer": [...]}``` whose elements are all strings
    accuracy = 1 iff the answer list (a scalar becomes a one-element list) has 1..100 elements, the same
               length as the gold list, and a greedy one-to-one matching pairs every element: numbers
               (JSON numbers, or strings like "1,234" / "3.5e2") as floats within |a - b| < 1e-2, all other
               values exactly (case-sensitive); order-insensitive
    reward   = format_weight * format + accuracy         (Table-R1: format_weight = 1, reward in [0, 2])

``table_fv`` (TabFact): the same with ``accuracy = 1[label == gold]`` over labels ``entailed`` / ``refuted``
(the gold may be written 1/0, SUPPORTS/REFUTES, true/false, any case: :func:`gold_label`).

Against hedging (deviations from the reference; docs/verifiers.md, Table QA: hedges, lists and several answers):
the answer is read only from the ``<answer>`` blocks when there is one (the reference falls back to JSON
anywhere, so ``<answer>London</answer> {"answer": ["Paris"]}`` scored Paris), and answer objects with
different values in that region (``{"answer": "entailed"} or {"answer": "refuted"}``, two answer blocks)
score 0 instead of the first one winning.

Gold data: ``meta["denotation"]`` (list of gold values, all required; ``table_qa``) and ``meta["label"]``
(``table_fv``); without them ``answer`` is parsed (a JSON list, a ``{"answer": ...}`` object, or a plain
string taken as one value). Deviation from the reference: leading/trailing whitespace of the completion is
stripped before the format check (the reference fails a trailing newline).

``table_ff`` (FeTaQA free-form answers, BLEU / ROUGE-L) lives in :mod:`rlvr.verifiers.table_ff`.

``table_em`` / ``table_f1`` (SQuAD normalisation: lowercase, drop punctuation, the articles a/an/the and
extra whitespace): the answer span is the last ``<answer>`` block, else the last non-empty line; a span
longer than ``max_answer_tokens`` words scores 0, so list-everything answers cannot farm F1 credit.
``reward = max over gold aliases of EM (0/1) or token F1``; aliases from ``meta["aliases"]``, else ``[answer]``.
Several ``<answer>`` blocks that differ, a hedge ("Paris or London", "maybe Paris", "Paris/London") and a list
holding a gold alias next to other items ("Paris, London") score 0 (:func:`hedge_reason`); a gold that
itself contains such a word or separator still matches itself.
"""

from __future__ import annotations

import json
import re
import string
from typing import Any

from pydantic import Field

from rlvr.core.types import Example, Score
from rlvr.registry import Params
from rlvr.verifiers.base import VERIFIERS, BaseVerifier
from rlvr.verifiers.format import extract_tag, last_line
from rlvr.verifiers.spans import _norm_or_raw, hedge_reason, squad_normalize, token_f1  # noqa: F401 (re-exported)

__all__ = ["TableQAVerifier", "TableFVVerifier", "TableEMVerifier", "TableF1Verifier",
           "extract_table_answer", "normalize_denotation", "denotation_match", "squad_normalize",
           "token_f1", "TableR1Params", "SpanParams", "SeveralAnswers", "answer_region", "gold_label",
           "hedge_reason"]  # the free-form verifier lives in table_ff.py

_THINK_ANSWER = re.compile(r"^<think>.*?</think>\s*<answer>.*?</answer>$", re.DOTALL)
_ANSWER_BLOCK = re.compile(r"<answer>(.*?)</answer>", re.DOTALL)
_VALUE = r'(?:\[[\s\S]*?\]|"[\s\S]*?"|[-+]?\d+(?:\.\d+)?(?:[eE][-+]?\d+)?)'
_QA_PATTERNS = (re.compile(r'```json\s*(\{\s*"answer"\s*:\s*' + _VALUE + r'\s*\})\s*```'),
                re.compile(r'(\{\s*"answer"\s*:\s*' + _VALUE + r'\s*\})'))
_QA_STRICT = re.compile(r'```json\s*(\{\s*"answer"\s*:\s*(?:\[[\s\S]*?\])\s*\})\s*```')
_LABEL = r'(\{\s*"answer"\s*:\s*"(?:entailed|refuted)"\s*\})'
_FV_PATTERNS = (re.compile(r"```json\s*" + _LABEL + r"\s*```"), re.compile(_LABEL))
_NUMBER = re.compile(r"^[+-]?(?:(?:\d{1,3}(?:,\d{3})*|\d+)(?:\.\d*)?|\.\d+)(?:[eE][+-]?\d+)?$")
LABELS = ("entailed", "refuted")
_PUNCT = frozenset(string.punctuation)


def _parse_answer_json(s: str, labels: bool) -> Any:
    try:
        data = json.loads(s)
    except (json.JSONDecodeError, RecursionError):
        return None
    if not isinstance(data, dict) or "answer" not in data:
        return None
    value = data["answer"]
    if labels:
        return value if value in LABELS else None
    return value if isinstance(value, list) else [value]


def _search(text: str, patterns: tuple[re.Pattern, ...], labels: bool) -> Any:
    for pat in patterns:
        m = pat.search(text)
        if m is not None:
            return _parse_answer_json(m.group(1).strip(), labels)
    return None


class SeveralAnswers(ValueError):
    """The completion states more than one different answer (a hedge); it scores 0."""


def answer_region(text: str) -> str:
    """Where the answer must be: the ``<answer>`` blocks when there is one (never the reasoning or text around
    them), else the whole completion."""
    blocks = _ANSWER_BLOCK.findall(text)
    return "\n".join(blocks) if blocks else text


def _answer_key(value: Any, labels: bool) -> Any:
    if labels:
        return value
    norm = normalize_denotation(value)
    return tuple(sorted(map(repr, norm))) if norm else repr(value)


def extract_table_answer(text: str, labels: bool = False) -> Any:
    """The answer list (or label when ``labels``): Table-R1's patterns (a fenced JSON block first, then a bare
    object) searched in :func:`answer_region`. Raises :class:`SeveralAnswers` when the region holds answer
    objects with different values (``{"answer": "entailed"} or {"answer": "refuted"}``)."""
    patterns = _FV_PATTERNS if labels else _QA_PATTERNS
    region = answer_region(text)
    found = _search(region, patterns, labels)
    if found is None:
        return None
    keys = {_answer_key(found, labels)}
    for m in _QA_PATTERNS[-1].finditer(region):  # every bare object, fenced ones included, any value
        value = _parse_answer_json(m.group(1).strip(), False)
        if value is None:  # not an answer object (invalid JSON): neither answer nor hedge
            continue
        if labels:  # a label and a non-label ({"answer": "Big Ben"}) are two answers too
            value = value[0] if len(value) == 1 and isinstance(value[0], str) else json.dumps(value)
        keys.add(_answer_key(value, labels))
        if len(keys) > 1:
            raise SeveralAnswers("several different answers: " + ", ".join(sorted(map(str, keys)))[:200])
    return found


def normalize_denotation(values: list) -> list:
    """Numbers (and number-like strings, thousands commas allowed) to float; other strings kept; [] if invalid."""
    out: list = []
    for x in values:
        if isinstance(x, (int, float)):  # bool is an int here, as in the reference
            out.append(float(x))
        elif isinstance(x, str):
            try:
                out.append(float(x.replace(",", "")) if _NUMBER.match(x) else x)
            except ValueError:
                out.append(x)
        else:
            return []
    return out


def denotation_match(pred: list, gold: list, tol: float = 1e-2) -> bool:
    """Table-R1's greedy order-insensitive one-to-one match (floats within ``tol``, others exactly)."""
    if len(pred) != len(gold):
        return False
    used = [False] * len(gold)
    for p in pred:
        for j, g in enumerate(gold):
            if used[j]:
                continue
            both_float = isinstance(p, float) and isinstance(g, float)
            if (both_float and abs(p - g) < tol) or (not both_float and p == g):
                used[j] = True
                break
    return all(used)


def _tags_once(text: str) -> bool:
    return all(text.count(t) == 1 for t in ("<think>", "</think>", "<answer>", "</answer>"))


def _format_ok(text: str, labels: bool) -> bool:
    """Table-R1's instruct-model format check."""
    if not _THINK_ANSWER.fullmatch(text) or not _tags_once(text):
        return False
    block = _ANSWER_BLOCK.search(text).group(1)
    if labels:
        m = _FV_PATTERNS[0].search(block)
        return m is not None and _parse_answer_json(m.group(1).strip(), True) is not None
    m = _QA_STRICT.search(block)
    if m is None:
        return False
    answer = _parse_answer_json(m.group(1).strip(), False)
    return answer is not None and all(isinstance(a, str) for a in answer)


def _gold_list(example: Example, key: str) -> list:
    if key in example.meta:
        gold = example.meta[key]
        return list(gold) if isinstance(gold, (list, tuple)) else [gold]
    try:
        data = json.loads(example.answer)
    except json.JSONDecodeError:
        return [example.answer.strip()]
    if isinstance(data, dict) and "answer" in data:
        data = data["answer"]
    return data if isinstance(data, list) else [data]


def _zero(reason: str) -> Score:
    return Score(0.0, {"correct": 0.0, "format": 0.0, "accuracy": 0.0}, {"reason": reason})


class _TableR1Base(BaseVerifier):
    labels = False

    def __init__(self, format_weight: float = 1.0, tolerance: float = 1e-2, max_items: int = 100,
                 max_chars: int = 16_000):
        self.format_weight, self.tol, self.max_items, self.max_chars = format_weight, tolerance, max_items, max_chars

    def _accuracy(self, example: Example, answer: Any) -> tuple[float, str | None]:
        raise NotImplementedError

    def score(self, example: Example, text: str) -> Score:
        if len(text) > self.max_chars:
            return _zero(f"completion longer than {self.max_chars} characters")
        text = text.strip()
        try:
            answer = extract_table_answer(text, self.labels)
        except SeveralAnswers as e:
            return _zero(str(e))
        if answer is None:
            return _zero('no {"answer": ...} JSON found')
        acc, reason = self._accuracy(example, answer)
        if acc is None:
            return _zero(reason)
        fmt = float(_format_ok(text, self.labels))
        info = {"answer": answer} if reason is None else {"answer": answer, "reason": reason}
        return Score(self.format_weight * fmt + acc, {"correct": acc, "format": fmt, "accuracy": acc}, info)


class TableQAVerifier(_TableR1Base):
    """Table-R1 TQA reward: format_weight * format + order-insensitive denotation accuracy."""

    name = "table_qa"

    def _accuracy(self, example, answer):
        pred = normalize_denotation(answer)
        if not pred or len(pred) > self.max_items:
            return None, f"answer must be a list of 1..{self.max_items} strings or numbers"
        ok = denotation_match(pred, normalize_denotation(_gold_list(example, "denotation")), self.tol)
        return float(ok), None if ok else "denotation mismatch"

    def validation_cases(self):
        ex = Example("table-qa-1", "q", '{"answer": ["Paris", "1234"]}', meta={"denotation": ["Paris", "1234"]})
        good = '<think>r</think>\n<answer>```json\n{"answer": ["1,234", "Paris"]}\n```</answer>'
        cases = [(ex, '{"answer": ["1234", "Paris"]}', 1.0), (ex, '{"answer": ["Paris"]}', 0.0),
                 (ex, "Paris, 1234", 0.0), (ex, '{"answer": ["paris", "1234"]}', 0.0)]
        return cases + [(ex, good, 1.0 + self.format_weight)]


class TableFVVerifier(_TableR1Base):
    """Table-R1 TFV reward: format_weight * format + 1[label == gold label]."""

    name = "table_fv"
    labels = True

    def _accuracy(self, example, answer):
        gold = gold_label(_gold_list(example, "label")[0])
        ok = answer == gold
        return float(ok), None if ok else f"label {answer!r} != {gold!r}"

    def validation_cases(self):
        ex = Example("table-fv-1", "q", '{"answer": "refuted"}', meta={"label": "refuted"})
        return [(ex, 'so {"answer": "refuted"}', 1.0), (ex, '{"answer": "entailed"}', 0.0),
                (ex, '{"answer": "maybe"}', 0.0), (ex, "refuted", 0.0)]


_GOLD_LABELS = {"entailed": "entailed", "entails": "entailed", "supported": "entailed", "supports": "entailed",
                "true": "entailed", "1": "entailed", "refuted": "refuted", "refutes": "refuted", "false": "refuted",
                "0": "refuted"}


def gold_label(value: Any) -> str:
    """A dataset's gold label as ``entailed`` / ``refuted``: TabFact's 1/0, FEVEROUS-style SUPPORTS /
    REFUTES, booleans and any letter case are accepted for the *gold* (predictions must say ``entailed`` or
    ``refuted``). Anything else is a broken example and raises."""
    key = str(int(value)) if isinstance(value, (bool, int)) else str(value).strip().casefold()
    if key not in _GOLD_LABELS:
        raise ValueError(f"gold label {value!r} is not entailed/refuted (or 1/0, supported/refuted, true/false)")
    return _GOLD_LABELS[key]


class TableR1Params(Params):
    format_weight: float = Field(1.0, ge=0.0, description="weight of the 0/1 format score added to accuracy "
                                                          "(Table-R1: 1, so rewards lie in [0, 2])")
    tolerance: float = Field(1e-2, ge=0.0, description="absolute tolerance for numeric answers (Table-R1: 1e-2)")
    max_items: int = Field(100, gt=0, description="answers with more list elements score 0 (Table-R1: 100)")
    max_chars: int = Field(16_000, gt=0, description="longer completions score 0 without being scanned")


@VERIFIERS.register("table_qa", TableR1Params)
def _table_qa(p: TableR1Params) -> TableQAVerifier:
    """Table-R1 TQA: format_weight*format + denotation accuracy (order-insensitive, numbers within 1e-2)."""
    return TableQAVerifier(p.format_weight, p.tolerance, p.max_items, p.max_chars)


@VERIFIERS.register("table_fv", TableR1Params)
def _table_fv(p: TableR1Params) -> TableFVVerifier:
    """Table-R1 TFV: format_weight*format + exact entailed/refuted label match."""
    return TableFVVerifier(p.format_weight, p.tolerance, p.max_items, p.max_chars)


class _SpanBase(BaseVerifier):
    def __init__(self, max_answer_tokens: int = 32, max_chars: int = 16_000):
        self.max_answer_tokens, self.max_chars = max_answer_tokens, max_chars

    def _metric(self, pred: str, gold: str) -> float:
        raise NotImplementedError

    def score(self, example: Example, text: str) -> Score:
        if len(text) > self.max_chars:
            return Score(0.0, {"correct": 0.0}, {"reason": f"completion longer than {self.max_chars} characters"})
        blocks = [b.strip() for b in _ANSWER_BLOCK.findall(text)]
        if len({_norm_or_raw(b) for b in blocks}) > 1:
            return Score(0.0, {"correct": 0.0}, {"reason": f"several different <answer> blocks: {blocks[:4]}"})
        span = extract_tag(text, "answer")
        span = last_line(text) if span is None else span
        if not span:
            return Score(0.0, {"correct": 0.0}, {"reason": "no answer span"})
        if len(span.split()) > self.max_answer_tokens:
            return Score(0.0, {"correct": 0.0}, {"reason": f"answer longer than {self.max_answer_tokens} words"})
        aliases = [str(a) for a in _gold_list(example, "aliases")] if "aliases" in example.meta else [example.answer]
        hedge = hedge_reason(span, aliases)
        if hedge:
            return Score(0.0, {"correct": 0.0}, {"answer": span, "reason": hedge})
        r = max(self._metric(span, g) for g in aliases)
        return Score(r, {"correct": float(r >= 1.0)}, {"answer": span})

    def validation_cases(self):
        ex = Example(f"{self.name}-1", "q", "The Eiffel Tower", meta={"aliases": ["The Eiffel Tower", "Tour Eiffel"]})
        return [(ex, "<answer>eiffel tower.</answer>", 1.0), (ex, "tour  EIFFEL", 1.0), (ex, "Big Ben", 0.0),
                (ex, "<answer></answer>", 0.0), (ex, "eiffel " * (self.max_answer_tokens + 1), 0.0)]


class TableEMVerifier(_SpanBase):
    """SQuAD-normalised exact match of the answer span against any gold alias."""

    name = "table_em"

    def _metric(self, pred, gold):
        return float(_norm_or_raw(pred) == _norm_or_raw(gold))


class TableF1Verifier(_SpanBase):
    """SQuAD token F1 of the answer span, best over gold aliases."""

    name = "table_f1"

    def _metric(self, pred, gold):
        return token_f1(pred, gold)


class SpanParams(Params):
    max_answer_tokens: int = Field(32, gt=0, description="answer spans with more words score 0")
    max_chars: int = Field(16_000, gt=0, description="longer completions score 0 without being scanned")


@VERIFIERS.register("table_em", SpanParams)
def _table_em(p: SpanParams) -> TableEMVerifier:
    """Exact match after SQuAD normalisation, best over meta['aliases'] (answer span capped in length)."""
    return TableEMVerifier(p.max_answer_tokens, p.max_chars)


@VERIFIERS.register("table_f1", SpanParams)
def _table_f1(p: SpanParams) -> TableF1Verifier:
    """SQuAD token F1 of the answer span, best over meta['aliases'] (answer span capped in length)."""
    return TableF1Verifier(p.max_answer_tokens, p.max_chars)

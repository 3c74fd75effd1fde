"""Table-R1's free-form table QA reward (FeTaQA), from the official ``verl/utils/reward_score/ff_tqa.py``.

Yang et al. 2025, "Table-R1: Inference-Time Scaling for Table Reasoning", arXiv:2505.23621 (EXACT). Shares the
answer-block and format conventions of :mod:`rlvr.verifiers.table`.

``table_ff`` (FeTaQA free-form answers; official ``ff_tqa.py``)::

    answer   = the {"answer": ...} value (any JSON type; patterns end at the first "}", as in the reference),
               else the whole stripped output; a list is joined with spaces, anything else str()-ed
    gold     = the first gold value (``meta["reference"]``, else ``answer``), normalised the same way
    accuracy = (sentence BLEU / 100 + ROUGE-L F) / 2   (sacrebleu exp smoothing, effective order; rouge_score
               with the Porter stemmer; pure-Python ports in :mod:`rlvr.verifiers.textmetrics`)
    format   = the TQA format check with any JSON answer value;  reward = format_weight * format + accuracy

Deviations from the reference, against reward hacks (docs/verifiers.md, Table QA: hedges, lists and several
answers): the ``<answer>`` block, when there is one, is the answer (no fall-back to JSON elsewhere in the
completion); accuracy is 0 for several different JSON answers, for a JSON list that holds the reference
next to other items, and for a hedge or list by :func:`rlvr.verifiers.table.hedge_reason` ("SUPPORTED or
REFUTED", "X / Y"); a reference of at most ``short_reference_tokens`` (2) words is a label or a value and is
compared by exact match after SQuAD normalisation (BLEU/ROUGE-L paid 0.58 for "SUPPORTED REFUTED").
"""

from __future__ import annotations

import json
import re
from typing import Any

from pydantic import Field

from rlvr.core.types import Example, Score
from rlvr.registry import Params
from rlvr.verifiers.base import VERIFIERS, BaseVerifier
from rlvr.verifiers.table import (_ANSWER_BLOCK, _THINK_ANSWER, _gold_list, _norm_or_raw, _tags_once, answer_region,
                                  hedge_reason, squad_normalize)
from rlvr.verifiers.textmetrics import rouge_l, sentence_bleu

__all__ = ["TableFFVerifier", "extract_free_form"]


_FF_PATTERNS = (re.compile(r'```json\s*(\{\s*"answer"\s*:\s*.*?\})\s*```', re.DOTALL),
                re.compile(r'(\{\s*"answer"\s*:\s*.*?\})', re.DOTALL))
_MISSING = object()


def _ff_parse(s: str) -> Any:
    try:
        data = json.loads(s.strip())
    except (json.JSONDecodeError, RecursionError):
        return _MISSING
    return data["answer"] if isinstance(data, dict) and data.get("answer") is not None else _MISSING


def _ff_search(text: str) -> Any:
    for pat in _FF_PATTERNS:  # the first pattern that matches decides, even when its JSON is invalid
        m = pat.search(text)
        if m is not None:
            return _ff_parse(m.group(1))
    return _MISSING


def _ff_text(value: Any) -> str:
    return " ".join(str(x).strip() for x in value) if isinstance(value, list) else str(value).strip()


def extract_free_form(text: str) -> str:
    """FF-TQA answer text: the JSON answer in the ``<answer>`` blocks, else (no JSON there) the blocks' text;
    without a block, the JSON answer anywhere, else the whole output. Table-R1's reference falls back from
    an answer block without JSON to JSON anywhere in the completion; here the answer block is the answer."""
    region = answer_region(text)
    found = _ff_search(region)
    return region.strip() if found is _MISSING else _ff_text(found)


def _ff_values(text: str) -> list:
    """Every JSON answer value in the answer region (each ``{"answer": ...}`` object that parses)."""
    out = []
    for m in _FF_PATTERNS[1].finditer(answer_region(text)):
        value = _ff_parse(m.group(1))
        if value is not _MISSING:
            out.append(value)
    return out


def free_form_hedge(text: str, reference: str) -> str | None:
    """Why the answer is a hedge or several answers, or None (docs/verifiers.md, Table QA: hedges, lists and
    several answers):
    different JSON answers in the answer region; a JSON list one of whose elements is the reference while
    others are not; or a hedge or list by :func:`rlvr.verifiers.table.hedge_reason` ("SUPPORTED or REFUTED")."""
    values = _ff_values(text)
    if len({_norm_or_raw(_ff_text(v)) for v in values}) > 1:
        return "several different answers"
    pred = extract_free_form(text)
    target = _norm_or_raw(reference)
    for v in values[:1]:
        if isinstance(v, list) and len(v) > 1 and _norm_or_raw(pred) != target and \
                any(_norm_or_raw(str(x)) == target for x in v):
            return "a list of answers that contains the reference: give one answer"
    return hedge_reason(pred, [reference])


def _ff_format_ok(text: str) -> bool:
    if not _THINK_ANSWER.fullmatch(text) or not _tags_once(text):
        return False
    m = _FF_PATTERNS[0].search(_ANSWER_BLOCK.search(text).group(1))
    return m is not None and _ff_parse(m.group(1)) is not _MISSING


class TableFFVerifier(BaseVerifier):
    """Table-R1 FF-TQA (FeTaQA) reward: format_weight * format + (BLEU/100 + ROUGE-L F) / 2."""

    name = "table_ff"

    def __init__(self, format_weight: float = 1.0, max_chars: int = 16_000, short_reference_tokens: int = 2):
        self.format_weight, self.max_chars = format_weight, max_chars
        self.short_reference_tokens = short_reference_tokens

    def score(self, example: Example, text: str) -> Score:
        if len(text) > self.max_chars:
            return Score(0.0, {"correct": 0.0, "format": 0.0, "accuracy": 0.0, "bleu": 0.0, "rouge_l": 0.0},
                         {"reason": f"completion longer than {self.max_chars} characters"})
        text = text.strip()
        gold = _gold_list(example, "reference")
        if not gold:
            raise ValueError("the example has no gold reference")
        pred, ref = extract_free_form(text), _ff_text(gold[0])
        fmt = float(_ff_format_ok(text))
        hedge = free_form_hedge(text, ref)
        if hedge:
            comps = {"correct": 0.0, "format": fmt, "accuracy": 0.0, "bleu": 0.0, "rouge_l": 0.0}
            return Score(self.format_weight * fmt, comps, {"answer": pred, "reason": hedge})
        if len(squad_normalize(ref).split()) <= self.short_reference_tokens:
            # a label or a value ("SUPPORTED", "1998"): n-gram overlap would pay "SUPPORTED REFUTED" 0.58
            acc = float(_norm_or_raw(pred) == _norm_or_raw(ref))
            comps = {"correct": acc, "format": fmt, "accuracy": acc, "bleu": acc, "rouge_l": acc, "exact": 1.0}
            return Score(self.format_weight * fmt + acc, comps, {"answer": pred})
        bleu, rouge = sentence_bleu(pred, ref) / 100.0, rouge_l(pred, ref)
        acc = (bleu + rouge) / 2
        comps = {"correct": float(acc >= 1.0), "format": fmt, "accuracy": acc, "bleu": bleu, "rouge_l": rouge}
        return Score(self.format_weight * fmt + acc, comps, {"answer": pred})

    def validation_cases(self):
        gold = "Smith scored 12 goals in 1998."
        ex = Example("table-ff-1", "q", gold)
        good = f'<think>r</think>\n<answer>```json\n{{"answer": "{gold}"}}\n```</answer>'
        return [(ex, gold, 1.0), (ex, 'so {"answer": ["Smith scored 12 goals", "in 1998."]}', 1.0),
                (ex, "Jones left the club", 0.0), (ex, '{"answer": "no idea"}', 0.0),
                (ex, good, 1.0 + self.format_weight)]


class TableFFParams(Params):
    format_weight: float = Field(1.0, ge=0.0, description="weight of the 0/1 format score added to the BLEU/ROUGE-L "
                                                          "accuracy (Table-R1: 1, so rewards lie in [0, 2])")
    max_chars: int = Field(16_000, gt=0, description="longer completions score 0 without being scanned")
    short_reference_tokens: int = Field(2, ge=0, description="references of at most this many (SQuAD-normalised) "
                                                             "words are labels or values: exact match instead of "
                                                             "BLEU/ROUGE-L (0: never)")


@VERIFIERS.register("table_ff", TableFFParams)
def _table_ff(p: TableFFParams) -> TableFFVerifier:
    """Table-R1 FF-TQA (FeTaQA): format_weight*format + (sentence BLEU/100 + ROUGE-L F)/2; hedges score 0."""
    return TableFFVerifier(p.format_weight, p.max_chars, p.short_reference_tokens)

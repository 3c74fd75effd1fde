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
"""

from __future__ import annotations

import json
import re
from typing import Any

from pydantic import Field

from rlvr.core.types import Example, Score
from rlvr.registry import Params
from rlvr.verifiers.base import VERIFIERS, BaseVerifier
from rlvr.verifiers.table import _ANSWER_BLOCK, _THINK_ANSWER, _gold_list, _tags_once
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
    """Table-R1 FF-TQA answer text: the JSON answer in ``<answer>``, else anywhere, else the whole output."""
    block = _ANSWER_BLOCK.search(text)
    found = _ff_search(block.group(1)) if block is not None else _MISSING
    found = _ff_search(text) if found is _MISSING else found
    return text.strip() if found is _MISSING else _ff_text(found)


def _ff_format_ok(text: str) -> bool:
    if not _THINK_ANSWER.fullmatch(text) or not _tags_once(text):
        return False
    m = _FF_PATTERNS[0].search(_ANSWER_BLOCK.search(text).group(1))
    return m is not None and _ff_parse(m.group(1)) is not _MISSING


class TableFFVerifier(BaseVerifier):
    """Table-R1 FF-TQA (FeTaQA) reward: format_weight * format + (BLEU/100 + ROUGE-L F) / 2."""

    name = "table_ff"

    def __init__(self, format_weight: float = 1.0, max_chars: int = 16_000):
        self.format_weight, self.max_chars = format_weight, max_chars

    def score(self, example: Example, text: str) -> Score:
        if len(text) > self.max_chars:
            return Score(0.0, {"correct": 0.0, "format": 0.0, "accuracy": 0.0, "bleu": 0.0, "rouge_l": 0.0},
                         {"reason": f"completion longer than {self.max_chars} characters"})
        text = text.strip()
        gold = _gold_list(example, "reference")
        if not gold:
            raise ValueError("the example has no gold reference")
        pred, ref = extract_free_form(text), _ff_text(gold[0])
        bleu, rouge = sentence_bleu(pred, ref) / 100.0, rouge_l(pred, ref)
        acc, fmt = (bleu + rouge) / 2, float(_ff_format_ok(text))
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


@VERIFIERS.register("table_ff", TableFFParams)
def _table_ff(p: TableFFParams) -> TableFFVerifier:
    """Table-R1 FF-TQA (FeTaQA): format_weight*format + (sentence BLEU/100 + ROUGE-L F)/2."""
    return TableFFVerifier(p.format_weight, p.max_chars)

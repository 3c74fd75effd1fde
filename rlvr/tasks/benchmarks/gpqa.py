"""GPQA (Diamond, or any GPQA subset in the same release schema), scored by the ``choice`` verifier.

The four options (``Correct Answer``, ``Incorrect Answer 1..3``, stripped of surrounding whitespace) are
shuffled per question with ``random.Random(f"{seed}:{record id}")``, so the order depends on the seed and
the question only (not on the file's row order). Each example's meta records ``options`` (as shown),
``correct_letter``, ``shuffle_seed`` and ``option_order`` (for each shown option, 0 for the correct answer or
k for ``Incorrect Answer k``), so any result can be audited against the release.
"""

from __future__ import annotations

import random
from typing import Any, Sequence

from rlvr.core.types import Example
from rlvr.tasks.benchmarks.reader import Row
from rlvr.tasks.benchmarks.spec import Benchmark, fill, register, require, text_field
from rlvr.verifiers.choice import LETTERS, letters_block

__all__ = ["CHOICE_TEMPLATE", "shuffled"]

# OpenAI simple-evals' multiple-choice template (the letters block is "A) ...", one line each)
CHOICE_TEMPLATE = ("Answer the following multiple choice question. The last line of your response should be of the "
                   "following format: 'Answer: $LETTER' (without quotes) where LETTER is one of {letters}. Think "
                   "step by step before answering.\n\n{question}\n\n{options}")
_FIELDS = ("Correct Answer", "Incorrect Answer 1", "Incorrect Answer 2", "Incorrect Answer 3")


def _choice_verifier(params: dict[str, Any]):
    from rlvr.verifiers import build_verifier

    return build_verifier("choice", params)


def shuffled(n: int, seed: int, key: str) -> list[int]:
    """A permutation of ``range(n)`` fixed by ``seed`` and the item's ``key``."""
    order = list(range(n))
    random.Random(f"{seed}:{key}").shuffle(order)
    return order


def _gpqa(rows: Sequence[Row], p: Any, bench: Benchmark) -> list[Example]:
    out = []
    for where, default, row in rows:
        require(bench, where, row)
        question = text_field(where, row, ("Question",)).strip()
        texts = [text_field(where, row, (f,)).strip() for f in _FIELDS]
        rid = str(row.get("Record ID") or default)
        order = shuffled(4, p.seed, rid)
        options = [texts[i] for i in order]
        letter = LETTERS[order.index(0)]
        meta = {k: v for k, v in row.items() if k != "Question"}
        meta.update(options=options, correct_letter=letter, shuffle_seed=p.seed, option_order=order)
        prompt = fill(p.template or bench.template, {"question": question, "options": letters_block(options),
                                                     "letters": LETTERS[:4], **dict(zip(LETTERS, options))})
        out.append(Example(rid, prompt, letter, bench.name, None, meta))
    return out


register(Benchmark(
    "gpqa_diamond", "GPQA-Diamond", "Idavidrein/gpqa, gpqa_diamond.csv",
    (("Question",), ("Correct Answer",), ("Incorrect Answer 1",), ("Incorrect Answer 2",), ("Incorrect Answer 3",)),
    ("Record ID", "Explanation", "Subdomain", "High-level domain"), CHOICE_TEMPLATE,
    ("question", "options", "letters", "A", "B", "C", "D"), _gpqa, _choice_verifier, "choice"))

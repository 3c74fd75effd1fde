"""MATH-500, AIME 2024, AIME 2025 and GSM8K test sets, scored by the ``math`` verifier.

Gold answers: MATH-500's ``answer`` field (else the last ``\\boxed{}`` of ``solution``), AIME's ``answer``
(a number or a string), GSM8K's text after the last ``####`` of ``answer`` with thousands separators removed
(``1,234`` -> ``1234``). The worked solution, where the row has one, is the example's supervised target.
"""

from __future__ import annotations

from typing import Any, Sequence

from rlvr.core.types import Example
from rlvr.tasks.benchmarks.reader import Row
from rlvr.tasks.benchmarks.spec import Benchmark, SchemaError, fill, register, require, text_field
from rlvr.tasks.dataset import DataError
from rlvr.tasks.math_data import gsm8k_gold, math_gold

__all__ = ["BOXED_TEMPLATE", "GSM8K_TEMPLATE"]

BOXED_TEMPLATE = "{problem}\n\nPlease reason step by step, and put your final answer within \\boxed{}."
GSM8K_TEMPLATE = "{question}\n\nPlease reason step by step, and put your final answer within \\boxed{}."
_AIME_PROBLEM = ("problem", "question", "Problem", "Question")
_AIME_ANSWER = ("answer", "Answer")


def _math_verifier(params: dict[str, Any]):
    from rlvr.verifiers import build_verifier

    return build_verifier("math", params)


def _id(row: dict, default: str, *keys: str) -> str:
    for k in keys:
        if row.get(k) not in (None, ""):
            return str(row[k])
    return default


def _math500(rows: Sequence[Row], p: Any, bench: Benchmark) -> list[Example]:
    out = []
    for where, default, row in rows:
        require(bench, where, row)
        problem = text_field(where, row, ("problem",))
        gold = math_gold({"answer": str(row["answer"]) if isinstance(row.get("answer"), (int, float)) else
                          row.get("answer"), "solution": row.get("solution")})
        if gold is None:
            raise DataError(f"{where}: no gold answer ('answer' is empty and 'solution' has no \\boxed{{}})")
        meta = {k: v for k, v in row.items() if k != "problem"}
        out.append(Example(_id(row, default, "unique_id", "id"), fill(p.template or bench.template, {"problem": problem}),
                           gold, bench.name, row.get("solution") if isinstance(row.get("solution"), str) else None,
                           meta))
    return out


def _aime(rows: Sequence[Row], p: Any, bench: Benchmark) -> list[Example]:
    out = []
    for where, default, row in rows:
        require(bench, where, row)
        problem = text_field(where, row, _AIME_PROBLEM)
        gold = text_field(where, row, _AIME_ANSWER).strip()
        if not gold.isdigit():
            raise SchemaError(f"{where}: not an {bench.title} row: 'answer' must be an integer (AIME answers are 0 "
                              f"to 999), got {gold[:60]!r}. Expected the schema of {bench.schema()}")
        key = next(k for k in _AIME_PROBLEM if k in row)
        meta = {k: v for k, v in row.items() if k != key}
        solution = row.get("solution")
        out.append(Example(_id(row, default, "id", "ID", "problem_idx"),
                           fill(p.template or bench.template, {"problem": problem, "question": problem}), gold,
                           bench.name, solution if isinstance(solution, str) and solution.strip() else None, meta))
    return out


def _gsm8k(rows: Sequence[Row], p: Any, bench: Benchmark) -> list[Example]:
    out = []
    for where, default, row in rows:
        require(bench, where, row)
        question = text_field(where, row, ("question",))
        solution = text_field(where, row, ("answer",))
        gold = gsm8k_gold(solution)
        if gold is None:
            raise DataError(f"{where}: 'answer' has no final '#### N' line (the GSM8K schema ends each worked "
                            f"answer with '#### <number>')")
        meta = {k: v for k, v in row.items() if k != "question"}
        out.append(Example(_id(row, default, "id"), fill(p.template or bench.template, {"question": question}),
                           gold, bench.name, solution, meta))
    return out


register(Benchmark(
    "math500", "MATH-500", "HuggingFaceH4/MATH-500", (("problem",), ("answer", "solution")),
    ("subject", "level", "unique_id"), BOXED_TEMPLATE, ("problem",), _math500, _math_verifier, "math"))
register(Benchmark(
    "aime2024", "AIME 2024", "HuggingFaceH4/aime_2024", (_AIME_PROBLEM, _AIME_ANSWER),
    ("id", "solution", "url", "year"), BOXED_TEMPLATE, ("problem",), _aime, _math_verifier, "math"))
register(Benchmark(
    "aime2025", "AIME 2025", "opencompass/AIME2025 or yentinglin/aime_2025", (_AIME_PROBLEM, _AIME_ANSWER),
    ("id", "solution", "url", "year"), BOXED_TEMPLATE, ("problem",), _aime, _math_verifier, "math"))
register(Benchmark(
    "gsm8k", "GSM8K", "openai/gsm8k (main)", (("question",), ("answer",)), (), GSM8K_TEMPLATE, ("question",),
    _gsm8k, _math_verifier, "math"))

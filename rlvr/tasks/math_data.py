"""``gsm8k`` and ``math``: loaders for GSM8K-style and MATH-style data files, scored by the ``math`` verifier.

GSM8K rows are ``{"question": ..., "answer": "<worked solution> #### 72"}``: the gold answer is the rest of
the last ``####`` line (thousands separators removed; see :func:`gsm8k_gold`) and the worked solution is the
supervised target. Completions are scored by the ``math`` verifier, whose ``#### N`` marker wins over every
number (dollar amounts included) in the reasoning before it.
MATH rows are ``{"problem": ..., "solution": "... \\boxed{\\frac{1}{2}}"}`` (an ``answer`` field, as in
MATH-500, wins when present): the gold answer is the last balanced ``\\boxed{}`` of the solution. Files are
JSONL, parquet or saved ``datasets`` directories, as for the ``dataset`` task. ``instruction`` is appended
to each prompt (e.g. where to put the final answer).
"""

from __future__ import annotations

import re
from typing import Any

from pydantic import Field

from rlvr.core.paths import LocalPathStr
from rlvr.core.types import Example
from rlvr.registry import Params
from rlvr.tasks.base import TASKS, Task, WeightedVerifier
from rlvr.tasks.dataset import DataError, _format, _jsonl_rows, _table_rows, split_holdout
from rlvr.verifiers import build_verifier

__all__ = ["MathDataParams", "gsm8k_task", "math_task", "gsm8k_gold", "math_gold"]


class MathDataParams(Params):
    train_path: LocalPathStr = Field(..., description="training data file or saved dataset")
    eval_path: LocalPathStr | None = Field(None, description="held-out data (default: eval_fraction of train)")
    eval_fraction: float = Field(0.1, ge=0.0, lt=1.0, description="held out when eval_path is unset")
    format: str = Field("auto", pattern="^(auto|jsonl|parquet|hf)$", description="file format (auto: from path)")
    hf_split: str | None = Field(None, description="split of a saved DatasetDict")
    instruction: str = Field("", description="text appended to every prompt")
    verifier_params: dict[str, Any] = Field(default_factory=dict, description="params of the math verifier")
    data_seed: int = Field(0, description="seed of the eval hold-out")


def gsm8k_gold(solution: str) -> str | None:
    """The value on the last ``#### N`` line (the rest of that line only; thousands commas, a currency sign
    and Unicode look-alikes such as a minus sign U+2212 normalised: ``#### −1,234`` is ``-1234``)."""
    from rlvr.verifiers.math.chars import fold

    if "####" not in solution:
        return None
    line = fold(solution.rsplit("####", 1)[1]).strip().split("\n", 1)[0].strip()
    line = re.sub(r"^\\?\$\s*", "", line).rstrip(".").strip()
    if re.fullmatch(r"-?\d{1,3}(?:,\d{3})+(?:\.\d+)?", line):
        line = line.replace(",", "")
    return line or None


def math_gold(row: dict[str, Any]) -> str | None:
    from rlvr.verifiers.math.extract import boxed_contents

    if isinstance(row.get("answer"), str) and row["answer"].strip():
        return row["answer"].strip()
    boxes = boxed_contents(row.get("solution") or "")
    return boxes[-1] if boxes else None


def _load(path: str, p: MathDataParams, kind: str) -> list[Example]:
    from pathlib import Path

    fpath = Path(path).expanduser()
    if not fpath.exists():
        raise DataError(f"{fpath}: no such file")
    fmt = _format(fpath, p.format)
    rows = _jsonl_rows(fpath) if fmt == "jsonl" else _table_rows(fpath, fmt, p.hf_split)
    prompt_key, solution_key = ("question", "answer") if kind == "gsm8k" else ("problem", "solution")
    out = []
    for where, key, row in rows:
        if not isinstance(row, dict) or not isinstance(row.get(prompt_key), str):
            raise DataError(f"{where}: expected an object with a {prompt_key!r} string")
        solution = row.get(solution_key)
        gold = gsm8k_gold(solution or "") if kind == "gsm8k" else math_gold(row)
        if gold is None:
            want = "'#### answer' in 'answer'" if kind == "gsm8k" else "a \\boxed{} answer or an 'answer' field"
            raise DataError(f"{where}: no gold answer found (expected {want})")
        prompt = row[prompt_key] + (("\n" + p.instruction) if p.instruction else "")
        meta = {k: v for k, v in row.items() if k not in (prompt_key, solution_key)}
        out.append(Example(str(row.get("id", f"{fpath.stem}-{key}")), prompt, gold, kind,
                           solution if isinstance(solution, str) else None, meta))
    if not out:
        raise DataError(f"{fpath}: no examples")
    return out


def _task(p: MathDataParams, kind: str) -> Task:
    train = _load(p.train_path, p, kind)
    if p.eval_path:
        evals = _load(p.eval_path, p, kind)
    else:
        train, evals = split_holdout(train, p.eval_fraction, p.data_seed)
    return Task(kind, {"train": train, "eval": evals}, [WeightedVerifier(build_verifier("math", p.verifier_params))])


@TASKS.register("gsm8k", MathDataParams)
def gsm8k_task(p: MathDataParams) -> Task:
    """GSM8K-style word problems ('#### answer'), scored by the math verifier."""
    return _task(p, "gsm8k")


@TASKS.register("math", MathDataParams)
def math_task(p: MathDataParams) -> Task:
    """MATH-style problems (boxed answers), scored by the math verifier."""
    return _task(p, "math")

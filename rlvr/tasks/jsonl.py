"""``jsonl``: a task from local JSON-lines files with ``prompt`` and ``answer`` fields.

Each line is one JSON object. ``prompt`` is a string or a list of chat messages; ``answer`` is the gold
answer (compared as an exact fraction by the default ``numeric`` verifier); an optional ``id`` is kept
(default: ``<file stem>-<line number>``) and an optional ``completion`` is the supervised target.
Errors name the file and line. Without ``eval_path``, ``eval_fraction`` of the train file is held out.
"""

from __future__ import annotations

import json
import random
from pathlib import Path

from pydantic import Field

from rlvr.core.types import Example
from rlvr.registry import Params
from rlvr.tasks.base import TASKS, Task, WeightedVerifier
from rlvr.verifiers import build_verifier, from_callable

__all__ = ["JsonlParams", "jsonl_task", "read_jsonl_examples", "DataError"]


class DataError(ValueError):
    """A malformed data file; the message names the file and line."""


class JsonlParams(Params):
    train_path: str = Field(..., description="JSONL file of training examples")
    eval_path: str | None = Field(None, description="JSONL file of held-out examples")
    eval_fraction: float = Field(0.1, ge=0.0, lt=1.0, description="held out from train_path when eval_path is unset")
    prompt_field: str = Field("prompt", description="field holding the prompt")
    answer_field: str = Field("answer", description="field holding the gold answer")
    verifier: str = Field("numeric", description="a registered verifier name, or 'package.module:function' "
                                                  "for a reward function (prompts, completions, **kw) -> floats")
    data_seed: int = Field(0, description="seed of the eval hold-out")
    name: str = Field("jsonl", description="task name used in ids and metrics")


def read_jsonl_examples(path: str | Path, p: JsonlParams) -> list[Example]:
    path = Path(path).expanduser()
    if not path.is_file():
        raise DataError(f"{path}: no such file")
    out: list[Example] = []
    with path.open(encoding="utf-8") as f:
        for lineno, line in enumerate(f, start=1):
            if not line.strip():
                continue
            where = f"{path}:{lineno}"
            try:
                row = json.loads(line)
            except json.JSONDecodeError as e:
                raise DataError(f"{where}: invalid JSON ({e.msg} at column {e.colno})") from None
            if not isinstance(row, dict):
                raise DataError(f"{where}: expected a JSON object, got {type(row).__name__}")
            for key in (p.prompt_field, p.answer_field):
                if key not in row:
                    raise DataError(f"{where}: missing field {key!r} (fields: {sorted(row)})")
            prompt, answer = row[p.prompt_field], row[p.answer_field]
            if not (isinstance(prompt, str) and prompt) and not (isinstance(prompt, list) and prompt):
                raise DataError(f"{where}: {p.prompt_field!r} must be a non-empty string or list of messages")
            if not isinstance(answer, (str, int, float)) or isinstance(answer, bool):
                raise DataError(f"{where}: {p.answer_field!r} must be a string or number")
            ex_id = str(row.get("id", f"{path.stem}-{lineno}"))
            target = row.get("completion")
            out.append(Example(ex_id, prompt, str(answer), p.name, target if isinstance(target, str) else None,
                               {k: v for k, v in row.items() if k not in (p.prompt_field, p.answer_field)}))
    if not out:
        raise DataError(f"{path}: no examples")
    return out


@TASKS.register("jsonl", JsonlParams)
def jsonl_task(p: JsonlParams) -> Task:
    """Prompts and answers from local JSONL files."""
    train = read_jsonl_examples(p.train_path, p)
    if p.eval_path:
        evals = read_jsonl_examples(p.eval_path, p)
    else:
        idx = list(range(len(train)))
        random.Random(p.data_seed).shuffle(idx)
        k = int(round(len(train) * p.eval_fraction))
        held = set(idx[:k])
        evals = [e for i, e in enumerate(train) if i in held]
        train = [e for i, e in enumerate(train) if i not in held]
    verifier = build_verifier(p.verifier) if ":" not in p.verifier else from_callable(p.verifier)
    return Task(p.name, {"train": train, "eval": evals}, [WeightedVerifier(verifier)])

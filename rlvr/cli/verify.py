"""``rlvr verify``: score a JSONL file of completions with registered verifiers.

Each line is a record ``{"task": VERIFIER, "answer": GOLD, "completion": TEXT, ...}``; ``task`` names a
registered verifier (``rlvr config --reference`` lists them) unless ``--verifier`` fixes one for every
record; ``id`` and ``prompt`` are optional and every other field is passed to the verifier as
``Example.meta`` (unit tests, tables, databases). One output line is written per input line, in order:
the score, its components and reason, or the error that made the line unusable. Huge, binary and malformed
lines are reported and skipped, never fatal.
"""

from __future__ import annotations

import json
from collections import Counter, defaultdict
from pathlib import Path
from typing import Any, Iterator

from rlvr.core.jsonl import iter_jsonl
from rlvr.core.types import Example, Score
from rlvr.registry import RegistryError
from rlvr.tasks.base import Task, WeightedVerifier
from rlvr.tasks.scoring import Scorer
from rlvr.verifiers import build_verifier

__all__ = ["verify_file", "iter_records"]

MAX_LINE_BYTES = 1 << 20


def iter_records(path: Path, max_line_bytes: int = MAX_LINE_BYTES) -> Iterator[tuple[int, dict | None, str | None]]:
    """``(line number, record or None, error or None)`` for every non-blank line (``rlvr.core.jsonl``)."""
    return iter_jsonl(path, max_line_bytes)


def _example(lineno: int, rec: dict, verifier: str | None) -> tuple[str, Example, str] | str:
    name = verifier or rec.get("task")
    if not isinstance(name, str):
        return "missing 'task' (a verifier name) and no --verifier given"
    for key in ("answer", "completion"):
        if key not in rec:
            return f"missing field {key!r}"
    completion = rec["completion"]
    if not isinstance(completion, str):
        return "'completion' must be a string"
    answer = rec["answer"]
    answer = answer if isinstance(answer, str) else json.dumps(answer)
    meta = {k: v for k, v in rec.items() if k not in ("task", "answer", "completion", "id", "prompt")}
    ex = Example(str(rec.get("id", f"line-{lineno}")), rec.get("prompt") or "", answer, name, None, meta)
    return name, ex, completion


def _flush(batch, tasks, scorers, out, totals, per_task) -> None:
    by_task = defaultdict(list)
    for item in batch:
        by_task[item[1]].append(item)
    results: dict[int, dict[str, Any]] = {}
    for name, items in by_task.items():
        scores, stats = scorers[name].score_many([i[2] for i in items], [i[3] for i in items])
        totals["timeouts"] += int(stats["score/timeouts"])
        for (lineno, _, ex, _), s in zip(items, scores):
            results[lineno] = _result(lineno, name, ex, s)
            per_task[name].append(s)
    for lineno, *_ in batch:
        out.write(json.dumps(results[lineno]) + "\n")


def _result(lineno: int, name: str, ex: Example, s: Score) -> dict[str, Any]:
    reason = next((str(v) for k, v in s.info.items() if k.endswith("reason")), None)
    return {"line": lineno, "id": ex.id, "task": name, "reward": s.reward,
            "correct": s.components.get("correct", float(s.reward >= 1.0)), "components": s.components,
            **({"reason": reason} if reason else {})}


def verify_file(path: str | Path, out_path: str | Path, verifier: str | None = None, workers: int = 4,
                timeout_s: float = 60.0, batch_size: int = 256, max_line_bytes: int = MAX_LINE_BYTES,
                on_progress=None) -> dict[str, Any]:
    """Score every record of ``path`` into ``out_path``; return a summary."""
    path, out_path = Path(path), Path(out_path)
    if not path.is_file():
        raise FileNotFoundError(f"{path}: no such file")
    tasks: dict[str, Task] = {}
    scorers: dict[str, Scorer] = {}
    totals: Counter = Counter()
    per_task: dict[str, list[Score]] = defaultdict(list)
    bad: list[dict[str, Any]] = []
    batch: list[tuple[int, str, Example, str]] = []
    with out_path.open("w", encoding="utf-8") as out:
        for lineno, rec, err in iter_records(path, max_line_bytes):
            totals["lines"] += 1
            parsed = _example(lineno, rec, verifier) if rec is not None else err
            if isinstance(parsed, tuple) and parsed[0] not in tasks:
                try:
                    tasks[parsed[0]] = Task(parsed[0], {}, [WeightedVerifier(build_verifier(parsed[0]))])
                    scorers[parsed[0]] = Scorer(tasks[parsed[0]], workers, timeout_s)
                except RegistryError as e:
                    parsed = str(e)
            if isinstance(parsed, str):
                _flush(batch, tasks, scorers, out, totals, per_task)
                batch = []
                bad.append({"line": lineno, "error": parsed})
                out.write(json.dumps(bad[-1]) + "\n")
                continue
            batch.append((lineno, *parsed))
            if len(batch) >= batch_size:
                _flush(batch, tasks, scorers, out, totals, per_task)
                batch = []
            if on_progress is not None:
                on_progress(totals["lines"])
        _flush(batch, tasks, scorers, out, totals, per_task)
    for s in scorers.values():
        s.close()
    scored = [s for v in per_task.values() for s in v]
    return {
        "input": str(path), "output": str(out_path), "lines": totals["lines"], "scored": len(scored),
        "unusable": len(bad), "timeouts": totals["timeouts"],
        "mean_reward": sum(s.reward for s in scored) / len(scored) if scored else None,
        "accuracy": sum(s.components.get("correct", 0.0) for s in scored) / len(scored) if scored else None,
        "per_task": {k: {"n": len(v), "mean_reward": sum(s.reward for s in v) / len(v)} for k, v in per_task.items()},
        "first_errors": bad[:10],
    }

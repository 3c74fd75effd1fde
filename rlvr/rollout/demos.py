"""In-context demonstrations for guided rollouts (``rollout.guidance.demos``): ICPO's implicit expert.

Huang, Tang, Liu, Bai, Yang, Wu 2025, "Think Outside the Policy: In-Context Steered Policy Optimization",
arXiv:2510.26519; code ``Celine-hxy/ICPO`` (``utils/prompt_builder.py::ICLPromptBuilder``, ``utils/demo_cache.py``,
``trainer/icpo_trainer.py::process_off_policy_batch``; docs/methods.md, `rollout.guidance`). A guided rollout's
prompt becomes k demonstrations (question, solution) from a pool, then the question:

    Question: {demo question 1}\\nAnswer: {demo solution 1}  <sep>  ...  <sep>  Question: {question}\\nAnswer:

(the official builder with prefixes; ``<sep>`` three newlines; each part a template). The pool is a local
JSONL file of demonstrations (``demo_path``: rows with ``prompt`` and ``target``, ``solution`` or
``answer``; the official code reads a separate MATH demonstration set), or else the training examples the
run has seen so far (their prompt and reference solution, ``Example.target``, else the answer; at most
``pool_size``, oldest dropped), never the question's own example. Draws are uniform without replacement
(the official ``random`` strategy), from a generator seeded by (the call's seed, example id, request
index). A pool of seen examples is saved in checkpoints, so a resumed run draws what the uninterrupted
one did.
"""

from __future__ import annotations

import json
import random
from pathlib import Path
from typing import Any, Sequence

from rlvr.core.types import Example
from rlvr.models.prompts import rewrite_prompt

__all__ = ["DemoPool", "question_text", "load_demos", "icl_example"]


def question_text(ex: Example) -> str:
    """The example's question: its prompt text, or the content of its last chat message."""
    return ex.prompt[-1]["content"] if isinstance(ex.prompt, list) else ex.prompt


def load_demos(path: str | Path) -> list[tuple[str, str, str]]:
    """``(id, question, solution)`` rows of a demonstrations JSONL; every bad line is reported at once."""
    path = Path(path).expanduser()
    if not path.exists():
        raise ValueError(f"rollout.guidance.demo_path: {path}: no such file")
    rows, bad = [], []
    for n, line in enumerate(path.read_text(encoding="utf-8").splitlines(), start=1):
        if not line.strip():
            continue
        try:
            row = json.loads(line)
        except json.JSONDecodeError as e:
            bad.append(f"line {n}: not JSON ({e.msg})")
            continue
        prompt = row.get("prompt") if isinstance(row, dict) else None
        solution = next((row[k] for k in ("target", "solution", "answer") if isinstance(row, dict) and k in row), None)
        if isinstance(prompt, list) and prompt and isinstance(prompt[-1], dict):
            prompt = prompt[-1].get("content")
        if not isinstance(prompt, str) or not isinstance(solution, (str, int, float)):
            bad.append(f"line {n}: needs a text 'prompt' (or chat messages) and a 'target', 'solution' or 'answer'")
            continue
        rows.append((str(row.get("id", f"demo-{n}")), prompt, str(solution)))
    if bad:
        raise ValueError(f"rollout.guidance.demo_path {path}: " + "; ".join(bad[:10])
                         + (f"; and {len(bad) - 10} more" if len(bad) > 10 else ""))
    if not rows:
        raise ValueError(f"rollout.guidance.demo_path {path}: no demonstrations")
    return rows


class DemoPool:
    """Demonstrations to draw from: a fixed file, or the training examples seen so far."""

    def __init__(self, path: str | None = None, pool_size: int = 75000):
        self.fixed = path is not None
        self.rows: list[tuple[str, str, str]] = load_demos(path) if path is not None else []
        self.pool_size = pool_size
        self._ids = {r[0] for r in self.rows}

    def see(self, examples: Sequence[Example]) -> None:
        """Add the examples not in the pool yet (seen-examples pool only)."""
        if self.fixed:
            return
        for ex in examples:
            if ex.id not in self._ids:
                self.rows.append((ex.id, question_text(ex), ex.sft_target))
                self._ids.add(ex.id)
        while len(self.rows) > self.pool_size:
            self._ids.discard(self.rows.pop(0)[0])

    def draw(self, k: int, exclude_id: str, rng: random.Random) -> list[tuple[str, str]]:
        """Up to ``k`` distinct ``(question, solution)`` pairs, none from example ``exclude_id``."""
        candidates = [r for r in self.rows if r[0] != exclude_id]
        picked = rng.sample(candidates, min(k, len(candidates)))
        return [(q, a) for _, q, a in picked]

    def state_dict(self) -> dict[str, Any]:
        return {} if self.fixed else {"rows": [list(r) for r in self.rows]}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        if not self.fixed and "rows" in state:
            self.rows = [tuple(r) for r in state["rows"]]  # type: ignore[misc]
            self._ids = {r[0] for r in self.rows}


def icl_example(ex: Example, demos: Sequence[tuple[str, str]], demo_format: str, separator: str,
                question_format: str) -> Example:
    """``ex`` with ``demos`` before its question (in its prompt text, or its last chat message)."""
    def build(text: str) -> str:
        shots = [demo_format.format(prompt=q, target=a) for q, a in demos]
        return separator.join(shots + [question_format.format(prompt=text)])

    return rewrite_prompt(ex, build)

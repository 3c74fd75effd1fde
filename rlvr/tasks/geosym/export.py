"""Writing a GeoSym dataset to disk: ``DIR/images/<id>.png`` and ``DIR/geosym.jsonl``.

Each JSONL row is what rlvr's ``dataset``/``jsonl`` task reads (:mod:`rlvr.tasks.dataset`): ``id``,
``prompt`` (with its ``<image>`` marker), ``answer`` (the exact SymPy string), ``images`` (the diagram's
path relative to the JSONL file), ``completion`` (the solver's chain of thought, the supervised target),
and the problem's record (:func:`~rlvr.tasks.geosym.generate.problem_meta`: ``difficulty``, ``base_type``,
``rules``, ``enhancements``, ``question_kind``, the coordinates and construction steps), which the dataset
task keeps in ``Example.meta``. Problem ``i`` is seeded by ``(seed, i)``; with ``difficulty="mixed"`` its
stratum is drawn uniformly from that seed too, so a run is reproduced by its arguments. A problem whose
prompt repeats an earlier one is redrawn.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Callable

from rlvr.tasks.geosym.generate import DIFFICULTIES, generate_problem, problem_meta
from rlvr.tasks.geosym.task import pick_difficulty

__all__ = ["write_dataset", "JSONL_NAME"]

JSONL_NAME = "geosym.jsonl"


def write_dataset(out: str | Path, num: int, difficulty: str = "mixed", width: int = 1600, height: int = 1200,
                  seed: int = 0, progress: Callable[[int], None] | None = None) -> Path:
    """Write ``num`` problems under ``out``; the JSONL file's path. ``progress(i)`` after each problem."""
    if difficulty != "mixed" and difficulty not in DIFFICULTIES:
        raise ValueError(f"unknown difficulty {difficulty!r}; choose easy, mid, hard or mixed")
    out = Path(out)
    (out / "images").mkdir(parents=True, exist_ok=True)
    path = out / JSONL_NAME
    seen: set[str] = set()
    uniform = {d: 1.0 for d in DIFFICULTIES}
    with path.open("w", encoding="utf-8") as f:
        for i in range(num):
            for attempt in range(50):
                s = f"{seed}:{i}:{attempt}"
                problem = generate_problem(s, difficulty if difficulty != "mixed" else pick_difficulty(uniform, s))
                if problem.prompt not in seen:
                    break
            seen.add(problem.prompt)
            ex_id = f"geosym-{seed}-{i:06d}"
            image = f"images/{ex_id}.png"
            problem.image(width, height).save(out / image)
            row = {"id": ex_id, "prompt": problem.prompt, "answer": problem.answer, "images": image,
                   "completion": problem.cot, **problem_meta(problem)}
            f.write(json.dumps(row, ensure_ascii=False) + "\n")
            if progress is not None:
                progress(i + 1)
    return path

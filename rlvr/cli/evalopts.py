"""``rlvr eval``'s options as config overrides, ``--benchmark NAME --path PATH`` among them.

``--benchmark`` replaces the config's whole ``task`` with ``{name: benchmark, benchmark: NAME, path: PATH}``
(the path made absolute here, so a run directory's config cannot reinterpret it), ahead of the user's own
``--set`` overrides, which can then refine it (``--set task.seed=1``, ``--set task.template=...``). The
other options become ``eval.*`` overrides after them. Kept out of :mod:`rlvr.cli.commands` (its size budget)
and light: the benchmark names come from :mod:`rlvr.tasks.benchmarks.spec`, which loads no model library.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, Optional

__all__ = ["eval_overrides", "EvalOptionError"]


class EvalOptionError(ValueError):
    """Options that do not go together, or name what does not exist."""


def eval_overrides(sets: Optional[list[str]], eval_fields: dict[str, Any], benchmark: Optional[str] = None,
                   path: Optional[Path] = None) -> list[str]:
    """The ``--set`` overrides of ``rlvr eval``'s options: the benchmark's task, the user's ``sets``, then
    ``eval.<field>=<value>`` for each ``eval_fields`` item that is not None (``{"search.name": "prm"}``)."""
    out: list[str] = []
    if benchmark is not None or path is not None:
        from rlvr.tasks.benchmarks.spec import NAMES

        if benchmark is None or path is None:
            raise EvalOptionError("--benchmark and --path go together: --benchmark NAME --path FILE_OR_DIR")
        if benchmark not in NAMES:
            raise EvalOptionError(f"--benchmark {benchmark}: unknown; choose one of {', '.join(NAMES)}")
        where = Path(path).expanduser()
        if not where.exists():
            raise EvalOptionError(f"--path {path}: no such file or directory")
        out.append("task=" + json.dumps({"name": "benchmark", "benchmark": benchmark, "path": str(where.resolve())}))
    out += list(sets or [])
    out += [f"eval.{k}={v}" for k, v in eval_fields.items() if v is not None]
    return out

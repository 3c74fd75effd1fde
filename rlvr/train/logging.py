"""Metrics to ``metrics.jsonl`` (one line per step, flushed at once) and the progress display."""

from __future__ import annotations

import json
import math
import sys
from pathlib import Path
from typing import Any

from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn, TimeRemainingColumn

__all__ = ["MetricsLog", "ProgressDisplay", "read_metrics"]


def _clean(v: Any) -> Any:
    if isinstance(v, float) and not math.isfinite(v):
        return str(v)
    return v


class MetricsLog:
    """Append-only JSONL; on resume, lines past the resumed step are dropped so no step appears twice."""

    def __init__(self, path: str | Path, resume_step: int | None = None):
        self.path = Path(path)
        if resume_step is not None and self.path.exists():
            kept = [ln for ln in self.path.read_text().splitlines()
                    if ln.strip() and json.loads(ln).get("step", 0) <= resume_step]
            self.path.write_text("".join(ln + "\n" for ln in kept))
        self._f = self.path.open("a", encoding="utf-8")

    def write(self, step: int, metrics: dict[str, Any]) -> None:
        self._f.write(json.dumps({"step": step, **{k: _clean(v) for k, v in metrics.items()}}) + "\n")
        self._f.flush()

    def close(self) -> None:
        self._f.close()


def read_metrics(path: str | Path) -> list[dict[str, Any]]:
    return [json.loads(ln) for ln in Path(path).read_text().splitlines() if ln.strip()]


class ProgressDisplay:
    """A rich progress bar on a terminal; a plain line every ``every`` steps elsewhere (CI logs)."""

    def __init__(self, description: str, total: int, start: int = 0, every: int = 10,
                 console: Console | None = None):
        self.console = console or Console(stderr=True)
        self.live = self.console.is_terminal
        self.description, self.total, self.every = description, total, every
        self._progress = None
        if self.live:
            self._progress = Progress(TextColumn("[bold]{task.description}"), BarColumn(), MofNCompleteColumn(),
                                      TextColumn("{task.fields[info]}"), TimeElapsedColumn(), TimeRemainingColumn(),
                                      console=self.console, transient=False)
            self._task = self._progress.add_task(description, total=total, completed=start, info="")
            self._progress.start()

    def update(self, step: int, info: str) -> None:
        if self._progress is not None:
            self._progress.update(self._task, completed=step, info=info)
        elif step % self.every == 0 or step == self.total:
            print(f"{self.description} {step}/{self.total} {info}", file=sys.stderr, flush=True)

    def close(self) -> None:
        if self._progress is not None:
            self._progress.stop()

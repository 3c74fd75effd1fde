"""Metrics to ``metrics.jsonl`` (one line per step, flushed at once), optional backends, the progress display.

``metrics.jsonl`` is always written. ``logging.backends`` in the config adds TensorBoard (event files in
``RUN_DIR/tensorboard``), Weights & Biases (``logging.wandb_mode``, offline by default: files in
``RUN_DIR/wandb``, ``wandb sync`` uploads them later) and MLflow (a file store in ``RUN_DIR/mlruns`` unless
``logging.mlflow_tracking_uri`` is set). Each backend has MetricsLog's interface (``write(step, metrics)``,
``close()``), is imported only when chosen, and names the pip extra to install when its package is missing.
A backend that fails while writing is dropped with a warning: a dashboard never stops training.
W&B and MLflow runs keep their ids in the run directory, so a resumed run continues the same run.
"""

from __future__ import annotations

import contextlib
import json
import math
import os
import re
import secrets
import sys
import warnings
from pathlib import Path
from typing import Any, Callable, Iterator

from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn, TimeRemainingColumn

__all__ = ["MetricsLog", "ProgressDisplay", "NullDisplay", "read_metrics", "TensorBoardLog", "WandbLog", "MLflowLog", "MultiLog",
           "open_metrics_log", "BACKENDS"]


def _clean(v: Any) -> Any:
    if isinstance(v, float) and not math.isfinite(v):
        return str(v)
    return v


class MetricsLog:
    """Append-only JSONL. On resume the file is cut (one ``truncate``, never rewritten: a kill at any moment
    leaves every earlier line) at its first line past the resumed step, or at a partial or unreadable line (a
    write a kill interrupted), so no step appears twice and the next line starts clean."""

    def __init__(self, path: str | Path, resume_step: int | None = None):
        self.path = Path(path)
        if resume_step is not None and self.path.exists():
            cut = _first_line_past(self.path, resume_step)
            if cut is not None:
                os.truncate(self.path, cut)
        self._f = self.path.open("a", encoding="utf-8")

    def write(self, step: int, metrics: dict[str, Any]) -> None:
        self._f.write(json.dumps({"step": step, **{k: _clean(v) for k, v in metrics.items()}}) + "\n")
        self._f.flush()

    def close(self) -> None:
        self._f.close()


TABLE_COLUMNS = ("example_id", "prompt", "completion", "reward", "advantage", "length", "truncated")


def _row(r: dict[str, Any]) -> list[Any]:
    return [r["example_id"], json.dumps(r["prompt"]) if not isinstance(r["prompt"], str) else r["prompt"],
            r["completion"], r["reward"], r["advantage"], r["length"], r["truncated"]]


def _cell(text: str, limit: int = 300) -> str:
    t = text if len(text) <= limit else text[:limit] + "..."
    return t.replace("|", "\\|").replace("\n", " ")


def _first_line_past(path: Path, step: int) -> int | None:
    """The byte offset of ``path``'s first line whose step is past ``step`` or that is not a whole JSON line
    (None: every line is kept)."""
    offset = 0
    with open(path, "rb") as f:
        for raw in f:
            try:
                if not raw.endswith(b"\n") or (raw.strip() and json.loads(raw).get("step", 0) > step):
                    return offset
            except (ValueError, AttributeError):
                return offset
            offset += len(raw)
    return None


def read_metrics(path: str | Path) -> list[dict[str, Any]]:
    """Every whole line of a metrics file (a partial or unreadable line, e.g. the last one after a kill, is
    skipped)."""
    out = []
    for ln in Path(path).read_text(encoding="utf-8", errors="replace").splitlines():
        try:
            rec = json.loads(ln) if ln.strip() else None
        except ValueError:
            continue
        if isinstance(rec, dict):
            out.append(rec)
    return out


def _numbers(metrics: dict[str, Any]) -> dict[str, float]:
    return {k: float(v) for k, v in metrics.items() if isinstance(v, (int, float)) and not isinstance(v, bool)}


def _require(module: str, extra: str, backend: str):
    import importlib

    try:
        return importlib.import_module(module)
    except ImportError:
        raise ImportError(f"logging backend {backend!r} needs the {module.split('.')[0]!r} package: "
                          f"pip install 'rlvr[{extra}]'") from None


def _flat(d: dict[str, Any], prefix: str = "") -> dict[str, Any]:
    out: dict[str, Any] = {}
    for k, v in d.items():
        if isinstance(v, dict):
            out.update(_flat(v, f"{prefix}{k}."))
        else:
            out[f"{prefix}{k}"] = v
    return out


def _stored_id(path: Path) -> str | None:
    return path.read_text().strip() if path.is_file() else None


class TensorBoardLog:
    """Scalars to TensorBoard event files; on resume, events past the resumed step are purged."""

    def __init__(self, run_dir: Path, config: dict[str, Any], resume_step: int | None = None):
        _require("tensorboard", "tensorboard", "tensorboard")
        from torch.utils.tensorboard import SummaryWriter

        self._w = SummaryWriter(str(run_dir / "tensorboard"), purge_step=(resume_step + 1) if resume_step else None)
        self._w.add_text("config", "```\n" + json.dumps(config, indent=1) + "\n```", 0)

    def write(self, step: int, metrics: dict[str, Any]) -> None:
        for k, v in _numbers(metrics).items():
            self._w.add_scalar(k, v, step)
        self._w.flush()

    def table(self, step: int, rows: list[dict[str, Any]]) -> None:
        head = "| reward | advantage | completion |\n|---|---|---|\n"
        body = "".join(f"| {r['reward']:.3f} | {r['advantage']:.3f} | {_cell(r['completion'])} |\n" for r in rows)
        self._w.add_text("completions", head + body, step)

    def close(self) -> None:
        self._w.close()


class WandbLog:
    """A W&B run (``mode``: offline writes ``RUN_DIR/wandb`` with no network)."""

    def __init__(self, run_dir: Path, config: dict[str, Any], project: str, name: str, mode: str,
                 entity: str | None = None):
        wandb = _require("wandb", "wandb", "wandb")
        id_file = run_dir / "wandb-run-id"
        run_id = _stored_id(id_file) or secrets.token_hex(4)
        id_file.write_text(run_id)
        self._run = wandb.init(project=project, entity=entity, name=name, id=run_id, resume="allow",
                               dir=str(run_dir), mode=mode, config=config, reinit="create_new")

    def write(self, step: int, metrics: dict[str, Any]) -> None:
        self._run.log(_numbers(metrics), step=step, commit=True)

    def table(self, step: int, rows: list[dict[str, Any]]) -> None:
        import wandb

        cols = ["step", *TABLE_COLUMNS]
        self._run.log({"completions": wandb.Table(columns=cols, data=[[step, *_row(r)] for r in rows])}, step=step)

    def close(self) -> None:
        self._run.finish()


class MLflowLog:
    """An MLflow run; metric names are sanitised (``pass@4`` -> ``pass_at_4``) to what MLflow accepts."""

    def __init__(self, run_dir: Path, config: dict[str, Any], experiment: str, name: str,
                 tracking_uri: str | None = None):
        mlflow = _require("mlflow", "mlflow", "mlflow")
        if tracking_uri is None:  # MLflow 3 refuses its file store unless asked; it is the no-server default here
            os.environ.setdefault("MLFLOW_ALLOW_FILE_STORE", "true")
        self._client = mlflow.tracking.MlflowClient(tracking_uri or (run_dir / "mlruns").resolve().as_uri())
        id_file = run_dir / "mlflow-run-id"
        self._run_id = _stored_id(id_file)
        if self._run_id is None:
            exp = self._client.get_experiment_by_name(experiment)
            exp_id = exp.experiment_id if exp else self._client.create_experiment(experiment)
            self._run_id = self._client.create_run(exp_id, run_name=name).info.run_id
            id_file.write_text(self._run_id)
            for k, v in _flat(config).items():
                self._client.log_param(self._run_id, k, json.dumps(v)[:500] if not isinstance(v, str) else v[:500])

    @staticmethod
    def key(name: str) -> str:
        return re.sub(r"[^0-9A-Za-z_\-. /]", "_", name.replace("@", "_at_"))

    def write(self, step: int, metrics: dict[str, Any]) -> None:
        from mlflow.entities import Metric

        now = int(__import__("time").time() * 1000)
        self._client.log_batch(self._run_id, metrics=[Metric(self.key(k), v, now, step)
                                                      for k, v in _numbers(metrics).items()])

    def table(self, step: int, rows: list[dict[str, Any]]) -> None:
        data = {c: [_row(r)[i] for r in rows] for i, c in enumerate(TABLE_COLUMNS)}
        self._client.log_table(self._run_id, {"step": [step] * len(rows), **data}, f"completions/step_{step:06d}.json")

    def close(self) -> None:
        self._client.set_terminated(self._run_id)


class MultiLog:
    """``metrics.jsonl`` plus the chosen backends behind MetricsLog's interface."""

    def __init__(self, jsonl: MetricsLog, backends: list[Any]):
        self.jsonl, self.backends = jsonl, list(backends)
        self._no_tables: set[int] = set()

    def write(self, step: int, metrics: dict[str, Any]) -> None:
        self.jsonl.write(step, metrics)
        for b in list(self.backends):
            try:
                b.write(step, metrics)
            except Exception as e:  # noqa: BLE001  a dashboard failure must not stop training
                warnings.warn(f"logging backend {type(b).__name__} failed ({type(e).__name__}: {e}); dropped it")
                self.backends.remove(b)

    def table(self, step: int, rows: list[dict[str, Any]]) -> None:
        """A step's sample of completions (:mod:`rlvr.train.samples`) to the backends that show tables."""
        for b in self.backends:
            if hasattr(b, "table") and id(b) not in self._no_tables:
                try:
                    b.table(step, rows)
                except Exception as e:  # noqa: BLE001  a dashboard failure must not stop training
                    warnings.warn(f"logging backend {type(b).__name__} failed to log completions "
                                  f"({type(e).__name__}: {e}); not logging them there again")
                    self._no_tables.add(id(b))

    def close(self) -> None:
        self.jsonl.close()
        for b in self.backends:
            try:
                b.close()
            except Exception as e:  # noqa: BLE001
                warnings.warn(f"logging backend {type(b).__name__} failed to close: {e}")


BACKENDS = ("jsonl", "tensorboard", "wandb", "mlflow")


def open_metrics_log(cfg, run_dir: str | Path, resume_step: int | None = None) -> MultiLog:
    """The run's metrics log: ``metrics.jsonl`` and every backend named in ``cfg.logging.backends``."""
    run_dir = Path(run_dir)
    lc = cfg.logging
    config = cfg.model_dump(mode="json")
    name = lc.run_name or run_dir.name
    backends: list[Any] = []
    try:
        for b in dict.fromkeys(lc.backends):
            if b == "tensorboard":
                backends.append(TensorBoardLog(run_dir, config, resume_step))
            elif b == "wandb":
                backends.append(WandbLog(run_dir, config, lc.project, name, lc.wandb_mode, lc.wandb_entity))
            elif b == "mlflow":
                backends.append(MLflowLog(run_dir, config, lc.project, name, lc.mlflow_tracking_uri))
    except BaseException:
        for opened in backends:
            opened.close()
        raise
    return MultiLog(MetricsLog(run_dir / "metrics.jsonl", resume_step=resume_step), backends)


class NullDisplay:
    """A progress display that shows nothing (the ranks other than 0 of a distributed run)."""

    def update(self, step: int, info: str) -> None:
        pass

    def message(self, text: str) -> None:
        pass

    def close(self) -> None:
        pass


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

    def message(self, text: str) -> None:
        """A line above the bar on a terminal (a plain line in logs), shown whatever the step."""
        if self._progress is not None:
            self._progress.console.print(text, style="yellow", highlight=False, markup=False)
        else:
            print(text, file=sys.stderr, flush=True)

    @contextlib.contextmanager
    def sub(self, description: str) -> Iterator[Callable[[int, int], None]]:
        """A nested phase (an evaluation inside training): an ``on_progress(done, total)`` callback shown as
        a second bar under this one (a terminal allows one live display), or as plain lines in logs."""
        task: list[Any] = []

        def update(done: int, total: int) -> None:
            if self._progress is not None:
                if not task:
                    task.append(self._progress.add_task(description, total=total, info="prompts"))
                self._progress.update(task[0], completed=done)
            elif done == total or (done and done % max(1, total // 10) == 0):
                print(f"{description} {done}/{total} prompts", file=sys.stderr, flush=True)

        try:
            yield update
        finally:
            if task:
                self._progress.remove_task(task[0])

    @staticmethod
    @contextlib.contextmanager
    def standalone(description: str) -> Iterator[Callable[[int, int], None]]:
        """An ``on_progress(done, total)`` callback with its own display, opened on the first call."""
        bars: list[ProgressDisplay] = []

        def update(done: int, total: int) -> None:
            if not bars:
                bars.append(ProgressDisplay(description, total, every=max(1, total // 10)))
            if done:
                bars[0].update(done, "prompts")

        try:
            yield update
        finally:
            for b in bars:
                b.close()

    def close(self) -> None:
        if self._progress is not None:
            self._progress.stop()

"""``rlvr audit``: red-team a verifier on a task's data (docs/audit.md).

:mod:`rlvr.cli.commands` registers :func:`audit` as ``rlvr audit``; the work is :mod:`rlvr.audit`. Exit codes:
0 no hack and no crash, 1 a hack or a crash (with ``--strict`` also a partial reward, a false negative or a
slow call), 2 bad input (an unknown task, verifier or family, a bad config), as one message.
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, NoReturn, Optional

import typer
from rich.console import Console
from rich.markup import escape

from rlvr.cli.common import console, fail

__all__ = ["audit"]


def _fail(msg: str, code: int = 2) -> NoReturn:
    fail(msg, code)


def _verifier_params(sets: list[str]) -> dict:
    """``--set key=value`` for ``--verifier``: the verifier's params (values read as YAML: 0.1, true, [a, b])."""
    import yaml

    params = {}
    for s in sets:
        key, sep, value = s.partition("=")
        if not sep or not key.strip():
            _fail(f"--set {s!r}: expected key=value")
        try:
            params[key.strip()] = yaml.safe_load(value)
        except yaml.YAMLError:
            params[key.strip()] = value
    return params


def _target(task: Optional[str], verifier: Optional[str], config: Optional[Path], sets: list[str],
            split: Optional[str], examples: int):
    from rlvr.audit import AuditInputError, from_task, from_verifier

    if verifier is not None:
        if task is not None or config is not None:
            _fail("--verifier audits a registered verifier on its built-in examples: give it without --task or -c")
        try:
            return from_verifier(verifier, _verifier_params(sets), examples)
        except AuditInputError as e:
            _fail(str(e))
    from rlvr.config.run import ConfigError, load_config
    from rlvr.tasks.base import TASKS

    try:
        cfg = load_config(config, list(sets) + ([f"task={task}"] if task is not None else []))
    except ConfigError as e:
        _fail(str(e))
    try:
        built = TASKS.get(cfg.task.name).fn(cfg.task.params)
    except Exception as e:  # a task that cannot be built (missing data file, missing extra): bad input, one line
        _fail(f"cannot build task {cfg.task.name!r}: {type(e).__name__}: {e}")
    try:
        return from_task(built, split, examples, source="config" if config is not None else "task")
    except AuditInputError as e:
        _fail(str(e))


def audit(task: Annotated[Optional[str], typer.Option("--task", "-t", help="a built-in task (see `rlvr config --reference`)")] = None,
          verifier: Annotated[Optional[str], typer.Option("--verifier", "-v", help="a registered verifier, audited on its built-in examples")] = None,
          config: Annotated[Optional[Path], typer.Option("--config", "-c", help="YAML config: its task and reward functions")] = None,
          set_: Annotated[Optional[list[str]], typer.Option("--set", "-s", help="config override (with --verifier: a verifier param), repeatable")] = None,
          split: Annotated[Optional[str], typer.Option("--split", help="the task split to take examples from (default: eval, else train)")] = None,
          examples: Annotated[int, typer.Option("--examples", "-n", min=1, help="the first N examples")] = 8,
          fuzz: Annotated[int, typer.Option("--fuzz", min=0, help="seeded random mutations of the gold completion per example")] = 0,
          seed: Annotated[int, typer.Option("--seed", help="seed of the fuzz mutations")] = 0,
          timeout: Annotated[float, typer.Option("--timeout", min=0.01, help="seconds one scoring call may take")] = 2.0,
          family: Annotated[Optional[list[str]], typer.Option("--family", help="only this probe family (repeatable)")] = None,
          json_out: Annotated[Optional[Path], typer.Option("--json", help="write the full report as JSON")] = None,
          html_out: Annotated[Optional[Path], typer.Option("--html", help="write the report as a self-contained HTML page")] = None,
          strict: Annotated[bool, typer.Option("--strict", help="exit 1 also for partial rewards, false negatives and slow calls")] = False,
          show_all: Annotated[bool, typer.Option("--all", help="list every probe, not only the findings")] = False,
          isolation: Annotated[str, typer.Option("--isolation", help="auto, process (a killable worker) or thread")] = "auto"):
    """Red-team a verifier: score known reward hacks, fair rewrites and odd inputs built from a task's gold answers.

    Reports hacks (wrong but rewarded), false negatives (right but unrewarded), crashes (the verifier raised) and
    slow calls (past --timeout); exit code 1 on a hack or a crash (docs/audit.md).
    """
    from rlvr.audit import AuditInputError, run_audit
    from rlvr.audit.report import print_report

    if isolation not in ("auto", "process", "thread"):
        _fail(f"--isolation {isolation}: choose auto, process or thread")
    target = _target(task, verifier, config, list(set_ or []), split, examples)
    status = console.status(f"auditing {target.name}")

    def progress(done: int, total: int, ex_id: str) -> None:
        status.update(f"auditing {escape(target.name)}: example {min(done + 1, total)}/{total} {escape(ex_id)}")

    try:
        with status:
            report = run_audit(target, fuzz=fuzz, seed=seed, timeout_s=timeout, families=family, isolation=isolation,
                               on_progress=progress)
    except AuditInputError as e:
        _fail(str(e))
    except KeyboardInterrupt:
        console.print("interrupted")
        raise typer.Exit(130)
    print_report(report, Console(width=170), show_all=show_all)
    if json_out is not None:
        console.print(f"wrote {report.write_json(json_out)}")
    if html_out is not None:
        from rlvr.audit.html import write_html

        console.print(f"wrote {write_html(report, html_out)}")
    code = report.exit_code(strict)
    c = report.counts()
    verdict = "[red]FAIL[/red]" if code else "[green]PASS[/green]"
    console.print(f"{verdict}: {c['hack']} hacks, {c['crash']} crashes, {c['partial']} partial, "
                  f"{c['false_negative']} false negatives, {c['slow']} slow of {len(report.results)} probes",
                  highlight=False)
    raise typer.Exit(code)

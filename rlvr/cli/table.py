"""``rlvr table``: evaluation results side by side, as a Markdown, LaTeX or CSV table a paper can use.

Each argument is an eval result (``rlvr eval``'s JSON, a run's ``eval/step_N.json``) or a run directory (its
final evaluation), optionally named ``NAME=PATH``. Results made under different protocols (samples,
temperature, token limit, prompt template, verifiers) are printed with a warning saying how they differ.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Annotated, Optional

import typer
from rich.markup import escape

from rlvr.cli.common import console, fail

__all__ = ["table", "load_result"]


def load_result(arg: str) -> tuple[str, dict]:
    """``(name, eval result)`` of ``NAME=PATH`` or ``PATH`` (a result file, or a run directory's last eval)."""
    name, sep, path = arg.partition("=")
    p = Path(path if sep else name)
    if p.is_dir():
        evals = sorted((p / "eval").glob("step_*.json"), key=lambda f: int(f.stem.split("_")[1]))
        if not evals:
            raise FileNotFoundError(f"{p}: no eval/step_*.json (not a run directory, or no evaluation yet)")
        file = evals[-1]
    elif p.is_file():
        file = p
    else:
        raise FileNotFoundError(f"{p}: no such file or directory")
    try:
        result = json.loads(file.read_text())
    except ValueError as e:
        raise ValueError(f"{file}: not an eval result ({e})") from None
    if not isinstance(result, dict) or "accuracy" not in result:
        raise ValueError(f"{file}: not an eval result (no accuracy)")
    return (name if sep else (p.name if p.is_dir() else p.stem)), result


def table(results: Annotated[list[str], typer.Argument(help="eval results or run directories (NAME=PATH to name "
                                                       "a row)")],
          fmt: Annotated[str, typer.Option("--format", "-f", help="markdown, latex or csv")] = "markdown",
          metric: Annotated[Optional[list[str]], typer.Option("--metric", "-m", help="a column (repeatable; "
                                                              "default: every metric and component)")] = None,
          digits: Annotated[int, typer.Option(min=0, max=6, help="decimals")] = 1):
    """Evaluation results side by side (rates in percent, each with its 95% interval over prompts)."""
    from rlvr.eval.output import export_table, protocol_differences

    try:
        rows = [load_result(a) for a in results]
        text = export_table(rows, fmt, metric, digits)
    except (FileNotFoundError, ValueError) as e:
        fail(str(e), 2)
    for name, res in rows[1:]:
        diff = protocol_differences(rows[0][1], res)
        if diff:
            console.print(f"warning: {escape(name)} was evaluated differently from {escape(rows[0][0])}: "
                          f"{escape('; '.join(diff))}", highlight=False, soft_wrap=True)
    typer.echo(text, nl=False)

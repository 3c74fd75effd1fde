"""``rlvr geosym``: the GeoSym geometry problem engine on the command line (:mod:`rlvr.tasks.geosym`).

:mod:`rlvr.cli.commands` mounts this app as ``rlvr geosym``.

``rlvr geosym generate --out DIR --num N --difficulty easy|mid|hard|mixed --size WxH --seed S`` writes
``DIR/images/*.png`` and ``DIR/geosym.jsonl`` (:mod:`rlvr.tasks.geosym.export`), which the ``dataset``
task reads with ``verifier: geosym``. Importing this module loads only typer; the command loads SymPy
and Pillow when it runs.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Annotated

import typer

__all__ = ["app", "parse_size"]

app = typer.Typer(add_completion=False, no_args_is_help=True, pretty_exceptions_enable=False,
                  help="GeoSym: geometry problems with diagrams and exact symbolic answers.")


@app.callback()
def _geosym() -> None:
    """GeoSym geometry problems (type-conditional grammar, SymPy ground truth; see rlvr.tasks.geosym)."""


def parse_size(size: str) -> tuple[int, int]:
    """``"1600x1200"`` -> ``(1600, 1200)``; each side at least 64 pixels."""
    m = re.fullmatch(r"\s*(\d+)\s*[xX×]\s*(\d+)\s*", size)
    if m is None:
        raise ValueError(f"--size must be WIDTHxHEIGHT, e.g. 1600x1200, got {size!r}")
    w, h = int(m.group(1)), int(m.group(2))
    if min(w, h) < 64 or max(w, h) > 8192:
        raise ValueError(f"--size sides must be between 64 and 8192 pixels, got {w}x{h}")
    return w, h


@app.command("generate")
def generate_cmd(out: Annotated[Path, typer.Option("--out", help="output folder (images/ and geosym.jsonl)")],
                 num: Annotated[int, typer.Option("--num", "-n", min=1, help="number of problems")] = 100,
                 difficulty: Annotated[str, typer.Option(help="easy, mid, hard (3/5/7 construction steps) "
                                                              "or mixed (each drawn uniformly)")] = "mixed",
                 size: Annotated[str, typer.Option(help="diagram size WIDTHxHEIGHT in pixels")] = "1600x1200",
                 seed: Annotated[int, typer.Option(help="generation seed")] = 0):
    """Write N GeoSym problems: DIR/images/<id>.png and DIR/geosym.jsonl (rows for the dataset task)."""
    from rich.console import Console
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeRemainingColumn

    if difficulty not in ("easy", "mid", "hard", "mixed"):
        _fail(f"unknown difficulty {difficulty!r}; choose easy, mid, hard or mixed")
    try:
        width, height = parse_size(size)
    except ValueError as e:
        _fail(str(e))
    from rlvr.tasks.geosym.export import write_dataset

    columns = (TextColumn("geosym"), BarColumn(), MofNCompleteColumn(), TimeRemainingColumn())
    with Progress(*columns, console=Console(stderr=True), transient=True) as bar:
        job = bar.add_task("generate", total=num)
        path = write_dataset(out, num, difficulty, width, height, seed,
                             progress=lambda i: bar.update(job, completed=i))
    typer.echo(f"wrote {num} problems ({difficulty}, {width}x{height}) to {path} and {out / 'images'}")


def _fail(message: str) -> None:
    typer.echo(f"error: {message}", err=True)
    raise typer.Exit(2)

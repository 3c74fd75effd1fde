"""What every ``rlvr`` command shares: the stderr console, how a command fails, and the ``--set`` option.

Imports only typer and rich (``rlvr --help`` loads no model libraries; tests/test_cli_startup.py).
"""

from __future__ import annotations

from typing import Annotated, NoReturn, Optional

import typer
from rich.console import Console
from rich.markup import escape

__all__ = ["console", "fail", "SetOpt"]

console = Console(stderr=True)
SetOpt = Annotated[Optional[list[str]], typer.Option("--set", "-s", help="override, e.g. optim.lr=1e-4 (repeatable)")]


def fail(msg: str, code: int = 1) -> NoReturn:
    """Print ``error: MSG`` on stderr (markup in MSG shown as written) and exit with ``code``."""
    console.print(f"[red]error:[/red] {escape(msg)}", highlight=False, soft_wrap=True)
    raise typer.Exit(code)

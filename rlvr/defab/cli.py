"""``rlvr defab``: command-line access to the defeasible-logic engine.

Mount it in ``rlvr/cli.py`` with::

    from rlvr.defab.cli import app as defab_app
    app.add_typer(defab_app, name="defab")

``rlvr defab derive THEORY_FILE`` prints the +Δ and then the +∂ literals, sorted, one per line.
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from rlvr.defab.engine import VARIANTS, derive
from rlvr.defab.ground import MODES, GroundingError
from rlvr.defab.parser import TheoryParseError, load_theory

__all__ = ["app"]

app = typer.Typer(add_completion=False, no_args_is_help=True, pretty_exceptions_enable=False,
                  help="DeFAb defeasible logic: derive conclusions of a theory file.")


@app.callback()
def _defab() -> None:
    """DeFAb defeasible logic (Maher 2001 semantics; see rlvr.defab)."""


@app.command("derive")
def derive_cmd(theory_file: Annotated[Path, typer.Argument(help="theory in the rlvr.defab.parser format")],
               variant: Annotated[str, typer.Option(help=f"logic variant: {', '.join(VARIANTS)}")] = "standard",
               grounding: Annotated[str, typer.Option(help=f"grounding: {', '.join(MODES)}")] = "full"):
    """Print the definitely (+Δ) and defeasibly (+∂) provable literals of THEORY_FILE."""
    if variant not in VARIANTS:
        _fail(f"unknown variant {variant!r}; choose one of {', '.join(VARIANTS)}")
    try:
        theory = load_theory(theory_file)
        conclusions = derive(theory, variant, grounding=grounding)
    except OSError as e:
        _fail(f"cannot read {theory_file}: {e.strerror or e}")
    except (TheoryParseError, GroundingError) as e:
        _fail(f"{theory_file}: {e}")
    for title, lits in (("+Δ (definitely provable)", conclusions.definite),
                        ("+∂ (defeasibly provable)", conclusions.defeasible)):
        typer.echo(f"{title}: {len(lits)}")
        for line in sorted(map(str, lits)):
            typer.echo(f"  {line}")


def _fail(message: str) -> None:
    typer.echo(f"error: {message}", err=True)
    raise typer.Exit(2)

"""``rlvr defab``: command-line access to the defeasible-logic engine (:mod:`rlvr.defab`).

:mod:`rlvr.cli.commands` mounts this app as ``rlvr defab``.

``rlvr defab derive THEORY_FILE`` prints the +Δ and then the +∂ literals, sorted, one per line.
``rlvr defab generate --level L -n N --seed S --out FILE.jsonl`` writes generated instances
(:mod:`rlvr.defab.generate`), one JSON object per line.
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from rlvr.defab.names import DISTRACTOR_STRATEGIES as STRATEGIES, GROUNDING_MODES as MODES, LOGIC_VARIANTS as VARIANTS

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
    from rlvr.defab.engine import derive
    from rlvr.defab.ground import GroundingError
    from rlvr.defab.parser import TheoryParseError, load_theory

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


@app.command("generate")
def generate_cmd(out: Annotated[Path, typer.Option("--out", help="output JSONL file")],
                 level: Annotated[int, typer.Option("--level", min=1, max=3, help="DeFAb level 1, 2 or 3")] = 1,
                 n: Annotated[int, typer.Option("-n", min=1, help="number of instances")] = 10,
                 seed: Annotated[int, typer.Option("--seed", help="generation seed")] = 0,
                 kb: Annotated[str, typer.Option("--kb", help="shipped KB name or path to a KB file")] = "animals",
                 nonsense: Annotated[bool, typer.Option("--nonsense", help="made-up vocabulary")] = False,
                 distractors: Annotated[str, typer.Option(help=f"distractor strategy: {', '.join(STRATEGIES)}")]
                 = "random",
                 exceptions: Annotated[float, typer.Option(
                     "--exceptions", min=0.0, max=1.0,
                     help="share of Level-3 golds that are exceptions with priority (the rest are defeaters)")]
                 = 0.5):
    """Write N verified DeFAb instances (theory, target, level, gold hypothesis) as JSONL."""
    import json

    from rlvr.defab.generate import GenerationError, generate
    from rlvr.defab.kb import KBError

    if distractors not in STRATEGIES:
        _fail(f"unknown distractor strategy {distractors!r}; choose one of {', '.join(STRATEGIES)}")
    try:
        instances = generate(level, n, seed, kb=kb, strategy=distractors, nonsense=nonsense, exceptions=exceptions)
    except (KBError, GenerationError) as e:
        _fail(str(e))
    out.parent.mkdir(parents=True, exist_ok=True)
    with out.open("w", encoding="utf-8") as f:
        for inst in instances:
            f.write(json.dumps(inst.to_json(), ensure_ascii=False) + "\n")
    typer.echo(f"wrote {len(instances)} Level-{level} instances to {out}")


def _fail(message: str) -> None:
    typer.echo(f"error: {message}", err=True)
    raise typer.Exit(2)

"""The ``rlvr`` command line: train, sft, eval, config."""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path
from typing import Annotated, Optional

import typer
from rich.console import Console
from rich.table import Table

from rlvr.config import ConfigError, RunConfig, dump_config, load_config

app = typer.Typer(add_completion=False, no_args_is_help=False, pretty_exceptions_enable=False,
                  help="rlvr: reinforcement learning from verifiable rewards.")
console = Console(stderr=True)


def _mount_subcommands() -> None:
    from rlvr.defab.cli import app as defab_app

    app.add_typer(defab_app, name="defab", help="DeFAb: defeasible-logic engine and abduction instances")


_mount_subcommands()

ConfigOpt = Annotated[Optional[Path], typer.Option("--config", "-c", help="YAML config file")]
SetOpt = Annotated[Optional[list[str]], typer.Option("--set", "-s", help="override, e.g. optim.lr=1e-4 (repeatable)")]
OutOpt = Annotated[Optional[Path], typer.Option("--out", "-o", help="run directory (default: runs/<time>)")]
SeedOpt = Annotated[Optional[int], typer.Option("--seed", help="shortcut for --set seed=N")]
RecipeOpt = Annotated[Optional[str], typer.Option("--recipe", "-r", help="start from a method's recipe (see `rlvr recipes`)")]


def _quiet_libraries() -> None:
    os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
    import transformers

    transformers.utils.logging.set_verbosity_error()
    transformers.utils.logging.disable_progress_bar()


def _config(config: Optional[Path], sets: Optional[list[str]], out: Optional[Path] = None,
            seed: Optional[int] = None, recipe: Optional[str] = None) -> RunConfig:
    overrides = list(sets or [])
    if out is not None:
        overrides.append(f"out={out}")
    if seed is not None:
        overrides.append(f"seed={seed}")
    try:
        return load_config(config, overrides, recipe=recipe)
    except ConfigError as e:
        console.print(f"[red]error:[/red] {e}", markup=True, highlight=False)
        raise typer.Exit(2)


def _fail(msg: str, code: int = 1) -> None:
    console.print(f"[red]error:[/red] {msg}", highlight=False)
    raise typer.Exit(code)


@app.command()
def train(config: ConfigOpt = None, set_: SetOpt = None, out: OutOpt = None, seed: SeedOpt = None,
          recipe: RecipeOpt = None, resume: Annotated[Optional[Path], typer.Option("--resume", help="run directory or checkpoint to continue")] = None):
    """Train with RL. With no arguments: the built-in CPU demo (tiny model, SFT warm-up, GRPO, eval)."""
    from rlvr.tasks.dataset import DataError
    from rlvr.train.run import resume as resume_run, train as train_run
    from rlvr.train.update import NonFiniteError

    _quiet_libraries()
    try:
        if resume is not None:
            if config is not None or out is not None or recipe is not None:
                _fail("--resume continues the run with its own config.yaml; use --set to change fields")
            summary = resume_run(resume, list(set_ or []) + ([f"seed={seed}"] if seed is not None else []))
        else:
            summary = train_run(_config(config, set_, out, seed, recipe))
    except ConfigError as e:
        _fail(str(e), 2)
    except (DataError, FileNotFoundError, FileExistsError) as e:
        _fail(str(e), 2)
    except NonFiniteError as e:
        _fail(f"{e}. Training stopped; the last good checkpoint is kept in the run directory.")
    except KeyboardInterrupt as e:
        console.print(f"interrupted: {e or 'no checkpoint written'}")
        raise typer.Exit(130)
    _print_summary(summary)


def _print_summary(summary: dict) -> None:
    t = Table(title=f"run {summary['run_dir']}")
    t.add_column("metric")
    t.add_column("value", justify="right")
    before, after = summary.get("eval_before") or {}, summary.get("eval_after") or {}
    for key, label in (("accuracy", "held-out accuracy"), ("greedy_accuracy", "held-out greedy accuracy")):
        if key in before:
            t.add_row(f"{label} before RL", f"{before[key]:.3f}")
        if key in after:
            t.add_row(f"{label} after RL", f"{after[key]:.3f}")
    t.add_row("RL seconds", f"{summary['rl_seconds']:.1f}")
    t.add_row("peak memory (MB)", f"{summary['peak_memory_mb']:.0f}")
    Console().print(t)


@app.command()
def sft(config: ConfigOpt = None, set_: SetOpt = None, out: OutOpt = None, seed: SeedOpt = None):
    """Supervised fine-tuning on the task's reference answers; saves a model directory to OUT/model."""
    from rlvr.train.run import run_sft

    _quiet_libraries()
    cfg = _config(config, set_, out, seed)
    try:
        result = run_sft(cfg)
    except (FileNotFoundError, ValueError) as e:
        _fail(str(e), 2)
    Console().print_json(json.dumps(result))


@app.command("eval")
def eval_(model: Annotated[Optional[Path], typer.Option("--model", "-m", help="local HF model dir or checkpoint")] = None,
          config: ConfigOpt = None, set_: SetOpt = None,
          output: Annotated[Optional[Path], typer.Option("--output", help="write the metrics JSON here")] = None):
    """Evaluate a model on the task's held-out split."""
    from rlvr.train.run import eval_model

    _quiet_libraries()
    cfg = _config(config, set_)
    try:
        result = eval_model(cfg, model)
    except (FileNotFoundError, ValueError) as e:
        _fail(str(e), 2)
    if output is not None:
        output.write_text(json.dumps(result, indent=2))
    Console().print_json(json.dumps(result))


@app.command()
def verify(file: Annotated[Path, typer.Argument(help="JSONL of {task, answer, completion, ...} records")],
           out: Annotated[Optional[Path], typer.Option("--out", "-o", help="scores JSONL (default: FILE.scores.jsonl)")] = None,
           verifier: Annotated[Optional[str], typer.Option("--verifier", help="score every record with this verifier")] = None,
           workers: Annotated[int, typer.Option(help="scoring threads")] = 4,
           timeout: Annotated[float, typer.Option(help="seconds per batch of records before late ones score 0")] = 60.0):
    """Score a JSONL file of completions with registered verifiers; one output line per input line."""
    from rlvr.verify import verify_file

    out = out or file.with_suffix(".scores.jsonl")
    bar = None
    try:
        from rlvr.train.logging import ProgressDisplay

        total = sum(1 for _ in file.open("rb")) if file.is_file() else 0
        bar = ProgressDisplay("verify", total, every=max(1, total // 10))
        summary = verify_file(file, out, verifier, workers, timeout, on_progress=lambda n: bar.update(n, ""))
    except FileNotFoundError as e:
        _fail(str(e), 2)
    finally:
        if bar is not None:
            bar.close()
    Console().print_json(json.dumps(summary))


@app.command()
def recipes():
    """List the method recipes usable with `rlvr train --recipe NAME`."""
    from rlvr.recipes import list_recipes

    t = Table(title="recipes")
    t.add_column("name", style="bold")
    t.add_column("method")
    t.add_column("paper")
    for name, desc, cite in list_recipes():
        t.add_row(name, desc, cite)
    Console(width=200).print(t)


@app.command("config")
def show_config(config: ConfigOpt = None, set_: SetOpt = None, recipe: RecipeOpt = None,
                reference: Annotated[bool, typer.Option("--reference", help="print every field as Markdown")] = False):
    """Validate a config and print it fully resolved (every default filled in)."""
    if reference:
        from rlvr.docs import config_reference

        sys.stdout.write(config_reference())
        return
    sys.stdout.write(dump_config(_config(config, set_, recipe=recipe)))


def main() -> None:
    app()


if __name__ == "__main__":
    main()

"""The ``rlvr`` command line: train, sft, eval, compare, report, verify, recipes, config, plan, defab, geosym,
data, merge.

Start-up is kept fast: this module imports only typer and rich, and each command imports what it needs
(torch, transformers and the component registries come with ``rlvr.config.run``), so ``rlvr --help``,
``rlvr CMD --help``, ``rlvr recipes`` and ``rlvr defab ...`` load no model libraries
(tests/test_cli_startup.py holds this).
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Optional

import typer
from rich.console import Console
from rich.markup import escape
from rich.table import Table

if TYPE_CHECKING:
    from rlvr.config.run import RunConfig

app = typer.Typer(add_completion=False, no_args_is_help=False, pretty_exceptions_enable=False,
                  help="rlvr: reinforcement learning from verifiable rewards.")
from rlvr.cli.common import SetOpt, console  # noqa: E402
from rlvr.cli.common import fail as _fail  # noqa: E402
from rlvr.cli.mounts import mount_subcommands  # noqa: E402

mount_subcommands(app)

ConfigOpt = Annotated[Optional[Path], typer.Option("--config", "-c", help="YAML config file")]
OutOpt = Annotated[Optional[Path], typer.Option("--out", "-o", help="run directory (default: runs/<time>)")]
SeedOpt = Annotated[Optional[int], typer.Option("--seed", help="shortcut for --set seed=N")]
RecipeOpt = Annotated[Optional[str], typer.Option("--recipe", "-r", help="start from a method's recipe (see `rlvr recipes`)")]


from rlvr.cli.quiet import quiet_libraries as _quiet_libraries  # noqa: E402


def _config(config: Optional[Path], sets: Optional[list[str]], out: Optional[Path] = None,
            seed: Optional[int] = None, recipe: Optional[str] = None, model_given: bool = False) -> RunConfig:
    from rlvr.config.run import ConfigError, load_config

    overrides = list(sets or [])
    if out is not None:
        overrides.append(f"out={out}")
    if seed is not None:
        overrides.append(f"seed={seed}")
    try:
        return load_config(config, overrides, recipe=recipe, model_given=model_given)
    except ConfigError as e:
        console.print(f"[red]error:[/red] {escape(str(e))}", markup=True, highlight=False, soft_wrap=True)
        raise typer.Exit(2)


def _train_config(config: Optional[Path], sets: Optional[list[str]], out: Optional[Path], seed: Optional[int],
                  recipe: Optional[str]) -> RunConfig:
    """No config file, no recipe, no --set (only --seed, --out): the demo, rlvr/recipes/demo.yaml."""
    demo = config is None and recipe is None and not sets
    return _config(config, sets, out, seed, "demo" if demo else recipe)


def _setup_errors() -> tuple[type[Exception], ...]:
    """Errors that mean the run cannot start as set up: printed as one message, exit code 2."""
    from rlvr.models.checks import ModelDirError
    from rlvr.run.preflight import SetupError
    from rlvr.models.lora import LoRAError
    from rlvr.distributed.world import DistributedSetupError
    from rlvr.run.prompt_limits import PromptLimitError

    return SetupError, ModelDirError, PromptLimitError, DistributedSetupError, LoRAError


def _run_errors() -> tuple[type[Exception], ...]:
    """Errors that stop a run that has started (the message says what was saved): exit code 1."""
    from rlvr.tasks.scoring import ScoringError
    from rlvr.run.rundir import RunDirBusy
    from rlvr.run.checkpoint import CheckpointError
    return ScoringError, RunDirBusy, CheckpointError


@app.command()
def train(config: ConfigOpt = None, set_: SetOpt = None, out: OutOpt = None, seed: SeedOpt = None,
          recipe: RecipeOpt = None, resume: Annotated[Optional[Path], typer.Option("--resume", help="run directory or checkpoint to continue")] = None,
          nproc: Annotated[Optional[int], typer.Option("--nproc", min=1, help="data-parallel processes on this machine (starts torchrun; see docs/distributed.md)")] = None,
          launcher: Annotated[str, typer.Option("--launcher", help="local, or ray: the trainer and rollout engines as Ray actors (the ray extra)")] = "local"):
    """Train with RL. With no arguments: the built-in CPU demo (tiny model, SFT warm-up, GRPO, eval)."""
    if nproc is not None:
        from rlvr.cli.launch import launch_torchrun

        raise typer.Exit(launch_torchrun(nproc, check=None if resume else lambda: _train_config(config, set_, out, seed, recipe)))
    from rlvr.config.run import ConfigError
    from rlvr.tasks.dataset import DataError
    from rlvr.run.train import resume as resume_run, train as train_run
    from rlvr.train.update import NonFiniteError

    _quiet_libraries()
    if launcher not in ("local", "ray"):
        _fail(f"--launcher {launcher}: choose local or ray", 2)
    if launcher == "ray":
        from rlvr.distributed.ray_launch import ray_resume as resume_run, ray_train as train_run  # noqa: F811
    try:
        if resume is not None:
            if config is not None or out is not None or recipe is not None:
                _fail("--resume continues the run with its own config.yaml; use --set to change fields")
            summary = resume_run(resume, list(set_ or []) + ([f"seed={seed}"] if seed is not None else []))
        else:
            summary = train_run(_train_config(config, set_, out, seed, recipe))
    except ConfigError as e:
        _fail(str(e), 2)
    except _setup_errors() as e:
        _fail(str(e), 2)
    except ImportError as e:  # an optional extra the run needs (ray, vllm, peft)
        _fail(str(e), 2)
    except (DataError, FileNotFoundError, FileExistsError) as e:
        _fail(str(e), 2)
    except _run_errors() as e:
        _fail(str(e))
    except NonFiniteError as e:
        _fail(str(e))
    except KeyboardInterrupt as e:
        console.print(f"interrupted: {e or 'aborted without saving'}", highlight=False)
        raise typer.Exit(130)
    if summary.get("run_dir") and _rank() == 0:
        _print_summary(summary)


def _rank() -> int:
    import os

    return int(os.environ.get("RANK", "0"))


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
    if summary.get("rl_seconds") is not None:
        t.add_row("RL seconds", f"{summary['rl_seconds']:.1f}")
    if summary.get("peak_memory_mb") is not None:
        t.add_row("peak memory (MB)", f"{summary['peak_memory_mb']:.0f}")
    Console().print(t)


@app.command()
def sft(config: ConfigOpt = None, set_: SetOpt = None, out: OutOpt = None, seed: SeedOpt = None):
    """Supervised fine-tuning on the task's reference answers; saves a model directory to OUT/model."""
    from rlvr.run.train import run_sft

    _quiet_libraries()
    cfg = _config(config, set_, out, seed)
    try:
        result = run_sft(cfg)
    except (FileNotFoundError, ValueError) as e:
        _fail(str(e), 2)
    except _run_errors() as e:
        _fail(str(e))
    except KeyboardInterrupt as e:
        console.print(f"interrupted: {e or 'aborted without saving'}", highlight=False)
        raise typer.Exit(130)
    Console().print_json(json.dumps(result))


@app.command("eval")
def eval_(model: Annotated[Optional[Path], typer.Option("--model", "-m", help="local HF model dir, run dir or checkpoint")] = None,
          config: ConfigOpt = None, set_: SetOpt = None,
          output: Annotated[Optional[Path], typer.Option("--output", help="metrics JSON (default: runs/eval-<time>.json)")] = None,
          samples: Annotated[Optional[int], typer.Option("--samples", "-n", help="samples per prompt (eval.samples)")] = None,
          num_examples: Annotated[Optional[int], typer.Option("--num-examples", help="first K prompts (eval.num_examples)")] = None,
          split: Annotated[Optional[str], typer.Option("--split", help="task split (eval.split)")] = None,
          search: Annotated[Optional[str], typer.Option("--search", help="none, or prm: PROPA's best-of-N search "
                                                        "guided by a process reward model (eval.search.name)")] = None,
          prm: Annotated[Optional[Path], typer.Option("--prm", help="checkpoint or run dir holding the process "
                                                      "reward model (eval.search.prm)")] = None,
          benchmark: Annotated[Optional[str], typer.Option("--benchmark", help="a standard benchmark as the task: math500, aime2024, aime2025, gsm8k, gpqa_diamond, humaneval, mbpp, defab (docs/benchmarks-eval.md)")] = None,
          path: Annotated[Optional[Path], typer.Option("--path", help="the benchmark's local file or directory")] = None):
    """Evaluate a model on a task's held-out split: avg@n, pass@k, maj@n, mean reward, 95% bootstrap CIs.

    A run directory (or one of its checkpoints) is evaluated with the run's own config.yaml unless -c is given.
    """
    from datetime import datetime

    from rlvr.cli.evalopts import EvalOptionError, eval_overrides
    from rlvr.eval.output import eval_table, write_eval
    from rlvr.run.logging import ProgressDisplay
    from rlvr.run.train import eval_model

    _quiet_libraries()
    try:
        sets = eval_overrides(set_, {"samples": samples, "num_examples": num_examples, "split": split,
                                     "search.name": search, "search.prm": prm}, benchmark, path)
    except EvalOptionError as e:
        _fail(str(e), 2)
    config = _run_config_of(model) if config is None and model is not None else config
    cfg = _config(config, sets, model_given=model is not None and config is None)  # outside a run: pretrained
    bars: list = []

    def progress(done: int, total: int) -> None:
        if not bars:
            bars.append(ProgressDisplay("eval", total, every=max(1, total // 10)))
        bars[0].update(done, "prompts")

    try:
        result = eval_model(cfg, model, on_progress=progress)
    except (FileNotFoundError, ValueError, KeyError) as e:
        _fail(str(e), 2)
    finally:
        for b in bars:
            b.close()
    output = output or Path("runs") / datetime.now().strftime("eval-%Y%m%d-%H%M%S.json")
    write_eval(result, output)
    Console().print(eval_table(result, f"{result['model']} on {result['task']}/{result['split']}: "
                                       f"{result['num_examples']} prompts x {result['samples']} samples, "
                                       f"T={result['temperature']:g}"))
    console.print(f"wrote {output}")


def _run_config_of(model: Path) -> Optional[Path]:
    """The config.yaml of the run that ``model`` (a run dir, a checkpoint or its model dir, ``rlvr sft``'s
    output) belongs to."""
    for cand in (model, *list(model.parents)[:3]):
        if (cand / "config.yaml").is_file() and ((cand / "checkpoints").is_dir() or (cand / "sft.json").is_file()):
            console.print(f"using the run's config {cand / 'config.yaml'}")
            return cand / "config.yaml"
    return None


@app.command()
def report(path: Annotated[Path, typer.Argument(help="a run directory (or a comparison's --out directory)")]):
    """Regenerate a run's plot.png, summary.json and report.html (or a comparison's report) from its files."""
    from rlvr.config.run import ConfigError
    from rlvr.report import report_run

    try:
        if (path / "compare.json").is_file():
            from rlvr.compare import write_report
            from rlvr.compare.variants import read_plan

            plan = read_plan(path)
            results = write_report(path, plan["variants"], plan["seeds"])
            from rlvr.cli.compare import print_comparison

            print_comparison(results)
            console.print(f"report: {path / 'report.html'}")
            return
        summary = report_run(path)
    except (FileNotFoundError, ConfigError) as e:
        _fail(str(e), 2)
    _print_summary(summary)
    console.print(f"wrote {path / 'plot.png'}, {path / 'summary.json'}, {path / 'report.html'}")


@app.command()
def export(path: Annotated[Path, typer.Argument(help="a run directory, a checkpoint, or a checkpoint's model/")],
           merged: Annotated[Path, typer.Option("--merged", help="output model directory (LoRA adapters merged)")]):
    """Write a run's model as a plain Hugging Face model directory (a LoRA adapter merged into its base)."""
    from rlvr.run.export import export_model

    try:
        out = export_model(path, merged)
    except (FileNotFoundError, FileExistsError, ValueError) as e:
        _fail(str(e), 2)
    console.print(f"wrote {out}")


@app.command()
def verify(file: Annotated[Path, typer.Argument(help="JSONL of {task, answer, completion, ...} records")],
           out: Annotated[Optional[Path], typer.Option("--out", "-o", help="scores JSONL (default: FILE.scores.jsonl)")] = None,
           verifier: Annotated[Optional[str], typer.Option("--verifier", help="score every record with this verifier")] = None,
           workers: Annotated[int, typer.Option(help="scoring threads")] = 4,
           timeout: Annotated[float, typer.Option(help="seconds per batch of records before late ones score 0")] = 60.0):
    """Score a JSONL file of completions with registered verifiers; one output line per input line."""
    from rlvr.cli.verify import verify_file

    out = out or file.with_suffix(".scores.jsonl")
    bar = None
    try:
        from rlvr.run.logging import ProgressDisplay

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
    from rlvr.config.recipes import list_recipes

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
    """Validate a config and print it fully resolved (every default filled in), as `rlvr train` would run it."""
    if reference:
        from rlvr.cli.docs import config_reference

        sys.stdout.write(config_reference())
        return
    from rlvr.config.run import dump_config

    sys.stdout.write(dump_config(_train_config(config, set_, None, None, recipe)))  # what rlvr train would run


def main() -> None:
    app()


if __name__ == "__main__":
    main()

"""``rlvr compare``: methods x seeds on one task with the same rollout budget; an HTML report, and with
``--markdown`` a Markdown page with its learning curves and, with ``--claims``, a verdict per method on the
direction its paper claims (:mod:`rlvr.compare.markdown`)."""

from __future__ import annotations

import shlex
import sys
from pathlib import Path
from typing import Annotated, Optional

import typer
from rich.console import Console
from rich.table import Table

from rlvr.cli.common import SetOpt, console
from rlvr.cli.common import fail as _fail
from rlvr.cli.quiet import quiet_libraries

__all__ = ["compare", "print_comparison", "read_claims"]


def read_claims(path: Path) -> dict:
    """A claims file: ``method: {metric, direction: higher|lower, claim: text}`` per method, checked."""
    from rlvr.compare.markdown import DIRECTIONS
    from rlvr.core import yaml_io

    raw = yaml_io.load(path.read_text()) or {}
    if not isinstance(raw, dict):
        raise ValueError(f"{path}: expected a mapping of method -> {{metric, direction, claim}}")
    for name, c in raw.items():
        if not isinstance(c, dict) or "metric" not in c or c.get("direction") not in DIRECTIONS:
            raise ValueError(f"{path}: {name}: expected {{metric: NAME, direction: higher|lower, claim: TEXT}}, "
                             f"got {c!r}")
    return raw


def setup_text(cfg, n_methods: int, seeds: list[int], base: str) -> str:
    """What a comparison ran, in words (the task, the budget, the evaluation, the start)."""
    e, r = cfg.eval, cfg.rollout
    start = (f" Every run starts RL from one shared warm-up ({cfg.sft.steps} SFT steps, seed {cfg.sft.seed})."
             if cfg.sft.steps and cfg.sft.seed is not None else "")
    return (f"Task `{cfg.task.name}`; {n_methods} methods x seeds {', '.join(map(str, seeds))}; every run trains on "
            f"{r.prompts_per_step} prompts x {r.group_size} completions x {cfg.train.steps} steps (at most "
            f"{r.max_new_tokens} new tokens). Held-out accuracy is avg@{e.samples} at T={e.temperature:g} on split "
            f"`{e.split}`{f' (first {e.num_examples} prompts)' if e.num_examples else ''}. Baseline: `{base}`."
            f"{start} Intervals are 95% bootstrap intervals over held-out prompts; p (prompts) is a two-sided "
            "sign-flip test of the per-prompt difference (seed-averaged), p (seeds) the same test over seeds (with "
            "3 seeds it cannot go below 0.25).")


def compare(out: Annotated[Path, typer.Option("--out", "-o", help="comparison directory (rerun with it to continue)")],
            recipe: Annotated[Optional[list[str]], typer.Option("--recipe", "-r", help="a method's recipe (repeatable; the first is the baseline)")] = None,
            variant: Annotated[Optional[list[Path]], typer.Option("--variant", help="a variant config YAML (repeatable; after the recipes)")] = None,
            seeds: Annotated[str, typer.Option("--seeds", help="comma-separated seeds")] = "0,1,2",
            config: Annotated[Optional[Path], typer.Option("--config", "-c", help="shared YAML config under every variant")] = None,
            set_: SetOpt = None,
            allow_budget_mismatch: Annotated[bool, typer.Option("--allow-budget-mismatch", help="run variants whose rollout budgets differ")] = False,
            report_only: Annotated[bool, typer.Option("--report-only", help="only rewrite the report from the runs so far")] = False,
            markdown: Annotated[Optional[Path], typer.Option("--markdown", help="also write a Markdown page (and its curves as .png)")] = None,
            claims: Annotated[Optional[Path], typer.Option("--claims", help="YAML: method -> {metric, direction, claim}; the page says whether each is reproduced")] = None,
            title: Annotated[str, typer.Option("--title", help="the Markdown page's title")] = "Comparison"):
    """Compare methods x seeds on one task with the same rollout budget; writes OUT/report.html.

    Finished runs are skipped and interrupted ones resumed, so rerunning the same command continues it.
    """
    from rlvr.compare import CompareError, make_variants, run_compare, write_report
    from rlvr.compare.runner import check_budgets, variant_config
    from rlvr.config.run import ConfigError

    quiet_libraries()
    try:
        seed_list = [int(s) for s in seeds.split(",") if s.strip()]
    except ValueError:
        _fail(f"--seeds {seeds!r}: expected comma-separated integers such as 0,1,2", 2)
    try:
        claim_map = read_claims(claims) if claims is not None else None
    except (OSError, ValueError) as e:
        _fail(str(e), 2)

    def note(kind: str, name: str, seed: int, run_dir: Path) -> None:
        console.print(f"[bold]{kind}[/bold] {name} seed {seed} ({run_dir})")

    try:
        variants = make_variants(recipe, variant)
        if report_only:
            cfgs = {v.name: variant_config(v, seed_list[0], out, config, set_) for v in variants}
            results = write_report(out, variants, seed_list, check_budgets(cfgs, True))
        else:
            results = run_compare(variants, seed_list, out, config, list(set_ or []), allow_budget_mismatch, note)
        if markdown is not None:
            from rlvr.compare.markdown import write_markdown
            from rlvr.compare.report import collect

            cfg0 = variant_config(variants[0], seed_list[0], out, config, set_)
            write_markdown(markdown, collect(out, variants, seed_list),
                           setup_text(cfg0, len(variants), seed_list, variants[0].name), claim_map,
                           "rlvr " + shlex.join(sys.argv[1:]), title)
    except (CompareError, ConfigError) as e:
        _fail(str(e), 2)
    except KeyboardInterrupt:
        console.print(f"interrupted: rerun the same command to continue ({out})")
        raise typer.Exit(130)
    print_comparison(results)
    console.print(f"report: {out / 'report.html'}" + (f"; page: {markdown}" if markdown is not None else ""))


def print_comparison(results: dict) -> None:
    t = Table(title=f"final held-out accuracy (baseline {results['baseline']})")
    for col in ("method", "seeds", "accuracy", "95% CI", "Δ", "p (prompts)", "p (seeds)", "s / run", "tokens / run"):
        t.add_column(col, justify="left" if col == "method" else "right")
    for name in results["variants"]:
        f, c, s = results["final"][name], results["cost"][name], results["significance"].get(name) or {}
        acc = f.get("mean", {}).get("accuracy")
        ci = f.get("ci95", {}).get("accuracy")
        t.add_row(name, str(len(f["seeds"])), f"{acc:.3f}" if acc is not None else "–",
                  f"[{ci[0]:.3f}, {ci[1]:.3f}]" if ci else "–",
                  f"{s['diff']:+.3f}" if s else "", f"{s['prompt_p']:.4f}" if s else "",
                  f"{s['seed_p']:.3f}" if s and s.get("seed_p") is not None else "",
                  f"{c['seconds_per_run']:.1f}" if c.get("runs") else "–",
                  f"{c['tokens_per_run']:.0f}" if c.get("runs") else "–")
    Console(width=160).print(t)

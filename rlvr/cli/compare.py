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

__all__ = ["compare", "print_comparison"]


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
    from rlvr.compare import CompareError, make_variants, rewrite_report, run_compare
    from rlvr.compare.markdown import read_claims, write_page
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
            results = rewrite_report(variants, seed_list, out, config, set_)
        else:
            results = run_compare(variants, seed_list, out, config, list(set_ or []), allow_budget_mismatch, note)
        if markdown is not None:
            write_page(markdown, out, variants, seed_list, claim_map, "rlvr " + shlex.join(sys.argv[1:]), title)
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

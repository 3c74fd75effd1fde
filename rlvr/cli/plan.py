"""``rlvr plan``: per-device memory by part for a config and a world size, and whether it fits, before launch.

:mod:`rlvr.cli.commands` registers :func:`plan` as ``rlvr plan``; the arithmetic is :mod:`rlvr.run.plan`.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Annotated, Optional

import typer
from rich.console import Console
from rich.table import Table

from rlvr.cli.common import console, fail

__all__ = ["plan"]


def _machine_gib() -> float:
    return os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES") / 2**30


def plan(config: Annotated[Optional[Path], typer.Option("--config", "-c", help="YAML config file")] = None,
         set_: Annotated[Optional[list[str]], typer.Option("--set", "-s", help="override (repeatable)")] = None,
         recipe: Annotated[Optional[str], typer.Option("--recipe", "-r", help="start from a method's recipe")] = None,
         world_size: Annotated[int, typer.Option("--world-size", "-n", min=1, help="ranks (GPUs) the run uses")] = 1,
         device: Annotated[Optional[str], typer.Option(help="cpu or cuda (default: the config's device; auto "
                                                       "means cuda when one is present)")] = None,
         gpu_gib: Annotated[Optional[float], typer.Option("--gpu-gib", min=0.1, help="memory of one card in GiB "
                                                          "(e.g. 80 for an H100): say whether the run fits; "
                                                          "vLLM's share is taken of it")] = None,
         prompt_tokens: Annotated[Optional[int], typer.Option(min=1, help="the longest prompt in tokens (default: "
                                                              "measured on the task's training prompts; else "
                                                              "data.max_prompt_tokens, else 128)")] = None,
         as_json: Annotated[bool, typer.Option("--json", help="print the plan as JSON")] = False):
    """Per-device memory of a run by part (weights, gradients, optimizer, activations, log-probs, engine) and
    whether it fits a card, counted from the model's config.json without loading a weight (docs/gpu.md)."""
    if device not in (None, "cpu", "cuda"):
        fail(f"--device {device}: cpu or cuda", 2)
    from rlvr.config.run import ConfigError, load_config

    try:
        cfg = load_config(config, list(set_ or []), recipe=recipe)
    except ConfigError as e:
        fail(str(e), 2)
    from rlvr.run.plan import GIB, PHASES, longest_prompt, plan_memory

    measured = prompt_tokens is None
    if measured:
        prompt_tokens = longest_prompt(cfg)
    try:
        p = plan_memory(cfg, world_size=world_size, device=device, prompt_tokens=prompt_tokens, card_gib=gpu_gib)
    except (OSError, ValueError) as e:
        fail(str(e), 2)
    limit: float | None = gpu_gib if p.device == "cuda" else (gpu_gib or _machine_gib())
    fits = None if limit is None else p.fits(limit)
    if as_json:
        out = {"device": p.device, "world_size": p.world_size, "tokens": p.tokens,
               "parts": [{"name": x.name, **{f"{ph}_gib": x.during(ph) / GIB for ph in PHASES}, "note": x.note}
                         for x in p.parts],
               **{f"{ph}_gib": p.total(ph) / GIB for ph in PHASES},
               "peak_gib": p.peak / GIB, "limit_gib": limit, "fits": fits}
        typer.echo(json.dumps(out, indent=1))
    else:
        t = Table(title=f"memory per device: {p.device}, {p.world_size} rank{'s' * (p.world_size > 1)}")
        for col in ("part", *(f"{ph} GiB" for ph in PHASES), "what"):
            t.add_column(col, justify="right" if "GiB" in col else "left")
        for row in p.table():
            t.add_row(*row)
        Console(width=140).print(t)
        tok = p.tokens
        console.print(f"longest prompt: {tok['prompt']} tokens ("
                      + ("measured on the task" if measured and prompt_tokens else "--prompt-tokens" if not measured
                         else "data.max_prompt_tokens or 128: the task could not be read") + ")", highlight=False)
        console.print(f"micro-batch: {tok['micro_batch_rows']} rows, {tok['micro_batch_tokens']} tokens "
                      f"({tok['completion_tokens']} completion tokens)", highlight=False)
        if fits is not None:
            what = "card" if p.device == "cuda" else "machine"
            verdict = "[green]fits[/green]" if fits else "[red]does not fit[/red]"
            console.print(f"peak {p.peak / GIB:.2f} GiB {verdict} a {limit:.0f} GiB {what}", highlight=False)
    if fits is False:
        raise typer.Exit(1)

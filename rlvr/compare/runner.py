"""``rlvr compare``: several methods x several seeds on one task with the same rollout budget, resumable.

Every (variant, seed) is an ordinary run directory, ``OUT/runs/<variant>/seed<k>``, made by
:func:`rlvr.run.train.train` and continued by :func:`rlvr.run.train.resume`. Rerunning the same command
skips finished runs, resumes interrupted ones from their newest checkpoint, and starts the rest, so a
comparison stopped with Ctrl-C continues where it stopped. ``OUT/compare.json`` records the plan: methods
and seeds may be added to it or left out, but another shared config, other overrides or another definition of
a kept method in the same directory is refused rather than mixed in.

A variant is a recipe (``--recipe grpo``) or a YAML file (``--variant my.yaml``), on top of an optional
shared config file and the shared ``--set`` overrides. Same budget means the same
``prompts_per_step x group_size x steps`` completions for every variant (dynamic sampling may generate
more; the report counts what was generated); a mismatch is refused unless explicitly allowed.
"""

from __future__ import annotations

import json
import os
from dataclasses import asdict
from pathlib import Path
from typing import Any, Callable

from rlvr.compare.report import write_report
from rlvr.compare.variants import (CompareError, Variant, make_variants, read_plan, resolve_plan, rollout_budget,
                                   run_dir_of, variant_config)
from rlvr.config.run import RunConfig, load_config

__all__ = ["Variant", "make_variants", "variant_config", "rollout_budget", "check_budgets", "run_status",
           "run_compare", "rewrite_report", "run_dir_of", "CompareError"]

Event = Callable[[str, str, int, Path], None]


def check_budgets(cfgs: dict[str, RunConfig], allow_mismatch: bool = False) -> list[str]:
    """Warnings about budgets, task or eval settings that differ; raises on a budget mismatch unless allowed."""
    budgets = {n: (c.rollout.prompts_per_step, c.rollout.group_size, c.train.steps) for n, c in cfgs.items()}
    msgs = []
    if len(set(budgets.values())) > 1:
        detail = "; ".join(f"{n}: {p} prompts x {g} completions x {s} steps" for n, (p, g, s) in budgets.items())
        if not allow_mismatch:
            raise CompareError(f"rollout budgets differ ({detail}); make them equal or pass --allow-budget-mismatch")
        msgs.append(f"rollout budgets differ: {detail}")
    for what, get in (("task", lambda c: c.task.to_dict()), ("eval", lambda c: c.eval.model_dump()),
                      ("model", lambda c: c.model.model_dump())):
        if len({json.dumps(get(c), sort_keys=True) for c in cfgs.values()}) > 1:
            msgs.append(f"the variants use different {what} settings: results are not comparable")
    return msgs


def rewrite_report(variants: list[Variant], seeds: list[int], out: str | Path, base: str | Path | None = None,
                   overrides: list[str] | None = None) -> dict[str, Any]:
    """OUT/report.html again from the runs so far, nothing trained (``--report-only``); budgets that differ
    are a warning on the page here, not an error."""
    cfgs = {v.name: variant_config(v, seeds[0], Path(out), base, overrides) for v in variants}
    return write_report(Path(out), variants, seeds, check_budgets(cfgs, True))


def _comparable(cfg: RunConfig) -> dict[str, Any]:
    d = cfg.model_dump(mode="json")
    d.pop("out", None)
    d["train"].pop("steps", None)
    return d


def run_status(run_dir: Path, cfg: RunConfig) -> str:
    """``done`` (its summary says it trained every step; checkpoints are not needed), ``resume`` (a checkpoint
    exists) or ``fresh``; refuses a run directory with another config."""
    from rlvr.run.checkpoint import latest_checkpoint

    if not (run_dir / "config.yaml").is_file():
        return "fresh"
    have = load_config(run_dir / "config.yaml")
    if _comparable(have) != _comparable(cfg):
        raise CompareError(f"{run_dir} was made with a different config than this comparison asks for; "
                           f"choose another --out")
    summary = run_dir / "summary.json"
    # a finished run is told by its summary, so its checkpoints may be deleted (or never copied) to save space
    if have.train.steps == cfg.train.steps and summary.is_file() \
            and json.loads(summary.read_text()).get("steps") == cfg.train.steps:
        return "done"
    try:
        latest_checkpoint(run_dir)
    except FileNotFoundError:
        return "fresh"
    return "resume"


def _plan(variants: list[Variant], seeds: list[int], base, overrides, out: Path) -> dict[str, Any]:
    """The plan as ``compare.json`` keeps it: files relative to ``out`` (read back by :func:`rlvr.compare.variants.read_plan`), so a comparison
    kept beside its config (in a repository, say) continues from another checkout or machine."""
    variants = [{**asdict(v), "config": _relative(v.config, out)} for v in variants]
    return {"variants": variants, "seeds": list(seeds), "base": _relative(base, out),
            "overrides": list(overrides or [])}


def _relative(path, out: Path) -> str | None:
    return os.path.relpath(Path(path).resolve(), Path(out).resolve()) if path else None


def _plan_conflict(old: dict[str, Any], new: dict[str, Any]) -> str | None:
    """Why ``new`` cannot continue the comparison kept as ``old``, or None. The shared config, the overrides
    and the definition of every variant kept in both must be the same; variants and seeds may be added or
    left out (each run's own config is checked again before it is skipped or resumed)."""
    for key, what in (("base", "shared config"), ("overrides", "overrides")):
        if old.get(key) != new.get(key):
            return f"its {what} were {old.get(key)!r}, now {new.get(key)!r}"
    kept = {v.name: v for v in old.get("variants", [])}
    for v in new["variants"]:
        if v.name in kept and kept[v.name] != v:
            return f"its variant {v.name!r} was {kept[v.name]}, now {v}"
    return None


def _check_plan(out: Path, plan: dict[str, Any]) -> None:
    path = out / "compare.json"
    if path.is_file():
        why = _plan_conflict(read_plan(out), resolve_plan(plan, out))
        if why:
            raise CompareError(f"{out} holds a different comparison ({path}): {why}; rerun it with the same "
                               f"shared config, overrides and variant definitions to continue it (methods and "
                               f"seeds may be added or left out), or choose another --out")
    out.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(plan, indent=2))


def run_compare(variants: list[Variant], seeds: list[int], out: str | Path, base: str | Path | None = None,
                overrides: list[str] | None = None, allow_budget_mismatch: bool = False,
                on_event: Event | None = None) -> dict[str, Any]:
    """Run (or continue) every variant x seed, then write ``OUT/report.html`` and ``OUT/results.json``.

    Seeds are the outer loop, so an interrupted comparison has every method at the same number of seeds
    as far as possible. ``on_event(kind, variant, seed, run_dir)`` is called with ``skip``, ``resume``,
    ``start`` and ``done``.
    """
    from rlvr.run.train import resume, train

    out = Path(out)
    if not seeds:
        raise CompareError("no seeds given")
    cfgs = {(v.name, s): variant_config(v, s, out, base, overrides) for v in variants for s in seeds}
    warnings = check_budgets({v.name: cfgs[(v.name, seeds[0])] for v in variants}, allow_budget_mismatch)
    _check_plan(out, _plan(variants, seeds, base, overrides, out))
    note = on_event or (lambda *a: None)
    for seed in seeds:
        for v in variants:
            cfg, run_dir = cfgs[(v.name, seed)], run_dir_of(out, v, seed)
            status = run_status(run_dir, cfg)
            if status == "done":
                note("skip", v.name, seed, run_dir)
                continue
            note(status if status == "resume" else "start", v.name, seed, run_dir)
            if status == "resume":
                resume(run_dir, [f"train.steps={cfg.train.steps}"])
            else:
                train(cfg)
            note("done", v.name, seed, run_dir)
    return write_report(out, variants, seeds, warnings)

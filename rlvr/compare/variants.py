"""What a comparison runs: its variants, each (variant, seed)'s config and run directory, and its budget.

Shared by :mod:`rlvr.compare.runner` (which trains the runs) and :mod:`rlvr.compare.report` (which reads
them back), so the report does not import the runner.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

import yaml

from rlvr.config.run import RunConfig, load_config

__all__ = ["CompareError", "Variant", "make_variants", "run_dir_of", "variant_config", "rollout_budget", "read_plan",
           "resolve_plan"]


class CompareError(ValueError):
    """A comparison that cannot run as asked (bad variants, budgets that differ, a different plan in OUT)."""


@dataclass(frozen=True)
class Variant:
    name: str
    recipe: str | None = None
    config: str | None = None  # YAML file of the variant


def make_variants(recipes: list[str] | None, configs: list[str | Path] | None) -> list[Variant]:
    """Variants named by recipe or by YAML file stem, in the order given (the first is the baseline)."""
    variants = [Variant(r, recipe=r) for r in recipes or []]
    variants += [Variant(Path(c).stem, config=str(Path(c).resolve())) for c in configs or []]
    names = [v.name for v in variants]
    if len(variants) < 2:
        raise CompareError("a comparison needs at least two variants (--recipe NAME or --variant FILE.yaml)")
    dup = sorted({n for n in names if names.count(n) > 1})
    if dup:
        raise CompareError(f"variant names must differ; repeated: {', '.join(dup)} (rename a YAML file)")
    return variants


def resolve_plan(plan: dict, out: str | Path) -> dict:
    """A plan as ``compare.json`` keeps it (files relative to ``out``; older plans hold absolute paths) with its
    files resolved and its variants as :class:`Variant`."""
    def where(p: str | None) -> str | None:
        return str((Path(out) / p).resolve()) if p else None

    return {**plan, "base": where(plan.get("base")),
            "variants": [Variant(**{**v, "config": where(v.get("config"))}) for v in plan.get("variants", [])]}


def read_plan(out: str | Path) -> dict:
    """``OUT/compare.json`` resolved (:func:`resolve_plan`); empty when there is none."""
    path = Path(out) / "compare.json"
    return resolve_plan(json.loads(path.read_text()), out) if path.is_file() else {}


def run_dir_of(out: Path, variant: Variant, seed: int) -> Path:
    return Path(out) / "runs" / variant.name / f"seed{seed}"


def variant_config(v: Variant, seed: int, out: Path, base: str | Path | None = None,
                   overrides: list[str] | None = None) -> RunConfig:
    """The run config of ``v`` at ``seed``: recipe (or shared base, then the variant's YAML), then overrides."""
    sets = list(overrides or []) + [f"seed={seed}", f"out={run_dir_of(out, v, seed)}"]
    if v.config is not None:
        base_raw = None
        if base:  # the shared file's relative paths belong beside it, not beside the variant's file
            from rlvr.config.errors import ConfigError
            from rlvr.core.paths import resolved_raw

            base_raw = yaml.safe_load(Path(base).read_text()) or {}
            try:
                base_raw = resolved_raw(base_raw, load_config(base).model_dump(mode="json"))
            except ConfigError:  # valid only with the variant's settings: its paths as written
                pass
        return load_config(v.config, sets, base=base_raw)
    return load_config(base, sets, recipe=v.recipe)


def rollout_budget(cfg: RunConfig) -> int:
    """Completions the run trains on: prompts per step x group size x steps."""
    return cfg.rollout.prompts_per_step * cfg.rollout.group_size * cfg.train.steps

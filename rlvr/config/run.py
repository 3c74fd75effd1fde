"""The run configuration: a typed tree validated once at load, frozen after.

A run is fully described by one YAML file (``config.yaml`` in the run directory is the resolved config
and reproduces the run). Command-line overrides use dotted paths: ``--set algorithm.objective.clip_high=0.28``.
Registered components are written ``{name: ..., <params>}`` and their params are validated against the
component's own model, so a typo or bad value fails at load, naming the field and the allowed values.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, Field, ValidationError, ValidationInfo, model_validator

import rlvr.algorithms  # noqa: F401  (registers components)
import rlvr.rollout  # noqa: F401
import rlvr.tasks  # noqa: F401
from rlvr.algorithms.kl_schedules import KL_SCHEDULES
from rlvr.algorithms.registry import (ADVANTAGE_TRANSFORMS, ADVANTAGES, AGGREGATIONS, CLIP_RULES, CORRECTIONS,
                                     LOSS_TERMS, OBJECTIVES, REWARD_TRANSFORMS)
from rlvr.config.algorithm import AlgorithmConfig, KLConfig
from rlvr.config.data import DataConfig
from rlvr.config.defaults import apply_defaults
from rlvr.config.errors import ConfigError, format_validation_error
from rlvr.config.eval import EvalConfig, LoggingConfig
from rlvr.config.fields import Component, Section, component
from rlvr.config.optim import OptimConfig
from rlvr.config.overrides import apply_overrides, merge_configs
from rlvr.config.plugins import import_plugins, read_config_file
from rlvr.config.rollout import RolloutConfig
from rlvr.config.scoring import ScoringConfig
from rlvr.core.paths import resolve_local_paths
from rlvr.config.train import SFTConfig, TrainConfig
from rlvr.core import yaml_io
from rlvr.engines.native_config import native_problems
from rlvr.engines.vllm_config import vllm_problems
from rlvr.models.config import ModelConfig
from rlvr.optim import OPTIMIZERS
from rlvr.rollout.strategies.base import ROLLOUT_STRATEGIES
from rlvr.sampling import ALLOCATORS, SAMPLERS
from rlvr.registry import Registry
from rlvr.tasks.base import TASKS

__all__ = ["Component", "RunConfig", "ConfigError", "load_config", "apply_overrides", "dump_config",
           "configured_components", "algorithm_needs", "needs_reference", "LengthLimits", "length_limits",
           "AlgorithmConfig", "KLConfig", "RolloutConfig", "ScoringConfig", "OptimConfig", "EvalConfig",
           "LoggingConfig", "DataConfig"]


class RecipeInfo(Section):
    """Where a run's algorithm came from (filled in by ``--recipe``)."""

    name: str = Field(..., description="recipe name")
    description: str = Field("", description="one line: what the method changes")
    citation: str = Field("", description="the paper")


class RunConfig(Section):
    plugins: list[str] = Field(default_factory=list, description="modules or .py files imported before the config "
                                                                 "is validated: your own components register there")
    recipe: RecipeInfo | None = Field(None, description="the recipe this run started from")
    defaults: Literal["auto", "demo", "pretrained"] = Field(
        "auto", description="the defaults under the config: demo (a model built from scratch: rlvr/config/demo.yaml) "
                            "or pretrained (current practice); auto: demo unless model.path is set")
    seed: int = Field(0, description="one seed fixes init, data order and sampling")
    out: str | None = Field(None, description="run directory (default: runs/<time>)")
    device: Literal["auto", "cpu", "cuda"] = Field("auto", description="where to train")
    model: ModelConfig = Field(default_factory=ModelConfig)
    task: component(TASKS, "arithmetic") = Field({"name": "arithmetic"}, validate_default=True, description="task")
    rollout: RolloutConfig = Field(default_factory=RolloutConfig)
    data: DataConfig = Field(default_factory=DataConfig)
    scoring: ScoringConfig = Field(default_factory=ScoringConfig)
    algorithm: AlgorithmConfig = Field(default_factory=AlgorithmConfig)
    optim: OptimConfig = Field(default_factory=OptimConfig)
    train: TrainConfig = Field(default_factory=TrainConfig)
    sft: SFTConfig = Field(default_factory=SFTConfig)
    eval: EvalConfig = Field(default_factory=EvalConfig)
    logging: LoggingConfig = Field(default_factory=LoggingConfig)

    @model_validator(mode="before")
    @classmethod
    def _import_plugins(cls, data: Any, info: ValidationInfo) -> Any:
        if isinstance(data, dict):
            import_plugins(data.get("plugins"))
            # the demo's settings under a model built from scratch (rlvr.config.defaults); context
            # {"model_given": True}: a model object will be passed, so the pretrained defaults
            data = apply_defaults(data, bool((info.context or {}).get("model_given")))
        return data

    @model_validator(mode="after")
    def _check_combination(self) -> "RunConfig":
        problems = []
        n = self.rollout.prompts_per_step * self.rollout.group_size
        if n % self.algorithm.minibatches:
            problems.append(
                f"algorithm.minibatches={self.algorithm.minibatches} must divide the completions per step "
                f"(rollout.prompts_per_step x rollout.group_size = {n})")
        traits = algorithm_traits(self)
        if "whole_groups" in traits and self.rollout.prompts_per_step % self.algorithm.minibatches:
            problems.append(f"objective {self.algorithm.objective.name!r} keeps groups whole, so "
                            f"algorithm.minibatches={self.algorithm.minibatches} must divide "
                            f"rollout.prompts_per_step={self.rollout.prompts_per_step}")
        if "reduced_loss" in traits and self.algorithm.correction.name != "none":
            problems.append(f"objective {self.algorithm.objective.name!r} reduces its own loss over the group, so "
                            f"the per-token correction {self.algorithm.correction.name!r} cannot apply; use "
                            f"algorithm.correction: none")
        if self.sft.interleave_every and (self.rollout.max_staleness or self.rollout.stages):
            problems.append("sft.interleave_every changes the policy between RL steps, which asynchronous rollouts "
                            "(rollout.max_staleness, rollout.stages) do not track; set one")
        c = self.rollout.contexts
        if c.num_contexts and (c.num_contexts * c.per_context != self.rollout.group_size
                               or self.rollout.guidance.fraction):
            problems.append(f"rollout.contexts needs rollout.group_size = num_contexts x per_context "
                            f"({c.num_contexts * c.per_context}) and no rollout.guidance")
        if self.rollout.max_staleness and self.rollout.stages:
            problems.append("rollout.max_staleness and rollout.stages are two schedules of stale rollouts; set one")
        if self.rollout.producer_threads and not (self.rollout.max_staleness or self.rollout.stages):
            problems.append("rollout.producer_threads sets the asynchronous producer's threads; a synchronous run "
                            "(no rollout.max_staleness or rollout.stages) has none: use train.threads")
        if self.rollout.producer_threads and self.rollout.engine == "vllm":
            problems.append("rollout.producer_threads cannot apply with rollout.engine=vllm: vLLM's CPU kernels run on "
                            "the thread count its engine was planned with (train.threads)")
        problems += native_problems(self.rollout)
        if not (self.device == "auto" and self.rollout.engine == "vllm"):  # (auto: known at set-up, which runs
            problems += vllm_problems(self)  # the same check; asking torch here would load it for every command)
        if self.algorithm.dynamic_sampling.enabled and self.rollout.group_size < 2:
            problems.append("algorithm.dynamic_sampling needs rollout.group_size >= 2 (a group of one has no variance)")
        for key, registry, comp in configured_components(self):
            entry = registry.get(comp.name)
            if entry.check is not None:
                problems += [f"{key} {comp.name!r}: {msg}" for msg in entry.check(self, comp.params)]
        if problems:
            raise ValueError("; ".join(problems))
        return self


COMPONENT_FIELDS = [("algorithm.advantage", ADVANTAGES), ("algorithm.objective", OBJECTIVES),
                    ("algorithm.aggregation", AGGREGATIONS), ("algorithm.correction", CORRECTIONS),
                    ("algorithm.clip", CLIP_RULES), ("algorithm.reward_transforms", REWARD_TRANSFORMS),
                    ("algorithm.advantage_transforms", ADVANTAGE_TRANSFORMS),
                    ("algorithm.loss_terms", LOSS_TERMS),
                    ("algorithm.kl.schedule", KL_SCHEDULES), ("optim.optimizer", OPTIMIZERS),
                    ("data.sampler", SAMPLERS), ("data.budget", ALLOCATORS),
                    ("rollout.strategy", ROLLOUT_STRATEGIES), ("task", TASKS)]


def configured_components(cfg: "RunConfig") -> list[tuple[str, Registry, Component]]:
    """``(config path, registry, component)`` for every component a run uses; list fields give one entry per
    item, at paths such as ``algorithm.advantage_transforms.0``."""
    out = []
    for key, registry in COMPONENT_FIELDS:
        value = _lookup(cfg, key)
        if isinstance(value, (list, tuple)):
            out += [(f"{key}.{i}", registry, comp) for i, comp in enumerate(value)]
        else:
            out.append((key, registry, value))
    return out


def needs_reference(cfg: "RunConfig") -> bool:
    """A frozen reference model is loaded for a KL term or for a component that reads reference log-probs."""
    return cfg.algorithm.kl.coef > 0 or "ref_logp" in algorithm_needs(cfg)


def algorithm_needs(cfg: "RunConfig", step: int | None = None) -> frozenset[str]:
    """The union of the extra tensors (``needs``) the run's components request; with ``step``, only those of
    components active at that step (see ``Registry.register(active=...)``)."""
    needs: set[str] = set()
    for _, registry, comp in configured_components(cfg):
        entry = registry.get(comp.name)
        if step is None or entry.active is None or entry.active(comp.params, step):
            needs |= entry.needs
    return frozenset(needs)


def algorithm_traits(cfg: "RunConfig") -> frozenset[str]:
    """The union of the behaviour traits (``traits``) of the run's components: the one place config checks
    and the update read them from."""
    return frozenset(t for _, registry, comp in configured_components(cfg) for t in registry.get(comp.name).traits)


@dataclass(frozen=True)
class LengthLimits:
    """The run's token limits, derived from the config in this one place."""

    completion: int  # tokens one generation call samples at most: rollouts, evaluation, the overlong shaping,
    #                  the aggregations' constant normaliser (rollout.max_new_tokens)
    episode: int  # tokens a completion holds at most, for the context check: a multi-turn episode's turns and
    #               observations, else ``completion``
    episode_source: str  # where ``episode`` comes from, for messages
    warmup: int  # SSB's curated attempts and solutions (sft.ssb.max_new_tokens, else ``completion``)


def length_limits(cfg: "RunConfig") -> LengthLimits:
    """The token limits of ``cfg``'s run (:class:`LengthLimits`)."""
    completion = cfg.rollout.max_new_tokens
    episode, source = completion, "rollout.max_new_tokens"
    mt = cfg.rollout.multiturn  # an episode's completion holds every turn and observation
    if mt.env is not None:
        episode = mt.completion_bound(completion)
        source = ("rollout.multiturn.max_tokens" if mt.max_tokens is not None else
                  "an episode's longest completion (rollout.multiturn: max_turns x (turn tokens + "
                  "max_observation_tokens); set rollout.multiturn.max_tokens to bound it)")
    return LengthLimits(completion, episode, source, cfg.sft.ssb.max_new_tokens or completion)


def _lookup(cfg: BaseModel, dotted: str) -> Any:
    for part in dotted.split("."):
        cfg = getattr(cfg, part)
    return cfg


def load_config(path: str | Path | None = None, overrides: list[str] | None = None,
                base: dict[str, Any] | None = None, recipe: str | None = None,
                model_given: bool = False) -> RunConfig:
    """Validate recipe, then YAML (or ``base``), then overrides into a frozen :class:`RunConfig`, over the
    demo's settings when the model is built from scratch (:mod:`rlvr.config.defaults`; ``model_given``: a model
    object will be passed, so the pretrained defaults apply).

    Raises :class:`ConfigError` naming every bad field. Every field naming a local file or directory is made
    absolute (:mod:`rlvr.core.paths`: beside the config file, else in the working directory), so the resolved
    config finds the same files from any directory.
    """
    raw: dict[str, Any] = dict(base or {})
    if recipe is not None:
        from rlvr.config.recipes import load_recipe

        raw = merge_configs(load_recipe(recipe), raw)
    if path is not None:
        raw = merge_configs(raw, read_config_file(path))
    raw = apply_overrides(raw, overrides or [])
    try:
        cfg = RunConfig.model_validate(raw, context={"model_given": model_given})
    except ValidationError as e:
        raise ConfigError(format_validation_error(RunConfig, e)) from None
    # files and directories: beside the config file, else in the working directory, stored absolute
    return resolve_local_paths(cfg, Path(path).resolve().parent if path is not None else None)


def dump_config(cfg: RunConfig) -> str:
    return yaml_io.dump(cfg.model_dump(mode="json"))

"""The run configuration: a typed tree validated once at load, frozen after.

A run is fully described by one YAML file (``config.yaml`` in the run directory is the resolved config
and reproduces the run). Command-line overrides use dotted paths: ``--set algorithm.objective.clip_high=0.28``.
Registered components are written ``{name: ..., <params>}`` and their params are validated against the
component's own model, so a typo or bad value fails at load, naming the field and the allowed values.
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Any, Literal

from pydantic import (BaseModel, ConfigDict, Field, PlainSerializer, PlainValidator, ValidationError,
                      WithJsonSchema, model_validator)

import rlvr.algorithms  # noqa: F401  (registers components)
from rlvr.algorithms.kl_schedules import KL_SCHEDULES
import rlvr.rollout  # noqa: F401
import rlvr.tasks  # noqa: F401
from rlvr.algorithms.registry import (ADVANTAGE_TRANSFORMS, ADVANTAGES, AGGREGATIONS, CLIP_RULES, CORRECTIONS,
                                     KL_ESTIMATORS, LOSS_TERMS, OBJECTIVES, REWARD_TRANSFORMS)
from rlvr.config.errors import ConfigError, format_params_error, format_validation_error
from rlvr.config.overrides import apply_overrides, merge_configs
from rlvr.config.plugins import import_plugins, read_config_file
from rlvr.config.sections import (BeliefConfig, CriticConfig, DiscriminatorConfig, DynamicSamplingConfig, EvalSearchConfig,
                                  OverlongConfig)
from rlvr.config.train import SFTConfig, TrainConfig
from rlvr.core import yaml_io
from rlvr.rollout.multiturn import MultiTurnConfig  # (also registers the multiturn engine wrapper)
from rlvr.rollout.contexts import ContextsConfig
from rlvr.rollout.guidance import GuidanceConfig
from rlvr.engines.native_config import NativeConfig, native_problems
from rlvr.rollout.param_noise import ParamNoiseConfig
from rlvr.rollout.strategies.base import ROLLOUT_STRATEGIES
from rlvr.distributed.ray_engine import RayConfig
from rlvr.rollout.scaffold import ScaffoldConfig
from rlvr.engines.vllm_config import VLLMConfig
from rlvr.models.config import ModelConfig
from rlvr.optim import OPTIMIZERS
from rlvr.registry import Params, Registry, RegistryError
from rlvr.engines.base import ENGINES
from rlvr.sampling import ALLOCATORS, SAMPLERS
from rlvr.tasks.appeals import AppealConfig
from rlvr.tasks.base import TASKS

__all__ = ["Component", "RunConfig", "ConfigError", "load_config", "apply_overrides", "dump_config",
           "configured_components", "algorithm_needs", "needs_reference"]


class Section(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class Component(BaseModel):
    """A registered component chosen by name, with its validated parameters."""

    model_config = ConfigDict(frozen=True, arbitrary_types_allowed=True)
    name: str
    params: Params

    def to_dict(self) -> dict[str, Any]:
        return {"name": self.name, **self.params.model_dump(mode="json")}


def _component(registry: Registry, default: str | None) -> Any:
    """A config field holding a ``registry`` component; a mapping without ``name`` means ``default``
    (``None``: the name is required)."""

    def validate(v: Any) -> Component:
        if isinstance(v, Component):
            return v
        if isinstance(v, str):
            v = {"name": v}
        if isinstance(v, dict) and "name" not in v and default is not None:
            v = {"name": default, **v}
        if isinstance(v, dict) and "name" not in v:
            raise ValueError(f"expected a mapping with a 'name' (one of: {', '.join(registry.names())})")
        if not isinstance(v, dict):
            raise ValueError(f"expected a mapping with a 'name' (one of: {', '.join(registry.names())})")
        raw = dict(v)
        name = raw.pop("name")
        try:
            entry = registry.get(str(name))
        except RegistryError as e:
            raise ValueError(str(e)) from None
        try:
            params = entry.params.model_validate(raw)
        except ValidationError as e:
            raise ValueError(format_params_error(f"{registry.kind} {name!r}", entry.params, e)) from None
        return Component(name=str(name), params=params)

    return Annotated[Component, PlainValidator(validate), PlainSerializer(lambda c: c.to_dict()),
                     WithJsonSchema({"type": "object"})]


def _named(registry: Registry) -> Any:
    def validate(v: Any) -> str:
        if not isinstance(v, str) or v not in registry:
            raise ValueError(f"unknown {registry.kind} {v!r}; valid names: {', '.join(registry.names())}")
        return v

    return Annotated[str, PlainValidator(validate), WithJsonSchema({"type": "string"})]


class RolloutConfig(Section):
    engine: _named(ENGINES) = Field("hf", description="rollout engine")
    prompts_per_step: int = Field(32, gt=0, description="prompts (groups) sampled per training step")
    group_size: int = Field(8, gt=0, description="completions sampled per prompt")
    temperature: float = Field(1.0, gt=0.0, description="sampling temperature")
    top_p: float = Field(1.0, gt=0.0, le=1.0, description="nucleus sampling mass")
    max_new_tokens: int = Field(8, gt=0, description="completion length limit (tokens)")
    batch_size: int = Field(256, gt=0, description="sequences per generate call")
    param_noise: ParamNoiseConfig = Field(default_factory=ParamNoiseConfig)
    guidance: GuidanceConfig = Field(default_factory=GuidanceConfig)
    contexts: ContextsConfig = Field(default_factory=ContextsConfig)
    scaffold: ScaffoldConfig = Field(default_factory=ScaffoldConfig)
    multiturn: MultiTurnConfig = Field(default_factory=MultiTurnConfig)
    strategy: _component(ROLLOUT_STRATEGIES, "plain") = Field({"name": "plain"}, validate_default=True,
                                                              description="how rollouts are produced around the "
                                                              "engine (rlvr.rollout.strategies.base)")
    vllm: VLLMConfig = Field(default_factory=VLLMConfig)
    native: NativeConfig = Field(default_factory=NativeConfig)
    ray: RayConfig = Field(default_factory=RayConfig, description="rollout.engine=ray: Ray rollout workers")
    max_staleness: int = Field(0, ge=0, description="asynchronous rollouts: generate up to K optimizer steps "
                                                    "ahead of the update (0: synchronous; rlvr.distributed.async_rollouts)")
    stages: int = Field(0, ge=0, description="Mu-GRPO: S generation stages over the run, each generated at once "
                                             "with its first step's policy (0: off; rlvr.distributed.async_rollouts)")
    producer_threads: int | None = Field(None, gt=0, description="torch threads of the asynchronous producer "
                                         "(null: train.threads, the trainer's count)")


class ScoringConfig(Section):
    workers: int = Field(1, gt=0, description="threads scoring completions (1: in-line)")
    backend: Literal["threads", "ray"] = Field("threads", description="ray: each completion a Ray task (the ray "
                                               "extra; cluster at rollout.ray.address)")
    timeout_s: float = Field(60.0, gt=0.0, description="deadline for scoring one step's completions; "
                                                        "late ones score 0 and count in score/timeouts")
    max_error_frac: float = Field(0.5, ge=0.0, le=1.0, description="stop the run when the verifier raises on more "
                                  "than this share of a step's completions (a broken reward function, not bad "
                                  "output; 1: never stop)")
    appeal: AppealConfig = Field(default_factory=AppealConfig, description="E1 appeals: a second verifier re-checks "
                                 "a sample of each step's negatives and estimates the false-negative rate (fn_rate)")


class KLConfig(Section):
    estimator: _named(KL_ESTIMATORS) = Field("k3", description="KL estimator against the frozen reference")
    coef: float = Field(0.0, ge=0.0, description="KL coefficient; 0 loads no reference model")
    placement: Literal["loss", "reward"] = Field(
        "loss", description="add coef x KL to the per-token loss (GRPO), or subtract coef x sum_t KL from the "
                            "reward before advantages (PPO-style)")
    schedule: _component(KL_SCHEDULES, "constant") = Field({"name": "constant"}, validate_default=True,
                                                          description="how the coefficient moves over the run")


class AlgorithmConfig(Section):
    advantage: _component(ADVANTAGES, "grpo") = Field({"name": "grpo"}, validate_default=True,
                                              description="advantage estimator")
    objective: _component(OBJECTIVES, "ppo_clip") = Field({"name": "ppo_clip"}, validate_default=True,
                                              description="per-token policy objective")
    aggregation: _component(AGGREGATIONS, "token_mean") = Field({"name": "token_mean"}, validate_default=True,
                                                  description="per-token loss -> scalar")
    correction: _component(CORRECTIONS, "none") = Field({"name": "none"}, validate_default=True,
                                                        description="engine-vs-trainer importance-sampling correction")
    clip: _component(CLIP_RULES, "ratio") = Field({"name": "ratio"}, validate_default=True,
                                                  description="trust region of ratio-clipping objectives")
    reward_transforms: list[_component(REWARD_TRANSFORMS, None)] = Field(
        default_factory=list, description="applied in order to the scored rewards, before the advantage")
    advantage_transforms: list[_component(ADVANTAGE_TRANSFORMS, None)] = Field(
        default_factory=list, description="applied in order to the advantages (weights, per-token credit)")
    loss_terms: list[_component(LOSS_TERMS, None)] = Field(
        default_factory=list, description="training signals added to the objective's loss, each with its own "
                                          "weight and schedule (SFT on selected completions, self-distillation)")
    teacher_hint: str = Field(" {answer}\n", description="text appended to the prompt for teacher passes "
                                                          "({answer}: the gold answer or a rejected completion)")
    teacher_context: Literal["answer", "cot_prefix", "cot_suffix"] = Field(
        "answer", description="what teacher passes condition on: the answer (teacher_hint), or CEPO's CoT teacher: "
                              "the first / last teacher_cot_tokens tokens of the group's best correct completion "
                              "(the negative teacher: of its worst rejected one)")
    teacher_cot_tokens: int = Field(200, gt=0, description="tokens of a completion a CoT teacher context keeps")
    belief: BeliefConfig = Field(default_factory=BeliefConfig, description="GRPO-VPS's belief probe")
    critic: CriticConfig = Field(default_factory=CriticConfig, description="the value model (PPO, CDE)")
    discriminator: DiscriminatorConfig = Field(default_factory=DiscriminatorConfig, description="PRISM's")
    kl: KLConfig = Field(default_factory=KLConfig)
    dynamic_sampling: DynamicSamplingConfig = Field(default_factory=DynamicSamplingConfig)
    overlong: OverlongConfig = Field(default_factory=OverlongConfig)
    epochs: int = Field(1, gt=0, description="update passes over each rollout batch (mu)")
    minibatches: int = Field(4, gt=0, description="optimizer steps per pass; the batch splits evenly")
    old_logp: Literal["recompute", "behaviour"] = Field(
        "recompute", description="the ratio's old policy: recomputed by the trainer, or the engine's behaviour "
                                 "log-probs (the ratio then measures staleness: Mu-GRPO's stages)")
    train_temperature: float | None = Field(
        None, gt=0.0, description="temperature the trainer recomputes log-probs (and entropies) at, in the update "
                                  "and the old/reference/token-statistics passes (null: rollout.temperature). "
                                  "OSFT decouples it from the sampling temperature (tau_t = 1, tau_s = 0.6); the "
                                  "engine-vs-trainer logp_mismatch metric then includes the temperature gap")


class OptimConfig(Section):
    optimizer: _component(OPTIMIZERS, "adamw") = Field({"name": "adamw"}, validate_default=True,
                                                       description="optimizer")
    lr: float = Field(2e-4, gt=0.0, description="peak learning rate")
    weight_decay: float = Field(0.0, ge=0.0, description="AdamW weight decay")
    betas: tuple[float, float] = Field((0.9, 0.999), description="AdamW betas")
    warmup_steps: int = Field(0, ge=0, description="linear warm-up optimizer steps")
    schedule: Literal["constant", "linear", "cosine"] = Field("constant", description="decay after warm-up")
    max_grad_norm: float | None = Field(1.0, gt=0.0, description="gradient clipping norm (null: off)")


class EvalConfig(Section):
    split: str = Field("eval", description="task split to evaluate on")
    num_examples: int | None = Field(None, gt=0, description="evaluate on the first K examples (null: all)")
    temperature: float = Field(1.0, ge=0.0, description="sampling temperature; 0 is greedy decoding")
    samples: int = Field(4, gt=0, description="samples per prompt (accuracy is avg@samples); 1 when greedy")
    report_greedy: bool = Field(True, description="also report greedy accuracy when sampling")
    batch_size: int = Field(512, gt=0, description="sequences per generate call")
    search: EvalSearchConfig = Field(default_factory=EvalSearchConfig, description="plain sampling or PRM search")


class LoggingConfig(Section):
    """Where metrics go besides ``metrics.jsonl`` (always written)."""

    backends: list[Literal["jsonl", "tensorboard", "wandb", "mlflow"]] = Field(
        ["jsonl"], description="metric backends; jsonl is always on, the others need their pip extra")
    project: str = Field("rlvr", description="W&B project and MLflow experiment name")
    run_name: str | None = Field(None, description="run name in W&B and MLflow (default: the run directory's name)")
    wandb_mode: Literal["offline", "online", "disabled"] = Field(
        "offline", description="W&B mode; offline writes RUN_DIR/wandb for a later `wandb sync`")
    wandb_entity: str | None = Field(None, description="W&B entity (team or user)")
    mlflow_tracking_uri: str | None = Field(None, description="MLflow tracking URI (default: RUN_DIR/mlruns)")


class DataConfig(Section):
    """Which prompts each step trains on, how many completions each gets, and the per-prompt statistics."""

    sampler: _component(SAMPLERS, "uniform") = Field({"name": "uniform"}, validate_default=True,
                                                     description="prompt sampler (which prompts go into a step)")
    budget: _component(ALLOCATORS, "fixed") = Field({"name": "fixed"}, validate_default=True,
                                                    description="rollout budget allocator (completions per prompt)")
    stats_decay: float = Field(0.5, ge=0.0, lt=1.0, description="decay of the per-prompt pass-rate and reward-"
                                                                "variance estimates (ema = d ema + (1-d) new)")
    max_prompt_tokens: int | None = Field(None, gt=0, description="longest prompt in tokens (null: what the "
                                          "model's context leaves after rollout.max_new_tokens)")
    prompt_overflow: Literal["error", "drop", "truncate_left"] = Field(
        "error", description="a prompt over the limit: stop with the counts, drop it (counted), or keep its end")


class RecipeInfo(Section):
    """Where a run's algorithm came from (filled in by ``--recipe``)."""

    name: str = Field(..., description="recipe name")
    description: str = Field("", description="one line: what the method changes")
    citation: str = Field("", description="the paper")


class RunConfig(Section):
    plugins: list[str] = Field(default_factory=list, description="modules or .py files imported before the config "
                                                                 "is validated: your own components register there")
    recipe: RecipeInfo | None = Field(None, description="the recipe this run started from")
    seed: int = Field(0, description="one seed fixes init, data order and sampling")
    out: str | None = Field(None, description="run directory (default: runs/<time>)")
    device: Literal["auto", "cpu", "cuda"] = Field("auto", description="where to train")
    model: ModelConfig = Field(default_factory=ModelConfig)
    task: _component(TASKS, "arithmetic") = Field({"name": "arithmetic"}, validate_default=True, description="task")
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
    def _import_plugins(cls, data: Any) -> Any:
        if isinstance(data, dict):
            import_plugins(data.get("plugins"))
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


def _lookup(cfg: BaseModel, dotted: str) -> Any:
    for part in dotted.split("."):
        cfg = getattr(cfg, part)
    return cfg


def load_config(path: str | Path | None = None, overrides: list[str] | None = None,
                base: dict[str, Any] | None = None, recipe: str | None = None) -> RunConfig:
    """Validate recipe, then YAML (or ``base``), then overrides into a frozen :class:`RunConfig`.

    Raises :class:`ConfigError` naming every bad field.
    """
    raw: dict[str, Any] = dict(base or {})
    if recipe is not None:
        from rlvr.config.recipes import load_recipe

        raw = merge_configs(load_recipe(recipe), raw)
    if path is not None:
        raw = merge_configs(raw, read_config_file(path))
    raw = apply_overrides(raw, overrides or [])
    try:
        return RunConfig.model_validate(raw)
    except ValidationError as e:
        raise ConfigError(format_validation_error(RunConfig, e)) from None


def dump_config(cfg: RunConfig) -> str:
    return yaml_io.dump(cfg.model_dump(mode="json"))

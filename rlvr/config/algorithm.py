"""The ``algorithm`` section: the run's composition of registered components (advantage, objective,
aggregation, correction, clip rule, transforms, loss terms, KL) and the settings of the update."""

from __future__ import annotations

from typing import Literal

from pydantic import Field

from rlvr.algorithms.kl_schedules import KL_SCHEDULES
from rlvr.algorithms.registry import (ADVANTAGE_TRANSFORMS, ADVANTAGES, AGGREGATIONS, CLIP_RULES, CORRECTIONS,
                                     KL_ESTIMATORS, LOSS_TERMS, OBJECTIVES, REWARD_TRANSFORMS)
from rlvr.config.fields import Section, component, named
from rlvr.config.sections import (BeliefConfig, CriticConfig, DiscriminatorConfig, DynamicSamplingConfig,
                                  OverlongConfig)

__all__ = ["KLConfig", "AlgorithmConfig"]


class KLConfig(Section):
    estimator: named(KL_ESTIMATORS) = Field("k3", description="KL estimator against the frozen reference")
    coef: float = Field(0.0, ge=0.0, description="KL coefficient; 0 loads no reference model")
    placement: Literal["loss", "reward"] = Field(
        "loss", description="add coef x KL to the per-token loss (GRPO), or subtract coef x sum_t KL from the "
                            "reward before advantages (PPO-style)")
    schedule: component(KL_SCHEDULES, "constant") = Field({"name": "constant"}, validate_default=True,
                                                          description="how the coefficient moves over the run")


class AlgorithmConfig(Section):
    advantage: component(ADVANTAGES, "grpo") = Field({"name": "grpo"}, validate_default=True,
                                              description="advantage estimator")
    objective: component(OBJECTIVES, "ppo_clip") = Field({"name": "ppo_clip"}, validate_default=True,
                                              description="per-token policy objective")
    aggregation: component(AGGREGATIONS, "token_mean") = Field({"name": "token_mean"}, validate_default=True,
                                                  description="per-token loss -> scalar")
    correction: component(CORRECTIONS, "none") = Field({"name": "none"}, validate_default=True,
                                                        description="engine-vs-trainer importance-sampling correction")
    clip: component(CLIP_RULES, "ratio") = Field({"name": "ratio"}, validate_default=True,
                                                  description="trust region of ratio-clipping objectives")
    reward_transforms: list[component(REWARD_TRANSFORMS, None)] = Field(
        default_factory=list, description="applied in order to the scored rewards, before the advantage")
    advantage_transforms: list[component(ADVANTAGE_TRANSFORMS, None)] = Field(
        default_factory=list, description="applied in order to the advantages (weights, per-token credit)")
    loss_terms: list[component(LOSS_TERMS, None)] = Field(
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

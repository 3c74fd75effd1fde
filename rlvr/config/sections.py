"""Sections of the run config that name no registered component (so they need no registry to validate):
DAPO's dynamic sampling and overlong handling, GRPO-VPS's belief probe, the critic (value model), the search
evaluation can run (PROPA's process-reward-guided best-of-N), PRISM's discriminator."""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

from rlvr.core.paths import LocalPathStr
__all__ = ["DynamicSamplingConfig", "OverlongConfig", "BeliefConfig", "CriticConfig", "EvalSearchConfig",
           "DiscriminatorConfig"]


class _Section(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class DynamicSamplingConfig(_Section):
    """DAPO dynamic sampling: drop groups with no signal and sample more prompts until the batch is full."""

    enabled: bool = Field(False, description="drop zero-variance groups and resample")
    metric: Literal["reward", "correct"] = Field(
        "reward", description="what must vary inside a kept group: the training reward or correctness (verl's acc)")
    drop: Literal["constant", "all_correct"] = Field(
        "constant", description="which groups to drop: every constant one (DAPO), or only all-correct ones "
                               "(NGRPO's filter_groups all_correct, for advantages that learn from all-wrong groups)")
    max_rounds: int = Field(3, gt=0, description="generation rounds per step at most (the first included)")
    batch_prompts: int | None = Field(None, gt=0, description="prompts per extra round (default: prompts_per_step)")
    on_shortfall: Literal["proceed", "error"] = Field(
        "proceed", description="when rounds run out: train on the groups found, or stop (verl)")


class OverlongConfig(_Section):
    """DAPO's treatment of completions that hit the length limit."""

    filter: bool = Field(False, description="mask truncated completions out of the loss (overlong filtering)")
    soft_penalty: bool = Field(False, description="add the soft overlong punishment to the reward")
    buffer_frac: float = Field(0.2, gt=0.0, le=1.0, description="L_cache as a fraction of rollout.max_new_tokens "
                                                                 "(DAPO: 4096 of 20480 = 0.2)")
    factor: float = Field(1.0, ge=0.0, description="penalty at the limit (-factor)")


class BeliefConfig(_Section):
    """GRPO-VPS's belief probe (extras ``belief_progress`` / ``belief_segment``): after each segment of a
    completion, the mean log-probability of the gold answer following ``suffix``."""

    suffix: str = Field("\nThe final answer is ", description="text between a completion prefix and the gold "
                                                              "answer whose log-probability is the belief")
    max_segments: int = Field(16, gt=0, description="segments probed per completion at most (more are merged, "
                                                    "keeping every k-th boundary and the last)")


class CriticConfig(_Section):
    """The value model (rlvr.learners.critic): a copy of the policy's trunk with ``heads`` linear value heads,
    trained beside the policy on the returns of the advantage estimator that reads its values (``gae``)."""

    heads: int = Field(0, ge=0, description="value heads (0: no critic; 1: PPO's critic; K > 1: bootstrapped "
                                            "heads, whose spread is CDE's critic bonus)")
    lr: float = Field(1e-5, gt=0.0, description="the critic's AdamW learning rate (verl: 1e-5)")
    weight_decay: float = Field(0.0, ge=0.0, description="the critic's AdamW weight decay")
    value_clip: float | None = Field(0.5, gt=0.0, description="clip new values to old +- this in the loss (verl's "
                                                              "cliprange_value; null: no clip)")
    epochs: int = Field(1, gt=0, description="passes over each step's batch")
    minibatches: int = Field(1, gt=0, description="optimizer steps per pass")
    bootstrap: float = Field(1.0, gt=0.0, le=1.0, description="chance a completion trains each head (CDE's "
                                                              "bootstrap masks; 1: every head sees every row)")
    max_grad_norm: float | None = Field(1.0, gt=0.0, description="clip the critic's gradient norm (null: off)")
    init_std: float = Field(0.02, ge=0.0, description="std of the value heads' initial weights (bias 0)")


PRISM_FORMAT = r"\s*<caption>.*?</caption>\s*<think>.*?</think>\s*<answer>.*?</answer>\s*"


class DiscriminatorConfig(_Section):
    """PRISM's discriminator (rlvr.learners.discriminator): a copy of the policy's trunk with a perception and a
    reasoning expert, trained beside the policy to tell the demonstrations from the policy's responses."""

    enabled: bool = Field(False, description="train a discriminator (the prism advantage transform reads it)")
    demos: LocalPathStr | None = Field(None, description="JSONL of demonstrations, {id, response} per line, matched to "
                                                "examples by id (null: each example's reference target)")
    format: str | None = Field(PRISM_FORMAT, description="regex a well-formed response matches in full (DOTALL; "
                                                         "null: every response is well-formed)")
    perception_tag: str | None = Field("caption", description="the tag whose block (through its closing tag) is "
                                                              "the perception span; the rest is the reasoning "
                                                              "span (null: no perception expert, all reasoning)")
    reasoning_reads_perception: bool = Field(False, description="the reasoning expert reads the perception span "
                                             "before the reasoning span, so it can judge the answer against the "
                                             "caption (not in the reference, where it reads the reasoning alone)")
    lr: float = Field(1e-6, gt=0.0, description="the discriminator's AdamW learning rate (official: 1e-6)")
    score_clip: float | None = Field(10.0, gt=0.0, description="clamp scores to +-this (null: off)")
    score_reg: float = Field(0.001, ge=0.0, description="coefficient of the mean squared score in its loss")
    max_grad_norm: float | None = Field(1.0, gt=0.0, description="clip its gradient norm (null: off)")
    init_std: float = Field(0.02, ge=0.0, description="std of the expert heads' initial weights (bias 0)")


class EvalSearchConfig(_Section):
    """How evaluation generates (``rlvr eval --search``): plain sampling, or PROPA's step-level best-of-N guided by
    a process reward model (rlvr.eval.prm_search)."""

    name: Literal["none", "prm"] = Field("none", description="none: plain sampling; prm: keep, at every step, the "
                                                             "candidate the process reward model scores highest")
    prm: LocalPathStr | None = Field(None, description="a checkpoint (or run directory) holding prm/ (default: the "
                                              "evaluated checkpoint's, when it has one)")
    candidates: int = Field(4, gt=0, description="next steps sampled per step")
    max_steps: int = Field(10, gt=0, description="steps before a search stops")
    step_tokens: int = Field(256, gt=0, description="most tokens in one step")
    delimiter: str = Field("\n", min_length=1, description="the text that ends a step")
    terminal: str = Field("the final answer is", description="a kept step containing it ends the search (EOS does too)")

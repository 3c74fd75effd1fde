"""The ``train`` section of the run config (steps, micro-batches, precision, threads, distributed training) and
the ``sft`` section (the supervised warm-up, interleaved SFT, SSB).

Kept apart from :mod:`rlvr.config.run` (which validates components against every registry) because it names
no component.
"""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator

__all__ = ["TrainConfig", "DistributedConfig", "SFTConfig", "SSBConfig"]


class _Section(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class DistributedConfig(_Section):
    """Data-parallel training under torchrun (``rlvr train --nproc N``); ignored in a one-process run."""

    strategy: Literal["ddp", "fsdp"] = Field("ddp", description="ddp: every rank holds the whole model; fsdp: "
                                             "FSDP2 shards weights, gradients and optimizer state over the ranks")
    backend: Literal["auto", "gloo", "nccl"] = Field("auto", description="auto: nccl on CUDA, gloo on CPU")
    timeout_s: float = Field(1800.0, gt=0, description="seconds a rank waits in a collective before failing")
    mixed_precision: Literal["bfloat16", "float16"] | None = Field(
        None, description="fsdp: all-gather and compute the parameters in this dtype, reduce gradients in float32, "
                          "keep the sharded parameters and optimizer state in model.dtype (null: off)")
    cpu_offload: bool = Field(False, description="fsdp: keep the sharded parameters, gradients and optimizer state in "
                                                 "host memory between uses (GPU runs; the optimizer steps on the CPU)")

    @model_validator(mode="after")
    def _fsdp_only(self) -> "DistributedConfig":
        if self.strategy != "fsdp" and (self.mixed_precision or self.cpu_offload):
            raise ValueError("train.distributed.mixed_precision and cpu_offload are FSDP2 policies: set "
                             "train.distributed.strategy=fsdp")
        return self


class TrainConfig(_Section):
    steps: int = Field(1000, ge=0, description="RL steps (each: rollout, score, update)")
    micro_batch_size: int = Field(8, gt=0, description="completions per forward/backward")
    eval_every: int = Field(100, ge=0, description="held-out eval every K steps (0: only before and after)")
    checkpoint_every: int = Field(50, ge=0, description="checkpoint every K steps (0: not by steps)")
    checkpoint_minutes: float | None = Field(10.0, gt=0, description="also checkpoint when this many minutes have "
                                             "passed since the last checkpoint (RL steps and SFT warm-up steps; "
                                             "null: not by time)")
    keep_checkpoints: int = Field(2, gt=0, description="most recent checkpoints kept")
    threads: int | None = Field(None, gt=0, description="torch CPU threads (null: auto, see docs/cpu-threads.md)")
    micro_batch_tokens: int | None = Field(None, gt=0, description="padded tokens per micro-batch at most, "
                                           "beside micro_batch_size (null: rows only)")
    autocast: Literal["bfloat16", "float16"] | None = Field(None, description="forwards under torch.autocast; "
                                                             "weights and optimizer stay in model.dtype")
    activation_checkpointing: bool = Field(False, description="recompute decoder layers in backward")
    shared_prefix: bool = Field(True, description="log-prob passes and the update run each group's prompt through "
                                "the model once, not once per completion, where that saves tokens (Llama / Qwen / "
                                "Mistral families; rlvr.models.shared_prefix)")
    distributed: DistributedConfig = Field(default_factory=DistributedConfig)


SSB_TEMPLATE = (
    "We have two sample responses from students for a problem for you to observe. One of the responses is "
    "correct and the other is incorrect. Only the final answer was checked by an automatic evaluator. The "
    "following is the problem:\n---\n{question}\n---\n\nThis is the correct response from a student:\n---\n"
    "{correct}\n---\n\nThis is an attempt by another student which was labelled as incorrect by auto-evaluator:"
    "\n---\n{incorrect}\n---\n\nWrite a coherent, step-by-step derivation of the solution. Do not skip any "
    "step in your response and make it as detailed as possible. This should be a standalone solution of the "
    "given problem since this solution will be used by the students for studying and learning. Make the "
    "solution robust by cautioning about potential errors or wrong chain of reasoning. However, do not mention "
    "in your response that you were provided attempted responses by the students. There should not be a "
    "slightest mention or hint that you are actually refining from correct or incorrect responses written by "
    "students.\n\nConclude the entire response with the final answer at the very end. Make sure your final "
    "answer exactly matches the final answer in the given correct response of the student.\n")


class SSBConfig(_Section):
    """Semantic soft bootstrapping (``sft.method: ssb``, rlvr.sft.ssb): the warm-up distils the model's own
    robust, hinted solutions into the bare question."""

    rollouts: int = Field(4, ge=2, description="K: attempts per problem (num_trials)")
    temperature: float = Field(0.8, gt=0.0, description="the attempts' sampling temperature")
    teacher_temperature: float = Field(0.4, gt=0.0, description="the robust solution's sampling temperature")
    kd_temperature: float = Field(2.0, gt=0.0, description="T of the KD loss T^2 KL(softmax(z_t/T) || softmax(z_s/T))")
    kd_weight: float = Field(1.0, ge=0.0, description="lambda_KD")
    ce_weight: float = Field(0.0, ge=0.0, description="lambda_CE: cross-entropy on the solution tokens")
    max_problems: int | None = Field(None, gt=0, description="curate from the first N training problems (null: all)")
    max_new_tokens: int | None = Field(None, gt=0, description="attempt and solution length (null: "
                                                               "rollout.max_new_tokens)")
    template: str = Field(SSB_TEMPLATE, description="the teacher's prompt ({question}, {correct}, {incorrect})")


class SFTConfig(_Section):
    steps: int = Field(0, ge=0, description="supervised warm-up steps before RL (0: none)")
    batch_size: int = Field(64, gt=0, description="examples per SFT step")
    lr: float = Field(1e-5, gt=0.0, description="SFT peak learning rate (cosine decay)")
    warmup_steps: int = Field(20, ge=0, description="SFT linear warm-up steps")
    checkpoint_every: int = Field(0, ge=0, description="checkpoint the warm-up every K SFT steps into RUN_DIR/warmup "
                                                       "(0: by train.checkpoint_minutes, on a stop and at its end)")
    method: Literal["targets", "ssb"] = Field("targets", description="the warm-up: cross-entropy on the reference "
                                                                     "completions, or SSB's self-distillation")
    ssb: SSBConfig = Field(default_factory=SSBConfig, description="SSB's curation and distillation (method ssb)")
    interleave_every: int = Field(0, ge=0, description="interleaved SFT: after every N-th RL step, interleave_steps "
                                                       "SFT steps on the reference completions (0: off)")
    interleave_steps: int = Field(10, gt=0, description="SFT steps per interleaved phase")
    interleave_lr: float | None = Field(None, gt=0.0, description="interleaved phases' constant lr (null: optim.lr, "
                                                                      "the RL phase's)")
    interleave_source: Literal["task", "rollouts"] = Field(
        "task", description="interleaved phases train on the task's reference completions, or on the rows the "
                            "rollout strategy collected since the last phase (PROPA's successful and corrected paths)")
    under_contexts: bool = Field(False, description="the warm-up also trains on every example under each of its "
                                                    "rollout.contexts prompts (MEML-GRPO's expert fine-tuning)")
    seed: int | None = Field(None, description="seed of the start: the built-in tiny model's initial weights and "
                                               "the warm-up's data order (null: the run's seed). Give every run the "
                                               "same one so all methods and seeds start from the same weights")
    cache: bool | str = Field(False, description="keep the finished warm-up as a shared start, keyed by everything "
                                                 "that decides it, and reuse it instead of training again (true: "
                                                 "$RLVR_CACHE or ~/.cache/rlvr, under starts/; a string: that "
                                                 "directory; docs/shared-start.md)")

    @model_validator(mode="after")
    def _check_cache(self) -> "SFTConfig":
        if self.cache is not False and not self.steps:
            raise ValueError("sft.cache keeps a finished warm-up, and sft.steps is 0 (no warm-up): set sft.steps or "
                             "sft.cache: false")
        if isinstance(self.cache, str) and not self.cache.strip():
            raise ValueError("sft.cache: give a directory, true (the default cache) or false")
        return self

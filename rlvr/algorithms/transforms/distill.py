"""On-policy distillation: the per-token reverse KL to a teacher model, as an advantage.

The student samples; a teacher (a local model directory with the student's tokenizer) scores every sampled
token; each token's advantage gains the negative of the per-token reverse-KL estimate on the student's own
sample (Agarwal et al. 2024, "On-Policy Distillation of Language Models: Learning from Self-Generated
Mistakes" (GKD), arXiv:2306.13649; the per-token reverse-KL advantage of Thinking Machines' "On-Policy
Distillation" and tinker-cookbook; TRL's GKDTrainer with lambda 1 and beta 1 is the same objective):

    A_{i,t} <- A_{i,t} + coef * ( log pi_T(o_t | x, o_<t) - log pi_old(o_t | x, o_<t) )       (masked)

log pi_old is the student's log-prob of its sample (``old_logp``), log pi_T the teacher's (``teacher_model_logp``,
:mod:`rlvr.passes.teacher_model`). Its expectation under the student is -KL(pi_old || pi_T) per token, so the
policy gradient minimises the reverse KL (mode-seeking: the student drops what the teacher finds unlikely).
It adds to any advantage estimator, so it composes with verifiable rewards (``coef`` weighs the two) and with
every objective; with the task's rewards constant (or ``advantage: {name: fixed_baseline, baseline: 0}`` and a
reward of 0) it is pure distillation. A teacher equal to the student gives exactly zero signal.

EXACT for the reverse-KL advantage; the generalised (JSD / forward-KL) variants need the teacher's whole
next-token distribution and are not implemented. Cost: one teacher forward over prompt + completion per step
(the teacher is held on the trainer's device, frozen).
"""

from __future__ import annotations

from pydantic import Field

from rlvr.algorithms.registry import ADVANTAGE_TRANSFORMS, TransformInputs, TransformOutput
from rlvr.core.paths import LocalPathStr
from rlvr.lazy import torch
from rlvr.registry import Params

__all__ = ["DistillParams", "distill"]


class DistillParams(Params):
    teacher: LocalPathStr = Field(..., description="the teacher: a local model directory sharing the student's "
                                                   "tokenizer")
    coef: float = Field(1.0, ge=0.0, description="weight of the reverse-KL advantage beside the task's")


def _check(run_cfg, p: DistillParams) -> list[str]:
    from pathlib import Path

    if not (Path(p.teacher) / "config.json").is_file():
        return [f"teacher {p.teacher}: not a model directory (no config.json)"]
    return []


@ADVANTAGE_TRANSFORMS.register("distill", DistillParams, needs=("teacher_model_logp", "old_logp"), check=_check)
def distill(inp: TransformInputs, p: DistillParams) -> TransformOutput:
    """On-policy distillation: A += coef (teacher log-prob - student log-prob) per sampled token."""
    diff = (inp.extras["teacher_model_logp"].to(torch.float64) - inp.extras["old_logp"].to(torch.float64))
    diff = diff * inp.mask
    adv = inp.advantages.to(torch.float64) + p.coef * diff
    n = inp.mask.sum().clamp(min=1)
    return adv, {"reverse_kl": float(-diff.sum() / n)}

"""CEPO (contrastive teacher credit) and RLSD (teacher vs student credit): per-token advantage weights.

Heakl et al. 2026, "CEPO: RLVR Self-Distillation using Contrastive Evidence Policy Optimization",
arXiv:2605.19436; code ``ahmedheakl/CEPO`` (``apply_cepo_weighting``, ``_build_cepo_teacher_batch``; EXACT,
code). The same model is a positive teacher
(prompt + the gold answer, extra ``teacher_logp``) and a negative teacher (prompt + the worst rejected
completion of the group, extra ``neg_teacher_logp``; the gold answer again when the group has none, so the
weight is 1 and the update is plain GRPO). A token is decisive if the gold answer makes it likelier and the
wrong one less likely:

    delta_t = sg[ log P_T+(o_t | x, r+, o_<t) - log P_T-(o_t | x, r-, o_<t) ]          [N, T]
    w_t     = exp( sign(A_i) * delta_t )           sign(A_i) = sign(sum_t M A_{i,t}), the row's sign as in the code
    A_{i,t} <- A_{i,t} * [ (1 - lam) + lam * clip(w_t, 1 - eps_w, 1 + eps_w) ]
    lam     = lam0 * max(0, 1 - step / warmup)   (schedule ``linear``)   or   lam0   (``constant``)

``step`` is the RL step from 0 (the reference uses lam0 at its first step and decays after each step, the
same sequence), so the schedule is a pure function of the step and a resumed run continues it. Defaults are
the paper's script (``experiments/geo/cepo.sh``: lam0 0.5, 25 steps, eps_w 0.2); the code's config defaults
are lam0 1.0, warmup 100. As in the reference, once lambda is 0 the transform (then exactly the identity)
and its teacher passes are skipped.
RLSD (arXiv:2604.03128, the method CEPO extends) is the same weight with the student in place of the
negative teacher: ``delta_t = teacher_logp - old_logp`` (transform ``rlsd``).
Cost: one extra policy forward per teacher (CEPO 2, RLSD 1 + the old log-probs) over prompt + hint + completion.
"""

from __future__ import annotations

from typing import Literal

from pydantic import Field

from rlvr.algorithms.registry import ADVANTAGE_TRANSFORMS, TransformInputs, TransformOutput
from rlvr.lazy import torch
from rlvr.registry import Params

__all__ = ["TeacherCreditParams", "cepo", "rlsd", "teacher_weight", "lambda_at"]


class TeacherCreditParams(Params):
    lam0: float = Field(0.5, ge=0.0, le=1.0, description="initial mixing weight lambda of the token weight")
    schedule: Literal["linear", "constant"] = Field("linear", description="lambda decays linearly to 0 over "
                                                                          "`warmup` steps, or stays lam0")
    warmup: int = Field(25, gt=0, description="steps over which a linear lambda reaches 0")
    eps_w: float = Field(0.2, ge=0.0, lt=1.0, description="the weight is clipped to [1 - eps_w, 1 + eps_w]")


def lambda_at(p: TeacherCreditParams, step: int) -> float:
    return p.lam0 * max(0.0, 1.0 - step / p.warmup) if p.schedule == "linear" else p.lam0


def teacher_weight(sign: torch.Tensor, delta: torch.Tensor, lam: float, eps_w: float) -> torch.Tensor:
    """``(1 - lam) + lam * clip(exp(sign * delta), 1 - eps_w, 1 + eps_w)``, elementwise (broadcasting)."""
    w = torch.exp(sign * delta).clamp(1.0 - eps_w, 1.0 + eps_w)
    return (1.0 - lam) + lam * w


def _apply(inp: TransformInputs, delta: torch.Tensor, p: TeacherCreditParams) -> TransformOutput:
    lam = lambda_at(p, inp.step)
    adv = inp.advantages.to(torch.float64)
    mask = inp.mask
    sign = torch.sign((adv * mask).sum(-1, keepdim=True))
    weight = teacher_weight(sign, delta.to(torch.float64), lam, p.eps_w)
    n = mask.sum().clamp(min=1)
    return (adv * weight * mask).to(inp.advantages.dtype), {
        "lambda": lam,
        "weight_mean": float((weight * mask).sum() / n),
        "delta_mean": float((delta * mask).sum() / n),
    }


def _lambda_positive(p: TeacherCreditParams, step: int) -> bool:
    """At lambda 0 the weight is exactly 1: the transform and its teacher passes are skipped."""
    return lambda_at(p, step) > 0.0


@ADVANTAGE_TRANSFORMS.register("cepo", TeacherCreditParams, needs=("teacher_logp", "neg_teacher_logp"),
                               active=_lambda_positive)
def cepo(inp: TransformInputs, p: TeacherCreditParams) -> TransformOutput:
    """CEPO: weight each token by the positive-vs-negative teacher log-prob contrast."""
    return _apply(inp, inp.extras["teacher_logp"] - inp.extras["neg_teacher_logp"], p)


@ADVANTAGE_TRANSFORMS.register("rlsd", TeacherCreditParams, needs=("teacher_logp", "old_logp"),
                               active=_lambda_positive)
def rlsd(inp: TransformInputs, p: TeacherCreditParams) -> TransformOutput:
    """RLSD: weight each token by the teacher-vs-student log-prob difference."""
    return _apply(inp, inp.extras["teacher_logp"] - inp.extras["old_logp"], p)

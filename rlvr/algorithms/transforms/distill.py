"""On-policy distillation: a per-token divergence to a teacher model, as an advantage.

The student samples; a teacher (a local model directory with the student's tokenizer) scores every sampled
token; each token's advantage gains a term whose policy gradient, in expectation over the student's samples,
is the negative gradient of a divergence between the student's and the teacher's next-token distributions at
that position (Agarwal et al. 2024, "On-Policy Distillation of Language Models: Learning from Self-Generated
Mistakes" (GKD), arXiv:2306.13649; the per-token reverse-KL advantage of Thinking Machines' "On-Policy
Distillation" and tinker-cookbook; TRL's GKDTrainer's generalised JSD). With l = log pi_old(o_t | x, o_<t) (the
student's log-prob of its sample, ``old_logp``) and l_T the teacher's (``teacher_model_logp``,
:mod:`rlvr.passes.teacher_model`):

    reverse_kl   A_t += coef * (l_T - l)                                  KL(S || T): mode-seeking (default)
    forward_kl   A_t += coef * (min(exp(l_T - l), max_ratio) - 1)         KL(T || S): mass-covering
    jsd          A_t += coef * (1 - beta) * log(M / S) = coef * (1 - beta) * log(1 + beta (e^(l_T - l) - 1))
                 JSD_beta = beta KL(T || M) + (1 - beta) KL(S || M),  M = (1 - beta) S + beta T   (TRL's beta:
                 its limits are the two KLs, which TRL takes at beta = 1 and 0; so does ``jsd`` here)

Each is exact for its divergence at a position, from the sampled token alone: summed over the vocabulary,
``sum_v S_v A_v grad log S_v`` equals ``-grad D(S, T)`` (for the forward KL, ``sum_v (T_v - S_v) grad log S_v``;
for the JSD, ``(1 - beta) sum_v grad S_v log(S_v / M_v)``: the mixture's own terms cancel), which the tests check
against the full-vocabulary divergences TRL computes. Like every per-token distillation advantage (tinker-cookbook,
GKD), a position's term is not carried to the tokens before it. The forward KL's importance ratio is capped at
``max_ratio`` (a token the student finds far less likely than the teacher otherwise weighs without bound; the
cap makes it biased; ``null`` removes it). The term adds to any advantage estimator, so it composes with
verifiable rewards (``coef`` weighs the two) and with every objective; with the task's rewards constant (or
``advantage: {name: fixed_baseline, baseline: 0}`` and a reward of 0) it is pure distillation. A teacher equal to
the student gives exactly zero signal under each divergence. Cost: one teacher forward over prompt + completion
per step (the teacher is held on the trainer's device, frozen).
"""

from __future__ import annotations

from typing import Literal

from pydantic import Field

from rlvr.algorithms.registry import ADVANTAGE_TRANSFORMS, TransformInputs, TransformOutput
from rlvr.core.paths import LocalPathStr
from rlvr.lazy import torch
from rlvr.registry import Params

__all__ = ["DistillParams", "distill"]


class DistillParams(Params):
    teacher: LocalPathStr = Field(..., description="the teacher: a local model directory sharing the student's "
                                                   "tokenizer")
    coef: float = Field(1.0, ge=0.0, description="weight of the distillation advantage beside the task's")
    divergence: Literal["reverse_kl", "forward_kl", "jsd"] = Field(
        "reverse_kl", description="reverse_kl KL(S||T), forward_kl KL(T||S), or jsd (TRL's generalised JSD, beta)")
    beta: float = Field(0.5, ge=0.0, le=1.0, description="jsd: the teacher's share of the mixture (0: forward KL, "
                                                          "1: reverse KL, as in TRL)")
    max_ratio: float | None = Field(10.0, gt=1.0, description="forward_kl: cap of the importance ratio "
                                                             "exp(l_T - l) (null: none)")


def _check(run_cfg, p: DistillParams) -> list[str]:
    from pathlib import Path

    if not (Path(p.teacher) / "config.json").is_file():
        return [f"teacher {p.teacher}: not a model directory (no config.json)"]
    return []


def token_terms(logp: torch.Tensor, teacher: torch.Tensor, p: DistillParams) -> tuple[torch.Tensor, torch.Tensor]:
    """``(advantage term, divergence estimate)`` per token, from the student's and the teacher's log-probs of the
    sampled tokens (float64)."""
    gap = teacher - logp  # l_T - l
    kind, beta = p.divergence, p.beta
    if kind == "jsd" and beta in (0.0, 1.0):  # TRL's limits: the KL itself
        kind = "forward_kl" if beta == 0.0 else "reverse_kl"
    if kind == "reverse_kl":
        return gap, -gap  # E_S[l - l_T] = KL(S || T)
    if kind == "forward_kl":
        ratio = gap.exp()
        capped = ratio if p.max_ratio is None else ratio.clamp(max=p.max_ratio)
        return capped - 1.0, ratio * gap  # E_S[r (l_T - l)] = KL(T || S)
    up = torch.log1p(beta * torch.expm1(gap))  # log M - l at the sampled token (exactly 0 when l_T = l)
    # E_S[(1 - b) (l - log M) + b r (l_T - log M)] = JSD_b, r = exp(l_T - l)
    return (1.0 - beta) * up, -(1.0 - beta) * up + beta * gap.exp() * (gap - up)


@ADVANTAGE_TRANSFORMS.register("distill", DistillParams, needs=("teacher_model_logp", "old_logp"), check=_check)
def distill(inp: TransformInputs, p: DistillParams) -> TransformOutput:
    """On-policy distillation: A += coef x the per-token divergence term (reverse KL, forward KL or JSD)."""
    term, div = token_terms(inp.extras["old_logp"].to(torch.float64),
                            inp.extras["teacher_model_logp"].to(torch.float64), p)
    adv = inp.advantages.to(torch.float64) + p.coef * term * inp.mask
    n = inp.mask.sum().clamp(min=1)
    return adv, {p.divergence: float((div * inp.mask).sum() / n)}

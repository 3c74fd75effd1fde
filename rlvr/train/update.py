"""The policy update: mu passes x minibatches x micro-batches over one rollout batch.

The aggregation's coefficients are computed from each whole minibatch before its first micro-batch, so
gradient accumulation gives the same gradient as one big micro-batch. Old log-probs are recomputed
only when the policy changes between optimizer steps of one batch (``epochs x minibatches > 1``);
otherwise the ratio is exactly 1 and ``old_logp = logp.detach()``.
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass, replace

import torch

from rlvr.algorithms.registry import (AGGREGATIONS, CORRECTIONS, KL_ESTIMATORS, OBJECTIVES, AggregationInputs,
                                     CorrectionInputs, ObjectiveInputs, aggregate)
from rlvr.config import AlgorithmConfig
from rlvr.core.batch import RolloutBatch
from rlvr.models.logprobs import completion_logprobs

__all__ = ["NonFiniteError", "UpdateSettings", "needs_old_logp", "batch_logprobs", "update_policy"]


class NonFiniteError(RuntimeError):
    """The loss or gradient became NaN/inf; the optimizer step was not taken."""


@dataclass(frozen=True)
class UpdateSettings:
    algorithm: AlgorithmConfig
    micro_batch_size: int
    temperature: float
    chunk_tokens: int
    max_grad_norm: float | None
    kl_coef: float = 0.0  # this step's coefficient of the KL term in the loss (0 when KL sits in the reward)
    max_new_tokens: int | None = None  # default constant normaliser for aggregations that need one


def needs_old_logp(alg: AlgorithmConfig) -> bool:
    return alg.epochs * alg.minibatches > 1


@torch.no_grad()
def batch_logprobs(model, batch: RolloutBatch, s: UpdateSettings) -> torch.Tensor:
    """Log-probs ``[N, T]`` of the whole batch under ``model``, micro-batch by micro-batch, no grad."""
    out = torch.zeros_like(batch.completion_mask)
    for start in range(0, batch.size, s.micro_batch_size):
        idx = torch.arange(start, min(start + s.micro_batch_size, batch.size))
        micro = batch.select(idx).trim()
        lp, _ = completion_logprobs(model, micro, s.temperature, s.chunk_tokens)
        out[idx, : lp.shape[1]] = lp.float()
    return out


class _Meter:
    """Sums of masked per-token metrics and per-step scalars across micro-batches."""

    def __init__(self):
        self.tok_sum, self.tok_n = defaultdict(float), defaultdict(float)
        self.scalars = defaultdict(list)

    def tokens(self, name: str, values: torch.Tensor, mask: torch.Tensor) -> None:
        self.tok_sum[name] += float((values.detach().float() * mask).sum())
        self.tok_n[name] += float(mask.sum())

    def result(self) -> dict[str, float]:
        out = {k: self.tok_sum[k] / max(self.tok_n[k], 1.0) for k in self.tok_sum}
        out.update({k: sum(v) / len(v) for k, v in self.scalars.items() if v})
        return out


def _micro_loss(model, micro: RolloutBatch, s: UpdateSettings, meter: _Meter) -> torch.Tensor:
    alg = s.algorithm
    logp, entropy = completion_logprobs(model, micro, s.temperature, s.chunk_tokens, with_entropy=True)
    mask = micro.completion_mask
    old = micro.old_logp if micro.old_logp is not None else logp.detach()
    obj = OBJECTIVES.get(alg.objective.name).fn
    inputs = ObjectiveInputs(logp, old, micro.advantages, mask, micro.behaviour_logp, entropy)
    loss_tok, metrics = obj(inputs, alg.objective.params)
    if micro.behaviour_logp is not None:
        corr = CORRECTIONS.get(alg.correction.name).fn(CorrectionInputs(old, micro.behaviour_logp, mask),
                                                        alg.correction.params)
        loss_tok = loss_tok * corr[0].detach()
        metrics = {**metrics, **{f"is/{k}": v for k, v in corr[1].items()}}
    if micro.ref_logp is not None:
        kl = KL_ESTIMATORS.get(alg.kl.estimator).fn(logp, micro.ref_logp)
        meter.tokens("kl", kl, mask)
        if s.kl_coef > 0:
            loss_tok = loss_tok + s.kl_coef * kl
    loss = aggregate(micro.loss_coef, loss_tok, mask)
    meter.tokens("entropy", entropy, mask)
    if micro.old_logp is not None:  # how far this step's updates moved the policy (a metric, no gradient)
        meter.tokens("kl_old", KL_ESTIMATORS.get("k3").fn(logp.detach(), micro.old_logp), mask)
    for name, v in metrics.items():
        meter.tokens(name, v, mask)
    if micro.behaviour_logp is not None:  # engine vs trainer log-prob mismatch, reported always
        meter.tokens("logp_mismatch", (logp.detach() - micro.behaviour_logp).abs(), mask)
    return loss


def update_policy(model, optimizer, scheduler, batch: RolloutBatch, s: UpdateSettings,
                  generator: torch.Generator | None = None) -> dict[str, float]:
    """Run ``epochs x minibatches`` optimizer steps on ``batch``; return averaged metrics."""
    alg = s.algorithm
    params = [p for p in model.parameters() if p.requires_grad]
    meter = _Meter()
    model.train()
    for _ in range(alg.epochs):
        shuffle = generator if alg.minibatches > 1 else None
        for mb in batch.minibatches(alg.minibatches, shuffle):
            mb = with_loss_coef(mb, alg, s.max_new_tokens)
            optimizer.zero_grad(set_to_none=True)
            total = 0.0
            for micro in mb.micro_batches(s.micro_batch_size):
                loss = _micro_loss(model, micro, s, meter)
                loss.backward()
                total += float(loss.detach())
            if not torch.isfinite(torch.tensor(total)):
                raise NonFiniteError(f"loss is {total}; the optimizer step was not taken")
            norm = torch.nn.utils.clip_grad_norm_(params, s.max_grad_norm or float("inf"))
            if not torch.isfinite(norm):
                raise NonFiniteError(f"gradient norm is {float(norm)}; the optimizer step was not taken")
            optimizer.step()
            scheduler.step()
            meter.scalars["loss"].append(total)
            meter.scalars["grad_norm"].append(float(norm))
    out = meter.result()
    out["lr"] = scheduler.get_last_lr()[0]
    return out


def with_loss_coef(mb: RolloutBatch, alg: AlgorithmConfig, max_new_tokens: int | None = None) -> RolloutBatch:
    """Attach the aggregation's coefficients, computed over the whole minibatch, as ``[N, T]``."""
    agg = AGGREGATIONS.get(alg.aggregation.name)
    inp = AggregationInputs(mb.completion_mask, mb.group_index, mb.advantages, max_new_tokens)
    coef = agg.fn(inp, alg.aggregation.params)
    coef = coef.to(mb.completion_mask.device, torch.float32)
    if coef.dim() == 1:
        coef = coef[:, None].expand_as(mb.completion_mask)
    return replace(mb, loss_coef=coef.contiguous())

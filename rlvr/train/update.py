"""The policy update: mu passes x minibatches x micro-batches over one rollout batch.

The aggregation's coefficients are computed from each whole minibatch before its first micro-batch, so
gradient accumulation gives the same gradient as one big micro-batch. Old log-probs are recomputed
only when the policy changes between optimizer steps of one batch (``epochs x minibatches > 1``);
otherwise the ratio is exactly 1 and ``old_logp = logp.detach()``.
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass, replace
from typing import Any

import torch

from rlvr.algorithms.loss_terms.base import term_weight
from rlvr.algorithms.registry import (AGGREGATIONS, CLIP_RULES, CORRECTIONS, KL_ESTIMATORS, LOSS_TERMS, OBJECTIVES,
                                     SIDE_ROW_TRAITS,
                                     AggregationInputs, CorrectionInputs, ObjectiveInputs, aggregate, call,
                                     loss_term_shape, objective_loss_shape, row_coefficients)
from rlvr.config.run import AlgorithmConfig, algorithm_traits, length_limits
from rlvr.core.batch import RolloutBatch, SideRows
from rlvr.models.logprobs import CompletionLogprobs, autocast_to
from rlvr.distributed.world import World
from rlvr.distributed.fsdp import local_value

__all__ = ["NonFiniteError", "UpdateSettings", "needs_old_logp", "update_policy"]


class NonFiniteError(RuntimeError):
    """The loss or gradient became NaN/inf; the optimizer step was not taken."""


@dataclass(frozen=True, kw_only=True)
class UpdateSettings:
    """What the update and the extra passes read of the config, derived once per run (:meth:`from_config`), and
    the step's own values (:meth:`at_step`)."""

    algorithm: AlgorithmConfig
    micro_batch_size: int
    temperature: float  # the trainer's: algorithm.train_temperature, else the rollout's
    chunk_tokens: int
    max_grad_norm: float | None
    max_new_tokens: int | None = None  # default constant normaliser for aggregations that need one
    total_steps: int = 1
    traits: frozenset[str] = frozenset()  # rlvr.config.run.algorithm_traits of the run
    micro_batch_tokens: int | None = None  # padded tokens per micro-batch at most (beside the row count)
    autocast: str | None = None  # "bfloat16": forwards under torch.autocast (fp32 master weights)
    activation_checkpointing: bool = False
    kl_in_loss: bool = True  # algorithm.kl.placement is "loss" (else the KL sits in the reward)
    # the step's own
    step: int = 0  # the RL step (for components with schedules)
    kl_coef: float = 0.0  # this step's coefficient of the KL term in the loss (0 when KL sits in the reward)
    objective_state: Any = None  # the objective's explicit state, when it keeps one

    @classmethod
    def from_config(cls, cfg: Any) -> "UpdateSettings":
        """The run's settings (every field but the step's own)."""
        return cls(algorithm=cfg.algorithm, micro_batch_size=cfg.train.micro_batch_size,
                   temperature=cfg.algorithm.train_temperature or cfg.rollout.temperature,  # (null: the rollout's)
                   chunk_tokens=cfg.model.logprob_chunk_tokens, max_grad_norm=cfg.optim.max_grad_norm,
                   max_new_tokens=length_limits(cfg).completion, total_steps=max(cfg.train.steps, 1),
                   traits=algorithm_traits(cfg), micro_batch_tokens=cfg.train.micro_batch_tokens,
                   autocast=cfg.train.autocast, activation_checkpointing=cfg.train.activation_checkpointing,
                   kl_in_loss=cfg.algorithm.kl.placement == "loss")

    def at_step(self, step: int, kl_coef: float, objective_state: Any = None) -> "UpdateSettings":
        """These settings at ``step``, with its KL coefficient (in the loss only when the KL sits there)."""
        return replace(self, step=step, kl_coef=kl_coef if self.kl_in_loss else 0.0, objective_state=objective_state)

    @property
    def whole_groups(self) -> bool:
        return "whole_groups" in self.traits


def needs_old_logp(alg: AlgorithmConfig) -> bool:
    return alg.epochs * alg.minibatches > 1


class _Meter:
    """Sums of masked per-token metrics and per-step scalars across micro-batches."""

    def __init__(self):
        self.tok_sum, self.tok_n = defaultdict(float), defaultdict(float)
        self.scalars = defaultdict(list)

    def tokens(self, name: str, values: torch.Tensor, mask: torch.Tensor) -> None:
        self.tok_sum[name] += float((values.detach().float() * mask).sum())
        self.tok_n[name] += float(mask.sum())

    def merge(self, world: World) -> None:
        """Sum every rank's sums (distributed runs), so metrics cover the whole batch."""
        if not world.distributed:
            return
        parts = world.gather((dict(self.tok_sum), dict(self.tok_n)))
        self.tok_sum, self.tok_n = defaultdict(float), defaultdict(float)
        for sums, counts in parts:
            for k, v in sums.items():
                self.tok_sum[k] += v
            for k, v in counts.items():
                self.tok_n[k] += v

    def result(self) -> dict[str, float]:
        out = {k: self.tok_sum[k] / max(self.tok_n[k], 1.0) for k in self.tok_sum}
        out.update({k: sum(v) / len(v) for k, v in self.scalars.items() if v})
        return out


def _clip_rule(alg: AlgorithmConfig):
    entry = CLIP_RULES.get(alg.clip.name)
    return lambda inputs: entry.fn(inputs, alg.clip.params)


def _micro_loss(module, micro: RolloutBatch, s: UpdateSettings, meter: _Meter, n_rows: int,
                n_groups: int, minibatch: AggregationInputs | None = None) -> torch.Tensor:
    alg = s.algorithm
    side = _side_rows(micro, s)
    out = module(micro, s.temperature, s.chunk_tokens, with_entropy=True,
                 **({"also": tuple(sd.rows for sd in side)} if side else {}))
    logp, entropy = out[0], out[1]
    side_logp = list(out[2]) if side else []
    mask = micro.completion_mask
    old = micro.old_logp if micro.old_logp is not None else logp.detach()
    inputs = ObjectiveInputs(logp, old, micro.advantages, mask, micro.behaviour_logp, entropy,
                             rewards=micro.rewards, group_index=micro.group_index, ref_logp=micro.ref_logp,
                             extras=micro.extras, clip=_clip_rule(alg), n_rows=n_rows, n_groups=n_groups,
                             step=s.step, total_steps=s.total_steps, minibatch=minibatch)
    objective = OBJECTIVES.get(alg.objective.name)
    loss_tok, metrics = call(objective, inputs, alg.objective.params, s.objective_state)
    if objective_loss_shape(objective, loss_tok, mask):  # it reduced its loss itself (its minibatch share)
        loss = loss_tok
        loss_tok = torch.zeros_like(logp)
    else:
        loss = None
    if micro.behaviour_logp is not None and loss is None:
        corr = CORRECTIONS.get(alg.correction.name).fn(CorrectionInputs(old, micro.behaviour_logp, mask),
                                                        alg.correction.params)
        loss_tok = loss_tok * corr[0].detach()
        metrics = {**metrics, **{f"is/{k}": v for k, v in corr[1].items()}}
    if micro.ref_logp is not None:
        kl = KL_ESTIMATORS.get(alg.kl.estimator).fn(logp, micro.ref_logp)
        meter.tokens("kl", kl, mask)
        if s.kl_coef > 0:
            loss_tok = loss_tok + s.kl_coef * kl
    terms_tok, terms_loss = _loss_terms(side, side_logp, micro, inputs, s, meter)
    loss_tok = loss_tok + terms_tok
    loss = aggregate(micro.loss_coef, loss_tok, mask) + (loss if loss is not None else 0.0) + terms_loss
    meter.tokens("entropy", entropy, mask)
    if micro.old_logp is not None:  # how far this step's updates moved the policy (a metric, no gradient)
        meter.tokens("kl_old", KL_ESTIMATORS.get("k3").fn(logp.detach(), micro.old_logp), mask)
    for name, v in metrics.items():
        meter.tokens(name, v, mask)
    if micro.behaviour_logp is not None:  # engine vs trainer log-prob mismatch, reported always
        # against the trainer's log-probs before this step's updates: the recomputed old log-probs when there are
        # some, so later minibatches do not count the policy's own movement within the step as mismatch
        trainer = micro.old_logp if micro.old_logp is not None and alg.old_logp == "recompute" else logp.detach()
        meter.tokens("logp_mismatch", (trainer - micro.behaviour_logp).abs(), mask)
    return loss


def _side_rows(micro: RolloutBatch, s: UpdateSettings) -> list[SideRows]:
    """The side rows (:class:`~rlvr.core.batch.SideRows`) the micro-batch's active loss terms read, each once, in
    term order: they go through the module in the micro-batch's own forward call (:class:`CompletionLogprobs`'
    ``also``), as DDP and FSDP need."""
    out: list[SideRows] = []
    for i, comp in enumerate(s.algorithm.loss_terms):
        if term_weight(comp.params, s.step) == 0.0:
            continue
        traits = LOSS_TERMS.get(comp.name).traits
        out += [sd for sd in micro.side if sd.rows is not None and sd.trait in traits and sd.term in (None, i)
                and all(sd is not o for o in out)]
    return out


def _loss_terms(side: list[SideRows], side_logp: list[torch.Tensor], micro: RolloutBatch, inputs: ObjectiveInputs,
                s: UpdateSettings, meter: _Meter):
    """``(sum_k weight_k(step) * term_k`` over per-token terms ([N, T], or 0 without), the same over the 0-dim
    terms on the step's own side rows (or 0)), each term's value as a metric. A term that reads side rows gets
    their log-probs with gradient (``side_logp``, from the micro-batch's forward) and their fixed tensors as
    extras; a term on the step's own rows (not aligned with the batch's) runs once per minibatch, in the
    micro-batch that carries them, and returns a 0-dim loss."""
    alg, step = s.algorithm, s.step
    total, reduced = 0.0, 0.0
    names = [comp.name for comp in alg.loss_terms]
    for i, comp in enumerate(alg.loss_terms):
        weight = term_weight(comp.params, step)
        if weight == 0.0:
            continue
        entry = LOSS_TERMS.get(comp.name)
        label = comp.name if names.count(comp.name) == 1 else f"{comp.name}.{i}"
        wants = [t for t in entry.traits if t in SIDE_ROW_TRAITS]
        mine = [sd for sd in micro.side if sd.trait in wants and sd.term in (None, i)]
        if wants and not mine:
            raise ValueError(f"loss term {comp.name!r} {SIDE_ROW_TRAITS[wants[0]]}")
        if any(sd.rows is None for sd in mine):  # its rows run in another micro-batch of this minibatch
            continue
        x = inputs
        if mine:
            extra = {}
            for sd in mine:
                extra[f"{sd.name}_logp"] = next(lp for o, lp in zip(side, side_logp) if o is sd)
                extra.update({f"{sd.name}_{k}": v for k, v in sd.fixed.items()})
            x = replace(inputs, extras={**inputs.extras, **extra})
        out, metrics = entry.fn(x, comp.params)
        if any(not sd.aligned for sd in mine):  # a 0-dim loss on the step's own rows, once per minibatch
            if out.dim() != 0:
                raise ValueError(f"loss term {comp.name!r} (trait {wants[0]}) returned shape {tuple(out.shape)}; it "
                                 "must return a 0-dim loss")
            meter.scalars[f"loss_term/{label}"].append(float(out.detach()))
            for name, v in metrics.items():
                meter.scalars[f"loss_term/{label}/{name}"].append(float(v))
            meter.scalars[f"loss_term/{label}_weight"].append(weight)
            reduced = reduced + weight * out
            continue
        tok = loss_term_shape(entry, out, x.mask)
        meter.tokens(f"loss_term/{label}", tok, x.mask)
        meter.scalars[f"loss_term/{label}_weight"].append(weight)
        for name, v in metrics.items():
            meter.tokens(f"loss_term/{label}/{name}", v, x.mask)
        total = total + weight * tok
    return total, reduced


def _step_rows_once(micros: list[RolloutBatch]) -> list[RolloutBatch]:
    """A minibatch's micro-batches with the step's own side rows (not aligned with the batch's) on the first
    alone; the others mark them as run there (``rows`` None): their terms' loss enters each minibatch once."""
    if not micros or all(sd.aligned for sd in micros[0].side):
        return micros
    return micros[:1] + [replace(m, side=tuple(sd if sd.aligned else replace(sd, rows=None) for sd in m.side))
                         for m in micros[1:]]


def update_policy(model, optimizer, scheduler, batch: RolloutBatch, s: UpdateSettings,
                  generator: torch.Generator | None = None, world: World | None = None,
                  module: torch.nn.Module | None = None) -> dict[str, float]:
    """Run ``epochs x minibatches`` optimizer steps on ``batch``; return averaged metrics.

    ``module`` computes the log-probs with gradients (default :class:`CompletionLogprobs` of ``model``; in
    a distributed run the DDP wrapper of it). Each minibatch's micro-batches go round-robin to the ranks of
    ``world``; a rank with one fewer runs a zero-weight copy, so every rank runs as many backward passes;
    each loss is scaled by the world size, undoing DDP's mean, so the summed gradient is the whole batch's.
    """
    alg = s.algorithm
    world = world or World()
    module = module if module is not None else CompletionLogprobs(model)
    params = [p for p in model.parameters() if p.requires_grad]
    meter = _Meter()
    if not model.training:  # a walk over every module: skipped when nothing switched it to eval mode
        model.train()
    checkpointing(model, s.activation_checkpointing)
    for _ in range(alg.epochs):
        shuffle = generator if alg.minibatches > 1 else None
        for mb in batch.minibatches(alg.minibatches, shuffle, s.whole_groups):
            mb = with_loss_coef(mb, alg, s.max_new_tokens)
            n_groups = int(torch.unique(mb.group_index).numel())
            whole = AggregationInputs(mb.completion_mask, mb.group_index, mb.advantages, s.max_new_tokens)
            optimizer.zero_grad(set_to_none=True)
            micros = _step_rows_once(list(mb.micro_batches(s.micro_batch_size, s.whole_groups, s.micro_batch_tokens)))
            mine = [micros[j] for j in world.share(len(micros))]
            passes = -(-len(micros) // world.size)
            total = 0.0
            for k in range(passes):
                real = k < len(mine)
                with world.no_sync(module, last=k == passes - 1):
                    with autocast_to(s.autocast, mb.input_ids.device):
                        loss = _micro_loss(module, mine[k] if real else micros[0], s,
                                           meter if real else _Meter(), mb.size, n_groups, whole)
                    (loss * (world.size if real else 0.0) if world.distributed else loss).backward()
                total += float(loss.detach()) if real else 0.0
            total = world.sum([total])[0]
            if not torch.isfinite(torch.tensor(total)):
                raise NonFiniteError(f"loss is {total}; the optimizer step was not taken ({diagnosis(mb, scheduler)})")
            norm = local_value(torch.nn.utils.clip_grad_norm_(params, s.max_grad_norm or float("inf")))
            if not torch.isfinite(norm):
                raise NonFiniteError(f"gradient norm is {float(norm)}; the optimizer step was not taken "
                                     f"({diagnosis(mb, scheduler)})")
            optimizer.step()
            scheduler.step()
            meter.scalars["loss"].append(total)
            meter.scalars["grad_norm"].append(float(norm))
    meter.merge(world)
    out = meter.result()
    out["lr"] = scheduler.get_last_lr()[0]
    return out


def diagnosis(mb: RolloutBatch, scheduler: Any) -> str:
    """The step's statistics a non-finite loss is read against: each tensor's finite range and its count of
    non-finite values (a reward or advantage blowing up, log-probs of -inf), and the learning rate."""
    parts = []
    for name in ("rewards", "advantages", "old_logp", "behaviour_logp", "ref_logp"):
        t = getattr(mb, name, None)
        if t is None or not t.numel():
            continue
        t = t.detach().float()
        ok = torch.isfinite(t)
        rng = f"[{float(t[ok].min()):.4g}, {float(t[ok].max()):.4g}]" if ok.any() else "none finite"
        parts.append(f"{name} {rng}" + (f", {int((~ok).sum())} non-finite" if not ok.all() else ""))
    return "; ".join(parts + [f"lr {scheduler.get_last_lr()[0]:.3g}"])


def checkpointing(model, on: bool) -> None:
    """Activation checkpointing of the decoder layers in the update (recompute in backward, not store)."""
    if getattr(model, "_rlvr_checkpointing", None) is on:  # as the last call left it (asking walks the modules)
        return
    new = hasattr(model, "activation_checkpointing_enable")  # transformers >= 5.x names; older ones below
    active = getattr(model, "is_activation_checkpointing" if new else "is_gradient_checkpointing", False)
    if on and not active:
        kwargs = {"use_reentrant": False}
        if new:
            model.activation_checkpointing_enable(activation_checkpointing_kwargs=kwargs)
        else:
            model.gradient_checkpointing_enable(gradient_checkpointing_kwargs=kwargs)
    elif not on and active:
        (model.activation_checkpointing_disable if new else model.gradient_checkpointing_disable)()
    model._rlvr_checkpointing = on


def with_loss_coef(mb: RolloutBatch, alg: AlgorithmConfig, max_new_tokens: int | None = None) -> RolloutBatch:
    """Attach the aggregation's coefficients, computed over the whole minibatch, as ``[N, T]``."""
    agg = AGGREGATIONS.get(alg.aggregation.name)
    inp = AggregationInputs(mb.completion_mask, mb.group_index, mb.advantages, max_new_tokens)
    coef = agg.fn(inp, alg.aggregation.params).to(mb.completion_mask.device, torch.float32)
    return replace(mb, loss_coef=row_coefficients(agg, coef, mb.completion_mask).contiguous())

"""The training loop: one short function over injected components.

    sample prompts -> allocate rollouts -> generate -> score -> batch -> advantages
      -> (old / reference log-probs, only when needed) -> update -> metrics -> eval -> checkpoint

The loop never branches on an algorithm's or task's name; everything method-specific lives in the
registered components named by the config.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field, replace
from typing import Any, Callable

import torch

from rlvr.algorithms.grouping import group_constant
from rlvr.algorithms.registry import (ADVANTAGE_TRANSFORMS, ADVANTAGES, MASK_TRANSFORMS, REWARD_TRANSFORMS,
                                     AdvantageInputs, MaskInputs, TransformInputs, call, token_advantages)
from rlvr.config.run import RunConfig, algorithm_needs, algorithm_traits
from rlvr.core.batch import build_batch, with_plain_context
from rlvr.tasks.appeals import AppealState
from rlvr.train.algo_state import AlgorithmState
from rlvr.distributed.world import World
from rlvr.train.extras import compute_extras
from rlvr.train.config_flags import step_features
from rlvr.run.interrupt import deferred_interrupt
from rlvr.train.pairs import with_pairs
from rlvr.train.rollouts import collect_rollouts
from rlvr.train.update import UpdateSettings, needs_old_logp, update_policy

__all__ = ["Components", "rl_step", "train_step", "collect_step", "train_loop", "step_seed", "step_needs"]


@dataclass
class Components:
    """Everything the loop needs, built from the config (or injected by a user or a test)."""

    model: Any
    tokenizer: Any
    task: Any
    engine: Any
    sampler: Any
    allocator: Any
    stats: Any
    optimizer: torch.optim.Optimizer
    scheduler: Any
    ref_model: Any = None
    device: torch.device = field(default_factory=lambda: torch.device("cpu"))
    kl: Any = None  # KLController; None means a constant kl.coef
    scorer: Any = None  # Scorer; None scores in-line with task.score
    algo_state: Any = None  # AlgorithmState of stateful components; None builds it from the config
    appeal: Any = field(default_factory=lambda: AppealState())  # scoring.appeal's running FN-rate estimate
    world: World = field(default_factory=World)  # the data-parallel group (rlvr.distributed.world)
    update_module: Any = None  # what the update's forward runs through (DDP over the log-probs); None: model
    rollouts: Any = None  # an asynchronous rollout producer (rlvr.distributed.async_rollouts); None: rollouts in line
    after_update: Any = None  # step -> metrics, run after each update (interleaved SFT, rlvr.sft.interleave)
    critic: Any = None  # the value model (rlvr.learners.critic), trained after each update; None: no critic
    discriminator: Any = None  # PRISM's (rlvr.learners.discriminator), trained after each update it scored
    pair_sources: dict = field(default_factory=dict)  # pairs files of pair_batch loss terms, read once (train.pairs)

    def __post_init__(self):
        if self.scorer is None:
            from rlvr.tasks.scoring import Scorer

            self.scorer = Scorer(self.task)


def step_seed(seed: int, step: int, salt: int = 0) -> int:
    """A per-step seed that depends only on (seed, step): resumed runs sample what uninterrupted ones do."""
    return (seed * 1_000_003 + step * 7_919 + salt * 104_729) % (2**31 - 1)


def settings(cfg: RunConfig, kl_coef: float | None = None, step: int = 0,
             objective_state: Any = None) -> UpdateSettings:
    coef = cfg.algorithm.kl.coef if kl_coef is None else kl_coef
    in_loss = cfg.algorithm.kl.placement == "loss"
    return UpdateSettings(cfg.algorithm, cfg.train.micro_batch_size,
                          cfg.algorithm.train_temperature or cfg.rollout.temperature,  # (null: the rollout's)
                          cfg.model.logprob_chunk_tokens, cfg.optim.max_grad_norm, coef if in_loss else 0.0,
                          cfg.rollout.max_new_tokens, step, max(cfg.train.steps, 1), objective_state,
                          algorithm_traits(cfg), cfg.train.micro_batch_tokens, cfg.train.autocast,
                          cfg.train.activation_checkpointing)


def _score_components(scores) -> dict[str, torch.Tensor]:
    """Each numeric score component as an ``[N]`` float64 tensor (0 where a completion lacks it)."""
    keys = sorted({k for sc in scores for k, v in sc.components.items() if isinstance(v, (int, float))})
    return {k: torch.tensor([float(sc.components.get(k, 0.0)) for sc in scores], dtype=torch.float64) for k in keys}


def _active(registry, comp, step: int) -> bool:
    entry = registry.get(comp.name)
    return entry.active is None or bool(entry.active(comp.params, step))


def step_needs(cfg: RunConfig, c: Components, step: int) -> frozenset[str]:
    """Every extra tensor this step needs, from one place: what the active components (configured, and the
    features the config's flags turn on) request, plus the old log-probs when the policy moves between
    optimizer steps of the batch and the reference log-probs whenever a reference model is loaded."""
    needs = set(algorithm_needs(cfg, step))
    for f in step_features(cfg, c.ref_model is not None).reward_transforms:
        needs |= REWARD_TRANSFORMS.get(f.name).needs
    if cfg.algorithm.old_logp == "behaviour":  # the engine's log-probs stand for the sampling policy's
        needs.discard("old_logp")
    elif needs_old_logp(cfg.algorithm):
        needs.add("old_logp")
    if c.ref_model is not None:
        needs.add("ref_logp")
    return frozenset(needs)


def _advantages(cfg: RunConfig, c: Components, batch, ro, step: int, kl_coef: float = 0.0):
    """Reward transforms (the features' first, then the configured ones) -> advantage estimator ->
    advantage transforms over the batch and its extras; returns the batch with rewards and advantages set,
    and the transforms' metrics."""
    alg, state = cfg.algorithm, c.algo_state
    implied = [(None, f) for f in step_features(cfg, c.ref_model is not None).reward_transforms]
    rtf = implied + [(i, comp) for i, comp in enumerate(alg.reward_transforms)
                     if _active(REWARD_TRANSFORMS, comp, step)]
    atf = [(i, comp) for i, comp in enumerate(alg.advantage_transforms) if _active(ADVANTAGE_TRANSFORMS, comp, step)]
    extras = {**batch.extras, **{k: v for k, v in (("old_logp", batch.old_logp), ("ref_logp", batch.ref_logp))
                                 if v is not None}}
    comps = {k: v.to(batch.rewards.device) for k, v in _score_components(ro.scores).items()}
    total = max(cfg.train.steps, 1)
    metrics: dict[str, float] = {}
    rewards = batch.rewards
    for i, comp in rtf:
        inp = TransformInputs(rewards, batch.group_index, batch.completion_mask, None, comps, extras, step, total,
                              kl_coef)
        rewards, m = call(REWARD_TRANSFORMS.get(comp.name), inp, comp.params,
                          None if i is None else state.get(f"algorithm.reward_transforms.{i}"))
        rewards = rewards.to(torch.float64)
        metrics.update({f"reward_transform/{comp.name}/{k}": float(v) for k, v in m.items()})
    estimator = ADVANTAGES.get(alg.advantage.name)
    adv = call(estimator, AdvantageInputs(rewards, batch.group_index, batch.lengths, batch.completion_mask, comps,
                                          extras, step, total),
               alg.advantage.params, state.get("algorithm.advantage"))
    adv = token_advantages(estimator, adv, batch.completion_mask)
    for i, comp in atf:
        inp = TransformInputs(rewards, batch.group_index, batch.completion_mask, adv, comps, extras, step, total,
                              kl_coef)
        adv, m = call(ADVANTAGE_TRANSFORMS.get(comp.name), inp, comp.params,
                      state.get(f"algorithm.advantage_transforms.{i}"))
        adv = adv * batch.completion_mask
        metrics.update({f"advantage_transform/{comp.name}/{k}": float(v) for k, v in m.items()})
    return replace(batch, rewards=rewards, advantages=adv.float()), metrics


def rl_step(cfg: RunConfig, c: Components, step: int) -> dict[str, float]:
    """One RL step; returns its metrics.

    The batch is built and moved to the device once; :func:`compute_extras` is the one producer of every
    extra tensor (old, reference and teacher log-probs, entropies, ...), which then live on the batch:
    old and reference log-probs in its fields, the rest in ``batch.extras``.
    """
    t0 = time.perf_counter()
    return train_step(cfg, c, step, collect_step(cfg, c, step), t0)


def collect_step(cfg: RunConfig, c: Components, step: int):
    """Step ``step``'s rollouts (with ``c``'s engine; the asynchronous producer passes its own)."""
    with c.world.full_weights(c.update_module):  # FSDP: the whole model for generation (rlvr.distributed.fsdp)
        return collect_rollouts(cfg, c, step, lambda r: step_seed(cfg.seed, step, salt=10 * r))


def train_step(cfg: RunConfig, c: Components, step: int, ro, t0: float) -> dict[str, float]:
    """Everything of a step after its rollouts: batch, extras, advantages, update, metrics. ``t0``: when
    the step began (its wall time is ``time/step``)."""
    t1 = time.perf_counter()
    correct = [sc.components.get("correct", 0.0) for sc in ro.scores]
    # prompt statistics were updated with every generated completion while collecting (rollouts.py)
    if not ro.completions:  # dynamic sampling found no group with signal: nothing to learn from
        g = ro.metrics
        return {**g, "reward": g["generated/reward"], "accuracy": g["generated/accuracy"],
                "completion_length": g["generated/completion_length"], "update_skipped": 1.0,
                "kl": 0.0, "time/step": t1 - t0}
    if c.algo_state is None:
        c.algo_state = AlgorithmState(cfg)
    coef = c.kl.coef_at(step) if c.kl is not None else cfg.algorithm.kl.coef
    s = settings(cfg, coef, step, c.algo_state.get("algorithm.objective"))
    batch = build_batch(ro.completions, ro.rewards, c.tokenizer.pad_token_id).to(c.device)
    if "context_logp" in s.traits:  # a loss term trains under the plain prompts too
        batch = with_plain_context(batch, ro.completions, c.tokenizer.pad_token_id)
    if "pair_batch" in s.traits:  # a loss term trains on off-policy preference pairs too
        batch = with_pairs(cfg, c, batch, s, step, step_seed(cfg.seed, step, salt=3))
    examples = [ro.requests[comp.group].example for comp in ro.completions]
    needs = step_needs(cfg, c, step)
    extras = {}
    if needs:  # split by whole groups over the ranks, gathered on every rank
        with c.world.full_weights(c.update_module):
            extras = c.world.gather_rows(batch.size, batch.group_index, lambda rows: compute_extras(
                needs, c, batch.select(rows), s, [ro.completions[i] for i in rows.tolist()],
                [examples[i] for i in rows.tolist()], cfg.algorithm.teacher_hint, cfg.algorithm.teacher_context,
                cfg.algorithm.teacher_cot_tokens, cfg.algorithm.belief))
        extras = {k: v.to(c.device) for k, v in extras.items()}
    old = extras.pop("old_logp", None)
    if cfg.algorithm.old_logp == "behaviour":
        if batch.behaviour_logp is None:
            raise ValueError("algorithm.old_logp=behaviour, but the engine returned no behaviour log-probs")
        old = batch.behaviour_logp  # (components that read old_logp get it too: _advantages, the update)
    batch = replace(batch, old_logp=old, ref_logp=extras.pop("ref_logp", None), extras=extras)
    batch, transform_metrics = _advantages(cfg, c, batch, ro, step, coef)
    reward_kl = transform_metrics.pop("reward_transform/kl_penalty/kl", None)  # reported as "kl"
    if cfg.algorithm.kl.placement == "reward" and "ref_logp" not in algorithm_needs(cfg, step):
        batch = replace(batch, ref_logp=None)  # the reward carries the penalty: no KL term in the loss
    for f in step_features(cfg, c.ref_model is not None).mask_transforms:  # e.g. truncated rows leave the loss
        mask = MASK_TRANSFORMS.get(f.name).fn(MaskInputs(batch.completion_mask, batch.truncated), f.params)
        batch = replace(batch, completion_mask=mask)
    gen = torch.Generator().manual_seed(step_seed(cfg.seed, step, salt=1))
    upd = update_policy(c.model, c.optimizer, c.scheduler, batch, s, gen, c.world,
                        c.update_module) if batch.completion_mask.any() else {}
    if c.critic is not None and batch.completion_mask.any():  # on the batch its values were read for
        upd = {**upd, **c.critic.update(batch, step_seed(cfg.seed, step, salt=2))}
    if c.discriminator is not None:  # on the rows it scored this step (none outside the alignment stage)
        upd = {**upd, **c.discriminator.update()}
    if c.after_update is not None:  # before the engine takes the new weights
        upd = {**upd, **c.after_update(step)}
    c.engine.sync_weights()
    t2 = time.perf_counter()
    n_tok = float(batch.lengths.sum())
    rewards_cpu = batch.rewards.cpu()
    zero_var = group_constant(rewards_cpu, batch.group_index.cpu())
    metrics = {
        "reward": float(rewards_cpu.mean()),
        "reward_std": float(rewards_cpu.std()) if batch.size > 1 else 0.0,
        "accuracy": sum(correct) / len(correct),
        "completion_length": float(batch.lengths.float().mean()),
        "truncated_frac": float(batch.truncated.float().mean()),
        "zero_variance_group_frac": float(zero_var.float().mean()),
        "completions": float(batch.size),
        "time/update": t2 - t1,
        "time/step": t2 - t0,
        "tokens_per_s": n_tok / max(t2 - t0, 1e-9),
        **ro.metrics,
    }
    metrics.update(upd)
    metrics.update(transform_metrics)
    if reward_kl is not None:
        metrics["kl"] = reward_kl
    metrics.setdefault("kl", 0.0)
    metrics["kl_coef"] = coef
    if c.kl is not None:
        c.kl.observe(metrics)
    return metrics


def train_loop(cfg: RunConfig, c: Components, start_step: int,
               on_step: Callable[[int, dict[str, float]], None],
               save: Callable[[int], None],
               evaluate: Callable[[int], dict[str, float]] | None = None) -> int:
    """Run steps ``start_step .. cfg.train.steps - 1``; checkpoint on schedule, on Ctrl-C or SIGTERM (after
    the step in progress) and at the end.

    Returns the number of completed steps. A non-finite loss raises before its optimizer step, leaving the
    last checkpoint as the last good state.
    """
    source = c.rollouts  # None: each step collects its own rollouts (rl_step)
    total, every = cfg.train.steps, cfg.train.checkpoint_every
    step = start_step

    def finish(step: int, ro=None, t0: float = 0.0) -> int:
        if source is None:
            metrics = rl_step(cfg, c, step)
        else:
            metrics = train_step(cfg, c, step, ro, t0)
            source.trained(step)
        step += 1
        if evaluate is not None and cfg.train.eval_every and step % cfg.train.eval_every == 0:
            metrics.update({f"eval/{k}": v for k, v in evaluate(step).items()})
        on_step(step, metrics)
        return step

    with deferred_interrupt("this step") as interrupted:
        while step < total:
            end = min(total, (step // every + 1) * every) if every else total  # a segment: up to a checkpoint
            if source is not None:
                source.start(step, end)
            try:
                while step < end:
                    t0 = time.perf_counter()
                    step = finish(step, *((source.get(step), t0) if source is not None else ()))
                    stop = c.world.any(interrupted())  # a signal on any rank stops every rank after this step
                    if stop:
                        for j, ro in (source.stop() if source is not None else ()):  # generated: trained too
                            step = finish(j, ro, time.perf_counter())
                        save(step)
                        raise KeyboardInterrupt(f"{stop}: stopped after step {step}; checkpoint saved")
            finally:
                if source is not None:
                    source.stop()
            if step < total:
                save(step)
    save(step)
    return step

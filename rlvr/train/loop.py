"""The training loop: one short function over injected components.

    sample prompts -> allocate rollouts -> generate -> score -> batch -> extras -> advantages
      -> update the policy -> update the learners -> metrics -> eval -> checkpoint

The loop never branches on an algorithm's, task's or engine's name: what a method needs beyond the batch
it asks for through registries (extra tensors and side rows, :mod:`rlvr.algorithms.extra_producers`; the
components config flags turn on, :mod:`rlvr.train.config_flags`), and what trains beside the policy is a list
of learners the step treats alike (:mod:`rlvr.learners.base`). :mod:`rlvr.train.reference` is the same step
for plain GRPO, in one file.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Any, Callable

import torch

from rlvr.algorithms.extra_producers import SIDE_ROWS, ExtraContext, SideContext, produce_extras, reference_extras
from rlvr.algorithms.grouping import group_constant
from rlvr.algorithms.registry import (ADVANTAGE_TRANSFORMS, ADVANTAGES, MASK_TRANSFORMS, REWARD_TRANSFORMS,
                                     AdvantageInputs, MaskInputs, TransformInputs, call, token_advantages)
from rlvr.config.run import RunConfig, algorithm_needs
from rlvr.core.batch import RolloutBatch, build_batch
from rlvr.core.seeds import step_seed
from rlvr.distributed.world import World
from rlvr.rollout.wrappers import reads_trainer_weights
from rlvr.core.clock import SaveClock
from rlvr.run.interrupt import deferred_interrupt
from rlvr.train.algo_state import AlgorithmState
from rlvr.train.config_flags import StepFeatures, run_features
from rlvr.train.rewards import active, score_components, transform_rewards
from rlvr.train.rollouts import Rollouts, collect_rollouts
from rlvr.train.samples import step_samples
from rlvr.train.update import UpdateSettings, needs_old_logp, update_policy

if TYPE_CHECKING:
    from rlvr.engines.base import RolloutEngine
    from rlvr.learners.base import Learner
    from rlvr.sampling.base import Allocator
    from rlvr.sampling.stats import PromptStats
    from rlvr.tasks.base import Task
    from rlvr.tasks.scoring import Scorer
    from rlvr.train.kl_control import KLController

__all__ = ["Components", "rl_step", "train_step", "collect_step", "train_loop", "step_needs", "compute_extras",
           "settings"]


@dataclass
class Components:
    """Everything the loop needs, built from the config (:func:`rlvr.run.setup.build_components`) or injected
    by a user or a test."""

    model: torch.nn.Module  # the policy (a transformers causal LM)
    tokenizer: Any  # its tokenizer
    task: Task
    engine: RolloutEngine  # inside the run's engine wrappers
    sampler: Any  # prompt sampler (rlvr.sampling.base: next, observe, metrics, state)
    allocator: Allocator
    stats: PromptStats
    optimizer: torch.optim.Optimizer
    scheduler: torch.optim.lr_scheduler.LRScheduler | None
    ref_model: torch.nn.Module | None = None  # the frozen reference, when a component reads it
    ref_shards: torch.nn.Module | None = None  # FSDP: the reference's sharded root (its forwards run in lockstep)
    device: torch.device = field(default_factory=lambda: torch.device("cpu"))
    kl: KLController | None = None  # the KL coefficient over steps; None: a constant kl.coef
    scorer: Scorer | None = None  # None: scores in line with task.score
    algo_state: AlgorithmState | None = None  # stateful components' state; None: built from the config
    world: World = field(default_factory=World)  # the data-parallel group (rlvr.distributed.world)
    update_module: torch.nn.Module | None = None  # what the update's forward runs through (DDP/FSDP); None: model
    rollouts: Any = None  # an asynchronous rollout producer (rlvr.distributed.async_rollouts); None: in line
    learners: list[Learner] = field(default_factory=list)  # trained after the policy, in order (rlvr.learners)
    settings: UpdateSettings | None = None  # what the step reads of the config, once per run; None: derived
    features: StepFeatures | None = None  # the components config flags turn on, once per run; None: derived
    memo: dict = field(default_factory=dict)  # what side-row builders keep for the run (a file read once)
    samples: list = field(default_factory=list)  # the last step's readable sample (rlvr.train.samples), if taken

    def __post_init__(self):
        if self.scorer is None:
            from rlvr.tasks.scoring import Scorer

            self.scorer = Scorer(self.task)


def settings(cfg: RunConfig, kl_coef: float | None = None, step: int = 0,
             objective_state: Any = None) -> UpdateSettings:
    """The run's :class:`UpdateSettings` at ``step`` (``kl_coef``: the step's KL coefficient, default the
    configured one)."""
    coef = cfg.algorithm.kl.coef if kl_coef is None else kl_coef
    return UpdateSettings.from_config(cfg).at_step(step, coef, objective_state)


def step_needs(cfg: RunConfig, c: Components, step: int) -> frozenset[str]:
    """Every extra tensor this step needs, from one place: what the active components (configured, and the
    features the config's flags turn on) request, plus the old log-probs when the policy moves between
    optimizer steps of the batch and the reference log-probs whenever a reference model is loaded."""
    needs = set(algorithm_needs(cfg, step))
    for f in run_features(cfg, c).reward_transforms:
        needs |= REWARD_TRANSFORMS.get(f.name).needs
    if cfg.algorithm.old_logp == "behaviour":  # the engine's log-probs stand for the sampling policy's
        needs.discard("old_logp")
    elif needs_old_logp(cfg.algorithm):
        needs.add("old_logp")
    if c.ref_model is not None:
        needs.add("ref_logp")
    return frozenset(needs)


def compute_extras(needs: frozenset[str], c: Any, batch: RolloutBatch, s: Any, completions, examples,
                   algorithm: Any = None) -> dict[str, torch.Tensor]:
    """The extras in ``needs`` for ``batch``'s rows (in the order of ``completions``), on ``c.device``: each
    from the producer registered for it (:func:`rlvr.algorithms.extra_producers.produce_extras`)."""
    ctx = ExtraContext(c.model, c.tokenizer, c.device, batch.to(c.device), completions, examples, s, algorithm,
                       getattr(c, "ref_model", None), getattr(c, "learners", ()))
    return produce_extras(needs, ctx)


def _advantages(cfg: RunConfig, c: Components, batch, ro, step: int, kl_coef: float = 0.0):
    """Reward transforms (the features' first, then the configured ones) -> advantage estimator ->
    advantage transforms over the batch and its extras; returns the batch with rewards and advantages set,
    the transforms' metrics, and the metrics the features report under names of their own."""
    alg, state = cfg.algorithm, c.algo_state
    atf = [(i, comp) for i, comp in enumerate(alg.advantage_transforms) if active(ADVANTAGE_TRANSFORMS, comp, step)]
    extras = {**batch.extras, **{k: v for k, v in (("old_logp", batch.old_logp), ("ref_logp", batch.ref_logp))
                                 if v is not None}}
    comps = {k: v.to(batch.rewards.device) for k, v in score_components(ro.scores).items()}
    total = max(cfg.train.steps, 1)
    rewards, metrics, reported = transform_rewards(cfg, run_features(cfg, c), state, batch.rewards, batch.group_index,
                                                   batch.completion_mask, comps, extras, step, kl_coef)
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
    return replace(batch, rewards=rewards, advantages=adv.float()), metrics, reported


def rl_step(cfg: RunConfig, c: Components, step: int) -> dict[str, float]:
    """One RL step; returns its metrics."""
    t0 = time.perf_counter()
    return train_step(cfg, c, step, collect_step(cfg, c, step), t0)


def collect_step(cfg: RunConfig, c: Components, step: int) -> Rollouts:
    """Step ``step``'s rollouts (with ``c``'s engine; the asynchronous producer passes its own)."""
    # FSDP: the whole model on every rank while generating, unless the engine holds weights of its own (vLLM)
    gather = reads_trainer_weights(c.engine)
    with c.world.full_weights(c.update_module if gather else None):
        return collect_rollouts(cfg, c, step, lambda r: step_seed(cfg.seed, step, salt=10 * r))


def _with_side_rows(cfg: RunConfig, c: Components, batch: RolloutBatch, ro: Rollouts, s: UpdateSettings,
                    step: int) -> RolloutBatch:
    """``batch`` with the rows the run's loss terms score beside it (the builders of their traits)."""
    ctx = SideContext(step, step_seed(cfg.seed, step, salt=3), c.tokenizer, c.device, s, cfg.algorithm,
                      ro.completions, c.ref_model, cfg.model.chat_template, c.memo)
    for trait in sorted(t for t in s.traits if t in SIDE_ROWS):
        batch = SIDE_ROWS.get(trait).fn(ctx, batch)
    return batch


def train_step(cfg: RunConfig, c: Components, step: int, ro: Rollouts, t0: float) -> dict[str, float]:
    """Everything of a step after its rollouts: batch, extras, advantages, update, learners, metrics. ``t0``:
    when the step began (its wall time is ``time/step``)."""
    t1 = time.perf_counter()
    # prompt statistics were updated with every generated completion while collecting (rollouts.py)
    if not ro.completions:  # dynamic sampling found no group with signal: nothing to learn from
        g = ro.metrics
        return {**g, "reward": g["generated/reward"], "accuracy": g["generated/accuracy"],
                "completion_length": g["generated/completion_length"], "update_skipped": 1.0,
                "kl": 0.0, "time/step": t1 - t0}
    if c.algo_state is None:
        c.algo_state = AlgorithmState(cfg)
    if c.settings is None:
        c.settings = UpdateSettings.from_config(cfg)
    coef = c.kl.coef_at(step) if c.kl is not None else cfg.algorithm.kl.coef
    s = c.settings.at_step(step, coef, c.algo_state.get("algorithm.objective"))

    # the batch, on the device once, with the rows loss terms score beside it
    batch = build_batch(ro.completions, ro.rewards, c.tokenizer.pad_token_id).to(c.device)
    with c.world.passes(c.ref_shards):  # (FSDP: builders that score rows with the reference use its shards)
        batch = _with_side_rows(cfg, c, batch, ro, s, step)

    # the extra tensors the step's components read, split by whole groups over the ranks, gathered on every rank
    # (FSDP: on the shards, one decoder layer gathered at a time; the reference's passes in a block of their own)
    examples = [ro.requests[comp.group].example for comp in ro.completions]
    needs = step_needs(cfg, c, step)
    on_ref = reference_extras(needs) if c.ref_shards is not None else frozenset()
    extras = {}
    for keys, sharded in ((needs - on_ref, c.update_module), (on_ref, c.ref_shards)):
        if keys:
            extras |= c.world.gather_rows(batch.size, batch.group_index, lambda rows, keys=keys: compute_extras(
                keys, c, batch.select(rows), s, [ro.completions[i] for i in rows.tolist()],
                [examples[i] for i in rows.tolist()], cfg.algorithm), sharded=sharded)
    extras = {k: v.to(c.device) for k, v in extras.items()}
    old = extras.pop("old_logp", None)
    if cfg.algorithm.old_logp == "behaviour":
        if batch.behaviour_logp is None:
            raise ValueError("algorithm.old_logp=behaviour, but the engine returned no behaviour log-probs")
        old = batch.behaviour_logp  # (components that read old_logp get it too: _advantages, the update)
    batch = replace(batch, old_logp=old, ref_logp=extras.pop("ref_logp", None), extras=extras)

    # rewards -> advantages, then the loss mask
    batch, transform_metrics, reported = _advantages(cfg, c, batch, ro, step, coef)
    if cfg.algorithm.kl.placement == "reward" and "ref_logp" not in algorithm_needs(cfg, step):
        batch = replace(batch, ref_logp=None)  # the reward carries the penalty: no KL term in the loss
    for f in run_features(cfg, c).mask_transforms:  # e.g. truncated rows leave the loss
        mask = MASK_TRANSFORMS.get(f.name).fn(MaskInputs(batch.completion_mask, batch.truncated), f.params)
        batch = replace(batch, completion_mask=mask)

    # the policy's update, then what trains beside it, before the engine takes the new weights
    gen = torch.Generator().manual_seed(step_seed(cfg.seed, step, salt=1))
    upd = update_policy(c.model, c.optimizer, c.scheduler, batch, s, gen, c.world,
                        c.update_module) if batch.completion_mask.any() else {}
    for learner in c.learners:
        upd = {**upd, **learner.update(batch, step)}
    c.engine.sync_weights()

    t2 = time.perf_counter()
    n_tok = float(batch.lengths.sum())
    rewards_cpu = batch.rewards.cpu()
    correct = [sc.components.get("correct", 0.0) for sc in ro.scores]
    metrics = {
        "reward": float(rewards_cpu.mean()),
        "reward_std": float(rewards_cpu.std()) if batch.size > 1 else 0.0,
        "accuracy": sum(correct) / len(correct),
        "completion_length": float(batch.lengths.float().mean()),
        "truncated_frac": float(batch.truncated.float().mean()),
        "zero_variance_group_frac": float(group_constant(rewards_cpu, batch.group_index.cpu()).float().mean()),
        "completions": float(batch.size),
        "time/update": t2 - t1,
        "time/step": t2 - t0,
        "tokens_per_s": n_tok / max(t2 - t0, 1e-9),
        **ro.metrics,
    }
    metrics.update(_reward_metrics(c.task, ro.scores))
    metrics.update(upd)
    metrics.update(transform_metrics)
    metrics.update(reported)
    metrics.setdefault("kl", 0.0)
    metrics["kl_coef"] = coef
    if c.kl is not None:
        c.kl.observe(metrics)
    every = cfg.logging.completions_every  # a readable sample, every so many steps (rank 0 writes it)
    c.samples = step_samples(ro, batch, cfg.logging.completions_per_step) \
        if every and (step + 1) % every == 0 and c.world.main else []
    return metrics


def _reward_metrics(task: Any, scores) -> dict[str, float]:
    """With several rewards (task.rewards), each one's mean and spread over the trained batch: reward/NAME."""
    names = [wv.verifier.name for wv in getattr(task, "verifiers", ())]
    if len(names) < 2:
        return {}
    out = {}
    for name, v in score_components(scores).items():
        if name in names:
            out[f"reward/{name}"] = float(v.mean())
            out[f"reward/{name}/std"] = float(v.std()) if len(v) > 1 else 0.0
    return out


def train_loop(cfg: RunConfig, c: Components, start_step: int,
               on_step: Callable[[int, dict[str, float]], None],
               save: Callable[[int], None],
               evaluate: Callable[[int], dict[str, float]] | None = None) -> int:
    """Run steps ``start_step .. cfg.train.steps - 1``; checkpoint every ``train.checkpoint_every`` steps, when
    ``train.checkpoint_minutes`` have passed, on Ctrl-C or SIGTERM (after the step in progress) and at the end.

    Returns the number of completed steps. A non-finite loss raises before its optimizer step, leaving the
    last checkpoint as the last good state.
    """
    source = c.rollouts  # None: each step collects its own rollouts (rl_step)
    total, every = cfg.train.steps, cfg.train.checkpoint_every
    step = start_step
    clock = SaveClock(cfg.train.checkpoint_minutes, c.world)
    save = clock.wrap(save)

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
                    if source is None and step < end and clock.due():  # by time (an asynchronous producer's
                        save(step)  # rollouts run ahead within a segment: it saves at the segment's end only)
            finally:
                if source is not None:
                    source.stop()
            if step < total:
                save(step)
    save(step)
    return step

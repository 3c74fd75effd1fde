"""What every run builds before it trains: seeds, device, threads, model, task, and the checks on them.

:func:`prepare` is shared by ``rlvr train``, ``rlvr sft``, ``rlvr eval`` and the Python API. Each check
fails with one clear :class:`~rlvr.run.preflight.SetupError` before any work is done (see
:mod:`rlvr.run.preflight` and :mod:`rlvr.run.prompt_limits`). :func:`build_components` turns a prepared
model and task into the loop's :class:`~rlvr.train.loop.Components`; :func:`build_engine` is the one
place an engine is built (training wraps it in the configured rollout wrappers; evaluation never does).
"""

from __future__ import annotations

import copy
import logging
import math
import random
import sys
from pathlib import Path
from dataclasses import dataclass
from typing import Any

import numpy as np
import torch

from rlvr.config.run import RunConfig, algorithm_needs, length_limits
from rlvr.models.loading import ModelConfig, load_model
from rlvr.models import shared_prefix
from rlvr.models.logprobs import CompletionLogprobs
from rlvr.optim import OPTIMIZERS
from rlvr.engines.base import ENGINES
from rlvr.distributed.ray_engine import RayPool
from rlvr.models.lora import apply_lora
from rlvr.rollout.wrappers import base_engine, bind_stats, bind_task, without_image_support, wrap_engine
from rlvr.sampling import build_data
from rlvr.tasks.base import TASKS, Task
from rlvr.tasks.scoring import Scorer, check_verifier
from rlvr.train.algo_state import AlgorithmState
from rlvr.learners.critic import build_critic
from rlvr.learners.discriminator import build_discriminator
from rlvr.distributed.world import World
from rlvr.sft.interleave import InterleavedPhases, interleaved_sft
from rlvr.train.kl_control import KLController
from rlvr.train.loop import Components, collect_step
from rlvr.train.update import UpdateSettings
from rlvr.distributed.async_rollouts import async_rollouts, rollout_copy, wants_async
from rlvr.run.preflight import (SetupError, check_chat_template, check_compiler, check_device, check_group_size,
                                  check_packages, check_ray, check_vllm)
from rlvr.run.prompt_limits import PromptReport, fit_prompts
from rlvr.run.threads import apply_threads

__all__ = ["Prepared", "prepare", "build_task", "build_engine", "evaluation_engine", "build_components",
           "seed_everything", "pick_device", "SetupError", "use_shared_prefix"]

log = logging.getLogger(__name__)


def seed_everything(seed: int) -> None:
    random.seed(seed)
    np.random.seed(seed % 2**32)
    torch.manual_seed(seed)


def pick_device(name: str) -> torch.device:
    check_device(name)
    return torch.device("cuda" if name == "cuda" or (name == "auto" and torch.cuda.is_available()) else "cpu")


def _seed_or(seed: int | None, default: int) -> int:
    return default if seed is None else seed


def build_task(cfg: RunConfig) -> Task:
    return TASKS.get(cfg.task.name).fn(cfg.task.params)


@dataclass
class Prepared:
    model: Any
    tokenizer: Any
    task: Task
    device: torch.device
    prompts: PromptReport
    threads: int = 1


def _say(msg: str) -> None:
    print(msg, file=sys.stderr, flush=True)


def prepare(cfg: RunConfig, model: Any = None, tokenizer: Any = None, task: Task | None = None,
            model_cfg: ModelConfig | None = None, check_scoring: bool = True, world: World | None = None) -> Prepared:
    """Seed, check, load and fit: the model and tokenizer (given, or from ``model_cfg`` / ``cfg.model``),
    the task (given, or built from ``cfg.task``) with its prompts checked against the model's context.
    In a distributed run each rank gets its own GPU and a share of the CPU threads; under FSDP the model stays
    in host memory, to be sharded before it is placed (:func:`build_components`)."""
    check_packages(cfg)
    check_pair_files(cfg)
    world = world or World()
    device = world.device_for(pick_device(cfg.device))
    check_compiler(cfg, device)
    check_vllm(cfg, device, model, model_cfg)
    check_ray(cfg)
    warning = check_group_size(cfg)
    if warning:
        _say(warning)
    threads = apply_threads(cfg.train.threads)
    seed_everything(cfg.seed)
    if model is None:
        model, tokenizer = load_model(model_cfg or cfg.model, seed=_seed_or(cfg.sft.seed, cfg.seed), device=device)
    elif tokenizer is None:
        raise SetupError("a model object needs its tokenizer too (tokenizer=...)")
    task = task if task is not None else build_task(cfg)
    ln = cfg.data.label_noise
    if ln.fraction and "train" in task.splits:  # wrong gold answers for a share of the training examples
        from rlvr.tasks.noise import corrupt_labels

        noisy, ids = corrupt_labels(task.examples("train"), ln.fraction, _seed_or(ln.seed, cfg.seed))
        task.replace_split("train", noisy)
        _say(f"data.label_noise: {len(ids)} of {len(noisy)} training examples have a wrong gold answer")
    where = (model_cfg or cfg.model).path or "the built-in tiny model"
    check_chat_template(tokenizer, cfg.model.chat_template, [e for s in task.splits for e in task.examples(s)], where)
    limits = length_limits(cfg)  # an episode's completion holds every turn and observation
    report = fit_prompts(task, tokenizer, model, limits.episode, cfg.data.max_prompt_tokens,
                         cfg.data.prompt_overflow, cfg.model.chat_template, limits.episode_source)
    if any(s["dropped"] or s["truncated"] for s in report.splits.values()):
        _say(report.summary())
    if check_scoring and "train" in task.splits:
        check_verifier(task, task.examples("train"), timeout_s=cfg.scoring.timeout_s)
    # FSDP shards the policy before it is placed (rlvr.distributed.fsdp.shard): it stays in host memory until then
    return Prepared(model if world.sharded else model.to(device), tokenizer, task, device, report, threads)


def build_engine(cfg: RunConfig, model, tok, batch_size: int, training: bool = False, engine=None):
    """The configured engine (or ``engine``, already built for ``model``) inside the training wrappers
    (``training``) or the evaluation ones."""
    if engine is None:
        engine = ENGINES.get(cfg.rollout.engine).fn(model, tok, batch_size=batch_size,
                                                    chat_template=cfg.model.chat_template, rollout=cfg.rollout,
                                                    seed=cfg.seed)
    return wrap_engine(engine, model, tok, cfg.rollout, cfg.model.chat_template, eval_only=not training)


def producer_engine(cfg: RunConfig, engine, model, tok):
    """The asynchronous producer's engine on its snapshot ``model``, in training wrappers of its own: a view of
    the run's engine where that engine holds weights of its own and offers one (``vllm``: one vLLM per
    process), else a second engine of the configured kind."""
    base = base_engine(engine)
    view = base.view(model) if hasattr(base, "view") else None
    return build_engine(cfg, model, tok, cfg.rollout.batch_size, training=True, engine=view)


def evaluation_engine(cfg: RunConfig, engine):
    """What evaluation generates with during training: the unwrapped engine in fresh evaluation wrappers
    (multi-turn episodes), so it never touches the training wrappers' state or metrics."""
    base = base_engine(engine)
    return wrap_engine(base, getattr(base, "model", None), getattr(base, "tokenizer", None), cfg.rollout,
                       cfg.model.chat_template, eval_only=True)


def check_pair_files(cfg: RunConfig) -> None:
    """Every loss term on off-policy preference pairs (trait ``pair_batch``) names a file that exists, so a wrong
    path stops the run before any work (SFT included) rather than at its first RL step."""
    from rlvr.algorithms.registry import LOSS_TERMS

    for i, term in enumerate(cfg.algorithm.loss_terms):
        if "pair_batch" in getattr(LOSS_TERMS.get(term.name), "traits", ()):
            path = Path(term.params.path).expanduser()
            if not path.is_file():
                raise SetupError(f"algorithm.loss_terms.{i} ({term.name}): the preference-pair file {str(path)!r} does "
                                 f"not exist; set algorithm.loss_terms.{i}.path")


def check_image_support(engine, task: Task) -> None:
    """A task with image prompts needs an engine (and wrappers) that carry images through."""
    if not any(ex.images for split in task.splits for ex in task.examples(split)):
        return
    lacking = without_image_support(engine)
    if lacking:
        raise SetupError(f"task {task.name!r} has image prompts, which {', '.join(lacking)} cannot take yet; use "
                         "rollout.engine: hf or vllm without rollout strategies, contexts, guidance or multi-turn "
                         "episodes")


def _optimizer(cfg: RunConfig, model) -> tuple[torch.optim.Optimizer, Any]:
    o = cfg.optim
    opt = OPTIMIZERS.get(o.optimizer.name).fn(model, o, o.optimizer.params)
    total = max(1, cfg.train.steps * cfg.algorithm.epochs * cfg.algorithm.minibatches)

    def lr_at(i: int) -> float:
        if i < o.warmup_steps:
            return (i + 1) / o.warmup_steps
        frac = min(1.0, (i - o.warmup_steps) / max(1, total - o.warmup_steps))
        return {"constant": 1.0, "linear": 1.0 - frac, "cosine": 0.5 * (1 + math.cos(math.pi * frac))}[o.schedule]

    return opt, torch.optim.lr_scheduler.LambdaLR(opt, lr_at)


def use_shared_prefix(cfg: RunConfig, *models) -> None:
    """Enable the shared-prefix log-prob forward (``train.shared_prefix``) on the policy and reference models
    that support it; a model that does not keeps the standard forward, and the reason is logged."""
    if not cfg.train.shared_prefix:
        return
    for m in models:
        reason = None if m is None else shared_prefix.enable(m)
        if reason:
            log.info("train.shared_prefix: %s; the standard forward is used", reason)


def learners(cfg: RunConfig, c: Components, side, whole) -> list:
    """What trains after the policy's update, in order: the critic, the discriminator (each built from
    ``side``, a copy of the policy taken before any sharding) and the interleaved SFT phases; those the config
    leaves off are absent."""
    needs = algorithm_needs(cfg)
    phase = interleaved_sft(cfg, c.model, c.tokenizer, c.task, c.engine, c.world, whole)
    out = [build_critic(cfg, side, c.device, c.world, needs),  # None without algorithm.critic
           build_discriminator(cfg, side, c.tokenizer, c.task, c.device, c.world, needs),  # None unless enabled
           InterleavedPhases(phase) if phase is not None else None]
    return [x for x in out if x is not None]


def build_components(cfg: RunConfig, model, tok, task: Task, device: torch.device | str = "cpu",
                     ref_model=None, world: World | None = None) -> Components:
    """The loop's components for ``model`` and ``task`` as the config names them; in a distributed run
    (``world``) the update runs through DDP, whose construction gives every rank rank 0's weights."""
    world = world or World()
    device = torch.device(device)
    model = apply_lora(model, cfg.model.lora)  # adapters only train (a no-op without model.lora)
    if not world.sharded:  # (FSDP places the policy's shards as it shards it, below)
        model = model.to(device)
    use_shared_prefix(cfg, model, ref_model)
    # FSDP shards the policy in place next: what needs it whole takes its copy first -- the asynchronous
    # producer's snapshot, the copy interleaved SFT phases train, the source of the critic's and the
    # discriminator's trunks
    snapshot = rollout_copy(model).to(device) if world.sharded and wants_async(cfg) else None
    whole = copy.deepcopy(model).to(device) if world.sharded and cfg.sft.interleave_every else None
    side = model
    if world.sharded and (cfg.algorithm.critic.heads or cfg.algorithm.discriminator.enabled):
        side = whole if whole is not None else copy.deepcopy(model).to(device)
    # before the optimizer; FSDP: sharded, then placed (the reference too: a rank keeps its shards between steps)
    update_module = world.wrap(CompletionLogprobs(model), device) if world.distributed else None
    ref_shards = world.shard_frozen(CompletionLogprobs(ref_model), device) \
        if ref_model is not None and world.sharded else None
    engine = build_engine(cfg, model, tok, cfg.rollout.batch_size, training=True)
    check_image_support(engine, task)
    opt, sched = _optimizer(cfg, model)
    algo_state = AlgorithmState(cfg)  # shared with the sampler and allocator (learned per-prompt tables)
    sampler, allocator, stats = build_data(cfg, task, algo_state)
    bind_stats(engine, stats)  # wrappers that follow per-prompt pass rates (rollout.scaffold)
    bind_task(engine, task)  # wrappers that score their own rollouts (rollout.strategy propa)
    c = Components(model=model, tokenizer=tok, task=task, engine=engine,
                      sampler=sampler, allocator=allocator, stats=stats,
                      optimizer=opt, scheduler=sched, ref_model=ref_model, ref_shards=ref_shards, device=device,
                      kl=KLController(cfg.algorithm.kl, cfg.train.steps),
                      scorer=Scorer(task, cfg.scoring.workers, cfg.scoring.timeout_s, cfg.scoring.max_error_frac,
                                    pool=RayPool(cfg.rollout.ray.address) if cfg.scoring.backend == "ray" else None,
                                    noise=cfg.scoring.noise, noise_seed=_seed_or(cfg.scoring.noise.seed, cfg.seed)),
                      algo_state=algo_state, world=world,
                      update_module=update_module, settings=UpdateSettings.from_config(cfg))
    c.learners = learners(cfg, c, side, whole)
    del side
    c.rollouts = async_rollouts(cfg, c, lambda cc, j: collect_step(cfg, cc, j),  # None unless max_staleness
                                lambda m: bind_task(bind_stats(producer_engine(cfg, engine, m, tok), stats), task),
                                snapshot)
    return c

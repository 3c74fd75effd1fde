"""``rlvr train``: set up a run directory, warm up with SFT, train with RL, evaluate, summarise.

A fresh run writes ``config.yaml`` (the resolved config, which reproduces the run) before any work;
``resume`` reloads it from the run directory, restores the newest checkpoint and continues. A run directory
is locked while a process writes to it (:mod:`rlvr.run.rundir`). Ctrl-C and SIGTERM finish the step (or
SFT step) in progress and save before exiting (:mod:`rlvr.run.interrupt`).
"""

from __future__ import annotations

import contextlib
import copy
import json
import sys
import time
from functools import partial
from pathlib import Path
from typing import Any, Callable

from rlvr.config.run import RunConfig, dump_config, length_limits, load_config, needs_reference
from rlvr.models.loading import ModelConfig, load_model
from rlvr.models.lora import is_adapter_dir, load_adapter
from rlvr.models.vision import save_tokenizer
from rlvr.rollout.contexts import context_examples
from rlvr.rollout.wrappers import load_engine_files
from rlvr.tasks.base import Task
from rlvr.run.checkpoint import intact_checkpoint, latest_checkpoint, list_checkpoints, load_checkpoint
from rlvr.distributed.process_group import init_world
from rlvr.distributed.world import World, check_world
from rlvr.run.interrupt import deferred_interrupt
from rlvr.run.logging import NullDisplay, ProgressDisplay
from rlvr.run.rl_phase import _eval_at, _run_rl, _stateful, load_state, run_eval, sharded_loader
from rlvr.run.rundir import lock_run_dir, make_run_dir, run_dir_path
from rlvr.run.settings import describe_settings
from rlvr.run.setup import build_components, build_engine, build_task, pick_device, prepare, seed_everything
from rlvr.sft.checkpoint import WarmupCheckpoint
from rlvr.sft.shared_start import SharedStart, start_seed
from rlvr.sft.sharded import sft_sharded
from rlvr.sft.supervised import sft
from rlvr.sft.ssb import curate, distill, write_rows

__all__ = ["train", "resume", "build_task", "build_components", "run_eval", "seed_everything", "pick_device",
           "make_run_dir", "eval_model", "run_sft", "_stateful"]


def _say(msg: str) -> None:
    print(msg, file=sys.stderr, flush=True)


def _sft_examples(task: Task):
    """The task's ``sft`` split when it has one (e.g. teacher-written targets), else its train split."""
    return task.examples("sft" if "sft" in task.splits else "train")


def _sft_phase(cfg: RunConfig, model, tok, task: Task, run_dir: Path, world: World | None = None,
               device: Any = "cpu", resume_hint: str | None = None) -> dict[str, Any]:
    """SFT with progress and its checkpoint (``run_dir/warmup``, :mod:`rlvr.sft.checkpoint`): a warm-up saved
    there resumes at its step, exactly; a finished one gives its weights without training. Ctrl-C or SIGTERM
    finishes the SFT step, saves, and raises ``KeyboardInterrupt`` saying how to continue (``resume_hint``).
    Under FSDP the plain SFT warm-up runs sharded on ``device`` (:mod:`rlvr.sft.sharded`); SSB's curation and
    distillation run on a whole copy on every rank, placed on ``device`` for the phase."""
    t0 = time.perf_counter()
    world = world or World()
    s = cfg.sft
    shared = SharedStart(cfg, run_dir / "warmup", world, device) if s.cache is not False else None
    if shared is not None and shared.fetch() is not None and world.main:
        _say(f"the SFT warm-up is the shared start {shared.fetched} (sft.cache): not trained again")
    warm = WarmupCheckpoint(run_dir / "warmup", world, s.checkpoint_every, cfg.train.checkpoint_minutes)
    warm.check_steps(s.steps)
    st = warm.state
    if warm.done:  # a shared start, or stopped after its warm-up: the warm-up's result, as it was
        warm.load_weights(model)
        if world.main and (shared is None or shared.fetched is None):
            _say(f"the SFT warm-up finished before the stop ({s.steps} steps): its weights are loaded")
        if shared is not None:
            shared.store()  # (a run stopped after training its warm-up stores it now)
        return {"sft_seconds": st["seconds"], "sft_final_loss": st["losses"][-1] if st["losses"] else None,
                "sft_steps": len(st["losses"]), "sft_start": shared.record() if shared is not None else None}
    if s.seed is not None:  # the start's own seed: the warm-up does not depend on the run's
        seed_everything(s.seed)
    before = float(st["seconds"]) if st else 0.0
    extra: dict[str, Any] = {}
    if s.method == "ssb":  # curate the model's own robust solutions, then distil them (rlvr.sft.ssb)
        model = model.to(device)  # (FSDP: the policy is still in host memory; back there after the phase)
        rows = _ssb_rows(cfg, model, tok, task, run_dir, world)  # from the weights before the warm-up
        extra["ssb_rows"] = len(rows)
        teacher = copy.deepcopy(model) if st else None  # the frozen teacher is the model before the warm-up
        train_fn = partial(distill, model, tok, rows, s.ssb, teacher=teacher)
    else:
        examples = _sft_examples(task)
        if s.under_contexts:  # MEML-GRPO's first stage: every example under each expert prompt too
            if not cfg.rollout.contexts.num_contexts:
                raise ValueError("sft.under_contexts trains on the rollout.contexts prompts; set "
                                 "rollout.contexts.num_contexts")
            examples = examples + [e for ex in examples for e in context_examples(ex, cfg.rollout.contexts)]
        train_fn = partial(sft, model, tok, examples)
        if world.sharded:  # data-parallel on shards (rlvr.sft.sharded); the ranks must stop at the same step
            train_fn = partial(sft_sharded, model, tok, examples, world=world, device=device)
    if st:
        warm.load_weights(model)  # (FSDP: into the whole policy in host memory, which the phase then shards)
        if world.main:
            _say(f"resuming the SFT warm-up at step {st['step']} of {s.steps} ({warm.folder})")
    bar = ProgressDisplay("SFT", s.steps, st["step"] if st else 0, every=50) if world.main else NullDisplay()
    with deferred_interrupt("this SFT step") as interrupted:
        asked = (lambda: world.any(interrupted()) is not None) if world.distributed else \
            (lambda: interrupted() is not None)  # every rank stops at the same step
        try:
            losses = train_fn(s.steps, s.batch_size, s.lr, s.warmup_steps, seed=start_seed(cfg),
                              chat_template=cfg.model.chat_template, micro_batch_size=cfg.train.micro_batch_size,
                              on_step=lambda i, loss: bar.update(i + 1, f"loss {loss:.4f}"), stop=asked,
                              checkpoint=warm)
        finally:
            bar.close()
        stop = world.any(interrupted())
        if stop and len(losses) < s.steps:  # the checkpoint holds the step reached
            raise KeyboardInterrupt(
                f"{stop} during SFT after step {len(losses)} of {s.steps}; the warm-up is saved in {warm.folder}. "
                + (f"Continue it with: rlvr train --resume {run_dir}" if resume_hint is None else resume_hint))
    if world.sharded and s.method == "ssb":
        model.to("cpu")
    seconds = before + time.perf_counter() - t0
    warm.finish(model, s.steps, losses, seconds)
    if shared is not None:
        where = shared.store()
        if world.main:
            _say(f"the SFT warm-up is kept as a shared start: {where}")
    if stop:
        raise KeyboardInterrupt(f"{stop} at the end of the SFT warm-up; it is saved in {warm.folder}. "
                                + (f"Continue with: rlvr train --resume {run_dir}" if resume_hint is None else resume_hint))
    return {"sft_seconds": seconds, "sft_final_loss": losses[-1] if losses else None, "sft_steps": len(losses),
            "sft_start": shared.record() if shared is not None else None, **extra}


def _ssb_rows(cfg: RunConfig, model, tok, task: Task, out: Path, world: World) -> list:
    """SSB's curated rows (written to ``out/ssb_data.jsonl``), with progress."""
    c = cfg.sft.ssb
    engine = build_engine(cfg, model, tok, cfg.rollout.batch_size)
    examples = _sft_examples(task)
    n = min(len(examples), c.max_problems or len(examples))
    bar = ProgressDisplay("SSB curation", n, every=max(1, n // 10)) if world.main else NullDisplay()
    try:
        rows = curate(engine, task, tok, examples, c, length_limits(cfg).warmup, start_seed(cfg),
                      on_progress=lambda i, _n: bar.update(i, "problems"))
    finally:
        bar.close()
    if world.main:
        write_rows(rows, out / "ssb_data.jsonl")
        if not rows:
            print("SSB: no problem had both a correct and a wrong attempt and a correct robust solution; the "
                  "warm-up distils nothing (more rollouts, or a model that solves some problems, help)",
                  file=sys.stderr)
    return rows


def _world(cfg: RunConfig) -> World:
    """The data-parallel group this process runs in (size 1 outside torchrun), checked against the config."""
    d = cfg.train.distributed
    world = init_world(d.backend, d.timeout_s, d.strategy,
                       {"mixed_precision": d.mixed_precision, "cpu_offload": d.cpu_offload})
    check_world(cfg, world)
    return world


def _main_only(world: World, ctx) -> contextlib.AbstractContextManager:
    return ctx if world.main else contextlib.nullcontext()


def train(cfg: RunConfig, model=None, tokenizer=None, task: Task | None = None) -> dict[str, Any]:
    """A fresh run: SFT warm-up (if ``sft.steps``), eval, RL, eval, plot, summary. A model object (with its
    tokenizer) or a task object may be given instead of the config's. Under torchrun every rank calls this;
    rank 0 creates, locks and writes the run directory."""
    world = _world(cfg)
    cfg = cfg.model_copy(update={"out": world.broadcast(str(run_dir_path(cfg)))})
    with _main_only(world, lock_run_dir(cfg.out)):
        if world.main:
            cfg, out = make_run_dir(cfg)
        world.barrier()
        return _from_start(cfg, world, Path(cfg.out), model, tokenizer, task)


def _from_start(cfg: RunConfig, world: World, out: Path, model=None, tokenizer=None,
                task: Task | None = None) -> dict[str, Any]:
    """A run up to its first RL checkpoint: set-up, the warm-up (from its checkpoint when there is one),
    the reference, the first evaluation, then RL from step 0."""
    if cfg.sft.steps and cfg.sft.cache is not False and (model is not None or task is not None):
        raise ValueError("sft.cache keys the shared start by the config, which does not describe a model or task "
                         "object given to train(); name them in the config (model.path, task) or set sft.cache: false")
    p = prepare(cfg, model, tokenizer, task, world=world)
    if world.main:
        describe_settings(cfg, p.model)
    extra: dict[str, Any] = {"prompts": p.prompts.splits}
    if cfg.sft.steps:  # replicated on every rank (FSDP: data-parallel on shards)
        extra.update(_sft_phase(cfg, p.model, p.tokenizer, p.task, out, world, p.device))
    world.sync_params(p.model)  # rank 0's weights on every rank (before the reference copy)
    ref = None
    if needs_reference(cfg):
        if world.main:
            p.model.save_pretrained(out / "reference", safe_serialization=True)
            save_tokenizer(p.tokenizer, out / "reference")
        ref = copy.deepcopy(p.model).eval().requires_grad_(False)  # (FSDP: sharded before it is placed)
        ref = ref if world.sharded else ref.to(p.device)
    if cfg.model.lora.rank and world.main:  # the frozen base, once: checkpoints then hold the adapter only
        p.model.save_pretrained(out / "lora_base", safe_serialization=True)
        save_tokenizer(p.tokenizer, out / "lora_base")
    seed_everything(cfg.seed)
    c = build_components(cfg, p.model, p.tokenizer, p.task, p.device, ref, world)
    with world.full_weights(c.update_module):
        extra["eval_before"] = _eval_at(cfg, c.engine, p.task, out, 0) if world.main else None
    return _run_rl(cfg, out, c, 0, extra)


def _restart(run_dir: Path, overrides: list[str] | None, task: Task | None) -> dict[str, Any]:
    """Resume a run stopped before its first RL checkpoint: from its warm-up checkpoint, else from the start
    (nothing had been saved, so nothing is lost)."""
    cfg = load_config(run_dir / "config.yaml", overrides)
    cfg = cfg.model_copy(update={"out": str(run_dir)})
    world = _world(cfg)
    with _main_only(world, lock_run_dir(run_dir)):
        world.barrier()  # every rank read config.yaml before rank 0 rewrites it
        if overrides and world.main:
            (run_dir / "config.yaml").write_text(dump_config(cfg))
        if world.main:
            saved = run_dir / "warmup" / "state.json"  # (checked against its checksums when it is loaded)
            st = json.loads(saved.read_text()) if saved.is_file() else None
            where = ("no checkpoint was written before it stopped: starting it again" if st is None else
                     "after its SFT warm-up" if st["step"] >= st["steps"] else
                     f"its SFT warm-up at step {st['step']} of {st['steps']}")
            _say(f"resuming {run_dir}: {where}")
        return _from_start(cfg, world, run_dir, task=task)


def resume(path: str | Path, overrides: list[str] | None = None, task: Task | None = None) -> dict[str, Any]:
    """Continue the run at ``path`` (a run directory or one of its checkpoints); under torchrun on every rank
    (the world size may differ from the one that wrote the checkpoint). A run stopped before its first RL
    checkpoint continues from its warm-up checkpoint (or from the start, when nothing was saved)."""
    path = Path(path)
    if not list_checkpoints(path) and (path / "config.yaml").is_file() and not (path / "state.json").is_file():
        return _restart(path, overrides, task)
    ckpt = intact_checkpoint(path)  # the newest whose files match their checksums (a damaged one is named)
    run_dir = ckpt.parent.parent
    cfg = load_config(run_dir / "config.yaml", overrides)
    world = _world(cfg)
    with _main_only(world, lock_run_dir(run_dir)):
        world.barrier()  # every rank read config.yaml before rank 0 rewrites it
        state = json.loads((ckpt / "state.json").read_text())
        step = int(state["step"])
        if step >= cfg.train.steps and (run_dir / "summary.json").is_file():
            if world.main:
                _say(f"{run_dir} is already complete (step {step} of {cfg.train.steps}); nothing to do. Train "
                     f"longer with: rlvr train --resume {run_dir} --set train.steps=N")
            return json.loads((run_dir / "summary.json").read_text())
        if overrides and world.main:
            (run_dir / "config.yaml").write_text(dump_config(cfg))
        if world.main:
            _say(f"resuming {run_dir} from {ckpt.name} (step {step} of {cfg.train.steps})")
        adapter = is_adapter_dir(ckpt / "model")
        weights = run_dir / "lora_base" if adapter else ckpt / "model"
        p = prepare(cfg, task=task, model_cfg=ModelConfig(path=str(weights), dtype=cfg.model.dtype,
                                                          chat_template=cfg.model.chat_template), world=world)
        if adapter:
            load_adapter(p.model, ckpt / "model")
        ref = None
        if needs_reference(cfg):
            ref, _ = load_model(ModelConfig(path=str(run_dir / "reference"), dtype=cfg.model.dtype), device=p.device)
            ref = ref.eval().requires_grad_(False)  # (in host memory; FSDP shards it before it is placed)
            ref = ref if world.sharded else ref.to(p.device)
        c = build_components(cfg, p.model, p.tokenizer, p.task, p.device, ref, world)
        state = load_checkpoint(ckpt, c.optimizer, c.scheduler, sharded_loader(c))
        load_state(c, state)
        for learner in c.learners:  # what trains beside the policy (a critic, a discriminator)
            learner.load(ckpt)
        load_engine_files(c.engine, ckpt)  # files the engine wrappers keep (PROPA's process reward model)
        extra = {k: state[k] for k in ("eval_before", "sft_seconds", "sft_final_loss", "sft_start", "rl_seconds",
                                                "prompts")
                 if k in state}
        return _run_rl(cfg, run_dir, c, int(state["step"]), extra)


def _resolve_model_dir(path: str | Path) -> Path:
    """A model directory from a HF dir, a checkpoint dir, or a run dir (its newest checkpoint)."""
    path = Path(path)
    if not path.exists():
        raise FileNotFoundError(f"--model {path}: no such file or directory")
    if (path / "config.json").is_file() or is_adapter_dir(path):
        return path
    if (path / "model" / "config.json").is_file() or is_adapter_dir(path / "model"):
        return path / "model"
    if not list_checkpoints(path):
        raise FileNotFoundError(f"--model {path}: neither a model directory (no config.json) nor a run directory "
                                "with checkpoints")
    return latest_checkpoint(path) / "model"


def eval_model(cfg: RunConfig, model_path: str | Path | None = None, on_progress=None,
               model=None, tokenizer=None, task: Task | None = None) -> dict[str, Any]:
    """Evaluate ``model_path`` (or a model object, or the config's model) on the task's eval split
    (per-prompt records included)."""
    resolved = None if model_path is None else _resolve_model_dir(model_path)
    adapter = resolved is not None and is_adapter_dir(resolved)
    weights = resolved.parents[2] / "lora_base" if adapter else resolved  # a checkpoint's adapter: its run's base
    mcfg = None if resolved is None else ModelConfig(path=str(weights), dtype=cfg.model.dtype,
                                                     chat_template=cfg.model.chat_template)
    p = prepare(cfg, model, tokenizer, task, model_cfg=mcfg, check_scoring=False)
    if adapter:
        load_adapter(p.model, resolved)
    engine = build_engine(cfg, p.model, p.tokenizer, cfg.eval.batch_size)
    if cfg.eval.search.name == "prm":
        engine = _prm_search(cfg, engine, p.model, p.tokenizer, resolved)
    name = str(model_path or ("model object" if model is not None else cfg.model.path or "tiny"))
    return {"model": name, "task": cfg.task.name if task is None else task.name,
            **run_eval(cfg, engine, p.task, on_progress=on_progress)}


def _prm_search(cfg: RunConfig, engine, model, tokenizer, resolved: Path | None):
    """``engine`` inside PROPA's step-level best-of-N search, scored by the process reward model of
    ``eval.search.prm`` (a checkpoint or run directory), else of the evaluated checkpoint."""
    from rlvr.learners.prm import PRM_DIR, ProcessRewardModel
    from rlvr.eval.prm_search import PRMSearchWrapper

    s = cfg.eval.search
    where = Path(s.prm) if s.prm else (resolved.parent if resolved is not None and resolved.name == "model" else None)
    if where is not None and not (where / PRM_DIR).is_dir() and (where / "checkpoints").is_dir():
        where = latest_checkpoint(where)
    if where is None or not (where / PRM_DIR).is_dir():
        raise FileNotFoundError(f"eval.search prm: no process reward model at {where or 'the evaluated model'} "
                                f"(a checkpoint of a run with rollout.strategy propa and prm: true holds {PRM_DIR}/); "
                                "set eval.search.prm")
    prm = ProcessRewardModel(model, tokenizer.pad_token_id)
    prm.load(where, optimizer=False)
    return PRMSearchWrapper(engine, tokenizer, prm.score, s.candidates, s.max_steps, s.step_tokens, s.delimiter,
                           s.terminal)


def run_sft(cfg: RunConfig, on_progress: Callable[[int, int], None] | None = None) -> dict[str, Any]:
    """Supervised fine-tuning alone: writes ``OUT/model`` (a HF directory) and ``OUT/sft.json``. Ctrl-C or
    SIGTERM saves the model trained so far to ``OUT/model`` and says so."""
    if cfg.sft.steps == 0:
        raise ValueError("sft.steps is 0: nothing to train")
    from datetime import datetime

    out = Path(cfg.out) if cfg.out else Path("runs") / datetime.now().strftime("sft-%Y%m%d-%H%M%S")
    out.mkdir(parents=True, exist_ok=True)
    with lock_run_dir(out):
        cfg = cfg.model_copy(update={"out": str(out)})
        (out / "config.yaml").write_text(dump_config(cfg))
        p = prepare(cfg, check_scoring=False)
        try:
            done = _sft_phase(cfg, p.model, p.tokenizer, p.task, out, resume_hint="")
        except KeyboardInterrupt as e:  # the model as trained so far, as a model directory
            p.model.save_pretrained(out / "model", safe_serialization=True)
            save_tokenizer(p.tokenizer, out / "model")
            raise KeyboardInterrupt(f"{e}The model trained so far is in {out / 'model'}.") from None
        p.model.save_pretrained(out / "model", safe_serialization=True)
        save_tokenizer(p.tokenizer, out / "model")
        engine = build_engine(cfg, p.model, p.tokenizer, cfg.eval.batch_size)
        with ProgressDisplay.standalone("eval") as progress:
            ev = run_eval(cfg, engine, p.task, on_progress=progress)
        result = {"model_dir": str(out / "model"), "steps": cfg.sft.steps, "final_loss": done["sft_final_loss"],
                  "seconds": done["sft_seconds"], "eval": {k: v for k, v in ev.items() if k != "per_prompt"}}
        (out / "sft.json").write_text(json.dumps(result, indent=2))
        return result

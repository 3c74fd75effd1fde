"""The RL phase of ``rlvr train``: the loop with its logging, evaluations, checkpoints and summary.

Shared by a fresh run and a resumed one (:mod:`rlvr.run.train`); everything a checkpoint holds is listed
once, in :func:`_stateful`.
"""

from __future__ import annotations

import json
import resource
import shutil
import time
from pathlib import Path
from typing import Any

import torch

from rlvr.config.run import RunConfig, length_limits
from rlvr.eval.evaluate import evaluate, scalar_metrics
from rlvr.eval.output import eval_path, write_eval
from rlvr.models.lora import describe
from rlvr.rollout.wrappers import engine_state, load_engine_state, save_engine_files
from rlvr.tasks.appeals import appeal_state
from rlvr.tasks.base import Task
from rlvr.run.checkpoint import checkpoint_tmp, list_checkpoints, save_checkpoint
from rlvr.distributed.fsdp import full_state_dict, load_optimizer, save_optimizer
from rlvr.run.health import RunHealth
from rlvr.run.logging import MetricsLog, ProgressDisplay, open_metrics_log, read_metrics
from rlvr.distributed.async_rollouts import wants_async
from rlvr.core.seeds import step_seed
from rlvr.train.loop import Components, train_loop
from rlvr.run.plot import eval_series, plot_run
from rlvr.run.setup import evaluation_engine
from rlvr.train.update import NonFiniteError

__all__ = ["run_eval", "load_state", "sharded_loader"]


def _write_extra(c: Components, folder) -> None:
    """The files beside the model in a checkpoint: the learners' (a critic, a discriminator) and the engine
    wrappers' (PROPA's PRM)."""
    for learner in c.learners:
        learner.save(folder)
    save_engine_files(c.engine, folder)


def run_eval(cfg: RunConfig, engine, task: Task, seed_salt: int = 0, on_progress=None) -> dict[str, Any]:
    """The configured evaluation, every completion scored under the run's deadline (``scoring``)."""
    from rlvr.tasks.scoring import Scorer

    e, s = cfg.eval, cfg.scoring
    scorer = Scorer(task, s.workers, s.timeout_s)
    try:
        return evaluate(engine, task, e.split, e.num_examples, e.samples, e.temperature,
                        length_limits(cfg).completion, seed=step_seed(cfg.seed, 10**6, salt=seed_salt),
                        report_greedy=e.report_greedy, on_progress=on_progress, scorer=scorer,
                        protocol={"chat_template": cfg.model.chat_template,
                                  "task_config": cfg.task.model_dump(mode="json")})
    finally:
        scorer.close()


def _eval_at(cfg: RunConfig, engine, task: Task, run_dir: Path, step: int,
             bar: ProgressDisplay | None = None) -> dict[str, Any]:
    """Evaluate with progress shown, write ``RUN_DIR/eval/step_N.json`` (per-prompt records included), and
    return it without them. Never through rollout wrappers (noise, hints)."""
    with (bar.sub(f"eval @{step}") if bar is not None else ProgressDisplay.standalone(f"eval @{step}")) as progress:
        result = run_eval(cfg, evaluation_engine(cfg, engine), task, on_progress=progress)
    write_eval({"step": step, **result}, eval_path(run_dir, step))
    return {k: v for k, v in result.items() if k != "per_prompt"}


def _accuracy_label(cfg: RunConfig) -> str:
    e = cfg.eval
    return "greedy" if e.temperature == 0 else f"avg@{e.samples}, T={e.temperature:g}"


def _info(m: dict[str, float]) -> str:
    errors = f"  score errors {m['score/errors']:.0f}" if m.get("score/errors") else ""
    return f"reward {m['reward']:.3f}  acc {m['accuracy']:.3f}  len {m['completion_length']:.1f}{errors}"


class _EngineState:
    def __init__(self, engine):
        self.engine = engine

    def state_dict(self) -> dict:
        return engine_state(self.engine)

    def load_state_dict(self, state: dict) -> None:
        load_engine_state(self.engine, state)


def _stateful(c: Components) -> dict[str, Any]:
    """Every object whose state a checkpoint holds, by its key in ``state.json``: save and resume walk this."""
    return {"sampler": c.sampler, "allocator": c.allocator, "stats": c.stats, "kl": c.kl,
            "algorithm_state": c.algo_state, "task": c.task,
            "engine": _EngineState(getattr(getattr(c, "rollouts", None), "engine", None) or c.engine),  # rollout side
            "appeal": appeal_state(c)}


def _non_finite(model) -> str | None:
    """The first parameter holding NaN or infinite values (this rank's shard under FSDP), or None."""
    for name, p in model.named_parameters():
        t = p.detach().to_local() if hasattr(p, "to_local") else p.detach()  # (no collective)
        if t.numel() and not bool(torch.isfinite(t).all()):
            return f"{name}: {int((~torch.isfinite(t)).sum())} non-finite values"
    return None


def _nan_message(e: Exception, run_dir: Path) -> str:
    found = list_checkpoints(run_dir)
    where = (f"the last good checkpoint, {found[-1]}, is kept" if found else
             "no checkpoint had been written yet (train.checkpoint_every sets how often)")
    return f"{e}. Training stopped; {where}"


def _run_rl(cfg: RunConfig, run_dir: Path, c: Components, start: int, extra: dict[str, Any]) -> dict[str, Any]:
    """The RL phase of a run. In a distributed run every rank trains; rank 0 alone logs, evaluates and
    writes files (the others wait at its checkpoints) and its summary is returned on every rank."""
    world = c.world
    log = open_metrics_log(cfg, run_dir, resume_step=start) if world.main else None
    # a readable sample of the steps' completions (rlvr.train.samples), one line per row
    samples = MetricsLog(run_dir / "completions.jsonl", resume_step=start) \
        if world.main and cfg.logging.completions_every else None
    bar = ProgressDisplay("RL", cfg.train.steps, start) if world.main else None
    keep = cfg.train.keep_checkpoints

    def save(step: int) -> None:
        bad = world.any(_non_finite(c.model))  # never a checkpoint of weights that are not numbers
        if bad:
            raise NonFiniteError(f"the weights are not finite after step {step} ({bad}): the last update diverged "
                                 "(too high a learning rate, or a reward or advantage far out of range); no "
                                 "checkpoint of them was written")
        state = {k: obj.state_dict() for k, obj in _stateful(c).items()}
        engines = world.gather(state["engine"])  # rank-local engine state (e.g. a reuse cache), every rank's
        if world.distributed:
            state["engine_ranks"] = engines
        state.update(extra, rl_seconds=extra.get("rl_seconds", 0.0) + time.perf_counter() - t0)
        if world.sharded:  # every rank writes its optimizer shard into the folder rank 0 then completes
            if world.main:
                shutil.rmtree(checkpoint_tmp(run_dir, step), ignore_errors=True)
            world.barrier()
            save_optimizer(c.update_module, c.optimizer, checkpoint_tmp(run_dir, step) / "optimizer_dcp")
        weights = full_state_dict(c.update_module) if world.sharded else None  # FSDP: gathered onto rank 0
        if world.main:
            save_checkpoint(run_dir, step, c.model, c.tokenizer, None if world.sharded else c.optimizer,
                            c.scheduler, state, keep, fresh=not world.sharded, model_state=weights,
                            write_extra=lambda folder: _write_extra(c, folder))
            shutil.rmtree(run_dir / "warmup", ignore_errors=True)  # its result is in every RL checkpoint now
        world.barrier()

    health = RunHealth(length_limits(cfg).episode, say=bar.message if bar is not None else None)

    def on_step(step: int, m: dict[str, float]) -> None:
        if world.main:
            health.check(step, m)  # warn/* flags in the metrics; a message when a condition starts
            log.write(step, m)
            if samples is not None and c.samples:
                for row in c.samples:
                    samples.write(step, row)
                log.table(step, c.samples)
            bar.update(step, _info(m) + RunHealth.tag(m))

    evals: dict[int, dict[str, Any]] = {}

    def ev(step: int) -> dict[str, Any]:
        with world.full_weights(c.update_module):  # every rank enters (FSDP gathers); rank 0 evaluates
            if not world.main:
                return {}
            evals[step] = _eval_at(cfg, c.engine, c.task, run_dir, step, bar)
        return scalar_metrics(evals[step])

    t0 = time.perf_counter()
    try:
        train_loop(cfg, c, start, on_step, save, ev)
    except NonFiniteError as e:
        raise NonFiniteError(_nan_message(e, run_dir)) from None
    finally:
        if world.main:
            bar.close()
            log.close()
            if samples is not None:
                samples.close()
    rl_time = time.perf_counter() - t0
    with world.full_weights(c.update_module):
        after = (evals.get(cfg.train.steps) or _eval_at(cfg, c.engine, c.task, run_dir, cfg.train.steps)
                 if world.main else None)
    summary = world.broadcast(_summarise(cfg, run_dir, c, extra, after, rl_time) if world.main else None)
    world.finish()
    return summary


def _summarise(cfg: RunConfig, run_dir: Path, c: Components, extra: dict[str, Any], after: dict[str, Any],
               rl_time: float) -> dict[str, Any]:
    metrics = read_metrics(run_dir / "metrics.jsonl")
    before = extra.get("eval_before")
    plot_run(metrics, run_dir / "plot.png", eval_series(metrics, before, after, cfg.train.steps, _accuracy_label(cfg)))
    summary = {
        "run_dir": str(run_dir), "steps": cfg.train.steps, "seed": cfg.seed,
        "eval_before": before, "eval_after": after,
        "final_metrics": metrics[-1] if metrics else {},
        "rl_seconds": rl_time + extra.get("rl_seconds", 0.0),
        "sft_seconds": extra.get("sft_seconds", 0.0),
        "sft_start": extra.get("sft_start"),  # the shared start the warm-up came from (sft.cache); None: trained
        "peak_memory_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024,
        "peak_gpu_memory_mb": torch.cuda.max_memory_allocated() / 2**20 if torch.cuda.is_available() else None,
        "prompts": extra.get("prompts"),
        "threads": torch.get_num_threads(),
        # the asynchronous producer's (rollout.producer_threads, else the trainer's); None: no producer
        "producer_threads": (cfg.rollout.producer_threads or torch.get_num_threads()) if wants_async(cfg) else None,
        "world_size": c.world.size,
        **describe(c.model, c.optimizer),  # trainable / total parameters, optimizer-state bytes (LoRA: adapters)
    }
    (run_dir / "summary.json").write_text(json.dumps(summary, indent=2))
    return summary


def sharded_loader(c: Components):
    """What :func:`load_checkpoint` restores a sharded (FSDP) optimizer state with; None when not sharded."""
    if not c.world.sharded:
        return None
    return lambda path: load_optimizer(c.update_module, c.optimizer, path)


def load_state(c: Components, state: dict[str, Any]) -> None:
    """Restore every stateful component from a checkpoint's ``state.json`` (each rank its own engine state
    when the checkpoint was written by as many ranks)."""
    ranks = state.get("engine_ranks")
    if ranks is not None and len(ranks) == c.world.size:
        state = {**state, "engine": ranks[c.world.rank]}
    for key, obj in _stateful(c).items():
        obj.load_state_dict(state.get(key, {}))

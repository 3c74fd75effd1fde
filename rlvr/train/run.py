"""``rlvr train``: set up a run directory, warm up with SFT, train with RL, evaluate, summarise.

A fresh run writes ``config.yaml`` (the resolved config, which reproduces the run) before any work;
``resume`` reloads it from the run directory, restores the newest checkpoint and continues. A run directory
is locked while a process writes to it (:mod:`rlvr.train.rundir`). Ctrl-C and SIGTERM finish the step (or
SFT step) in progress and save before exiting (:mod:`rlvr.train.interrupt`).
"""

from __future__ import annotations

import copy
import json
import resource
import sys
import time
from pathlib import Path
from typing import Any, Callable

import torch

from rlvr.config import RunConfig, dump_config, load_config, needs_reference
from rlvr.eval.evaluate import evaluate, scalar_metrics
from rlvr.eval.output import eval_path, write_eval
from rlvr.models.loading import ModelConfig, load_model
from rlvr.models.lora import describe, is_adapter_dir, load_adapter
from rlvr.rollout.wrappers import engine_state, load_engine_state
from rlvr.tasks.appeals import appeal_state
from rlvr.tasks.base import Task
from rlvr.train.checkpoint import latest_checkpoint, list_checkpoints, load_checkpoint, save_checkpoint
from rlvr.train.interrupt import deferred_interrupt
from rlvr.train.logging import ProgressDisplay, open_metrics_log, read_metrics
from rlvr.train.loop import Components, step_seed, train_loop
from rlvr.train.plot import eval_series, plot_run
from rlvr.train.rundir import lock_run_dir, make_run_dir, run_dir_path
from rlvr.train.setup import (build_components, build_engine, build_task, evaluation_engine, pick_device, prepare,
                              seed_everything)
from rlvr.train.sft import sft
from rlvr.train.update import NonFiniteError

__all__ = ["train", "resume", "build_task", "build_components", "run_eval", "seed_everything", "pick_device",
           "make_run_dir", "eval_model", "run_sft"]

def _say(msg: str) -> None:
    print(msg, file=sys.stderr, flush=True)


def _sft_examples(task: Task):
    """The task's ``sft`` split when it has one (e.g. teacher-written targets), else its train split."""
    return task.examples("sft" if "sft" in task.splits else "train")


def run_eval(cfg: RunConfig, engine, task: Task, seed_salt: int = 0, on_progress=None) -> dict[str, Any]:
    e = cfg.eval
    return evaluate(engine, task, e.split, e.num_examples, e.samples, e.temperature,
                    cfg.rollout.max_new_tokens, seed=step_seed(cfg.seed, 10**6, salt=seed_salt),
                    report_greedy=e.report_greedy, on_progress=on_progress)


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
            "algorithm_state": c.algo_state, "task": c.task, "engine": _EngineState(c.engine),
            "appeal": appeal_state(c)}


def _nan_message(e: Exception, run_dir: Path) -> str:
    found = list_checkpoints(run_dir)
    where = (f"the last good checkpoint, {found[-1]}, is kept" if found else
             "no checkpoint had been written yet (train.checkpoint_every sets how often)")
    return f"{e}. Training stopped; {where}"


def _run_rl(cfg: RunConfig, run_dir: Path, c: Components, start: int, extra: dict[str, Any]) -> dict[str, Any]:
    log = open_metrics_log(cfg, run_dir, resume_step=start)
    bar = ProgressDisplay("RL", cfg.train.steps, start)
    keep = cfg.train.keep_checkpoints

    def save(step: int) -> None:
        state = {k: obj.state_dict() for k, obj in _stateful(c).items()}
        state.update(extra, rl_seconds=extra.get("rl_seconds", 0.0) + time.perf_counter() - t0)
        save_checkpoint(run_dir, step, c.model, c.tokenizer, c.optimizer, c.scheduler, state, keep)

    def on_step(step: int, m: dict[str, float]) -> None:
        log.write(step, m)
        bar.update(step, _info(m))

    evals: dict[int, dict[str, Any]] = {}

    def ev(step: int) -> dict[str, Any]:
        evals[step] = _eval_at(cfg, c.engine, c.task, run_dir, step, bar)
        return scalar_metrics(evals[step])

    t0 = time.perf_counter()
    try:
        train_loop(cfg, c, start, on_step, save, ev)
    except NonFiniteError as e:
        raise NonFiniteError(_nan_message(e, run_dir)) from None
    finally:
        bar.close()
        log.close()
    rl_time = time.perf_counter() - t0
    after = evals.get(cfg.train.steps) or _eval_at(cfg, c.engine, c.task, run_dir, cfg.train.steps)
    metrics = read_metrics(run_dir / "metrics.jsonl")
    before = extra.get("eval_before")
    plot_run(metrics, run_dir / "plot.png", eval_series(metrics, before, after, cfg.train.steps, _accuracy_label(cfg)))
    summary = {
        "run_dir": str(run_dir), "steps": cfg.train.steps, "seed": cfg.seed,
        "eval_before": before, "eval_after": after,
        "final_metrics": metrics[-1] if metrics else {},
        "rl_seconds": rl_time + extra.get("rl_seconds", 0.0),
        "sft_seconds": extra.get("sft_seconds", 0.0),
        "peak_memory_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024,
        "peak_gpu_memory_mb": torch.cuda.max_memory_allocated() / 2**20 if torch.cuda.is_available() else None,
        "prompts": extra.get("prompts"),
        "threads": torch.get_num_threads(),
        **describe(c.model, c.optimizer),  # trainable / total parameters, optimizer-state bytes (LoRA: adapters)
    }
    (run_dir / "summary.json").write_text(json.dumps(summary, indent=2))
    return summary


def _sft_phase(cfg: RunConfig, model, tok, task: Task, save_to: Path) -> dict[str, Any]:
    """SFT with progress; Ctrl-C or SIGTERM finishes the SFT step, saves the model to ``save_to`` and raises
    ``KeyboardInterrupt`` saying where it is and how to continue from it."""
    t0 = time.perf_counter()
    bar = ProgressDisplay("SFT", cfg.sft.steps, every=50)
    with deferred_interrupt("this SFT step") as interrupted:
        try:
            losses = sft(model, tok, _sft_examples(task), cfg.sft.steps, cfg.sft.batch_size, cfg.sft.lr,
                         cfg.sft.warmup_steps, seed=cfg.seed, chat_template=cfg.model.chat_template,
                         micro_batch_size=cfg.train.micro_batch_size,
                         on_step=lambda i, loss: bar.update(i + 1, f"loss {loss:.4f}"),
                         stop=lambda: interrupted() is not None)
        finally:
            bar.close()
        if interrupted():
            model.save_pretrained(save_to, safe_serialization=True)
            tok.save_pretrained(save_to)
            (save_to / "sft_progress.json").write_text(json.dumps({"steps_done": len(losses), "steps": cfg.sft.steps,
                                                                   "final_loss": losses[-1] if losses else None}))
            raise KeyboardInterrupt(
                f"{interrupted()} during SFT after step {len(losses)} of {cfg.sft.steps}; the partly trained model "
                f"is saved in {save_to}. Continue from it with --set model.path={save_to} "
                f"--set sft.steps={cfg.sft.steps - len(losses)}")
    return {"sft_seconds": time.perf_counter() - t0, "sft_final_loss": losses[-1], "sft_steps": len(losses)}


def train(cfg: RunConfig, model=None, tokenizer=None, task: Task | None = None) -> dict[str, Any]:
    """A fresh run: SFT warm-up (if ``sft.steps``), eval, RL, eval, plot, summary. A model object (with its
    tokenizer) or a task object may be given instead of the config's."""
    cfg = cfg.model_copy(update={"out": str(run_dir_path(cfg))})
    with lock_run_dir(cfg.out):
        cfg, out = make_run_dir(cfg)
        p = prepare(cfg, model, tokenizer, task)
        extra: dict[str, Any] = {"prompts": p.prompts.splits}
        if cfg.sft.steps:
            extra.update(_sft_phase(cfg, p.model, p.tokenizer, p.task, out / "sft_model"))
        ref = None
        if needs_reference(cfg):
            p.model.save_pretrained(out / "reference", safe_serialization=True)
            p.tokenizer.save_pretrained(out / "reference")
            ref = copy.deepcopy(p.model).eval().requires_grad_(False)
        if cfg.model.lora.rank:  # the frozen base, once: checkpoints then hold the adapter only
            p.model.save_pretrained(out / "lora_base", safe_serialization=True)
            p.tokenizer.save_pretrained(out / "lora_base")
        seed_everything(cfg.seed)
        c = build_components(cfg, p.model, p.tokenizer, p.task, p.device, ref)
        extra["eval_before"] = _eval_at(cfg, c.engine, p.task, out, 0)
        return _run_rl(cfg, out, c, 0, extra)


def resume(path: str | Path, overrides: list[str] | None = None, task: Task | None = None) -> dict[str, Any]:
    """Continue the run at ``path`` (a run directory or one of its checkpoints)."""
    path = Path(path)
    if not list_checkpoints(path) and (path / "sft_model" / "sft_progress.json").is_file():
        done = json.loads((path / "sft_model" / "sft_progress.json").read_text())
        raise FileNotFoundError(
            f"{path} was stopped during its SFT warm-up (step {done['steps_done']} of {done['steps']}), before any "
            f"RL checkpoint. Start a new run from the saved model: rlvr train -c {path / 'config.yaml'} --out NEW_DIR "
            f"--set model.path={path / 'sft_model'} --set sft.steps={done['steps'] - done['steps_done']}")
    ckpt = latest_checkpoint(path)
    run_dir = ckpt.parent.parent
    with lock_run_dir(run_dir):
        cfg = load_config(run_dir / "config.yaml", overrides)
        state = json.loads((ckpt / "state.json").read_text())
        step = int(state["step"])
        if step >= cfg.train.steps and (run_dir / "summary.json").is_file():
            _say(f"{run_dir} is already complete (step {step} of {cfg.train.steps}); nothing to do. Train longer "
                 f"with: rlvr train --resume {run_dir} --set train.steps=N")
            return json.loads((run_dir / "summary.json").read_text())
        if overrides:
            (run_dir / "config.yaml").write_text(dump_config(cfg))
        _say(f"resuming {run_dir} from {ckpt.name} (step {step} of {cfg.train.steps})")
        adapter = is_adapter_dir(ckpt / "model")
        weights = run_dir / "lora_base" if adapter else ckpt / "model"
        p = prepare(cfg, task=task, model_cfg=ModelConfig(path=str(weights), dtype=cfg.model.dtype,
                                                          chat_template=cfg.model.chat_template))
        if adapter:
            load_adapter(p.model, ckpt / "model")
        ref = None
        if needs_reference(cfg):
            ref, _ = load_model(ModelConfig(path=str(run_dir / "reference"), dtype=cfg.model.dtype))
            ref = ref.to(p.device).eval().requires_grad_(False)
        c = build_components(cfg, p.model, p.tokenizer, p.task, p.device, ref)
        state = load_checkpoint(ckpt, c.optimizer, c.scheduler)
        for key, obj in _stateful(c).items():
            obj.load_state_dict(state.get(key, {}))
        extra = {k: state[k] for k in ("eval_before", "sft_seconds", "sft_final_loss", "rl_seconds", "prompts")
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
    name = str(model_path or ("model object" if model is not None else cfg.model.path or "tiny"))
    return {"model": name, "task": cfg.task.name if task is None else task.name,
            **run_eval(cfg, engine, p.task, on_progress=on_progress)}


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
        done = _sft_phase(cfg, p.model, p.tokenizer, p.task, out / "model")
        p.model.save_pretrained(out / "model", safe_serialization=True)
        p.tokenizer.save_pretrained(out / "model")
        engine = build_engine(cfg, p.model, p.tokenizer, cfg.eval.batch_size)
        with ProgressDisplay.standalone("eval") as progress:
            ev = run_eval(cfg, engine, p.task, on_progress=progress)
        result = {"model_dir": str(out / "model"), "steps": cfg.sft.steps, "final_loss": done["sft_final_loss"],
                  "seconds": done["sft_seconds"], "eval": {k: v for k, v in ev.items() if k != "per_prompt"}}
        (out / "sft.json").write_text(json.dumps(result, indent=2))
        return result

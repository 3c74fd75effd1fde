"""``rlvr train``: set up a run directory, warm up with SFT, train with RL, evaluate, summarise.

A fresh run writes ``config.yaml`` (the resolved config, which reproduces the run) before any work;
``resume`` reloads it from the run directory, restores the newest checkpoint and continues.
"""

from __future__ import annotations

import copy
import json
import math
import random
import resource
import time
from datetime import datetime
from pathlib import Path
from typing import Any

import numpy as np
import torch

from rlvr.config import RunConfig, dump_config, load_config, needs_reference
from rlvr.optim import OPTIMIZERS
from rlvr.train.algo_state import AlgorithmState
from rlvr.models.loading import ModelConfig, load_model
from rlvr.rollout.base import ENGINES
from rlvr.rollout.wrappers import base_engine, engine_state, load_engine_state, wrap_engine
from rlvr.sampling import build_data
from rlvr.tasks.base import TASKS, Task
from rlvr.tasks.scoring import Scorer
from rlvr.train.kl_control import KLController
from rlvr.train.checkpoint import latest_checkpoint, load_checkpoint, save_checkpoint
from rlvr.train.logging import ProgressDisplay, open_metrics_log, read_metrics
from rlvr.train.loop import Components, step_seed, train_loop
from rlvr.train.plot import eval_series, plot_run
from rlvr.train.sft import sft
from rlvr.eval.evaluate import evaluate, scalar_metrics
from rlvr.eval.output import eval_path, write_eval

__all__ = ["train", "resume", "build_task", "run_eval", "seed_everything", "pick_device", "make_run_dir"]


def seed_everything(seed: int) -> None:
    random.seed(seed)
    np.random.seed(seed % 2**32)
    torch.manual_seed(seed)


def pick_device(name: str) -> torch.device:
    if name == "cuda" and not torch.cuda.is_available():
        raise RuntimeError("device: cuda requested but no CUDA device is available")
    return torch.device("cuda" if name == "cuda" or (name == "auto" and torch.cuda.is_available()) else "cpu")


def make_run_dir(cfg: RunConfig, default_root: str = "runs") -> tuple[RunConfig, Path]:
    out = Path(cfg.out) if cfg.out else Path(default_root) / datetime.now().strftime("%Y%m%d-%H%M%S")
    if (out / "checkpoints").exists():
        raise FileExistsError(f"{out} already holds a run; resume it with `rlvr train --resume {out}` "
                              f"or choose another --out")
    out.mkdir(parents=True, exist_ok=True)
    cfg = cfg.model_copy(update={"out": str(out)})
    (out / "config.yaml").write_text(dump_config(cfg))
    return cfg, out


def _sft_examples(task: Task):
    """The task's ``sft`` split when it has one (e.g. teacher-written targets), else its train split."""
    return task.examples("sft" if "sft" in task.splits else "train")


def build_task(cfg: RunConfig) -> Task:
    return TASKS.get(cfg.task.name).fn(cfg.task.params)


def run_eval(cfg: RunConfig, engine, task: Task, seed_salt: int = 0, on_progress=None) -> dict[str, Any]:
    e = cfg.eval
    return evaluate(engine, task, e.split, e.num_examples, e.samples, e.temperature,
                    cfg.rollout.max_new_tokens, seed=step_seed(cfg.seed, 10**6, salt=seed_salt),
                    report_greedy=e.report_greedy, on_progress=on_progress)


def _eval_at(cfg: RunConfig, engine, task: Task, run_dir: Path, step: int) -> dict[str, Any]:
    """Evaluate, write ``RUN_DIR/eval/step_N.json`` (per-prompt records included), return it without them."""
    result = run_eval(cfg, base_engine(engine), task)  # never through rollout wrappers (noise, hints)
    write_eval({"step": step, **result}, eval_path(run_dir, step))
    return {k: v for k, v in result.items() if k != "per_prompt"}


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


def _components(cfg: RunConfig, model, tok, task: Task, device: torch.device, ref_model=None) -> Components:
    model.to(device)
    engine = ENGINES.get(cfg.rollout.engine).fn(model, tok, batch_size=cfg.rollout.batch_size,
                                                chat_template=cfg.model.chat_template)
    engine = wrap_engine(engine, model, tok, cfg.rollout, cfg.model.chat_template)
    opt, sched = _optimizer(cfg, model)
    sampler, allocator, stats = build_data(cfg, task)
    return Components(model=model, tokenizer=tok, task=task, engine=engine,
                      sampler=sampler, allocator=allocator, stats=stats,
                      optimizer=opt, scheduler=sched, ref_model=ref_model, device=device,
                      kl=KLController(cfg.algorithm.kl, cfg.train.steps),
                      scorer=Scorer(task, cfg.scoring.workers, cfg.scoring.timeout_s),
                      algo_state=AlgorithmState(cfg))


def _accuracy_label(cfg: RunConfig) -> str:
    e = cfg.eval
    return "greedy" if e.temperature == 0 else f"avg@{e.samples}, T={e.temperature:g}"


def _info(m: dict[str, float]) -> str:
    return f"reward {m['reward']:.3f}  acc {m['accuracy']:.3f}  len {m['completion_length']:.1f}"


def _run_rl(cfg: RunConfig, run_dir: Path, c: Components, start: int, extra: dict[str, Any]) -> dict[str, Any]:
    log = open_metrics_log(cfg, run_dir, resume_step=start)
    bar = ProgressDisplay("RL", cfg.train.steps, start)
    keep = cfg.train.keep_checkpoints

    def save(step: int) -> None:
        state = {"sampler": c.sampler.state_dict(), "allocator": c.allocator.state_dict(),
                 "stats": c.stats.state_dict(), "kl": c.kl.state_dict(),
                 "algorithm_state": c.algo_state.state_dict(), "task": c.task.state_dict(),
                 "engine": engine_state(c.engine), **extra,
                 "rl_seconds": extra.get("rl_seconds", 0.0) + time.perf_counter() - t0}
        save_checkpoint(run_dir, step, c.model, c.tokenizer, c.optimizer, c.scheduler, state, keep)

    def on_step(step: int, m: dict[str, float]) -> None:
        log.write(step, m)
        bar.update(step, _info(m))

    evals: dict[int, dict[str, Any]] = {}

    def ev(step: int) -> dict[str, Any]:
        evals[step] = _eval_at(cfg, c.engine, c.task, run_dir, step)
        return scalar_metrics(evals[step])

    t0 = time.perf_counter()
    try:
        train_loop(cfg, c, start, on_step, save, ev)
    finally:
        bar.close()
        log.close()
    rl_time = time.perf_counter() - t0
    after = evals.get(cfg.train.steps) or _eval_at(cfg, c.engine, c.task, run_dir, cfg.train.steps)
    metrics = read_metrics(run_dir / "metrics.jsonl")
    before = extra.get("eval_before")
    plot_run(metrics, run_dir / "plot.png", eval_series(metrics, before, after, cfg.train.steps, _accuracy_label(cfg)))
    peak_mb = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    summary = {
        "run_dir": str(run_dir), "steps": cfg.train.steps, "seed": cfg.seed,
        "eval_before": before, "eval_after": after,
        "final_metrics": metrics[-1] if metrics else {},
        "rl_seconds": rl_time + extra.get("rl_seconds", 0.0),
        "sft_seconds": extra.get("sft_seconds", 0.0),
        "peak_memory_mb": peak_mb,
        "peak_gpu_memory_mb": torch.cuda.max_memory_allocated() / 2**20 if torch.cuda.is_available() else None,
    }
    (run_dir / "summary.json").write_text(json.dumps(summary, indent=2))
    return summary


def train(cfg: RunConfig) -> dict[str, Any]:
    """A fresh run: SFT warm-up (if ``sft.steps``), eval, RL, eval, plot, summary."""
    cfg, run_dir = make_run_dir(cfg)
    seed_everything(cfg.seed)
    device = pick_device(cfg.device)
    model, tok = load_model(cfg.model, seed=cfg.seed)
    task = build_task(cfg)
    model.to(device)
    extra: dict[str, Any] = {}
    if cfg.sft.steps:
        t0 = time.perf_counter()
        bar = ProgressDisplay("SFT", cfg.sft.steps, every=50)
        losses = sft(model, tok, _sft_examples(task), cfg.sft.steps, cfg.sft.batch_size, cfg.sft.lr,
                     cfg.sft.warmup_steps, seed=cfg.seed, chat_template=cfg.model.chat_template,
                     micro_batch_size=cfg.train.micro_batch_size,
                     on_step=lambda i, loss: bar.update(i + 1, f"loss {loss:.4f}"))
        bar.close()
        extra["sft_seconds"] = time.perf_counter() - t0
        extra["sft_final_loss"] = losses[-1]
    ref = None
    if needs_reference(cfg):
        model.save_pretrained(run_dir / "reference", safe_serialization=True)
        tok.save_pretrained(run_dir / "reference")
        ref = copy.deepcopy(model).eval().requires_grad_(False)
    seed_everything(cfg.seed)
    c = _components(cfg, model, tok, task, device, ref)
    extra["eval_before"] = _eval_at(cfg, c.engine, task, run_dir, 0)
    return _run_rl(cfg, run_dir, c, 0, extra)


def resume(path: str | Path, overrides: list[str] | None = None) -> dict[str, Any]:
    """Continue the run at ``path`` (a run directory or one of its checkpoints)."""
    ckpt = latest_checkpoint(path)
    run_dir = ckpt.parent.parent
    cfg = load_config(run_dir / "config.yaml", overrides)
    if overrides:
        (run_dir / "config.yaml").write_text(dump_config(cfg))
    device = pick_device(cfg.device)
    model, tok = load_model(ModelConfig(path=str(ckpt / "model"), dtype=cfg.model.dtype))
    task = build_task(cfg)
    ref = None
    if needs_reference(cfg):
        ref, _ = load_model(ModelConfig(path=str(run_dir / "reference"), dtype=cfg.model.dtype))
        ref = ref.to(device).eval().requires_grad_(False)
    c = _components(cfg, model, tok, task, device, ref)
    state = load_checkpoint(ckpt, c.optimizer, c.scheduler)
    c.sampler.load_state_dict(state["sampler"])
    c.allocator.load_state_dict(state["allocator"])
    c.stats.load_state_dict(state["stats"])
    c.kl.load_state_dict(state["kl"])
    c.algo_state.load_state_dict(state.get("algorithm_state", {}))
    c.task.load_state_dict(state.get("task", {}))
    load_engine_state(c.engine, state.get("engine", {}))
    extra = {k: state[k] for k in ("eval_before", "sft_seconds", "sft_final_loss", "rl_seconds") if k in state}
    return _run_rl(cfg, run_dir, c, int(state["step"]), extra)


def _resolve_model_dir(path: str | Path) -> Path:
    """A model directory from a HF dir, a checkpoint dir, or a run dir (its newest checkpoint)."""
    path = Path(path)
    if (path / "config.json").is_file():
        return path
    if (path / "model" / "config.json").is_file():
        return path / "model"
    return latest_checkpoint(path) / "model"


def eval_model(cfg: RunConfig, model_path: str | Path | None = None, on_progress=None) -> dict[str, Any]:
    """Evaluate ``model_path`` (or the config's model) on the task's eval split (per-prompt records included)."""
    seed_everything(cfg.seed)
    mcfg = cfg.model if model_path is None else ModelConfig(path=str(_resolve_model_dir(model_path)),
                                                             dtype=cfg.model.dtype,
                                                             chat_template=cfg.model.chat_template)
    model, tok = load_model(mcfg, seed=cfg.seed)
    model.to(pick_device(cfg.device))
    task = build_task(cfg)
    engine = ENGINES.get(cfg.rollout.engine).fn(model, tok, batch_size=cfg.eval.batch_size,
                                                chat_template=cfg.model.chat_template)
    return {"model": str(model_path or cfg.model.path or "tiny"), "task": cfg.task.name,
            **run_eval(cfg, engine, task, on_progress=on_progress)}


def run_sft(cfg: RunConfig) -> dict[str, Any]:
    """Supervised fine-tuning alone: writes ``OUT/model`` (a HF directory) and ``OUT/sft.json``."""
    if cfg.sft.steps == 0:
        raise ValueError("sft.steps is 0: nothing to train")
    out = Path(cfg.out) if cfg.out else Path("runs") / datetime.now().strftime("sft-%Y%m%d-%H%M%S")
    out.mkdir(parents=True, exist_ok=True)
    cfg = cfg.model_copy(update={"out": str(out)})
    (out / "config.yaml").write_text(dump_config(cfg))
    seed_everything(cfg.seed)
    device = pick_device(cfg.device)
    model, tok = load_model(cfg.model, seed=cfg.seed)
    model.to(device)
    task = build_task(cfg)
    bar = ProgressDisplay("SFT", cfg.sft.steps, every=50)
    t0 = time.perf_counter()
    losses = sft(model, tok, _sft_examples(task), cfg.sft.steps, cfg.sft.batch_size, cfg.sft.lr,
                 cfg.sft.warmup_steps, seed=cfg.seed, chat_template=cfg.model.chat_template,
                 micro_batch_size=cfg.train.micro_batch_size,
                 on_step=lambda i, loss: bar.update(i + 1, f"loss {loss:.4f}"))
    bar.close()
    model.save_pretrained(out / "model", safe_serialization=True)
    tok.save_pretrained(out / "model")
    engine = ENGINES.get(cfg.rollout.engine).fn(model, tok, batch_size=cfg.eval.batch_size,
                                                chat_template=cfg.model.chat_template)
    result = {"model_dir": str(out / "model"), "steps": cfg.sft.steps, "final_loss": losses[-1],
              "seconds": time.perf_counter() - t0, "eval": {k: v for k, v in run_eval(cfg, engine, task).items() if k != "per_prompt"}}
    (out / "sft.json").write_text(json.dumps(result, indent=2))
    return result

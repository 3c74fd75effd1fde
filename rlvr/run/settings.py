"""The settings that matter, printed when a run starts: which defaults applied, the model, the task, the
algorithm, the rollout, the learning rates, the warm-up and the checkpoint cadence.

A user who forgot to set something (a learning rate meant for a pretrained model, a completion length) sees it
before the first step instead of after a night of training.
"""

from __future__ import annotations

import sys
from typing import Any

__all__ = ["key_settings", "describe_settings"]

_ORIGIN = {"demo": "the demo's defaults: a model built from scratch (rlvr/config/demo.yaml)",
           "pretrained": "the pretrained-model defaults (rlvr/config/defaults.py)"}


def _params(model: Any) -> str:
    if model is None:
        return ""
    n = sum(p.numel() for p in model.parameters())
    p = next(model.parameters())
    size = f"{n / 1e9:.2f}B" if n >= 1e9 else f"{n / 1e6:.1f}M" if n >= 1e6 else f"{n / 1e3:.0f}K"
    return f" ({size} parameters, {str(p.dtype).removeprefix('torch.')})"


def _cadence(every: int, minutes: float | None, unit: str) -> str:
    parts = ([f"every {every} {unit}"] if every else []) + ([f"every {minutes:g} min"] if minutes else [])
    return " and ".join(parts) or "at the end only"


def key_settings(cfg: Any, model: Any = None) -> list[tuple[str, str]]:
    """``(label, value)`` rows of the settings that matter for ``cfg`` (``model``: the built policy, for its
    size and dtype)."""
    m, r, a, o, s, t = cfg.model, cfg.rollout, cfg.algorithm, cfg.optim, cfg.sft, cfg.train
    tiny = m.tiny
    what = m.path or f"tiny {tiny.arch} built from scratch ({tiny.hidden_size} wide, {tiny.num_layers} layers)"
    lora = f", LoRA rank {m.lora.rank}" if m.lora.rank else ""
    params = cfg.task.params
    params = params.model_dump() if hasattr(params, "model_dump") else dict(params or {})
    task = cfg.task.name + "".join(f", {k}={v}" for k, v in params.items() if k.endswith("path") and v)
    algo = f"{a.advantage.name} advantage, {a.objective.name}, {a.aggregation.name}, kl {a.kl.coef:g}"
    if cfg.recipe is not None:
        algo = f"recipe {cfg.recipe.name}: {algo}"
    warm = (f"{s.steps} SFT steps ({s.method}) at lr {s.lr:g}, checkpoint "
            f"{_cadence(s.checkpoint_every, t.checkpoint_minutes, 'steps')}" if s.steps else "none (sft.steps: 0)")
    return [
        ("defaults", _ORIGIN.get(cfg.defaults, cfg.defaults)),
        ("model", f"{what}{_params(model)}{lora}"),
        ("task", task),
        ("algorithm", algo),
        ("rollout", f"{r.prompts_per_step} prompts x {r.group_size} completions a step, at most {r.max_new_tokens} "
                    f"new tokens, temperature {r.temperature:g}, engine {r.engine}"),
        ("learning", f"lr {o.lr:g} ({o.schedule}, {o.warmup_steps} warm-up steps), {a.minibatches} minibatch(es) "
                     f"a pass, micro-batches of {t.micro_batch_size}"),
        ("warm-up", warm),
        ("run", f"{t.steps} RL steps, eval every {t.eval_every or 'run (before and after)'}, checkpoint "
                f"{_cadence(t.checkpoint_every, t.checkpoint_minutes, 'steps')}, seed {cfg.seed}"),
        ("out", str(cfg.out)),
    ]


def describe_settings(cfg: Any, model: Any = None, file: Any = None) -> None:
    """Print :func:`key_settings` to ``file`` (default stderr, beside the progress lines)."""
    rows = key_settings(cfg, model)
    width = max(len(k) for k, _ in rows)
    out = file or sys.stderr
    print("settings:", file=out)
    for k, v in rows:
        print(f"  {k:<{width}}  {v}", file=out)
    out.flush()

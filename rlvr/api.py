"""The Python API: the CLI's ``train`` and ``eval`` from a notebook or a script.

::

    from rlvr.api import config, evaluate, task, train

    def reward(prompts, completions, answer, **kw):          # TRL-style: lists in, one float per completion
        return [float(c.strip() == a) for c, a in zip(completions, answer)]

    my_task = task([{"prompt": "2+3=", "answer": "5"}, ...], reward=reward)
    cfg = config({"train": {"steps": 50}}, overrides=["rollout.group_size=8"])
    summary = train(cfg, task=my_task)                     # or model="path/to/hf_dir", or model=obj
    result = evaluate(cfg, model=summary["run_dir"], task=my_task)

A config comes from a dict, a YAML path, a recipe name or nothing (the demo's defaults), with ``--set``
style overrides; errors are :class:`rlvr.config.run.ConfigError` naming every bad field. A task is a
:class:`rlvr.tasks.base.Task` (``task`` builds one from rows and a reward callable); the model is a
local Hugging Face directory or a ``(model, tokenizer)`` already in memory. transformers' own progress bars
and warnings are silenced as in the CLI.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any, Callable, Iterable, Mapping, Sequence

__all__ = ["config", "task", "train", "evaluate", "resume"]


def _quiet() -> None:
    os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
    import transformers

    transformers.utils.logging.set_verbosity_error()
    transformers.utils.logging.disable_progress_bar()


def config(source: Mapping[str, Any] | str | Path | Any = None, overrides: Sequence[str] = (),
           recipe: str | None = None, model_given: bool = False):
    """A validated, frozen :class:`~rlvr.config.run.RunConfig` from a dict, a YAML file, or a config (copied),
    then a recipe under it and ``overrides`` (``"optim.lr=1e-4"``) over it. Without ``model.path`` (and
    without ``model_given``: a model object will be passed) the demo's settings sit under it
    (:mod:`rlvr.config.defaults`)."""
    from rlvr.config.run import RunConfig, load_config

    if isinstance(source, RunConfig):
        return load_config(base=source.model_dump(mode="json"), overrides=list(overrides))
    if isinstance(source, (str, Path)):
        return load_config(source, list(overrides), recipe=recipe, model_given=model_given)
    return load_config(base=dict(source or {}), overrides=list(overrides), recipe=recipe, model_given=model_given)


def _example(row: Any, i: int, name: str):
    from rlvr.core.types import Example

    if isinstance(row, Example):
        return row
    if not isinstance(row, Mapping) or "prompt" not in row or "answer" not in row:
        raise ValueError(f"row {i}: expected a mapping with 'prompt' and 'answer' (or an Example), got {row!r:.80}")
    meta = {k: v for k, v in row.items() if k not in ("prompt", "answer", "id", "completion")}
    return Example(str(row.get("id", f"{name}-{i}")), row["prompt"], str(row["answer"]), name,
                   row.get("completion"), meta)


def task(train: Iterable[Any], eval: Iterable[Any] | None = None, reward: Callable | str | None = None,
         verifier: str | None = None, verifier_params: Mapping[str, Any] | None = None, name: str = "custom",
         eval_fraction: float = 0.1, seed: int = 0):
    """A task from rows (``{"prompt", "answer", ...}`` dicts or Examples) scored by ``reward`` (a
    ``(prompts, completions, **fields) -> list[float]`` callable or ``"module:function"``) or by a registered
    ``verifier`` (default ``numeric``). Without ``eval`` rows, ``eval_fraction`` of ``train`` is held out."""
    from rlvr.tasks.base import Task, WeightedVerifier
    from rlvr.tasks.dataset import split_holdout
    from rlvr.verifiers import build_verifier, from_callable

    if reward is not None and verifier is not None:
        raise ValueError("give reward= or verifier=, not both")
    rows = [_example(r, i, name) for i, r in enumerate(train)]
    if not rows:
        raise ValueError("task(): no training rows")
    if eval is None:
        rows, held = split_holdout(rows, eval_fraction, seed)
    else:
        held = [_example(r, i, name) for i, r in enumerate(eval)]
    v = from_callable(reward) if reward is not None else build_verifier(verifier or "numeric", dict(verifier_params or {}))
    return Task(name, {"train": rows, "eval": held}, [WeightedVerifier(v)])


def _model_args(model: Any, tokenizer: Any) -> tuple[Any, Any, str | None]:
    """``(model object, tokenizer, model directory)`` from what the caller passed."""
    if model is None or isinstance(model, (str, Path)):
        return None, None, None if model is None else str(model)
    if isinstance(model, tuple):
        model, tokenizer = model
    return model, tokenizer, None


def train(cfg=None, task=None, reward: Callable | str | None = None, model: Any = None, tokenizer: Any = None,
          quiet: bool = True) -> dict[str, Any]:
    """Train as ``rlvr train`` does and return the run's summary (``summary["run_dir"]`` holds everything).

    ``cfg``: a RunConfig, dict or YAML path (default: the demo; a dict or path given with ``model`` takes the
    pretrained defaults, :mod:`rlvr.config.defaults`). ``task``: a Task (default: the config's);
    ``reward``: a reward callable replacing the task's verifiers (with the config's task when ``task`` is
    None). ``model``: a local HF directory, a model object (with ``tokenizer``) or ``(model, tokenizer)``.
    """
    from rlvr.run.train import train as run_train

    if quiet:
        _quiet()
    obj, tok, path = _model_args(model, tokenizer)
    # the model decides the defaults (a pretrained one: no warm-up, a small lr), so it joins the config first
    cfg = config(cfg, [f"model.path={path}"] if path is not None else [], model_given=obj is not None)
    task = _with_reward(cfg, task, reward)
    return run_train(cfg, model=obj, tokenizer=tok, task=task)


def resume(run_dir: str | Path, overrides: Sequence[str] = (), task=None, reward: Callable | str | None = None,
           quiet: bool = True) -> dict[str, Any]:
    """Continue a run; a task or reward given to :func:`train` must be given again (configs hold no code)."""
    from rlvr.config.run import load_config
    from rlvr.run.train import resume as run_resume

    if quiet:
        _quiet()
    if reward is not None:
        task = _with_reward(load_config(Path(run_dir) / "config.yaml"), task, reward)
    return run_resume(run_dir, list(overrides), task=task)


def evaluate(cfg=None, model: Any = None, tokenizer: Any = None, task=None, reward: Callable | str | None = None,
             quiet: bool = True) -> dict[str, Any]:
    """Evaluate as ``rlvr eval`` does: ``model`` is a HF directory, run directory, checkpoint, a model object
    (with ``tokenizer``) or ``(model, tokenizer)``; default the config's model. Returns the metrics with
    95% intervals and the per-prompt records."""
    from rlvr.run.train import eval_model

    if quiet:
        _quiet()
    obj, tok, path = _model_args(model, tokenizer)
    # a model object or a model directory (not a run's checkpoint) is a pretrained model: its defaults, as
    # `rlvr eval --model DIR` gives them (rlvr.config.defaults)
    given = obj is not None or (path is not None and (Path(path) / "config.json").is_file())
    cfg = config(cfg, model_given=given)
    task = _with_reward(cfg, task, reward)
    return eval_model(cfg, path, model=obj, tokenizer=tok, task=task)


def _with_reward(cfg, task, reward):
    if reward is None:
        return task
    from rlvr.tasks.base import Task, WeightedVerifier
    from rlvr.run.setup import build_task
    from rlvr.verifiers import from_callable

    base = task if task is not None else build_task(cfg)
    return Task(base.name, {s: base.examples(s) for s in base.splits}, [WeightedVerifier(from_callable(reward))])

"""Shared helpers for the per-method tests: a few real recipe steps on the tiny model."""

from __future__ import annotations

import copy
import json
import string
from pathlib import Path

import torch

from rlvr.config.run import load_config, needs_reference
from rlvr.models.loading import load_model
from rlvr.train.loop import rl_step
from rlvr.run.setup import build_components, build_task, seed_everything

__all__ = ["TINY", "tiny_overrides", "run_recipe_steps", "recipe_trains"]

# a tiny model and short completions; ``tiny_overrides`` adds a user's JSONL data with a partial-credit
# reward (the fraction of the answer's 12 letters present in the completion), so groups have reward variance
TINY = [
    "model.tiny.hidden_size=32", "model.tiny.intermediate_size=64", "model.tiny.num_layers=1",
    "rollout.prompts_per_step=4", "rollout.group_size=4", "rollout.max_new_tokens=4",
    "algorithm.minibatches=2", "train.micro_batch_size=8", "sft.steps=0", "optim.lr=1e-2",
    "eval.num_examples=2", "eval.samples=1", "eval.report_greedy=false",
    "task.name=jsonl", "task.eval_fraction=0.25", "task.verifier=tests.reward_fns:shared_chars",
]


def tiny_overrides(tmp_path: Path) -> list[str]:
    data = tmp_path / "data.jsonl"
    letters = string.ascii_lowercase
    data.write_text("".join(json.dumps({"prompt": f"say {i}:", "answer": letters[i: i + 12]}) + "\n"
                            for i in range(8)))
    return TINY + [f"task.train_path={data}", f"out={tmp_path / 'run'}"]


def run_recipe_steps(recipe: str, tmp_path: Path, steps: int = 2, overrides: list[str] | tuple = ()) -> dict:
    """``steps`` real RL steps of ``recipe`` on the tiny model (the trainer's components and ``rl_step``,
    without evaluation, checkpoints or plots); returns the config, components, per-step metrics and the
    weights before and after."""
    cfg = load_config(recipe=recipe, overrides=tiny_overrides(tmp_path) + [f"train.steps={steps}", *overrides])
    seed_everything(cfg.seed)
    model, tok = load_model(cfg.model, seed=cfg.seed)
    ref = copy.deepcopy(model).eval().requires_grad_(False) if needs_reference(cfg) else None
    seed_everything(cfg.seed)
    c = build_components(cfg, model, tok, build_task(cfg), torch.device("cpu"), ref)
    before = {k: v.detach().clone() for k, v in model.state_dict().items()}
    metrics = [rl_step(cfg, c, step) for step in range(steps)]
    after = {k: v.detach().clone() for k, v in model.state_dict().items()}
    return {"cfg": cfg, "c": c, "metrics": metrics, "before": before, "after": after}


def recipe_trains(name: str, tmp_path: Path, keys, overrides=()) -> dict:
    """Two real steps of ``name``: the metrics ``keys`` are finite and some weight changed."""
    import math

    out = run_recipe_steps(name, tmp_path, overrides=list(overrides))
    for m in out["metrics"]:
        assert all(math.isfinite(m[k]) for k in keys), m
    assert any(not torch.equal(out["before"][k], out["after"][k]) for k in out["before"])
    return out


class Counting:
    """Records the requests of every generation call."""

    def __init__(self, inner):
        self.inner, self.calls = inner, []

    def sync_weights(self):
        self.inner.sync_weights()

    def generate(self, requests, sampling):
        self.calls.append(list(requests))
        return self.inner.generate(requests, sampling)

"""Support for the seed-paper method tests: a binary reward with variance on an untrained tiny model, and an
uninterrupted-vs-resumed training comparison for stateful components."""

import json
import shutil
from pathlib import Path

import torch
from safetensors.torch import load_file

from rlvr.config.run import load_config
from rlvr.run.train import resume, train
from tests.methods.helpers import tiny_overrides

# a verifier scoring 1 when the completion's character codes sum to an even number: about half of every
# group is "correct" from the first step, so correctness-based weights have something to weigh
BINARY = ["task.verifier=tests.methods.seed_support:even_code_sum"]


def even_code_sum(prompts, completions, answers, **kw):
    return [float(sum(map(ord, c)) % 2 == 0) for c in completions]


def _state(run: Path, step: int) -> dict:
    return json.loads((run / "checkpoints" / f"step_{step:06d}" / "state.json").read_text())["algorithm_state"]


def _weights(run: Path, step: int) -> dict[str, torch.Tensor]:
    folder = run / "checkpoints" / f"step_{step:06d}" / "model"
    full = folder / "model.safetensors"  # a LoRA run's checkpoint holds the adapter alone
    return load_file(str(full if full.is_file() else folder / "adapter_model.safetensors"))


def train_and_resume(recipe: str, tmp_path: Path, overrides: list[str] = ()) -> dict:
    """Train 4 steps straight, and 2 steps + a resume for 2 more from the step-2 checkpoint; returns both
    runs' step-4 weights and the algorithm states at steps 2 and 4."""
    base = tiny_overrides(tmp_path) + BINARY + list(overrides) + [
        "train.steps=4", "train.checkpoint_every=2", "train.keep_checkpoints=5", "train.eval_every=0"]
    train(load_config(recipe=recipe, overrides=base))
    full, part = tmp_path / "run", tmp_path / "part"
    shutil.copytree(full, part)
    shutil.rmtree(part / "checkpoints" / "step_000004")
    resume(part / "checkpoints" / "step_000002")
    return {"weights": (_weights(full, 4), _weights(part, 4)), "state2": _state(full, 2),
            "state4": (_state(full, 4), _state(part, 4))}

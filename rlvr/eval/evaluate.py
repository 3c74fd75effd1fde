"""Held-out evaluation: sample completions for a split and score them with the task's verifiers."""

from __future__ import annotations

from typing import Any

from rlvr.core.types import GenerationRequest, SamplingParams
from rlvr.tasks.base import Task

__all__ = ["evaluate"]


def evaluate(engine, task: Task, split: str = "eval", num_examples: int | None = None, samples: int = 1,
             temperature: float = 0.0, max_new_tokens: int = 16, seed: int = 0,
             report_greedy: bool = False) -> dict[str, Any]:
    """Accuracy (mean ``correct`` over all samples: avg@k when sampling), mean reward and mean length.

    With ``report_greedy`` and a temperature above 0, the greedy accuracy is added as ``greedy_accuracy``.
    """
    examples = task.examples(split)[:num_examples] if num_examples else task.examples(split)
    if not examples:
        raise ValueError(f"task {task.name!r} split {split!r} has no examples to evaluate")
    n = 1 if temperature == 0.0 else samples
    comps = engine.generate([GenerationRequest(e, n) for e in examples],
                            SamplingParams(temperature=temperature, max_new_tokens=max_new_tokens, seed=seed))
    scores = [task.score(examples[c.group], c.text) for c in comps]
    k = len(comps)
    extra = {}
    if report_greedy and temperature > 0:
        greedy = evaluate(engine, task, split, num_examples, 1, 0.0, max_new_tokens, seed)
        extra["greedy_accuracy"] = greedy["accuracy"]
    return {
        "accuracy": sum(s.components.get("correct", 0.0) for s in scores) / k,
        "mean_reward": sum(s.reward for s in scores) / k,
        "mean_length": sum(len(c) for c in comps) / k,
        "num_examples": len(examples),
        "samples": n,
        "temperature": temperature,
        **extra,
    }

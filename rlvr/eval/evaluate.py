"""Held-out evaluation: sample completions for a split and score them with the task's verifiers."""

from __future__ import annotations

from typing import Any

from rlvr.core.types import GenerationRequest, SamplingParams
from rlvr.eval.metrics import bootstrap_ci, pass_at_k
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
    per_prompt: list[list[float]] = [[] for _ in examples]
    for c, s in zip(comps, scores):
        per_prompt[c.group].append(s.components.get("correct", 0.0))
    prompt_acc = [sum(x) / len(x) for x in per_prompt]
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
        "accuracy_ci95": list(bootstrap_ci(prompt_acc)),
        **({f"pass@{n}": sum(pass_at_k(n, int(sum(x)), n) for x in per_prompt) / len(per_prompt)} if n > 1 else {}),
        **extra,
    }

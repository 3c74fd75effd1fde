"""Held-out evaluation: sample n completions per prompt of a split, score them, and summarise.

The result holds, over prompts: ``accuracy`` (= ``avg@n``, mean correctness of the n samples), unbiased
``pass@k`` for k = 1, 2, 4, ... up to n (and n itself), ``maj@n`` (majority vote over the n answers),
``mean_reward`` and ``mean_length``; ``ci95`` maps each of them to a 95% percentile-bootstrap interval
over prompts (one shared set of resampled prompts). ``per_prompt`` keeps every prompt's per-sample
correctness, reward and answer key, so comparisons can pair prompts across models.

maj@n groups answers by the key the verifier extracted (``info["<verifier>.extracted"]``, compared as an
exact fraction when it is a number), or by the whitespace-normalised completion when the verifier reports
no extraction; a cluster is correct when its first completion was scored correct (a deterministic
verifier gives one verdict per answer). Only maj@n over all n samples is given: maj@k for k < n has no
simple unbiased estimator.

Rendering-robust accuracy (DeFAb §5.5): when examples carry ``meta["rendering"]``, the examples sharing
``meta["rendering_group"]`` (default ``meta["id"]``) are renderings of one problem, and the problem scores
the *worst* of its renderings' accuracies. ``robust_accuracy`` is reported when some problem has two or
more renderings in the evaluated split.

On a task mixture (examples from several ``Example.task`` values) ``task/<name>/accuracy`` and
``task/<name>/num_examples`` are reported per task beside the pooled metrics.

Every score component the verifiers return besides ``correct`` (POW3R's strict completion, FGRPO's consistency
and grounding, a reward list's ``reward/NAME`` parts, ...) is kept per sample (``per_prompt[i]["components"]``)
and reported as ``component/<name>``: the mean over prompts of each prompt's mean, with its interval like any
metric (components some prompts lack are left out). ``protocol`` records how the numbers were made (split,
prompts, samples, temperature, top-p, token limit, seed, task and verifiers, and what the caller adds: the
prompt template), so two results are compared knowingly (:func:`rlvr.eval.output.protocol_differences`).
"""

from __future__ import annotations

import inspect

import re
from typing import Any, Callable, Sequence

import numpy as np

from rlvr.core.types import Example, GenerationRequest, SamplingParams
from rlvr.envs.multiturn import scored_example
from rlvr.eval.metrics import bootstrap_cis, majority_answer, pass_at_k
from rlvr.tasks.base import Task
from rlvr.verifiers.numeric import parse_number

__all__ = ["evaluate", "answer_key", "rendering_groups", "summarise", "per_prompt_columns", "pass_ks",
           "scalar_metrics"]

Progress = Callable[[int, int], None]


def pass_ks(n: int) -> list[int]:
    """k = 1, 2, 4, ... <= n, and n."""
    ks, k = [], 1
    while k <= n:
        ks.append(k)
        k *= 2
    return ks if ks[-1] == n else ks + [n]


def answer_key(text: str, info: dict[str, Any]) -> str | None:
    """The answer a completion gives, as a hashable key for majority voting (None: no answer)."""
    extracted = next((v for k, v in info.items() if k == "extracted" or k.endswith(".extracted")), None)
    raw = str(extracted) if extracted is not None else text
    value = parse_number(raw) if extracted is not None else None
    if value is not None:
        return str(value)
    key = re.sub(r"\s+", " ", raw).strip()
    return key or None


def rendering_groups(examples: Sequence[Example]) -> list[str]:
    """The problem each example renders (its own id when it carries no rendering)."""
    return [str(e.meta.get("rendering_group", e.meta.get("id", e.id))) if "rendering" in (e.meta or {}) else e.id
            for e in examples]


def _generate(engine, examples: list[Example], n: int, sampling: SamplingParams,
              on_progress: Progress | None) -> list[list]:
    """Completions per example, from one ``generate`` call, so the samples do not depend on whether progress
    is shown. An engine whose ``generate`` takes ``on_progress(rows_done, rows_total)`` reports it after each
    internal batch; with another engine and a progress display, prompts go in chunks of about one engine
    batch (chunk i > 0 seeded ``seed + i``) so the bar still moves."""
    per: list[list] = [[] for _ in examples]
    native_progress = on_progress is not None and "on_progress" in inspect.signature(engine.generate).parameters
    if on_progress is None or native_progress:
        chunks = [list(range(len(examples)))]
    else:
        size = max(1, getattr(engine, "batch_size", 256) // n)
        chunks = [list(range(i, min(i + size, len(examples)))) for i in range(0, len(examples), size)]
    if on_progress is not None:
        on_progress(0, len(examples))
    done = 0
    for ci, idx in enumerate(chunks):
        seed = sampling.seed if ci == 0 or sampling.seed is None else sampling.seed + ci
        params = SamplingParams(sampling.temperature, sampling.top_p, sampling.max_new_tokens, seed)
        requests = [GenerationRequest(examples[i], n) for i in idx]
        if native_progress:
            rows = engine.generate(requests, params,
                                   on_progress=lambda r, t: on_progress(min(len(idx), r // max(n, 1)), len(examples)))
        else:
            rows = engine.generate(requests, params)
        for c in rows:
            per[idx[c.group]].append(c)
        done += len(idx)
        if on_progress is not None and not native_progress:
            on_progress(done, len(examples))
    return per


def per_prompt_columns(per_prompt: list[dict[str, Any]]) -> dict[str, list[float]]:
    """Each metric's value on each prompt (the metric is the mean of its column over prompts)."""
    n = min(len(p["correct"]) for p in per_prompt)
    correct = [p["correct"] for p in per_prompt]
    cols: dict[str, list[float]] = {
        "accuracy": [float(np.mean(c)) for c in correct],
        "mean_reward": [float(np.mean(p["reward"])) for p in per_prompt],
    }
    if n > 1:
        for k in pass_ks(n):
            cols[f"pass@{k}"] = [pass_at_k(len(c), int(round(sum(c))), k) for c in correct]
        cols[f"maj@{n}"] = [_majority_correct(p["answers"], p["correct"]) for p in per_prompt]
    if all("greedy_correct" in p for p in per_prompt):
        cols["greedy_accuracy"] = [float(p["greedy_correct"]) for p in per_prompt]
    for name in sorted(set.intersection(*(set(p.get("components") or {}) for p in per_prompt))):
        cols[f"component/{name}"] = [float(np.mean(p["components"][name])) for p in per_prompt]
    return cols


def _components(scores) -> dict[str, list[float]]:
    """Each numeric component but ``correct`` over a prompt's samples, where every sample reports it."""
    names = set.intersection(*(set(s.components) for s in scores)) if scores else set()
    return {k: [float(s.components[k]) for s in scores] for k in sorted(names - {"correct"})
            if all(isinstance(s.components[k], (int, float)) and not isinstance(s.components[k], bool)
                   for s in scores)}


def summarise(per_prompt: list[dict[str, Any]], seed: int = 0) -> dict[str, Any]:
    """Metrics and bootstrap intervals from per-prompt records (``correct``, ``reward``, ``length``,
    ``answers`` per sample; ``group`` for renderings; ``greedy_correct`` when greedy decoding was scored too)."""
    n = min(len(p["correct"]) for p in per_prompt)
    cols = per_prompt_columns(per_prompt)
    out: dict[str, Any] = {k: float(np.mean(v)) for k, v in cols.items()}
    if n > 1:
        out[f"avg@{n}"] = out["accuracy"]
    groups: dict[str, list[float]] = {}
    for p, acc in zip(per_prompt, cols["accuracy"]):
        groups.setdefault(p.get("group") or p["id"], []).append(acc)
    group_cis = {}
    if any(len(g) > 1 for g in groups.values()):
        robust = [min(g) for g in groups.values()]
        out["robust_accuracy"] = float(np.mean(robust))
        out["robust_problems"] = len(robust)
        group_cis = bootstrap_cis({"robust_accuracy": robust}, seed=seed)
    out["mean_length"] = float(np.mean([np.mean(p["length"]) for p in per_prompt]))
    by_task: dict[str, list[float]] = {}
    for p, acc in zip(per_prompt, cols["accuracy"]):
        by_task.setdefault(p.get("task") or "", []).append(acc)
    if len(by_task) > 1:  # a task mixture: accuracy per task, beside the pooled one
        for name, accs in sorted(by_task.items()):
            out[f"task/{name}/accuracy"] = float(np.mean(accs))
            out[f"task/{name}/num_examples"] = len(accs)
    ci = {**bootstrap_cis(cols, seed=seed), **group_cis}
    out["ci95"] = {k: [float(lo), float(hi)] for k, (lo, hi) in ci.items()}
    out["accuracy_ci95"] = out["ci95"]["accuracy"]
    return out


def _majority_correct(answers: list[str | None], correct: list[float]) -> float:
    best = majority_answer(answers)
    return 0.0 if best is None else float(correct[answers.index(best)] >= 1.0)


def evaluate(engine, task: Task, split: str = "eval", num_examples: int | None = None, samples: int = 1,
             temperature: float = 0.0, max_new_tokens: int = 16, seed: int = 0,
             report_greedy: bool = False, top_p: float = 1.0,
             on_progress: Progress | None = None, scorer: Any = None,
             protocol: dict[str, Any] | None = None) -> dict[str, Any]:
    """Evaluate ``engine`` on ``task``'s ``split``; see the module docstring for what is returned.

    Greedy decoding (``temperature`` 0) takes one sample per prompt. With ``report_greedy`` and a
    temperature above 0, the greedy accuracy is added as ``greedy_accuracy``. Every completion is scored under
    the deadline of ``scorer`` (a :class:`rlvr.tasks.scoring.Scorer` of ``task``; default one worker, 30 s): one
    that overruns scores 0 and is counted in ``score_timeouts``. ``protocol``: what the caller adds to the
    result's ``protocol`` (e.g. the prompt template).
    """
    from rlvr.tasks.scoring import Scorer

    own = scorer is None
    scorer = scorer if scorer is not None else Scorer(task)
    try:
        out = _evaluate(engine, task, split, num_examples, samples, temperature, max_new_tokens, seed,
                        report_greedy, top_p, on_progress, scorer)
        out["protocol"] = {"task": task.name, "split": split, "num_examples": out["num_examples"],
                           "samples": out["samples"], "temperature": temperature, "top_p": top_p,
                           "max_new_tokens": max_new_tokens, "seed": seed,
                           "verifiers": [getattr(w.verifier, "name", type(w.verifier).__name__)
                                         for w in getattr(task, "verifiers", ())], **(protocol or {})}
        return out
    finally:
        if own:
            scorer.close()


def _evaluate(engine, task: Task, split: str, num_examples: int | None, samples: int, temperature: float,
              max_new_tokens: int, seed: int, report_greedy: bool, top_p: float, on_progress: Progress | None,
              scorer: Any) -> dict[str, Any]:
    examples = task.examples(split)[:num_examples] if num_examples else task.examples(split)
    if not examples:
        raise ValueError(f"task {task.name!r} split {split!r} has no examples to evaluate")
    n = 1 if temperature == 0.0 else samples
    sampling = SamplingParams(temperature=temperature, top_p=top_p, max_new_tokens=max_new_tokens, seed=seed)
    comps = _generate(engine, list(examples), n, sampling, on_progress)
    groups = rendering_groups(examples)
    per_prompt = []
    flat = [(ex, c) for ex, cs in zip(examples, comps) for c in cs]  # episodes: env_info for the verifier
    all_scores, stats = scorer.score_many([scored_example(ex, c) for ex, c in flat], [c.text for _, c in flat],
                                          groups=False)
    at = 0
    for ex, cs, group in zip(examples, comps, groups):
        scores, at = all_scores[at: at + len(cs)], at + len(cs)
        per_prompt.append({
            "id": ex.id, "group": group, "task": ex.task,
            "correct": [s.components.get("correct", 0.0) for s in scores],
            "components": _components(scores),
            "reward": [s.reward for s in scores],
            "length": [len(c) for c in cs],
            "answers": [answer_key(c.text, s.info) for c, s in zip(cs, scores)],
        })
    if report_greedy and temperature > 0:
        greedy = evaluate(engine, task, split, num_examples, 1, 0.0, max_new_tokens, seed, scorer=scorer)
        for rec, g in zip(per_prompt, greedy["per_prompt"]):
            rec["greedy_correct"] = g["correct"][0]
    return {**summarise(per_prompt, seed), "num_examples": len(examples), "samples": n,
            "temperature": temperature, "split": split, "score_timeouts": int(stats["score/timeouts"]),
            "per_prompt": per_prompt}


def scalar_metrics(result: dict[str, Any]) -> dict[str, float]:
    """The numbers of an eval result (no intervals, no per-prompt records), e.g. for ``metrics.jsonl``."""
    return {k: v for k, v in result.items() if isinstance(v, (int, float)) and not isinstance(v, bool)}

"""Collecting one step's rollouts: sample prompts, generate, score, shape rewards, filter groups.

With dynamic sampling (DAPO, Yu et al. 2025, arXiv:2503.14476) groups whose filter metric is constant
(max == min, compared exactly) are dropped and more prompts are sampled until ``prompts_per_step``
informative groups are collected or ``max_rounds`` generation rounds are spent; surplus groups are
discarded, as in verl. A shortfall either proceeds with the groups collected or raises, as configured.
"""

from __future__ import annotations

import time
from dataclasses import dataclass

import torch

from rlvr.algorithms.grouping import group_constant
from rlvr.algorithms.shaping import overlong_penalty
from rlvr.core.types import Completion, GenerationRequest, SamplingParams, Score

__all__ = ["Rollouts", "collect_rollouts", "DynamicSamplingShortfall"]


class DynamicSamplingShortfall(RuntimeError):
    """Dynamic sampling spent its generation rounds without filling the batch."""


@dataclass
class Rollouts:
    requests: list[GenerationRequest]
    completions: list[Completion]  # completion.group indexes ``requests``
    scores: list[Score]
    rewards: list[float]  # training rewards (task reward + shaping)
    metrics: dict[str, float]


def _round(cfg, c, k: int, seed: int) -> Rollouts:
    examples = c.sampler.next(k)
    requests = c.allocator.allocate(examples, c.stats)
    sampling = SamplingParams(cfg.rollout.temperature, cfg.rollout.top_p, cfg.rollout.max_new_tokens, seed=seed)
    t0 = time.perf_counter()
    completions = c.engine.generate(requests, sampling)
    t1 = time.perf_counter()
    scores, score_stats = c.scorer.score_many([requests[comp.group].example for comp in completions],
                                              [comp.text for comp in completions])
    t2 = time.perf_counter()
    rewards = torch.tensor([s.reward for s in scores], dtype=torch.float64)
    ov = cfg.algorithm.overlong
    if ov.soft_penalty:
        lengths = torch.tensor([len(comp) for comp in completions])
        limit = cfg.rollout.max_new_tokens
        buffer = max(1, round(ov.buffer_frac * limit))
        rewards = rewards + overlong_penalty(lengths, limit, buffer, ov.factor)
    n = max(len(completions), 1)
    seen = {"time/rollout": t1 - t0, "time/score": t2 - t1,
            "generated/reward_sum": float(rewards.sum()),
            "generated/correct_sum": sum(sc.components.get("correct", 0.0) for sc in scores),
            "generated/length_sum": float(sum(len(comp) for comp in completions)), "generated/n": float(n),
            "score/timeouts": score_stats["score/timeouts"], "score/errors": score_stats["score/errors"]}
    return Rollouts(requests, completions, scores, rewards.tolist(), seen)


def _step_metrics(sums: dict[str, float]) -> dict[str, float]:
    """Timings and scoring counts summed over rounds, and means over every completion generated this step,
    kept or not (the policy's unfiltered performance)."""
    n = max(sums["generated/n"], 1.0)
    return {"time/rollout": sums["time/rollout"], "time/score": sums["time/score"],
            "score/timeouts": sums["score/timeouts"], "score/errors": sums["score/errors"],
            "generated/reward": sums["generated/reward_sum"] / n,
            "generated/accuracy": sums["generated/correct_sum"] / n,
            "generated/completion_length": sums["generated/length_sum"] / n}


def _informative(r: Rollouts, metric: str) -> list[int]:
    """Indices of requests whose groups are not constant in ``metric``."""
    values = torch.tensor([s.components.get("correct", 0.0) for s in r.scores] if metric == "correct"
                          else r.rewards, dtype=torch.float64)
    groups = torch.tensor([comp.group for comp in r.completions])
    constant = group_constant(values, groups)
    sizes = torch.bincount(groups, minlength=len(r.requests))
    return [g for g in range(len(r.requests)) if sizes[g] == 1 or not bool(constant[groups == g].any())]


def _keep(r: Rollouts, groups: list[int], offset: int) -> Rollouts:
    remap = {g: offset + i for i, g in enumerate(groups)}
    idx = [i for i, comp in enumerate(r.completions) if comp.group in remap]
    comps = []
    for i in idx:
        comp = r.completions[i]
        comps.append(Completion(comp.example_id, comp.prompt_ids, comp.completion_ids, comp.logprobs,
                                comp.finish_reason, comp.text, remap[comp.group]))
    return Rollouts([r.requests[g] for g in groups], comps, [r.scores[i] for i in idx],
                    [r.rewards[i] for i in idx], {})


def collect_rollouts(cfg, c, step: int, seed_for) -> Rollouts:
    """One step's rollouts; ``seed_for(round)`` gives each generation round's sampling seed."""
    want = cfg.rollout.prompts_per_step
    ds = cfg.algorithm.dynamic_sampling
    first = _round(cfg, c, want, seed_for(0))
    if not ds.enabled:
        first.metrics = {**_step_metrics(first.metrics), "rollout/rounds": 1.0,
                         "rollout/completions_generated": float(len(first.completions))}
        return first
    parts, have, rounds, generated = [], 0, 0, 0
    timing = {k: 0.0 for k in first.metrics}
    current = first
    while True:
        rounds += 1
        generated += len(current.completions)
        for k in timing:
            timing[k] += current.metrics[k]
        keep = _informative(current, ds.metric)[: want - have]
        parts.append(_keep(current, keep, have))
        have += len(keep)
        if have >= want or rounds >= ds.max_rounds:
            break
        current = _round(cfg, c, ds.batch_prompts or want, seed_for(rounds))
    if have < want and ds.on_shortfall == "error":
        raise DynamicSamplingShortfall(
            f"dynamic sampling found {have} of {want} informative groups in {rounds} rounds "
            f"(algorithm.dynamic_sampling.max_rounds={ds.max_rounds})")
    out = Rollouts([r for p in parts for r in p.requests], [x for p in parts for x in p.completions],
                   [s for p in parts for s in p.scores], [x for p in parts for x in p.rewards], {})
    out.metrics = {**_step_metrics(timing), "rollout/rounds": float(rounds),
                   "rollout/completions_generated": float(generated), "rollout/informative_groups": float(have),
                   "rollout/filled_frac": have / want}
    return out

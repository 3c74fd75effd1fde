"""Collecting one step's rollouts: sample prompts, allocate, generate, score, shape rewards, filter groups.

A generation round (:func:`_round`) asks the sampler for prompts and the allocator for the first stage's
counts, then lets the allocator ask for more completions of chosen groups, stage after stage, until it
asks for none (multi-stage allocators: DARS, AR3PO, AERO; see :mod:`rlvr.sampling.base`). Every generated
completion is shown to the sampler and recorded in the prompt statistics; the allocator's ``finalize`` may
then drop completions (rejection) or add stored ones (response reuse). Groups may end up of unequal size.

With dynamic sampling (DAPO, Yu et al. 2025, arXiv:2503.14476) groups whose filter metric is constant
(max == min, compared exactly) are dropped and more rounds are run until ``prompts_per_step``
informative groups are collected or ``max_rounds`` generation rounds are spent; surplus groups are
discarded, as in verl. A shortfall either proceeds with the groups collected or raises, as configured. The
filter sees the rewards after the reward transforms that need no tensor of the update's passes
(:mod:`rlvr.train.rewards`), so a transform that makes a constant group informative keeps it.

Step metrics on what was spent: ``rollouts/spent`` (completions generated, every round and stage),
``rollouts/reused`` (completions added from a buffer, every round), ``rollouts/generation_calls``,
``rollouts/groups`` and ``rollouts/informative_groups`` (groups in the trained batch whose rewards differ,
so a group-relative advantage is not all zero), ``rollouts/zero_variance_groups``,
``rollouts/informative_frac``, ``rollouts/spent_per_informative_group`` and group sizes; ``sampler/*`` and
``budget/*`` from a sampler's or allocator's ``metrics()``; with a task mixture,
``task/<name>/{accuracy,reward,completions}`` over every generated completion of each task.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field, replace
from functools import cached_property

import torch

from rlvr.algorithms.group_filters import informative_groups
from rlvr.algorithms.registry import GROUP_FILTERS, REWARD_SHAPERS, GroupFilterInputs, ShapingInputs
from rlvr.core.batch import build_batch
from rlvr.core.types import Completion, Example, GenerationRequest, SamplingParams, Score
from rlvr.envs.multiturn import env_scores, scored_example
from rlvr.rollout.wrappers import engine_metrics, observe_scores
from rlvr.sampling.base import Group
from rlvr.tasks.appeals import appeal_state, run_appeal
from rlvr.config.run import length_limits
from rlvr.train.config_flags import run_features
from rlvr.train.rewards import score_components, transform_rewards

__all__ = ["Rollouts", "collect_rollouts", "DynamicSamplingShortfall", "stage_seed"]


class DynamicSamplingShortfall(RuntimeError):
    """Dynamic sampling spent its generation rounds without filling the batch."""


@dataclass
class Rollouts:
    """A step's rollouts: one list of groups (one per prompt, each with its completions, scores and
    training rewards), and flat views of them in group order for the batch (``completion.group`` indexes
    ``groups`` and ``requests``). Selecting groups (dynamic sampling) is selecting from ``groups``."""

    groups: list[Group]
    metrics: dict[str, float] = field(default_factory=dict)

    @cached_property
    def requests(self) -> list[GenerationRequest]:
        return [GenerationRequest(g.example, g.n) for g in self.groups]

    @cached_property
    def completions(self) -> list[Completion]:
        return [comp if comp.group == i else replace(comp, group=i) for i, g in enumerate(self.groups)
                for comp in g.completions]

    @cached_property
    def scores(self) -> list[Score]:
        return [sc for g in self.groups for sc in g.scores]

    @cached_property
    def rewards(self) -> list[float]:  # training rewards (task reward + shaping)
        return [r for g in self.groups for r in g.rewards]


@dataclass
class _Spent:
    """What a step's generation cost, summed over rounds and stages."""

    sums: dict[str, float] = field(default_factory=lambda: dict.fromkeys(
        ("time/rollout", "time/score", "generated/reward_sum", "generated/correct_sum", "generated/length_sum",
         "generated/n", "score/timeouts", "score/errors", "calls"), 0.0))
    per_task: dict[str, list[float]] = field(default_factory=dict)  # task -> [n, reward sum, correct sum]


def stage_seed(seed: int, stage: int) -> int:
    """The sampling seed of a round's ``stage``-th extra generation call (stage 0 uses the round's seed)."""
    return seed if stage == 0 else (seed * 1_000_003 + stage * 7_919) % (2**31 - 1)


def _generate_into(cfg, c, groups: list[Group], counts: list[int], seed: int, spent: _Spent,
                   step: int = 0) -> None:
    """Generate ``counts[i]`` completions for ``groups[i]``, score and shape them, append them in place."""
    idx = [i for i, n in enumerate(counts) if n > 0]
    requests = [GenerationRequest(groups[i].example, int(counts[i])) for i in idx]
    mine = c.world.share(len(requests))  # this rank's requests (all of them in a one-process run)
    local = [requests[j] for j in mine]
    limit = length_limits(cfg).completion
    sampling = SamplingParams(cfg.rollout.temperature, cfg.rollout.top_p, limit,
                              seed=c.world.seed(seed))
    t0 = time.perf_counter()
    completions = c.engine.generate(local, sampling) if local else []
    t1 = time.perf_counter()
    # what a verifier scores against: the example, with the completion's token ids and the step (a reward
    # function receives them as keywords, as TRL's do), and an episode's env_info
    examples = [_for_scoring(scored_example(local[comp.group].example, comp), comp, step) for comp in completions]
    scores, score_stats = c.scorer.score_many(examples, [comp.text for comp in completions])
    observe_scores(c.engine, completions, scores)  # wrappers that learn from outcomes (rollout.strategy arrol)
    completions = [comp if comp.group == mine[comp.group] else replace(comp, group=mine[comp.group])
                   for comp in completions]
    if c.world.distributed:
        completions, scores, score_stats = _gather(c.world, completions, scores, score_stats)
    t2 = time.perf_counter()
    rewards = [s.reward for s in scores]
    mt = cfg.rollout.multiturn
    if mt.env is not None:  # episodes: the environment's reward as configured; a failed environment scores 0
        rewards = env_scores(completions, rewards, mt.reward, mt.env_weight)
    rewards = torch.tensor(rewards, dtype=torch.float64)
    shapers = run_features(cfg, c).reward_shapers if completions else []
    for f in shapers:  # e.g. DAPO's soft overlong punishment, seen by dynamic sampling and prompt statistics
        inp = ShapingInputs(torch.tensor([len(comp) for comp in completions]), limit)
        rewards = rewards + REWARD_SHAPERS.get(f.name).fn(inp, f.params)
    s = spent.sums
    for comp, sc, r in zip(completions, scores, rewards.tolist()):
        g = groups[idx[comp.group]]
        g.completions.append(comp)
        g.scores.append(sc)
        g.rewards.append(r)
        ok = sc.components.get("correct", 0.0)
        t = spent.per_task.setdefault(g.example.task, [0.0, 0.0, 0.0])
        t[0], t[1], t[2] = t[0] + 1, t[1] + r, t[2] + ok
        s["generated/reward_sum"] += r
        s["generated/correct_sum"] += ok
        s["generated/length_sum"] += len(comp)
    s["generated/n"] += len(completions)
    s["time/rollout"] += t1 - t0
    s["time/score"] += t2 - t1
    for k, v in score_stats.items():  # timeouts, errors, and what else the scorer counts (noise/fp, noise/fn)
        if k != "score/seconds":
            s[k] = s.get(k, 0.0) + v
    s["calls"] += 1


def _for_scoring(example: Example, comp: Completion, step: int) -> Example:
    return replace(example, meta={**example.meta, "completion_ids": list(comp.completion_ids), "step": step})


def _gather(world, completions, scores, stats):
    """Every rank's completions and scores in request order (as one process would hold them)."""
    parts = world.gather((completions, scores, stats))
    pairs = sorted(((comp, sc) for cs, ss, _ in parts for comp, sc in zip(cs, ss)), key=lambda p: p[0].group)
    totals = {k: sum(st[k] for _, _, st in parts) for k in stats}
    return [p[0] for p in pairs], [p[1] for p in pairs], totals


def _observe(c, groups: list[Group], step: int) -> None:
    """Show the sampler every generated group (it reads the statistics as they were), then record them."""
    observe = getattr(c.sampler, "observe", None)
    if observe is not None:
        observe(groups, step)
    ids = [g.example.id for g in groups for _ in g.completions]
    correct = [x for g in groups for x in g.correct]
    rewards = [x for g in groups for x in g.rewards]
    domains = [g.example.task for g in groups for _ in g.completions]
    c.stats.update(ids, correct, step, rewards=rewards, domains=domains)


def _round(cfg, c, k: int, seed: int, step: int, spent: _Spent) -> tuple[Rollouts, int]:
    """One round: ``k`` prompts through the allocator's stages; returns the rollouts and completions reused."""
    examples = c.sampler.next(k, step)
    c.world.check_same([e.id for e in examples], f"the prompts sampled at step {step}")
    requests = c.allocator.allocate(examples, c.stats)
    groups = [Group(r.example) for r in requests]
    _generate_into(cfg, c, groups, [r.n for r in requests], seed, spent, step)
    extend = getattr(c.allocator, "extend", None)
    stage = 1
    while extend is not None:
        extra = list(extend(groups, stage))
        if len(extra) != len(groups):
            raise ValueError(f"allocator asked for {len(extra)} extra counts for {len(groups)} groups")
        if not any(extra):
            break
        _generate_into(cfg, c, groups, extra, stage_seed(seed, stage), spent, step)
        stage += 1
    _observe(c, groups, step)
    finalize = getattr(c.allocator, "finalize", None)
    if finalize is not None:
        groups = finalize(groups, step)
    return Rollouts([g for g in groups if g.completions]), sum(g.reused for g in groups)


def _step_metrics(sums: dict[str, float]) -> dict[str, float]:
    """Timings and scoring counts summed over rounds, and means over every completion generated this step,
    kept or not (the policy's unfiltered performance)."""
    n = max(sums["generated/n"], 1.0)
    return {"time/rollout": sums["time/rollout"], "time/score": sums["time/score"],
            **{k: v for k, v in sums.items() if k.startswith(("score/", "noise/"))},
            "generated/reward": sums["generated/reward_sum"] / n,
            "generated/accuracy": sums["generated/correct_sum"] / n,
            "generated/completion_length": sums["generated/length_sum"] / n,
            # every token generated this step (all rounds and stages, kept or not) over the generation time
            "gen_tokens_per_s": sums["generated/length_sum"] / max(sums["time/rollout"], 1e-9)}


def _spend_metrics(c, r: Rollouts, spent: _Spent, reused: int) -> dict[str, float]:
    sizes = torch.bincount(torch.tensor([comp.group for comp in r.completions], dtype=torch.long),
                           minlength=len(r.requests)) if r.completions else torch.zeros(0)
    informative = len(informative_groups(_filter_inputs(r), "reward", singletons=False)) if r.completions else 0
    groups = len(r.requests)
    out = {"rollouts/spent": spent.sums["generated/n"], "rollouts/reused": float(reused),
           "rollouts/generation_calls": spent.sums["calls"], "rollouts/groups": float(groups),
           "rollouts/informative_groups": float(informative),
           "rollouts/zero_variance_groups": float(groups - informative),
           "rollouts/informative_frac": informative / groups if groups else 0.0,
           "rollouts/spent_per_informative_group": spent.sums["generated/n"] / max(informative, 1),
           "rollouts/group_size_mean": float(sizes.float().mean()) if groups else 0.0,
           "rollouts/group_size_min": float(sizes.min()) if groups else 0.0,
           "rollouts/group_size_max": float(sizes.max()) if groups else 0.0}
    for obj, prefix in ((c.sampler, "sampler"), (c.allocator, "budget")):
        report = getattr(obj, "metrics", None)
        if report is not None:
            out.update({f"{prefix}/{k}": float(v) for k, v in report().items()})
    out.update(engine_metrics(c.engine))  # rollout-engine wrappers (parameter noise, guidance)
    if len(getattr(c.task, "domain_weights", None) or {}) > 1:
        for name in c.task.domain_weights:
            n, rew, ok = spent.per_task.get(name, [0.0, 0.0, 0.0])
            out.update({f"task/{name}/completions": n, f"task/{name}/reward": rew / n if n else 0.0,
                        f"task/{name}/accuracy": ok / n if n else 0.0})
    return out


def _filter_inputs(r: Rollouts, cfg=None, c=None, step: int = 0) -> GroupFilterInputs:
    """A round's groups for a group filter; given the run (``cfg``, ``c``), its rewards after the reward
    transforms that need no tensor of the update's passes (:mod:`rlvr.train.rewards`), as the advantage sees them."""
    groups = torch.tensor([comp.group for comp in r.completions], dtype=torch.long)
    rewards = torch.tensor(r.rewards, dtype=torch.float64)
    features = run_features(cfg, c) if cfg is not None else None
    if features is not None and r.completions and (cfg.algorithm.reward_transforms or features.reward_transforms):
        batch = build_batch(r.completions, r.rewards, c.tokenizer.pad_token_id)
        rewards, _, _ = transform_rewards(cfg, features, c.algo_state, batch.rewards, batch.group_index,
                                          batch.completion_mask, score_components(r.scores), {}, step, peek=True)
    return GroupFilterInputs(rewards,
                             torch.tensor([s.components.get("correct", 0.0) for s in r.scores], dtype=torch.float64),
                             groups, len(r.requests))


def collect_rollouts(cfg, c, step: int, seed_for) -> Rollouts:
    """One step's rollouts; ``seed_for(round)`` gives each generation round's sampling seed. With
    ``scoring.appeal.verifier`` set, the trained batch's negatives are then appealed (rlvr.tasks.appeals)."""
    ro = _collect(cfg, c, step, seed_for)
    if cfg.scoring.appeal.verifier is None or not ro.completions:
        return ro
    appeal = run_appeal(cfg.scoring.appeal, appeal_state(c), ro.groups, seed_for(0))
    return Rollouts(ro.groups, {**ro.metrics, **appeal})


def _collect(cfg, c, step: int, seed_for) -> Rollouts:
    want = cfg.rollout.prompts_per_step
    ds = cfg.algorithm.dynamic_sampling
    group_filter = run_features(cfg, c).group_filter
    spent = _Spent()
    first, reused = _round(cfg, c, want, seed_for(0), step, spent)
    if group_filter is None:
        first.metrics = {**_step_metrics(spent.sums), "rollout/rounds": 1.0,
                         **_spend_metrics(c, first, spent, reused)}
        return first
    kept: list[Group] = []
    rounds, total_reused = 0, reused
    current = first
    while True:
        rounds += 1
        keep = GROUP_FILTERS.get(group_filter.name).fn(_filter_inputs(current, cfg, c, step), group_filter.params)
        kept += [current.groups[g] for g in keep[: want - len(kept)]]
        have = len(kept)
        if have >= want or rounds >= ds.max_rounds:
            break
        current, reused = _round(cfg, c, ds.batch_prompts or want, seed_for(rounds), step, spent)
        total_reused += reused
    if have < want and ds.on_shortfall == "error":
        raise DynamicSamplingShortfall(
            f"dynamic sampling found {have} of {want} informative groups in {rounds} rounds "
            f"(algorithm.dynamic_sampling.max_rounds={ds.max_rounds})")
    out = Rollouts(kept)
    out.metrics = {**_step_metrics(spent.sums), "rollout/rounds": float(rounds), "rollout/filled_frac": have / want,
                   **_spend_metrics(c, out, spent, total_reused)}
    return out

"""Which prompts go into a step, how many completions each gets, and per-prompt statistics.

Samplers (``data.sampler``) and allocators (``data.budget``) are registered by name; each module
registers its own and is imported when its name is first looked up.
"""

from rlvr.lazy import lazy_exports
from rlvr.sampling.base import ALLOCATORS, SAMPLERS, AllocatorContext, Allocator, Group, SamplerContext

__all__ = ["ALLOCATORS", "SAMPLERS", "Allocator", "AllocatorContext", "FixedBudget", "Group", "MixtureSampler",
           "PromptStats", "SamplerContext", "UniformSampler", "build_allocator", "build_data", "build_sampler"]


def build_sampler(component, ctx: SamplerContext):
    """The sampler named by a config component (``{name, params}``)."""
    return SAMPLERS.get(component.name).fn(ctx, component.params)


def build_allocator(component, ctx: AllocatorContext):
    return ALLOCATORS.get(component.name).fn(ctx, component.params)


__getattr__ = lazy_exports(__name__, {"FixedBudget": "budget", "MixtureSampler": "prompts",
                                      "UniformSampler": "prompts", "PromptStats": "stats"})


def build_data(cfg, task, algorithm_state=None):
    """``(sampler, allocator, stats)`` for a run: ``cfg.data`` over the task's train split; ``algorithm_state``
    (the run's AlgorithmState) is shared with them through their contexts."""
    from rlvr.sampling.stats import PromptStats

    d, r = cfg.data, cfg.rollout
    stats = PromptStats(decay=d.stats_decay)
    weights = getattr(task, "domain_weights", None)
    examples = task.examples("train")
    sampler = build_sampler(d.sampler, SamplerContext(examples, stats, cfg.seed, r.prompts_per_step,
                                                      r.group_size, weights, algorithm_state))
    allocator = build_allocator(d.budget, AllocatorContext(stats, cfg.seed, r.prompts_per_step, r.group_size,
                                                           examples, algorithm_state))
    return sampler, allocator, stats

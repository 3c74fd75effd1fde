"""Which prompts go into a step, how many completions each gets, and per-prompt statistics."""

from rlvr.sampling.budget import FixedBudget
from rlvr.sampling.prompts import UniformSampler
from rlvr.sampling.stats import PromptStats

__all__ = ["FixedBudget", "PromptStats", "UniformSampler"]

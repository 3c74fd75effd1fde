"""REINFORCE Leave-One-Out (RLOO) advantage (Ahmadian et al. 2024, "Back to Basics: Revisiting REINFORCE
Style Optimization for Learning from Human Feedback in LLMs", arXiv:2402.14740; the estimator is from
Kool, van Hoof and Welling 2019, "Buy 4 REINFORCE Samples, Get a Baseline for Free!").

    A_i = r_i - 1/(n_g - 1) * sum_{j in g(i), j != i} r_j                     [N], broadcast to [N, T]
        = n_g/(n_g - 1) * (r_i - mean_{j in g(i)} r_j)

where ``n_g`` is the size of row i's group (groups are ragged, so n_g varies per row). The baseline of row i
is the mean of the OTHER completions of the same prompt, so it does not depend on r_i and the policy
gradient stays unbiased. No std scaling (as in the paper and verl's ``compute_rloo_outcome_advantage``).

Statistics are float64. A constant group (max == min) gets exactly 0.

DEVIATION (groups of one): such a group has no other sample to form a baseline from, so its row gets
A = 0 (no gradient). verl skips its ``n > 1`` branch and leaves the raw reward (A = r), i.e. silently mixes
baseline-free REINFORCE rows into an RLOO batch; we do not. The config check rejects
``rollout.group_size < 2``; singletons can still appear at run time (a ragged batch after filtering).
"""

from __future__ import annotations

from rlvr.algorithms.grouping import group_constant, leave_one_out_mean
from rlvr.algorithms.registry import ADVANTAGES, AdvantageInputs
from rlvr.lazy import torch
from rlvr.registry import Params

__all__ = ["RLOOAdvantageParams", "rloo_advantage", "rloo_check"]


class RLOOAdvantageParams(Params):
    """RLOO's advantage has no parameters."""


def rloo_check(run_cfg, p: RLOOAdvantageParams) -> list[str]:
    """A leave-one-out baseline needs at least one other completion per prompt."""
    g = run_cfg.rollout.group_size
    if g < 2:
        return [f"needs rollout.group_size >= 2 (a leave-one-out baseline of {g} completion is undefined)"]
    return []


@ADVANTAGES.register("rloo", RLOOAdvantageParams, check=rloo_check)
def rloo_advantage(inp: AdvantageInputs, p: RLOOAdvantageParams) -> torch.Tensor:
    """RLOO: reward minus the mean reward of the other completions of the same prompt."""
    r = inp.rewards.to(torch.float64)
    adv = r - leave_one_out_mean(r, inp.group_index)
    # exact zeros where there is no signal: a constant group (float64 gives ~1e-16 for e.g. [0.7]*4), which
    # includes every group of one (no baseline, see the module docstring)
    return torch.where(group_constant(r, inp.group_index), torch.zeros_like(adv), adv).to(torch.float32)

"""AERO's posterior baseline for groups with no signal (Zhang et al. 2026, arXiv:2602.14338) — RECONSTRUCTED.

AERO keeps a Beta(a, b) posterior of each prompt's success rate (the ``aero`` rollout allocator,
``data.budget: aero``) and uses its mean p~ as the baseline of all-0 / all-1 groups so they still carry
a gradient ("prevents zero-advantage dead zones")::

    informative group:    A_i = (r_i - mean_g r) / (std_g r + eps)      (GRPO; ``std`` as in ``grpo``)
    constant group:       A_i = r_i - p~_q                              p~_q = a_q / (a_q + b_q)

p~ is the posterior *before* the step's own completions were added (the allocator writes it into every
score as the component ``prior_pass_rate``), so the baseline does not depend on the rewards it is
subtracted from. Whether the paper also rescales the constant-group advantage is not known; it is not
rescaled here.
"""

from __future__ import annotations

from rlvr.algorithms.advantages.grpo import GRPOAdvantageParams, grpo_advantage
from rlvr.algorithms.grouping import group_constant, group_sizes
from rlvr.algorithms.registry import ADVANTAGES, AdvantageInputs
from rlvr.lazy import torch

__all__ = ["aero_advantage"]


def _needs_aero_budget(cfg, p) -> list[str]:
    """The ``prior_pass_rate`` score component must come from the configured allocator (declared there with
    ``provides=``); AERO's allocator, which keeps the per-prompt posterior, is the one that writes it."""
    from rlvr.sampling.base import ALLOCATORS

    if "prior_pass_rate" not in ALLOCATORS.get(cfg.data.budget.name).provides:
        writers = [n for n in ALLOCATORS.names() if "prior_pass_rate" in ALLOCATORS.get(n).provides]
        return [f"needs data.budget: {' or '.join(writers)} (which keeps the per-prompt posterior and provides "
                f"the prior_pass_rate score component), not {cfg.data.budget.name!r}"]
    return []


@ADVANTAGES.register("aero", GRPOAdvantageParams, check=_needs_aero_budget)
def aero_advantage(inp: AdvantageInputs, p: GRPOAdvantageParams) -> torch.Tensor:
    """GRPO, with the prompt's Beta-posterior mean as the baseline of constant groups (AERO)."""
    if "prior_pass_rate" not in inp.components:
        raise ValueError("the aero advantage needs the 'prior_pass_rate' score component written by the aero "
                         "rollout allocator (data.budget: aero)")
    r = inp.rewards.to(torch.float64)
    adv = grpo_advantage(inp, p).to(torch.float64)
    dead = group_constant(r, inp.group_index) & (group_sizes(inp.group_index) > 1)
    prior = inp.components["prior_pass_rate"].to(torch.float64)
    return torch.where(dead, r - prior, adv).to(torch.float32)

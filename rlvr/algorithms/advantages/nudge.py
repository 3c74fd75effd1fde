"""NudgeRL's inter/intra-context advantage (advantage estimator ``nudge``).

Kim et al. 2026, "Nudging Beyond the Comfort Zone: Efficient Strategy-Guided Exploration for RLVR",
arXiv:2605.15726; code ``tally0818/NudgeRL``, ``NudgeRLTrainer.compute_advantage_with_groups`` (EXACT from code;
docs/methods.md, `nudge`). Each problem's group is split over strategy contexts by ``rollout.contexts`` (extra
``context_index``: 0 for the plain, "dropout", rollouts, 1..M for a context). With m_c the mean reward of context
c's rollouts and m the mean over all of the problem's rollouts:

    A_raw = (r - m_c) + lambda (m_c - m)      a rollout under a context     (intra + lambda * inter)
          = r - m                             a plain rollout
    A     = (A_raw - mean(A_raw)) / (std(A_raw) + eps)     over the problem's rollouts, population std

With ``lambda = 1`` and no contexts it is the group-mean baseline ``r - m``, standardised: GRPO with the
population std. A group whose raw advantages are all equal (a constant group) gets 0. Defaults are the
paper's (``adv_lbd`` 1.1, ``adv_eps`` 1e-5).
"""

from __future__ import annotations

from pydantic import Field

from rlvr.algorithms.registry import ADVANTAGES, AdvantageInputs
from rlvr.lazy import torch
from rlvr.registry import Params

__all__ = ["NudgeParams", "nudge"]


class NudgeParams(Params):
    lam: float = Field(1.1, ge=0.0, description="weight of the between-context term m_c - m (adv_lbd)")
    eps: float = Field(1e-5, gt=0.0, description="added to the std (adv_eps)")


@ADVANTAGES.register("nudge", NudgeParams, needs=("context_index",))
def nudge(inp: AdvantageInputs, p: NudgeParams) -> torch.Tensor:
    """NudgeRL: within-context plus amplified between-context differences, standardised per problem."""
    r = inp.rewards.to(torch.float64)
    ctx = inp.extras["context_index"]
    ctx = ctx.max(-1).values.round().long() if ctx.dim() == 2 else ctx.round().long()  # one per row
    out = torch.zeros_like(r)
    for g in torch.unique(inp.group_index).tolist():
        rows = (inp.group_index == g).nonzero().flatten()
        rg, cg = r[rows], ctx[rows]
        m = rg.mean()
        raw = rg - m
        for c in torch.unique(cg).tolist():
            if c == 0:
                continue
            sel = cg == c
            mc = rg[sel].mean()
            raw[sel] = (rg[sel] - mc) + p.lam * (mc - m)
        centred = raw - raw.mean()
        std = raw.std(unbiased=False) if raw.numel() > 1 else torch.zeros((), dtype=raw.dtype)
        out[rows] = torch.where(centred.abs() < 1e-12, torch.zeros_like(centred), centred / (std + p.eps))
    return out

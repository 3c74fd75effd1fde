"""PPO's clipped surrogate with asymmetric bounds and an optional dual clip.

Schulman et al. 2017 (arXiv:1707.06347); asymmetric "clip-higher" bounds from DAPO (Yu et al. 2025,
arXiv:2503.14476); dual clip from Ye et al. 2019 (arXiv:1912.09729). Per token, with
rho = exp(clamp(logp - old_logp, -20, 20)):

    l1 = -A * rho
    l2 = -A * clip(rho, 1 - clip_low, 1 + clip_high)     # or the run's clip rule's bounds (algorithm.clip)
    l  = max(l1, l2)                          # = -min(rho A, clip(rho) A)
    if dual_clip c is set and A < 0:  l = min(l, -A c)

Returns the per-token loss [N, T] (aggregated elsewhere) and per-token metrics: ``clip_frac`` (tokens
whose gradient the clip removed), ``ratio``, ``dual_clip_frac``.
"""

from __future__ import annotations

from pydantic import Field, model_validator

from rlvr.algorithms.registry import OBJECTIVES, ObjectiveInputs, ObjectiveOutput
from rlvr.lazy import torch
from rlvr.registry import Params

__all__ = ["PPOClipParams", "ppo_clip"]


class PPOClipParams(Params):
    clip_low: float = Field(0.2, ge=0.0, lt=1.0, description="lower bound: ratio clipped at 1 - clip_low")
    clip_high: float = Field(0.2, ge=0.0, description="upper bound: ratio clipped at 1 + clip_high (DAPO: 0.28)")
    dual_clip: float | None = Field(None, description="dual-clip constant c > 1 capping negative-advantage loss")
    log_ratio_clamp: float = Field(20.0, gt=0.0, description="clamp on logp - old_logp before exp")

    @model_validator(mode="after")
    def _check_dual(self) -> "PPOClipParams":
        if self.dual_clip is not None and self.dual_clip <= 1.0:
            raise ValueError(f"dual_clip must be > 1 (got {self.dual_clip})")
        return self


@OBJECTIVES.register("ppo_clip", PPOClipParams, traits=("clip_rule",))
def ppo_clip(inp: ObjectiveInputs, p: PPOClipParams) -> ObjectiveOutput:
    """PPO clipped surrogate with separate low/high bounds and optional dual clip."""
    adv = inp.advantages
    log_ratio = (inp.logp - inp.old_logp).clamp(-p.log_ratio_clamp, p.log_ratio_clamp)
    ratio = torch.exp(log_ratio)
    b = inp.ratio_bounds(p.clip_low, p.clip_high, ratio)
    l1 = -adv * ratio
    l2 = -adv * torch.clamp(ratio, b.low, b.high)
    loss = torch.maximum(l1, l2)
    clipped = (l2 > l1).float()
    if b.keep is not None:  # the clip rule also dropped some tokens from the update
        loss = loss * b.keep
    dual = torch.zeros_like(loss)
    if p.dual_clip is not None:
        cap = -adv * p.dual_clip
        dual = ((adv < 0) & (loss > cap)).float()
        loss = torch.where(adv < 0, torch.minimum(loss, cap), loss)
    metrics = {"clip_frac": clipped.detach(), "ratio": ratio.detach(), "dual_clip_frac": dual.detach()}
    return loss, metrics

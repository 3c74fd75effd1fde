"""SSPO: one importance ratio per sub-sentence (GSPO's geometric mean inside each segment) and a clip range
that widens with the segment's entropy.

Yang et al., "SSPO: Subsentence-level Policy Optimization", arXiv:2511.04256. RECONSTRUCTED from the abstract
(no code found; docs/methods.md, `sspo`): the delimiter set, the entropy scaling g and the default bounds
are our choices, exposed as parameters. Segments end after tokens flagged by the ``segment_end`` extra (the
token's text ends in , . ; : ! ? or their full-width forms, or holds a newline; see rlvr.passes.segments). With
S_k the valid tokens of segment k of response i:

    log s_{i,k} = (1/|S_k|) sum_{t in S_k} (logp - old_logp)                           # per segment, detached
    s_{i,t}     = exp(min(logp_{i,t} - sg[logp_{i,t}] + log s_{i,k(t)}, 10))           # GSPO-token form
    H_k         = mean_{t in S_k} H_t;   g_k = clip(H_k / mean_{k' in i} H_k', scale_min, scale_max)
                  (g = 1 when entropy_adaptive is off or the response's mean entropy is 0)
    loss_{i,t}  = -min(s_{i,t} A, clip(s_{i,t}, 1 - clip_low g_k, 1 + clip_high g_k) A)

H is the per-token entropy of the policy being updated (detached). A response that is one segment is
``gspo_token`` (g = 1 then); one segment per token with entropy_adaptive off is ``ppo_clip``. The trust region
is SSPO's own (entropy-scaled), so ``algorithm.clip`` does not apply. The defaults (GRPO's 0.2, g in
[0.5, 2]) are placeholders: the paper's values were not found.
Metrics: ``clip_frac``, ``ratio`` (s_{i,t}), ``clip_scale`` (g), ``segments`` (segments in the response).
"""

from __future__ import annotations

from pydantic import Field, model_validator

from rlvr.algorithms.objectives.common import require
from rlvr.algorithms.registry import OBJECTIVES, ObjectiveInputs, ObjectiveOutput
from rlvr.lazy import torch
from rlvr.registry import Params

__all__ = ["SSPOParams", "sspo", "segment_ids"]


class SSPOParams(Params):
    clip_low: float = Field(0.2, ge=0.0, lt=1.0, description="segment ratio clipped below at 1 - clip_low x g")
    clip_high: float = Field(0.2, ge=0.0, description="segment ratio clipped above at 1 + clip_high x g")
    entropy_adaptive: bool = Field(True, description="scale the bounds by g = segment entropy / the response's "
                                                     "mean segment entropy")
    scale_min: float = Field(0.5, gt=0.0, description="smallest g")
    scale_max: float = Field(2.0, gt=0.0, description="largest g")
    log_ratio_clamp: float = Field(10.0, gt=0.0, description="upper clamp on the segment log-ratio before exp")

    @model_validator(mode="after")
    def _check_scale(self) -> "SSPOParams":
        if self.scale_min > self.scale_max:
            raise ValueError(f"scale_min ({self.scale_min}) must not exceed scale_max ({self.scale_max})")
        return self


def segment_ids(ends: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
    """[N, T] long: the segment of each token, counting segment ends among the earlier valid tokens."""
    e = (ends * mask > 0).long()
    return e.cumsum(-1) - e


def _segment_mean(x: torch.Tensor, flat: torch.Tensor, valid: torch.Tensor, n_slots: int):
    """Mean of ``x`` over each segment slot (valid tokens only) -> (mean per token, mean per slot, count)."""
    vals = torch.where(valid, x, torch.zeros_like(x)).flatten()
    total = torch.zeros(n_slots, dtype=x.dtype, device=x.device).index_add(0, flat, vals)
    count = torch.zeros(n_slots, dtype=x.dtype, device=x.device).index_add(0, flat, valid.flatten().to(x.dtype))
    mean = total / count.clamp(min=1)
    return mean[flat].view_as(x), mean, count


@OBJECTIVES.register("sspo", SSPOParams, needs=("segment_end",))
def sspo(inp: ObjectiveInputs, p: SSPOParams) -> ObjectiveOutput:
    """SSPO (reconstructed): sub-sentence ratios with entropy-scaled clip bounds."""
    n, t = inp.logp.shape
    ends = require(inp.extras.get("segment_end"), "the 'segment_end' extra", "sspo").to(inp.logp.device)
    valid = inp.mask > 0
    seg = segment_ids(ends, inp.mask)
    flat = (torch.arange(n, device=seg.device)[:, None] * (t + 1) + seg).flatten()  # one slot per (row, segment)
    n_slots = n * (t + 1)
    log_s, _, count = _segment_mean((inp.logp - inp.old_logp).detach(), flat, valid, n_slots)
    ratio = torch.exp((inp.logp - inp.logp.detach() + log_s).clamp(max=p.log_ratio_clamp))
    scale = torch.ones_like(ratio)
    if p.entropy_adaptive:
        ent = require(inp.entropy, "per-token entropies (entropy_adaptive)", "sspo").detach().to(ratio.dtype)
        _, seg_h, _ = _segment_mean(ent, flat, valid, n_slots)
        present = (count > 0).view(n, t + 1).to(ratio.dtype)
        row_h = (seg_h.view(n, t + 1) * present).sum(-1) / present.sum(-1).clamp(min=1)  # mean over segments
        g = (seg_h.view(n, t + 1) / row_h.clamp(min=1e-30)[:, None]).clamp(p.scale_min, p.scale_max)
        g = torch.where(row_h[:, None] > 0, g, torch.ones_like(g))
        scale = g.flatten()[flat].view(n, t)
    adv = inp.advantages
    l1 = -adv * ratio
    l2 = -adv * torch.clamp(ratio, 1.0 - p.clip_low * scale, 1.0 + p.clip_high * scale)
    loss = torch.maximum(l1, l2)
    n_seg = (count > 0).view(n, t + 1).sum(-1).to(ratio.dtype)[:, None].expand(n, t)
    return loss, {"clip_frac": (l2 > l1).float().detach(), "ratio": ratio.detach(), "clip_scale": scale,
                  "segments": n_seg}

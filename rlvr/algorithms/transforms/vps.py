"""GRPO-VPS: segment-wise progress from the policy's belief in the correct answer (advantage transform
``vps``), RECONSTRUCTED.

Zhu, Weng, Wu, Tan, Chen, Tao, Bai, Hou, Shang, Zhang 2026, "GRPO-VPS: Enhancing Group Relative Policy Optimization
with Verifiable Process Supervision for Effective Reasoning", arXiv:2604.20659 (no code; docs/methods.md, `vps`).
After each segment of a completion the trainer probes the policy's belief in the gold answer, ``b_k`` (mean
log-prob of the answer after an answer-eliciting suffix; :mod:`rlvr.passes.belief`, extras
``belief_progress`` = b_k - b_{k-1} and ``belief_segment`` = k on each token of segment k). Then

    Delta_{i,k} = b_{i,k} - b_{i,k-1}                               the segment's progress
    z_{i,k}     = (Delta_{i,k} - mean_g Delta) / (std_g Delta + eps)  over every segment of the group
                                                                    (population std; a constant group: 0)
    A_{i,t}     = A_{i,t} + gamma z_{i,k(t)}                        every token of segment k

so a segment that raised the belief (a useful step) gains credit, one that lowered it (an error) loses it,
and a flat one (redundant) keeps the trajectory's advantage. ``gamma = 0`` is the input advantage exactly.
RECONSTRUCTED: the normalisation and ``gamma`` (0.5) are our guess; the paper's optional sign-consistent variant is
not implemented. Metrics: ``progress_mean`` (per token), ``segments_mean`` (per completion).
"""

from __future__ import annotations

from pydantic import Field

from rlvr.algorithms.registry import ADVANTAGE_TRANSFORMS, TransformInputs, TransformOutput
from rlvr.lazy import torch
from rlvr.registry import Params

__all__ = ["VPSParams", "vps", "segment_zscores"]


class VPSParams(Params):
    gamma: float = Field(0.5, ge=0.0, description="weight of the group-normalised segment progress")
    eps: float = Field(1e-6, gt=0.0, description="added to the group's std of progress")


def segment_zscores(progress: torch.Tensor, segment: torch.Tensor, group_index: torch.Tensor,
                    mask: torch.Tensor, eps: float = 1e-6) -> torch.Tensor:
    """``[N, T]`` each token's segment progress, z-scored over all segments of its group (0 on padding)."""
    out = torch.zeros(progress.shape, dtype=torch.float64, device=progress.device)
    seg = segment.long()
    for g in torch.unique(group_index).tolist():
        rows = (group_index == g).nonzero().flatten().tolist()
        cells = [(i, k) for i in rows for k in torch.unique(seg[i][mask[i] > 0]).tolist() if k > 0]
        if not cells:
            continue
        values = torch.tensor([float(progress[i][(seg[i] == k) & (mask[i] > 0)][0]) for i, k in cells],
                              dtype=torch.float64)
        z = (values - values.mean()) / (values.std(unbiased=False) + eps)
        for (i, k), v in zip(cells, z.tolist()):
            out[i][seg[i] == k] = v
    return out * mask.to(torch.float64)


@ADVANTAGE_TRANSFORMS.register("vps", VPSParams, needs=("belief_progress", "belief_segment"))
def vps(inp: TransformInputs, p: VPSParams) -> TransformOutput:
    """GRPO-VPS: add the group-normalised gain in belief in the gold answer of each token's segment."""
    mask = inp.mask
    z = segment_zscores(inp.extras["belief_progress"].to(torch.float64), inp.extras["belief_segment"],
                        inp.group_index, mask, p.eps)
    out = (inp.advantages.to(torch.float64) + p.gamma * z) * mask
    seg = inp.extras["belief_segment"]
    n_seg = seg.max(-1).values.to(torch.float64)
    valid = mask.bool()
    return out.to(inp.advantages.dtype), {
        "progress_mean": float(inp.extras["belief_progress"][valid].mean()) if valid.any() else 0.0,
        "segments_mean": float(n_seg.mean()) if n_seg.numel() else 0.0}

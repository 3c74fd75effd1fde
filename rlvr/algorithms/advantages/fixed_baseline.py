"""REINFORCE with a constant baseline (Williams 1992; the setting in which the verifier-noise corrections of
Cai et al. 2025, arXiv:2510.00915, are unbiased).

    A_i = r_i - b                                                       [N], broadcast to [N, T]

No statistic of the batch enters A, so a reward transform that is affine in the reward (``noise_backward``,
``noise_forward``) changes the update here, whereas group or batch normalisation cancels it (see
``rlvr/algorithms/transforms/noise.py``). Higher variance than a group baseline: meant for those corrections
and for ablations.
"""

from __future__ import annotations

from pydantic import Field

from rlvr.algorithms.registry import ADVANTAGES, AdvantageInputs
from rlvr.lazy import torch
from rlvr.registry import Params

__all__ = ["FixedBaselineParams", "fixed_baseline_advantage"]


class FixedBaselineParams(Params):
    baseline: float = Field(0.0, description="b, subtracted from every reward")


@ADVANTAGES.register("fixed_baseline", FixedBaselineParams)
def fixed_baseline_advantage(inp: AdvantageInputs, p: FixedBaselineParams) -> torch.Tensor:
    """REINFORCE: reward minus a constant baseline, no normalisation."""
    return (inp.rewards.to(torch.float64) - p.baseline).to(torch.float32)

"""``none``: no importance-sampling correction (weights of 1); the engine-vs-trainer mismatch is still
reported as the ``logp_mismatch`` metric."""

from __future__ import annotations

from rlvr.algorithms.registry import CORRECTIONS, CorrectionInputs, CorrectionOutput
from rlvr.lazy import torch
from rlvr.registry import Params


@CORRECTIONS.register("none")
def no_correction(inp: CorrectionInputs, p: Params) -> CorrectionOutput:
    """No correction: every token has weight 1."""
    return torch.ones_like(inp.mask), {}

"""Mask transforms: which completion tokens enter the loss and its token counts.

``overlong_filter`` (DAPO, Yu et al. 2025, arXiv:2503.14476, §3.4, "overlong filtering";
``algorithm.overlong.filter`` turns it on): a truncated completion (it hit ``rollout.max_new_tokens``) has
its whole row masked out, M_i,t = 0 for all t, so a cut-off answer neither earns nor loses credit. The row
stays in the batch (its reward still counts in its group's statistics); aggregations leave empty rows out
of their denominators.
"""

from __future__ import annotations

from rlvr.algorithms.registry import MASK_TRANSFORMS, MaskInputs
from rlvr.lazy import torch
from rlvr.registry import Params

__all__ = ["overlong_filter"]


@MASK_TRANSFORMS.register("overlong_filter", Params)
def overlong_filter(inp: MaskInputs, p: Params) -> torch.Tensor:
    """Mask out the rows of truncated completions."""
    return inp.mask * (~inp.truncated)[:, None].to(inp.mask.dtype)

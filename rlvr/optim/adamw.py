"""AdamW (Loshchilov & Hutter 2019, arXiv:1711.05101), the default optimizer."""

from __future__ import annotations

import torch

from rlvr.optim.registry import OPTIMIZERS, trainable
from rlvr.registry import Params

__all__ = ["adamw"]


@OPTIMIZERS.register("adamw", Params)
def adamw(model: torch.nn.Module, o, p: Params) -> torch.optim.Optimizer:
    """torch.optim.AdamW over every trainable parameter with optim.lr, optim.betas, optim.weight_decay."""
    return torch.optim.AdamW([q for _, q in trainable(model)], lr=o.lr, betas=o.betas, weight_decay=o.weight_decay)

"""The optimizer registry."""

from __future__ import annotations

from typing import Any, Callable

from rlvr.lazy import torch
from rlvr.registry import Registry

__all__ = ["OPTIMIZERS", "trainable"]

OPTIMIZERS: Registry[Callable[..., torch.optim.Optimizer]] = Registry("optimizer")


def trainable(model: torch.nn.Module) -> list[tuple[str, Any]]:
    """``(name, parameter)`` pairs that require gradients, in ``model.named_parameters()`` order."""
    return [(n, p) for n, p in model.named_parameters() if p.requires_grad]

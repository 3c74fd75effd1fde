"""AdamW (Loshchilov & Hutter 2019, arXiv:1711.05101), the default optimizer.

torch's fused AdamW kernel is used where torch has one for the parameters (CPU and CUDA floating-point
tensors): the same update as the per-parameter loop up to float rounding, about 3x faster on CPU
(``benchmarks/update_path.py``: 1.3 ms against 4.0 ms a step for the tiny model, 44-85 ms against 144-300
ms for a 25M-parameter one).
"""

from __future__ import annotations

from pydantic import Field

from rlvr.lazy import torch
from rlvr.optim.registry import OPTIMIZERS, trainable
from rlvr.registry import Params

__all__ = ["adamw", "AdamWParams"]


class AdamWParams(Params):
    fused: bool | None = Field(None, description="torch's fused kernel (null: where torch supports the "
                                                 "parameters' device and dtype)")


def _fusable(params: list[torch.Tensor]) -> bool:
    return all(q.device.type in ("cpu", "cuda") and q.dtype in (torch.float32, torch.float16, torch.bfloat16,
                                                                  torch.float64) for q in params)


@OPTIMIZERS.register("adamw", AdamWParams)
def adamw(model: torch.nn.Module, o, p: AdamWParams) -> torch.optim.Optimizer:
    """torch.optim.AdamW over every trainable parameter with optim.lr, optim.betas, optim.weight_decay."""
    params = [q for _, q in trainable(model)]
    fused = _fusable(params) if p.fused is None else p.fused
    if fused:
        try:
            return torch.optim.AdamW(params, lr=o.lr, betas=o.betas, weight_decay=o.weight_decay, fused=True)
        except (RuntimeError, TypeError):
            if p.fused:  # asked for explicitly
                raise
    return torch.optim.AdamW(params, lr=o.lr, betas=o.betas, weight_decay=o.weight_decay)

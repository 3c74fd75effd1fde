"""The optimizer behind ``muon`` and ``pion``: a Newton-Schulz-orthogonalised momentum step on hidden
matrices and AdamW on the rest (the equations are in :mod:`rlvr.optim.muon`)."""

from __future__ import annotations

import math
from typing import Sequence

import torch

from rlvr.optim.newton_schulz import head_blocks, merge_head_blocks, polynomial_iteration

__all__ = ["SpectralAdamW"]


class SpectralAdamW(torch.optim.Optimizer):
    """Momentum + a Newton-Schulz polynomial ``schedule`` on matrix groups; AdamW on the other groups."""

    def __init__(self, param_groups: list[dict], schedule: Sequence[tuple[float, float, float]], *, lr: float,
                 betas: tuple[float, float] = (0.9, 0.999), weight_decay: float = 0.0, momentum: float = 0.95,
                 nesterov: bool = False, scale_factor: float = 5.0, eps: float = 1e-8,
                 ns_dtype: torch.dtype = torch.bfloat16):
        defaults = dict(lr=lr, betas=tuple(betas), eps=eps, weight_decay=weight_decay, momentum=momentum,
                        nesterov=nesterov, scale_factor=scale_factor, matrix=False, heads=None, split_dim=0)
        super().__init__(param_groups, defaults)
        self.schedule = tuple(tuple(float(v) for v in c) for c in schedule)
        self.ns_dtype = ns_dtype

    @torch.no_grad()
    def step(self, closure=None):
        loss = None
        if closure is not None:
            with torch.enable_grad():
                loss = closure()
        for group in self.param_groups:
            for p in group["params"]:
                if p.grad is not None:
                    (self._matrix_step if group["matrix"] else self._adamw_step)(p, group)
        return loss

    def direction(self, u: torch.Tensor, heads: int | None = None, split_dim: int = 0) -> torch.Tensor:
        """The scaled spectral direction ``sqrt(max(rows, cols)) * NS(u)`` of a momentum matrix ``u``."""
        g = u.reshape(u.shape[0], -1)
        blocks = head_blocks(g, heads, split_dim) if heads else None
        if blocks is None:
            x = polynomial_iteration(g, self.schedule, dtype=self.ns_dtype)
            return (x.to(u.dtype) * math.sqrt(max(g.shape))).reshape(u.shape)
        x = polynomial_iteration(blocks, self.schedule, dtype=self.ns_dtype).to(u.dtype)
        return (merge_head_blocks(x, split_dim) * math.sqrt(max(blocks.shape[-2:]))).reshape(u.shape)

    def _matrix_step(self, p: torch.Tensor, group: dict) -> None:
        state = self.state[p]
        if not state:
            state["step"] = 0
            state["momentum_buffer"] = torch.zeros_like(p)
        state["step"] += 1
        buf, mu = state["momentum_buffer"], group["momentum"]
        buf.lerp_(p.grad, 1 - mu)
        u = p.grad.lerp(buf, mu) if group["nesterov"] else buf
        update = self.direction(u, group["heads"], group["split_dim"])
        p.mul_(1 - group["lr"] * group["weight_decay"])
        p.add_(update, alpha=-group["lr"] * group["scale_factor"])

    def _adamw_step(self, p: torch.Tensor, group: dict) -> None:
        state = self.state[p]
        if not state:
            state["step"] = 0
            state["exp_avg"] = torch.zeros_like(p)
            state["exp_avg_sq"] = torch.zeros_like(p)
        state["step"] += 1
        (b1, b2), lr, t = group["betas"], group["lr"], state["step"]
        p.mul_(1 - lr * group["weight_decay"])
        state["exp_avg"].lerp_(p.grad, 1 - b1)
        state["exp_avg_sq"].mul_(b2).addcmul_(p.grad, p.grad, value=1 - b2)
        denom = (state["exp_avg_sq"].sqrt() / math.sqrt(1 - b2**t)).add_(group["eps"])
        p.addcdiv_(state["exp_avg"], denom, value=-lr / (1 - b1**t))

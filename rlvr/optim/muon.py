"""Muon for hidden matrices + AdamW for everything else, in one optimizer (``optim.optimizer: {name: muon}``).

Muon: Jordan et al. 2024, "Muon: An optimizer for hidden layers in neural networks" (kellerjordan.github.io);
the RLVR form used here is the one of Fan et al., arXiv:2605.19282, code OPTML-Group/Pion
``RL/verl/verl/utils/muon.py::MuonAdamW``. For each 2-D hidden matrix W with gradient g:

    m <- mu m + (1 - mu) g                      momentum buffer (lerp), mu = momentum
    u  = (1 - mu) g + mu m   if nesterov else m
    X  = NS(u)                                   Frobenius-normalise, 5 quintic Newton-Schulz steps (newton_schulz.py)
    W <- W (1 - lr wd) - lr * scale_factor * sqrt(max(rows, cols)) * X

Embeddings, the LM head (tied or not), any name containing one of ``exclude_names`` and 1-D parameters take
a plain AdamW step with the same lr, ``optim.betas`` and ``optim.weight_decay`` (decoupled, as torch's AdamW).

Defaults are the paper's RLVR runs (verl ``MuonAdamW``): momentum 0.95, no Nesterov, scale factor 5.0,
5 steps, embed/lm_head excluded, one lr for both parts. Muon's pretraining code (``pion.py::Muon``) uses
Nesterov and scale factor 2.0 instead: set ``nesterov: true, scale_factor: 2.0``.
``per_head: true`` orthogonalises each attention head of q/k/v_proj (heads on the rows) and o_proj (heads on
the columns) on its own, scale ``sqrt(max(head_rows, head_cols))`` (the repo's PerHeadMuonAdamW).

State per matrix: ``step``, ``momentum_buffer``; per AdamW parameter: ``step``, ``exp_avg``, ``exp_avg_sq``.
All of it is in ``state_dict()``, so checkpoints save and restore it like AdamW's.
"""

from __future__ import annotations

import math
from typing import Literal, Sequence

import torch
from pydantic import Field

from rlvr.optim.newton_schulz import head_blocks, merge_head_blocks, muon_schedule, polynomial_iteration
from rlvr.optim.registry import OPTIMIZERS, trainable
from rlvr.registry import Params

__all__ = ["MuonParams", "SpectralAdamW", "split_parameters", "muon"]

_DTYPES = {"bfloat16": torch.bfloat16, "float32": torch.float32, "float64": torch.float64}
_HEAD_PROJ = {"q_proj": ("num_attention_heads", 0), "k_proj": ("num_key_value_heads", 0),
              "v_proj": ("num_key_value_heads", 0), "o_proj": ("num_attention_heads", 1)}


class MuonParams(Params):
    momentum: float = Field(0.95, ge=0.0, lt=1.0, description="momentum mu of the matrix update")
    nesterov: bool = Field(False, description="Nesterov momentum (the RLVR code: off; Muon's pretraining: on)")
    ns_steps: int = Field(5, ge=1, description="Newton-Schulz steps")
    scale_factor: float = Field(5.0, gt=0.0, description="update scale: lr * scale_factor * sqrt(max(rows, cols))")
    exclude_names: tuple[str, ...] = Field(("embed", "lm_head"), description="parameters whose name contains one "
                                           "of these take AdamW steps (embeddings and LM head always do)")
    per_head: bool = Field(False, description="orthogonalise each attention head of q/k/v/o_proj separately")
    ns_dtype: Literal["bfloat16", "float32", "float64"] = Field("bfloat16", description="dtype of the iteration")
    adamw_eps: float = Field(1e-8, gt=0.0, description="eps of the AdamW part")


def split_parameters(model: torch.nn.Module, exclude_names: Sequence[str], per_head: bool) -> list[dict]:
    """Param groups: 2-D+ hidden matrices (``matrix: True``, per-head groups when asked) and the AdamW rest."""
    embeddings = set()
    for module in (model.get_input_embeddings(), model.get_output_embeddings()):
        if module is not None and getattr(module, "weight", None) is not None:
            embeddings.add(id(module.weight))
    cfg = getattr(model, "config", None)
    groups: dict[tuple, list] = {}
    for name, p in trainable(model):
        if p.ndim < 2 or id(p) in embeddings or any(s in name for s in exclude_names):
            key = (False, None, 0)
        else:
            proj = name.split(".")[-2] if name.count(".") else ""
            heads_attr, split = _HEAD_PROJ.get(proj, (None, 0))
            heads = getattr(cfg, heads_attr, None) if per_head and heads_attr else None
            key = (True, heads, split if heads else 0)
        groups.setdefault(key, []).append(p)
    return [{"params": ps, "matrix": m, "heads": h, "split_dim": s} for (m, h, s), ps in groups.items()]


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


def build(model: torch.nn.Module, o, p: MuonParams, schedule) -> SpectralAdamW:
    groups = split_parameters(model, p.exclude_names, p.per_head)
    return SpectralAdamW(groups, schedule, lr=o.lr, betas=o.betas, weight_decay=o.weight_decay,
                         momentum=p.momentum, nesterov=p.nesterov, scale_factor=p.scale_factor, eps=p.adamw_eps,
                         ns_dtype=_DTYPES[p.ns_dtype])


@OPTIMIZERS.register("muon", MuonParams)
def muon(model: torch.nn.Module, o, p: MuonParams) -> torch.optim.Optimizer:
    """Muon (Newton-Schulz-orthogonalised momentum) on hidden matrices, AdamW on the rest."""
    return build(model, o, p, muon_schedule(p.ns_steps))


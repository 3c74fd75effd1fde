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
The optimizer class is :class:`rlvr.optim.spectral.SpectralAdamW`; all of its state is in ``state_dict()``,
so checkpoints save and restore it like AdamW's.
"""

from __future__ import annotations

from typing import Literal, Sequence

from pydantic import Field

from rlvr.lazy import torch
from rlvr.optim.newton_schulz import muon_schedule
from rlvr.optim.registry import OPTIMIZERS, trainable
from rlvr.registry import Params

__all__ = ["MuonParams", "split_parameters", "muon"]

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


def build(model: torch.nn.Module, o, p: MuonParams, schedule) -> torch.optim.Optimizer:
    from rlvr.optim.spectral import SpectralAdamW  # (subclasses torch's Optimizer: imported when built)

    groups = split_parameters(model, p.exclude_names, p.per_head)
    return SpectralAdamW(groups, schedule, lr=o.lr, betas=o.betas, weight_decay=o.weight_decay,
                         momentum=p.momentum, nesterov=p.nesterov, scale_factor=p.scale_factor, eps=p.adamw_eps,
                         ns_dtype=getattr(torch, p.ns_dtype))


@OPTIMIZERS.register("muon", MuonParams)
def muon(model: torch.nn.Module, o, p: MuonParams) -> torch.optim.Optimizer:
    """Muon (Newton-Schulz-orthogonalised momentum) on hidden matrices, AdamW on the rest."""
    return build(model, o, p, muon_schedule(p.ns_steps))

"""An optimizer's state as safetensors-ready tensors plus JSON (no pickle), and back.

Checkpoints (:mod:`rlvr.train.checkpoint`), the critic and the process reward model write optimizer state with
these: every tensor of ``state_dict()["state"]`` under ``state.<param id>.<key>``, the scalars and the param
groups in the JSON meta.
"""

from __future__ import annotations

from typing import Any

from rlvr.lazy import torch

__all__ = ["flatten_optimizer", "unflatten_optimizer"]


def flatten_optimizer(opt: "torch.optim.Optimizer") -> tuple[dict[str, "torch.Tensor"], dict[str, Any]]:
    sd = opt.state_dict()
    tensors, scalars = {}, {}
    for pid, st in sd["state"].items():
        for k, v in st.items():
            if isinstance(v, torch.Tensor):
                tensors[f"state.{pid}.{k}"] = v.detach().cpu().contiguous()
            else:
                scalars[f"{pid}.{k}"] = v
    return tensors, {"param_groups": sd["param_groups"], "scalars": scalars}


def unflatten_optimizer(tensors: dict[str, "torch.Tensor"], meta: dict[str, Any]) -> dict[str, Any]:
    state: dict[int, dict[str, Any]] = {}
    for key, v in tensors.items():
        _, pid, k = key.split(".", 2)
        state.setdefault(int(pid), {})[k] = v
    for key, v in meta["scalars"].items():
        pid, k = key.split(".", 1)
        state.setdefault(int(pid), {})[k] = v
    return {"state": state, "param_groups": meta["param_groups"]}

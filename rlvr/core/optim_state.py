"""An optimizer's state as safetensors-ready tensors plus JSON (no pickle), and back.

Checkpoints (:mod:`rlvr.run.checkpoint`) write optimizer state with these: every tensor of
``state_dict()["state"]`` under ``state.<param id>.<key>``, the scalars and the param groups in the JSON meta.
The models trained beside the policy (the critic, PROPA's process reward model, PRISM's discriminator) save
and load their weights and optimizer through :func:`save_trained` / :func:`load_trained`.
"""

from __future__ import annotations

from typing import Any

from rlvr.lazy import torch

__all__ = ["flatten_optimizer", "unflatten_optimizer", "save_trained", "trained_meta", "load_trained"]


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


def save_trained(folder, stem: str, net: "torch.nn.Module", optimizer: "torch.optim.Optimizer", **meta: Any) -> None:
    """A model trained beside the policy, into ``folder``: ``{stem}.safetensors`` (weights),
    ``{stem}_optimizer.safetensors`` and ``{stem}.json`` (``meta`` and the optimizer's scalars and groups)."""
    import json
    from pathlib import Path

    from safetensors.torch import save_file

    folder = Path(folder)
    save_file({k: v.detach().cpu().contiguous() for k, v in net.state_dict().items()},
              str(folder / f"{stem}.safetensors"))
    tensors, opt_meta = flatten_optimizer(optimizer)
    save_file(tensors, str(folder / f"{stem}_optimizer.safetensors"))
    (folder / f"{stem}.json").write_text(json.dumps({**meta, "optimizer": opt_meta}))


def trained_meta(folder, stem: str) -> dict[str, Any] | None:
    """The ``meta`` :func:`save_trained` wrote with ``stem`` into ``folder``; None when it holds no such model."""
    import json
    from pathlib import Path

    folder = Path(folder)
    if not (folder / f"{stem}.safetensors").is_file():
        return None
    return json.loads((folder / f"{stem}.json").read_text())


def load_trained(folder, stem: str, net: "torch.nn.Module", optimizer: "torch.optim.Optimizer | None",
                 meta: dict[str, Any]) -> None:
    """Restore what :func:`save_trained` wrote (the optimizer too unless None); ``meta`` from :func:`trained_meta`."""
    from pathlib import Path

    from safetensors.torch import load_file

    folder = Path(folder)
    net.load_state_dict(load_file(str(folder / f"{stem}.safetensors")))
    if optimizer is not None:
        optimizer.load_state_dict(unflatten_optimizer(load_file(str(folder / f"{stem}_optimizer.safetensors")),
                                                      meta["optimizer"]))

"""FSDP2 (``torch.distributed.fsdp.fully_shard``) for ``train.distributed.strategy: fsdp``.

Each decoder layer (the model's ``_no_split_modules`` classes) is its own FSDP unit and the log-prob module
(:class:`~rlvr.models.logprobs.CompletionLogprobs`, holding the embeddings, final norm and head) is the
root, so every rank keeps ``1 / world`` of the parameters, gradients and optimizer state between steps.
The update's forward and backward all-gather a layer's parameters just before it runs and reduce-scatter
its gradients after (FSDP2's own schedule).

Generation and evaluation run different numbers of forwards on different ranks (a rank's own groups, rank
0's evaluation), which collectives in each forward cannot allow. They run inside :func:`full_weights`: every
rank all-gathers the whole model once, forwards then need no collective, and the shards come back after. That
costs one full copy of the weights per rank during generation (what verl's colocated rollout also holds), not
of the gradients or optimizer state; an engine with weights of its own (vLLM) needs none. The no-grad passes
(old and reference log-probs, token statistics) run on the shards instead, the ranks kept in lockstep
(:func:`lockstep_passes`): one decoder layer gathered at a time.

Checkpoints: the model as a full Hugging Face directory (gathered; rank 0 writes it) and the optimizer
sharded through ``torch.distributed.checkpoint`` (``optimizer_dcp/``, one file per rank, resharded on
load to the loading world size).
"""

from __future__ import annotations

import contextlib
import math
from pathlib import Path
from typing import Any, Iterable, Iterator

import torch

__all__ = ["shard", "full_weights", "lockstep_passes", "full_state_dict", "save_optimizer", "load_optimizer", "local_value",
           "gather_into", "scatter_from", "streamed_weights"]


def _units(model: torch.nn.Module) -> list[torch.nn.Module]:
    names = set(getattr(model, "_no_split_modules", None) or ())
    return [m for m in model.modules() if type(m).__name__ in names]


def shard(wrapper: torch.nn.Module, group=None, mixed_precision: str | None = None,
          cpu_offload: bool = False, device: torch.device | str | None = None) -> torch.nn.Module:
    """Shard ``wrapper`` (a :class:`CompletionLogprobs`) in place: decoder layers, then the root. With
    ``mixed_precision`` (``"bfloat16"``) each unit is all-gathered and computed in that dtype and its gradients
    reduced in float32, while the shards and the optimizer state keep the parameters' own dtype; with
    ``cpu_offload`` the shards, their gradients and the optimizer state live in host memory between uses.

    ``device``: where the shards live (default: where the parameters are). A model still in host memory is
    sharded before it is placed: FSDP2 moves each unit to the mesh's device as it shards it, so the device
    holds one whole layer at a time, never the whole model."""
    from torch.distributed.device_mesh import init_device_mesh
    from torch.distributed.fsdp import CPUOffloadPolicy, MixedPrecisionPolicy, OffloadPolicy, fully_shard

    dev = torch.device(device) if device is not None else next(wrapper.parameters()).device
    mesh = init_device_mesh(dev.type, (torch.distributed.get_world_size(group),))
    policies = {"mp_policy": MixedPrecisionPolicy(param_dtype=getattr(torch, mixed_precision),
                                                  reduce_dtype=torch.float32) if mixed_precision
                else MixedPrecisionPolicy(),
                "offload_policy": CPUOffloadPolicy() if cpu_offload else OffloadPolicy()}
    for unit in _units(wrapper.model):
        fully_shard(unit, mesh=mesh, **policies)
    fully_shard(wrapper, mesh=mesh, **policies)
    wrapper._get_fsdp_state()._lazy_init()  # the wrapper is the root, even if a layer runs forward first
    return wrapper


def _fsdp_modules(root: torch.nn.Module):
    from torch.distributed.fsdp import FSDPModule

    return [m for m in root.modules() if isinstance(m, FSDPModule)]


@contextlib.contextmanager
def full_weights(root: torch.nn.Module) -> Iterator[None]:
    """Every FSDP unit under ``root`` unsharded for the block (one all-gather each, on every rank)."""
    mods = _fsdp_modules(root)
    for m in mods:
        m.set_reshard_after_forward(False, recurse=False)
        m.unshard()
    try:
        yield
    finally:
        for m in mods:
            m.reshard()
            m.set_reshard_after_forward(True, recurse=False)


def _body(root: torch.nn.Module) -> torch.nn.Module | None:
    """The module whose forward runs every decoder-layer unit once, in order (a Llama / Qwen ``model.model``:
    the parent of the ``ModuleList`` that holds them all); None when the units live in more than one list (a
    vision tower's blocks beside the decoder's layers)."""
    units = {id(u) for u in _fsdp_modules(root.model)}  # (sharded, a unit's class is FSDP<its class>)
    for parent in root.model.modules():
        for child in parent.children():
            if isinstance(child, torch.nn.ModuleList) and units and units == {id(m) for m in child}:
                return parent
    return None


@contextlib.contextmanager
def lockstep_passes(root: torch.nn.Module, world: Any) -> Iterator[None]:
    """No-grad forwards of the policy (``root.model``, the bare model) on shards, whatever number each rank runs.

    The root unit (embeddings, final norm, head) is unsharded for the block; each decoder layer is all-gathered
    as it runs and freed after (FSDP2's own forward), so a rank holds one layer beside its shards, never the whole
    model. FSDP's per-layer all-gathers pair up only if every rank runs the same number of forwards, so the
    ranks keep in step: each forward of the decoder first all-reduces "I have a forward to run" (a pre-hook),
    and a rank whose passes are done runs a one-token forward for every forward another rank still runs, until
    no rank has one (every rank then leaves together). Inside the block a rank may run no other collective.
    Falls back to :func:`full_weights` when the decoder's layers are not one list (vision towers)."""
    body = _body(root)
    if body is None:
        with full_weights(root):
            yield
        return
    device = next(p for p in root.parameters()).device
    pad = torch.zeros((1, 1), dtype=torch.long, device=device if device.type != "meta" else "cpu")
    def announce(module, args) -> None:  # "I have a forward to run", before FSDP's own hooks gather a layer
        world.sum([1.0])

    root.unshard()  # (a collective, on every rank at the block's start)
    handle = body.register_forward_pre_hook(announce, prepend=True)
    try:
        yield
    finally:
        handle.remove()
        with torch.no_grad():
            while world.sum([0.0])[0] > 0:  # another rank runs a forward: its layers' all-gathers need ours
                body(input_ids=pad, use_cache=False)
        root.reshard()


def _dim0_sharded(t: Any) -> bool:
    """A DTensor sharded along dim 0 over a 1-D mesh (how FSDP2 shards every parameter)."""
    from torch.distributed.tensor import Shard

    return (t.device_mesh.ndim == 1 and len(t.placements) == 1 and isinstance(t.placements[0], Shard)
            and t.placements[0].dim == 0 and t.dim() > 0)


def streamed_weights(named: Iterable[tuple[str, torch.Tensor]], world: Any, dtype: torch.dtype | None = None,
                     bucket_bytes: int = 512 * 2**20) -> Iterator[tuple[str, torch.Tensor]]:
    """``(name, whole tensor)`` for every ``(name, tensor)`` of ``named`` whose FSDP shards every rank holds: the
    shards are cast to ``dtype`` (the inference engine's: half the bytes of float32 master weights in bfloat16)
    and gathered in buckets of about ``bucket_bytes`` (one all-gather per bucket, not per tensor; a larger
    tensor is a bucket of its own), so a rank holds one bucket of whole tensors at a time, never the whole model.
    Plain tensors pass through (cast). A collective over ``world`` (the shards' mesh group,
    :func:`rlvr.distributed.world.mesh_world`): every rank consumes the stream to its end, together.

    FSDP2 splits dim 0 as ``torch.chunk`` does: rank ``r`` holds rows ``[r c, min((r + 1) c, d0))`` with
    ``c = ceil(d0 / N)`` (possibly none). Each rank pads its rows to ``c``, so the gathered ``[N, c, ...]``
    buffer is the whole tensor padded at its end."""
    bucket: list[tuple[str, torch.Tensor, int, tuple[int, ...]]] = []  # name, padded local rows, d0, trailing shape
    size = 0

    def flush() -> Iterator[tuple[str, torch.Tensor]]:
        nonlocal size
        if not bucket:
            return
        flat = torch.cat([x.reshape(-1) for _, x, _, _ in bucket])
        gathered = world.all_gather_flat(flat)  # [N, bucket elements]
        off = 0
        for name, x, d0, rest in bucket:
            n = x.numel()
            whole = gathered[:, off:off + n].reshape(world.size * x.shape[0], *rest)[:d0]
            off += n
            yield name, whole
        bucket.clear()
        size = 0

    for name, t in named:
        if not (hasattr(t, "full_tensor") and _dim0_sharded(t)):
            yield from flush()
            whole = t.full_tensor() if hasattr(t, "full_tensor") else t  # (another layout: gathered on its own)
            yield name, whole.detach().to(dtype) if dtype is not None else whole.detach()
            continue
        local = t.to_local().detach()
        local = local.to(dtype) if dtype is not None else local
        d0, rest = t.shape[0], tuple(t.shape[1:])
        rows = math.ceil(d0 / world.size)
        if local.shape[0] < rows:  # the last ranks' shards are short (or empty): pad to the chunk
            local = torch.cat([local, local.new_zeros((rows - local.shape[0], *rest))])
        nbytes = local.numel() * local.element_size() * world.size
        if bucket and size + nbytes > bucket_bytes:
            yield from flush()
        bucket.append((name, local, d0, rest))
        size += nbytes
    yield from flush()


def gather_into(whole: torch.nn.Module, sharded: torch.nn.Module) -> None:
    """``sharded``'s parameters, gathered, into ``whole`` (a plain copy of the same model), one tensor at a
    time. A collective: every rank calls it at the same point."""
    with torch.no_grad():
        for dst, src in zip(whole.parameters(), sharded.parameters()):
            dst.copy_(local_value(src))


def scatter_from(whole: torch.nn.Module, sharded: torch.nn.Module) -> None:
    """Rank 0's ``whole`` parameters into every rank's shards of ``sharded`` (each rank keeps its own
    slice), one tensor at a time. A collective: every rank calls it at the same point."""
    from torch.distributed.tensor import distribute_tensor

    with torch.no_grad():
        for src, dst in zip(whole.parameters(), sharded.parameters()):
            if hasattr(dst, "full_tensor"):
                dst.copy_(distribute_tensor(src.detach(), dst.device_mesh, dst.placements, src_data_rank=0))
            else:
                dst.copy_(src)


def local_value(x: torch.Tensor) -> torch.Tensor:
    """A DTensor's full value (e.g. the global gradient norm), or ``x`` itself."""
    return x.full_tensor() if hasattr(x, "full_tensor") else x


def full_state_dict(root: torch.nn.Module) -> dict[str, torch.Tensor]:
    """The model's full (unsharded) state dict on rank 0's CPU, keys as the bare model names them; empty on
    the other ranks. A collective. With LoRA adapters, the adapters' tensors alone (what a checkpoint holds:
    the frozen base is the run's ``lora_base/``), each gathered on its own."""
    from torch.distributed.checkpoint.state_dict import StateDictOptions, get_model_state_dict

    from rlvr.models.lora import has_lora

    if has_lora(root.model):
        rank0 = torch.distributed.get_rank() == 0
        out = {}
        for k, v in root.model.state_dict().items():
            if "lora_" in k:
                full = v.full_tensor() if hasattr(v, "full_tensor") else v  # every rank takes part
                if rank0:
                    out[k] = full.detach().cpu()
        return out

    sd = get_model_state_dict(root, options=StateDictOptions(full_state_dict=True, cpu_offload=True))
    first: dict[int, str] = {}
    tied = set()  # a weight shared by two modules (tied embeddings) is written once, as save_pretrained does
    for k, v in root.model.state_dict(keep_vars=True).items():
        if first.setdefault(id(v), k) != k:
            tied.add(k)
    return {k.removeprefix("model."): v for k, v in sd.items() if k.removeprefix("model.") not in tied}


def save_optimizer(root: torch.nn.Module, optimizer: torch.optim.Optimizer, path: Path) -> None:
    """The sharded optimizer state into ``path`` (every rank writes its shard; a collective)."""
    import torch.distributed.checkpoint as dcp
    from torch.distributed.checkpoint.state_dict import get_optimizer_state_dict

    dcp.save({"optimizer": get_optimizer_state_dict(root, optimizer)}, checkpoint_id=str(path))


def load_optimizer(root: torch.nn.Module, optimizer: torch.optim.Optimizer, path: Path) -> None:
    import torch.distributed.checkpoint as dcp
    from torch.distributed.checkpoint.state_dict import get_optimizer_state_dict, set_optimizer_state_dict

    state = {"optimizer": get_optimizer_state_dict(root, optimizer)}
    dcp.load(state, checkpoint_id=str(path))
    set_optimizer_state_dict(root, optimizer, state["optimizer"])

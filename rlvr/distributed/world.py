"""Data-parallel training under ``torchrun``: one process per device, the same loop in each.

``torchrun --nproc-per-node N -m rlvr train ...`` (or ``rlvr train --nproc N``) starts N copies of the
run. Each holds the whole model (DDP, ``torch.nn.parallel.DistributedDataParallel``) and the same
replicated state: sampler, allocator, prompt statistics, KL controller, algorithm state. A step then goes:

1. every rank draws the same prompts (the sampler's state is identical; a check compares the ids) and
   generates and scores its share of the groups, round-robin by group (a group never straddles ranks);
2. the completions and scores are gathered, so every rank holds the step's global batch in the order a
   one-process run builds it; dynamic sampling, prompt statistics, group statistics and advantages are
   computed on it identically everywhere (they are cheap next to the forward passes);
3. the extra forward passes (old, reference, teacher log-probs, token statistics) are split by whole
   groups and gathered;
4. the update runs each minibatch's micro-batches round-robin over the ranks (ranks with one fewer run a
   zero-weight copy so every rank runs as many backward passes), with the aggregation's coefficients
   computed over the whole minibatch, and DDP sums the gradients (the loss is scaled by the world size to
   undo DDP's mean). The gradient is then the one-process gradient: micro-batch invariance extends to
   ranks. Metrics are summed over ranks.

Only rank 0 writes run files (config, metrics, checkpoints, evals, summary); the others wait for it where
a file must exist. Ctrl-C or SIGTERM on any rank makes every rank save and stop after the same step. A
rank that raises ends its process; the others' next collective fails at once (gloo, NCCL) and torchrun
stops the group with the first error.

A :class:`World` of size 1 (no ``torchrun``) makes every method a no-op, so the loop has one code path.
"""

from __future__ import annotations

import contextlib
import hashlib
import os
from typing import Any, Callable, Iterator, Sequence

import torch

__all__ = ["World", "check_world", "launched_by_torchrun", "DistributedSetupError", "collective_device",
           "served_types", "mesh_world"]


SEED_STRIDE = 15_485_863  # rank r samples with seed + r * SEED_STRIDE (mod 2**31 - 1)


class DistributedSetupError(RuntimeError):
    """A distributed run cannot start as configured."""


def launched_by_torchrun() -> bool:
    return int(os.environ.get("WORLD_SIZE", "1")) > 1


class World:
    """One process's view of the data-parallel group (``World()`` is the single-process world)."""

    def __init__(self, rank: int = 0, size: int = 1, local_rank: int = 0, group: Any = None,
                 strategy: str = "ddp", fsdp: dict | None = None):
        self.rank, self.size, self.local_rank, self.group = rank, size, local_rank, group
        self.strategy = strategy  # "ddp" (replicated weights) or "fsdp" (FSDP2-sharded, rlvr.distributed.fsdp)
        self.fsdp = dict(fsdp or {})  # FSDP2 policies: mixed_precision, cpu_offload (rlvr.distributed.fsdp.shard)

    @property
    def sharded(self) -> bool:
        return self.distributed and self.strategy == "fsdp"

    @property
    def main(self) -> bool:
        return self.rank == 0

    @property
    def distributed(self) -> bool:
        return self.size > 1

    def __repr__(self) -> str:
        return f"World(rank={self.rank}, size={self.size})"

    # --- collectives (all no-ops for size 1) ---------------------------------------------------------------
    # Every collective rlvr issues goes through these methods, and every tensor one of them sends goes through
    # _on_backend (tests/test_collectives.py checks both): a backend serves only the device types it was bound
    # to (gloo: CPU, and CUDA tensors it copies; NCCL: CUDA only), so a CPU tensor all-reduced under NCCL fails
    # with "No backend type associated with device type cpu". Object collectives pick their device themselves
    # (torch uses the current CUDA device under NCCL, which init_world sets to the rank's own).
    def backend_device(self, device: torch.device) -> torch.device:
        """Where this group's backend takes a tensor that lives on ``device``: there, when the backend serves
        its device type, else on the backend's own (:func:`collective_device`)."""
        return collective_device(served_types(self.group), device, self.local_rank)

    def _on_backend(self, t: torch.Tensor, op: Callable[..., Any], **kw: Any) -> torch.Tensor:
        """``op(t)`` (an in-place collective) run on a copy of ``t`` where the backend takes it, when ``t`` lives
        elsewhere, and copied back into ``t``; ``t``."""
        where = self.backend_device(t.device)
        x = t if where == t.device else t.to(where)
        op(x, group=self.group, **kw)
        if x is not t:
            t.copy_(x)
        return t

    def gather(self, obj: Any) -> list[Any]:
        """Every rank's ``obj``, in rank order (picklable objects; CPU tensors inside are fine)."""
        if not self.distributed:
            return [obj]
        import torch.distributed as dist

        out: list[Any] = [None] * self.size
        dist.all_gather_object(out, obj, group=self.group)
        return out

    def all_gather_flat(self, t: torch.Tensor) -> torch.Tensor:
        """Every rank's 1-D ``t`` (the same length on every rank) stacked in rank order, ``[size, len(t)]``, on
        ``t``'s device: one collective however many tensors ``t`` packs (:func:`rlvr.distributed.fsdp.
        streamed_weights`)."""
        if not self.distributed:
            return t.reshape(1, -1)
        import torch.distributed as dist

        where = self.backend_device(t.device)
        x = t if where == t.device else t.to(where)
        out = torch.empty(self.size * x.numel(), dtype=x.dtype, device=where)  # (gloo takes the flat form only)
        gather = getattr(dist, "all_gather_single", None) or dist.all_gather_into_tensor  # (renamed in torch 2.12)
        gather(out, x.contiguous(), group=self.group)
        out = out.view(self.size, x.numel())
        return out if where == t.device else out.to(t.device)

    def broadcast(self, obj: Any) -> Any:
        """Rank 0's ``obj`` on every rank."""
        if not self.distributed:
            return obj
        import torch.distributed as dist

        box = [obj]
        dist.broadcast_object_list(box, src=0, group=self.group)
        return box[0]

    def sum(self, values: Sequence[float]) -> list[float]:
        """Element-wise sums over ranks (float64)."""
        if not self.distributed:
            return list(values)
        return self.all_reduce_(torch.tensor(list(values), dtype=torch.float64)).tolist()

    def all_reduce_(self, t: torch.Tensor) -> torch.Tensor:
        """``t`` summed over ranks, in place (wherever ``t`` lives; the backend works on its own device)."""
        if self.distributed:
            import torch.distributed as dist

            self._on_backend(t, dist.all_reduce)
        return t

    def sum_grads_(self, params: Sequence[torch.nn.Parameter]) -> None:
        """Every rank's gradients of ``params`` summed, in place (one all-reduce; a missing gradient counts as
        zeros): for models trained beside the policy outside DDP, each rank having run its share of the
        micro-batches."""
        if not self.distributed:
            return
        params = list(params)
        flat = torch.cat([(p.grad if p.grad is not None else torch.zeros_like(p)).reshape(-1) for p in params])
        self.all_reduce_(flat)
        for p, g in zip(params, flat.split([p.numel() for p in params])):
            p.grad = g.view_as(p).clone()

    def any(self, flag: Any) -> Any:
        """``flag`` of the first rank on which it is truthy (``None`` when none is): all ranks agree."""
        if not self.distributed:
            return flag
        return next((f for f in self.gather(flag) if f), None)

    def finish(self) -> None:
        """The end of a run: every rank has left every collective before any rank goes on (or exits)."""
        self.barrier()

    def barrier(self) -> None:
        if self.distributed:
            import torch.distributed as dist

            dist.barrier(group=self.group)

    def check_same(self, values: Sequence[Any], what: str) -> None:
        """Raise on every rank when the ranks disagree on ``values`` (replicated state that drifted)."""
        if not self.distributed:
            return
        digest = hashlib.sha256(repr(list(values)).encode()).hexdigest()
        seen = self.gather(digest)
        if len(set(seen)) > 1:
            raise RuntimeError(f"ranks disagree on {what} (rank digests {[d[:8] for d in seen]}): replicated "
                               "state has drifted; a component draws from an unseeded or rank-local random source")

    def sync_params(self, module: torch.nn.Module) -> None:
        """Rank 0's parameters and buffers on every rank (after work each rank did alone, e.g. SFT)."""
        if not self.distributed:
            return
        import torch.distributed as dist

        with torch.no_grad():
            for t in [*module.parameters(), *module.buffers()]:
                self._on_backend(t.data, dist.broadcast, src=0)

    def device_for(self, device: torch.device) -> torch.device:
        """This rank's device: its own GPU (``LOCAL_RANK``) when the run is on CUDA."""
        if self.distributed and device.type == "cuda":
            return torch.device("cuda", self.local_rank)
        return device

    def split(self) -> "World":
        """The same ranks on a process group of their own (gloo), for collectives issued from another thread
        (the asynchronous rollout producer's gathers run beside the update's all-reduces). Every rank must
        call it, in the same order; a one-process world returns itself."""
        if not self.distributed:
            return self
        import torch.distributed as dist

        return World(self.rank, self.size, self.local_rank, dist.new_group(backend="gloo"), self.strategy, self.fsdp)

    # --- sharding ------------------------------------------------------------------------------------------
    def share(self, n: int) -> list[int]:
        """This rank's positions of ``n`` items, round-robin (position ``i`` goes to rank ``i % size``)."""
        return list(range(self.rank, n, self.size))

    def seed(self, seed: int) -> int:
        """A sampling seed for this rank's share (rank 0 keeps ``seed``; others get independent streams)."""
        return (seed + self.rank * SEED_STRIDE) % (2**31 - 1)

    def gather_rows(self, n: int, groups: torch.Tensor, fn: Callable[[torch.Tensor], dict[str, torch.Tensor]],
                    sharded: Any = None) -> dict[str, torch.Tensor]:
        """``fn(rows)`` over this rank's whole groups of an ``n``-row batch, gathered into ``[n, ...]`` tensors
        on every rank (CPU when distributed); ``groups`` is the batch's group index. Trailing dimensions are
        padded with zeros to the largest rank's (a rank's rows may have shorter completions). ``sharded``: the
        FSDP root whose bare model ``fn`` runs forwards of (:func:`rlvr.distributed.fsdp.lockstep_passes`)."""
        if not self.distributed:
            return fn(torch.arange(n))
        ids = torch.unique(groups.cpu())
        rows = torch.nonzero(torch.isin(groups.cpu(), ids[self.rank:: self.size])).flatten()
        with self.passes(sharded):
            part = {k: v.cpu() for k, v in fn(rows).items()} if len(rows) else {}
        parts = self.gather((rows, part))
        out: dict[str, torch.Tensor] = {}
        for key in sorted({k for _, p in parts for k in p}):
            vals = [(r, p[key]) for r, p in parts if key in p]
            dims = [max(v.shape[d] for _, v in vals) for d in range(1, vals[0][1].dim())]
            full = torch.zeros((n, *dims), dtype=vals[0][1].dtype)
            for r, v in vals:
                full[(r, *(slice(0, d) for d in v.shape[1:]))] = v
            out[key] = full
        return out

    # --- the update ----------------------------------------------------------------------------------------
    def wrap(self, model: torch.nn.Module, device: torch.device | str | None = None) -> torch.nn.Module:
        """The module the update runs forward and backward through (a :class:`CompletionLogprobs`): DDP
        over it (its construction broadcasts rank 0's weights, so every rank starts equal), or with
        ``fsdp`` sharded in place (:func:`rlvr.distributed.fsdp.shard`; build the optimizer after), else itself.
        ``device``: FSDP's shards go there, one unit at a time (the model may still be in host memory)."""
        if not self.distributed or not any(p.requires_grad for p in model.parameters()):
            return model if device is None else model.to(device)
        if self.sharded:
            from rlvr.distributed.fsdp import shard

            return shard(model, self.group, device=device, **self.fsdp)
        import inspect

        from torch.nn.parallel import DistributedDataParallel as DDP

        dev = next(model.parameters()).device
        ids = [dev.index] if dev.type == "cuda" else None
        quiet = ({"forward_sync_buffers": False} if "forward_sync_buffers" in inspect.signature(DDP).parameters
                 else {"broadcast_buffers": False})  # buffers are never trained: no sync before each forward
        return DDP(model, device_ids=ids, process_group=self.group, **quiet)

    def shard_frozen(self, wrapper: torch.nn.Module,
                     device: torch.device | str | None = None) -> torch.nn.Module | None:
        """FSDP: a frozen model's :class:`CompletionLogprobs` wrapper (the reference) sharded like the policy, in
        place, so a rank keeps ``1 / world`` of it between steps; its forwards then run inside :meth:`passes`
        (one decoder layer gathered at a time). None when the run is not sharded (the model stays whole)."""
        if not self.sharded:
            return None
        from rlvr.distributed.fsdp import shard

        return shard(wrapper, self.group, device=device, **self.fsdp)

    @contextlib.contextmanager
    def no_sync(self, module: torch.nn.Module, last: bool) -> Iterator[None]:
        """Accumulate gradients locally except on a rank's ``last`` backward of an optimizer step."""
        if self.sharded:
            module.set_requires_gradient_sync(last)
            yield
        elif last or not hasattr(module, "no_sync"):
            yield
        else:
            with module.no_sync():
                yield

    def passes(self, module: Any) -> contextlib.AbstractContextManager:
        """No-grad forwards of ``module``'s bare model, each rank its own number (FSDP: :func:`lockstep_passes`)."""
        from rlvr.distributed.fsdp import lockstep_passes

        return lockstep_passes(module, self) if self.sharded and module is not None else contextlib.nullcontext()

    def full_weights(self, module: Any) -> contextlib.AbstractContextManager:
        """The whole model on every rank for the block (generation, no-grad passes, evaluation, saving):
        FSDP unshards (a collective: every rank enters it); otherwise nothing to do."""
        if self.sharded and module is not None:
            from rlvr.distributed.fsdp import full_weights

            return full_weights(module)
        return contextlib.nullcontext()


def mesh_world(mesh: Any) -> World:
    """The :class:`World` of a device mesh's group (FSDP2's shards): the gateway its collectives go through."""
    return World(rank=mesh.get_local_rank(), size=mesh.size(), local_rank=int(os.environ.get("LOCAL_RANK", 0)),
                 group=mesh.get_group())


def check_world(cfg: Any, world: World) -> None:
    """Settings a distributed run cannot honour, as one clear error before any work."""
    if not world.distributed:
        return
    problems = []
    want = cfg.rollout.prompts_per_step
    if want % world.size:
        problems.append(f"rollout.prompts_per_step={want} is not divisible by the world size {world.size} (each "
                        "rank generates an equal share of the groups)")
    extra = cfg.algorithm.dynamic_sampling.batch_prompts
    if extra and extra % world.size:
        problems.append(f"algorithm.dynamic_sampling.batch_prompts={extra} is not divisible by the world size "
                        f"{world.size}")
    if cfg.rollout.engine == "vllm" and cfg.rollout.vllm.tensor_parallel_size > 1:
        problems.append(f"rollout.vllm.tensor_parallel_size={cfg.rollout.vllm.tensor_parallel_size} under torchrun "
                        "is not supported yet: every rank runs its own vLLM engine on its own device "
                        "(tensor_parallel_size=1) and generates its own share of the groups")
    d = cfg.train.distributed
    if d.cpu_offload and (cfg.device == "cpu" or not torch.cuda.is_available()):
        problems.append("train.distributed.cpu_offload moves the sharded state from the GPUs to host memory; this "
                        "run is on the CPU, where there is nothing to offload")
    if problems:
        raise DistributedSetupError("; ".join(problems))


def collective_device(types: Sequence[str], device: torch.device, local_rank: int = 0) -> torch.device:
    """Where a backend serving the device ``types`` (``["cuda"]`` for NCCL, ``["cuda", "cpu"]`` for gloo) takes
    a tensor on ``device``: ``device`` itself when its type is served, else CPU when that is, else this rank's
    GPU (``local_rank``)."""
    device = torch.device(device)
    if device.type in types:
        return device
    if "cpu" in types:
        return torch.device("cpu")
    return torch.device(types[0], local_rank)


def served_types(group: Any = None) -> list[str]:
    """The device types ``group``'s backends serve (default: the default group's): ``["cuda"]`` under NCCL,
    ``["cpu", "cuda"]`` under gloo, both under ``cpu:gloo,cuda:nccl``."""
    import torch.distributed as dist

    group = group if group is not None else dist.group.WORLD
    types = getattr(group, "_device_types", None)  # (torch >= 2.2; else read off the backend's name)
    if types:
        return [d.type for d in types]
    name = dist.get_backend(group)
    if ":" in name:
        return [part.split(":")[0] for part in name.split(",")]
    return {"nccl": ["cuda"], "gloo": ["cpu", "cuda"], "mpi": ["cpu", "cuda"]}.get(name, ["cpu"])

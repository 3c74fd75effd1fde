"""Joining and leaving the process group ``torchrun`` started this process in (:func:`init_world`), and the
backend it uses: NCCL on CUDA, gloo on CPU (``auto``). The collectives themselves go through
:class:`rlvr.distributed.world.World`."""

from __future__ import annotations

import atexit
import datetime
import os
import sys
import time

import torch

from rlvr.distributed.world import DistributedSetupError, World, launched_by_torchrun

__all__ = ["init_world"]


def _backend(name: str) -> str:
    import torch.distributed as dist

    backend = ("nccl" if torch.cuda.is_available() else "gloo") if name == "auto" else name
    if not dist.is_available() or not dist.is_backend_available(backend):
        raise DistributedSetupError(f"train.distributed.backend={name}: the {backend} backend is not available in "
                                    f"this torch build; use gloo (CPU) or nccl (CUDA)")
    if backend == "nccl" and not torch.cuda.is_available():
        raise DistributedSetupError("train.distributed.backend=nccl needs CUDA devices; use gloo on CPU")
    return backend


_GLOO_DRAIN_S = 0.25


def _leave() -> None:
    """At exit: release the process group this process joined (after :meth:`World.finish`, no rank is
    still inside a collective with it)."""
    import torch.distributed as dist

    vllm_state = sys.modules.get("vllm.distributed.parallel_state")
    if vllm_state is not None:
        # a vllm engine built its groups on this process group: release them first (vLLM's own shutdown, run
        # later by its finalizer, then finds nothing left to destroy instead of failing on a dead group)
        vllm_state.destroy_model_parallel()
        vllm_state.destroy_distributed_environment()
    if dist.is_initialized():
        if dist.get_backend() == "gloo":
            # gloo's worker threads drop their last finished work a moment after the caller's wait returns; a
            # barrier keeps (weakly) the collectives before it, so that drop can free an all-gather's output
            # tensor, which needs the GIL. Reached while the interpreter finalizes, it kills the thread through
            # a noexcept destructor: "terminate called without an active exception", SIGABRT at exit (seen in
            # about one run in eight). Sleeping releases the GIL to them while the interpreter is whole.
            time.sleep(_GLOO_DRAIN_S)
        dist.destroy_process_group()


def init_world(backend: str = "auto", timeout_s: float = 1800.0, strategy: str = "ddp",
               fsdp: dict | None = None) -> World:
    """The world torchrun started this process in (``World()`` outside torchrun); joins the process group."""
    if not launched_by_torchrun():
        return World()
    import torch.distributed as dist

    missing = [k for k in ("RANK", "LOCAL_RANK", "MASTER_ADDR", "MASTER_PORT") if k not in os.environ]
    if missing:
        raise DistributedSetupError(f"WORLD_SIZE is set but {', '.join(missing)} is not: start distributed runs "
                                    "with torchrun (or rlvr train --nproc N)")
    rank, size, local = int(os.environ["RANK"]), int(os.environ["WORLD_SIZE"]), int(os.environ["LOCAL_RANK"])
    name = _backend(backend)
    if not dist.is_initialized():
        if name == "nccl":
            torch.cuda.set_device(local)
        dist.init_process_group(name, timeout=datetime.timedelta(seconds=timeout_s))
        atexit.register(_leave)
    return World(rank, size, local, None, strategy, fsdp)

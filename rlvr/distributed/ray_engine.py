"""Ray placement (the ``ray`` extra): rollout engines as Ray actors on their own resources, weights broadcast
from the trainer after each step, scoring as Ray tasks. The layout of verl and OpenRLHF.

``rollout.engine: ray`` is an engine like the others: :class:`RayEngine` starts ``rollout.ray.workers``
actors (:class:`RolloutWorker`, each ``num_cpus`` / ``num_gpus`` as set), each holding its own copy of the
policy and the engine named by ``rollout.ray.engine`` (``hf``, ``native``, ``vllm``). ``generate`` deals
the requests round-robin to the workers (worker ``w`` samples with seed ``seed + w x 15485863``, so one
worker draws exactly what the local engine would) and returns their completions in request order.
``sync_weights`` (called by the loop after each optimizer step) puts the trainer's weights in Ray's object
store once and every worker loads them from there: a broadcast, not one copy per worker.

``scoring.backend: ray`` scores through :class:`RayPool`, a ``concurrent.futures``-like pool of Ray tasks
(the task object is put in the object store once), with the scorer's deadline and error accounting.

``rlvr train --launcher ray`` (``rlvr.distributed.ray_launch``) also runs the trainer itself as a Ray actor on
its own resources (``rollout.ray.trainer_cpus`` / ``trainer_gpus``). Outside it, ``rollout.engine: ray``
joins the cluster at ``rollout.ray.address`` (``auto``: the one ``ray start`` runs on this node) or starts
a local one.
"""

from __future__ import annotations

import concurrent.futures as cf
from dataclasses import replace
from typing import Any, Literal, Sequence

from pydantic import BaseModel, ConfigDict, Field

from rlvr.core.types import Completion, GenerationRequest, SamplingParams
from rlvr.lazy import torch
from rlvr.engines.base import ENGINES, EngineMemory, MemoryQuery, memory_rule

__all__ = ["RayConfig", "RayEngine", "RayPool", "require_ray", "SEED_STRIDE"]

SEED_STRIDE = 15_485_863


class RayConfig(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    engine: Literal["hf", "native", "vllm"] = Field("hf", description="the engine each rollout worker runs")
    workers: int = Field(1, gt=0, description="rollout worker actors")
    num_cpus: float = Field(1.0, ge=0, description="CPUs reserved per rollout worker")
    num_gpus: float = Field(0.0, ge=0, description="GPUs per rollout worker (fractions share a device)")
    trainer_cpus: float = Field(1.0, ge=0, description="CPUs of the trainer actor (--launcher ray)")
    trainer_gpus: float = Field(0.0, ge=0, description="GPUs of the trainer actor (--launcher ray)")
    trainers: int = Field(1, gt=0, description="trainer actors (--launcher ray): with more than one, a data-parallel "
                                               "torch.distributed group, one rank each, as under torchrun; each "
                                               "generates its share with the run's engine")
    address: str | None = Field(None, description="Ray cluster to join (auto: this node's; null: start a local one)")


def require_ray():
    try:
        import ray
    except ImportError as e:
        raise ImportError(f"Ray placement needs the ray extra: pip install 'rlvr[ray]' ({e})") from None
    return ray


def _connect(address: str | None):
    ray = require_ray()
    if not ray.is_initialized():
        ray.init(address=address, include_dashboard=False, log_to_driver=False)
    return ray


class RolloutWorker:
    """One rollout engine on its own copy of the policy (the body of a Ray actor)."""

    def __init__(self, model, tokenizer, engine: str, kwargs: dict[str, Any], threads: int | None):
        if threads:  # (the engines are registered: importing this module imported the rlvr.rollout package)
            torch.set_num_threads(threads)
        if torch.cuda.is_available():
            model = model.to("cuda")
        self.model = model.eval().requires_grad_(False)
        self.engine = ENGINES.get(engine).fn(self.model, tokenizer, **kwargs)

    def load(self, state: dict[str, torch.Tensor]) -> None:
        with torch.no_grad():
            for name, p in self.model.named_parameters():
                p.copy_(state[name].to(p.device))
        self.engine.sync_weights()

    def generate(self, requests: list[GenerationRequest], sampling: SamplingParams) -> list[Completion]:
        return self.engine.generate(requests, sampling)


class RayEngine:
    """The engine the loop sees: requests dealt to Ray rollout workers, completions gathered in order."""

    def __init__(self, model, tokenizer, ray_cfg: RayConfig, worker_kwargs: dict[str, Any]):
        ray = _connect(ray_cfg.address)
        self.model, self.tokenizer, self.cfg = model, tokenizer, ray_cfg
        actor = ray.remote(num_cpus=ray_cfg.num_cpus, num_gpus=ray_cfg.num_gpus)(RolloutWorker)
        threads = max(1, int(ray_cfg.num_cpus)) if ray_cfg.num_cpus else None
        copy = _cpu_copy(model)
        self.workers = [actor.remote(copy, tokenizer, ray_cfg.engine, worker_kwargs, threads)
                        for _ in range(ray_cfg.workers)]
        self._ray = ray

    def sync_weights(self) -> None:
        state = {n: p.detach().cpu() for n, p in self.model.named_parameters()}
        ref = self._ray.put(state)  # once in the object store; every worker reads the same copy
        self._ray.get([w.load.remote(ref) for w in self.workers])

    def generate(self, requests: Sequence[GenerationRequest], sampling: SamplingParams) -> list[Completion]:
        n = len(self.workers)
        parts = [list(range(w, len(requests), n)) for w in range(n)]
        refs = []
        for w, idx in enumerate(parts):
            if idx:
                seed = None if sampling.seed is None else (sampling.seed + w * SEED_STRIDE) % (2**31 - 1)
                refs.append((idx, self.workers[w].generate.remote([requests[i] for i in idx],
                                                                  replace(sampling, seed=seed))))
        out = []
        for idx, ref in refs:
            out += [replace(c, group=idx[c.group]) for c in self._ray.get(ref)]
        return sorted(out, key=lambda c: c.group)  # stable: each request's completions keep their order


def _cpu_copy(model):
    import copy

    dev = next(model.parameters()).device
    return copy.deepcopy(model).to("cpu") if dev.type != "cpu" else model


@memory_rule("ray")
def _ray_memory(q: MemoryQuery) -> EngineMemory:
    """The rollout workers generate on devices of their own: nothing on the trainer's."""
    return EngineMemory(0.0, 0.0, "Ray workers: on their own devices (plan them as a one-device run)")


@ENGINES.register("ray")
def _build_ray(model, tokenizer, batch_size: int = 256, chat_template: bool = False, rollout=None,
               seed: int = 0, **_) -> RayEngine:
    """Rollout workers as Ray actors (``rollout.ray``; the ``ray`` extra)."""
    cfg = rollout.ray if rollout is not None else RayConfig()
    kwargs = {"batch_size": batch_size, "chat_template": chat_template, "rollout": rollout, "seed": seed}
    return RayEngine(model, tokenizer, cfg, kwargs)


class _Future:
    def __init__(self, ray, ref):
        self._ray, self._ref = ray, ref

    def result(self, timeout: float | None = None):
        from ray.exceptions import GetTimeoutError

        try:
            return self._ray.get(self._ref, timeout=timeout)
        except GetTimeoutError:
            raise cf.TimeoutError() from None

    def cancel(self) -> bool:
        self._ray.cancel(self._ref, force=True)
        return True


def _call(obj, method: str, *args):
    return getattr(obj, method)(*args)


class RayPool:
    """``submit(bound_method, *args)`` as a Ray task; the method's object goes to the object store once."""

    def __init__(self, address: str | None = None, num_cpus: float = 1.0):
        self._ray = _connect(address)
        self._remote = self._ray.remote(num_cpus=num_cpus)(_call)
        self._objects: dict[int, Any] = {}

    def submit(self, fn, *args) -> _Future:
        obj, name = fn.__self__, fn.__name__
        ref = self._objects.get(id(obj))
        if ref is None:
            ref = self._objects[id(obj)] = (obj, self._ray.put(obj))
        return _Future(self._ray, self._remote.remote(ref[1], name, *args))

"""What a run asks of a Ray cluster, checked against what the cluster has before any actor is started.

Ray queues an actor it cannot place and waits for resources that may never come, silently: a run asking
for more CPUs or GPUs than the cluster has would hang at its first generation. :func:`check_ray_resources`
refuses such a run up front with one :class:`RayResourceError` (a set-up error) naming the
numbers and the config fields that ask for them: the cluster's totals must cover the sum of the asks, and
one node must hold each actor. Resources other jobs hold now (the cluster has them, but not free) are only
reported: the run waits for them, as Ray does.
"""

from __future__ import annotations

import sys
from dataclasses import dataclass
from typing import Any

from rlvr.distributed.world import DistributedSetupError

__all__ = ["RayAsk", "RayResourceError", "ray_asks", "check_ray_resources"]


class RayResourceError(DistributedSetupError):
    """The Ray cluster can never hold what the run asks for; the message names the numbers and the fields."""


@dataclass(frozen=True)
class RayAsk:
    """``count`` actors (or tasks) of ``cpus`` CPUs and ``gpus`` GPUs each, and the config fields that set
    them (``count_field`` is ``None`` for a number the run fixes)."""

    what: str
    count: int
    cpus: float
    gpus: float
    count_field: str | None
    cpu_field: str
    gpu_field: str | None = None

    def each(self, resource: str) -> float:
        return self.cpus if resource == "CPU" else self.gpus

    def fields(self, resource: str) -> str:
        """The fields setting this ask's ``resource``: ``COUNT x EACH``, or ``EACH``."""
        each = self.cpu_field if resource == "CPU" else self.gpu_field
        return f"{self.count_field} x {each}" if self.count_field else str(each)

    def describe(self, resource: str) -> str:
        each = self.each(resource)
        return (f"{self.count} {self.what}{'s' if self.count != 1 else ''} x {_num(each)} {resource}"
                f"{'s' if each != 1 else ''} ({self.fields(resource)})")


def ray_asks(cfg: Any, launcher: bool = False) -> list[RayAsk]:
    """What ``cfg`` asks of the cluster: with ``launcher`` (``--launcher ray``) the trainer actors; the rollout
    workers of ``rollout.engine: ray`` (which the launcher sets for one trainer); one CPU for the scoring
    tasks of ``scoring.backend: ray`` (each task takes one, and none runs while the actors hold every CPU)."""
    r = cfg.rollout.ray
    asks = []
    if launcher:
        asks.append(RayAsk("trainer", r.trainers, r.trainer_cpus, r.trainer_gpus, "rollout.ray.trainers",
                           "rollout.ray.trainer_cpus", "rollout.ray.trainer_gpus"))
    if cfg.rollout.engine == "ray" or (launcher and r.trainers == 1):
        asks.append(RayAsk("rollout worker", r.workers, r.num_cpus, r.num_gpus, "rollout.ray.workers",
                           "rollout.ray.num_cpus", "rollout.ray.num_gpus"))
    if cfg.scoring.backend == "ray":
        asks.append(RayAsk("scoring task", 1, 1.0, 0.0, None, "scoring.backend=ray"))
    return asks


def check_ray_resources(ray, asks: list[RayAsk], say=None) -> None:
    """Raise :class:`RayResourceError` when the cluster ``ray`` is connected to can never hold ``asks``;
    report (through ``say``, default stderr) when it can, but other work holds part of them now."""
    asks = [a for a in asks if a.count and (a.cpus or a.gpus)]
    if not asks:
        return
    total = ray.cluster_resources()
    for resource in ("CPU", "GPU"):
        problem = _shortfall(asks, resource, total.get(resource, 0.0))
        if problem:
            raise RayResourceError(problem)
    nodes = [n.get("Resources", {}) for n in ray.nodes() if n.get("Alive", True)]
    for a in asks:
        problem = _unplaceable(a, nodes)
        if problem:
            raise RayResourceError(problem)
    free = ray.available_resources()
    busy = [f"{_num(need)} {res}s asked, {_num(free.get(res, 0.0))} free" for res in ("CPU", "GPU")
            if (need := _need(asks, res)) > free.get(res, 0.0) + 1e-9]
    if busy:
        (say or _stderr)(f"waiting for Ray resources other work holds now ({'; '.join(busy)})")


def _need(asks: list[RayAsk], resource: str) -> float:
    return sum(a.count * a.each(resource) for a in asks)


def _shortfall(asks: list[RayAsk], resource: str, have: float) -> str | None:
    """The message for a cluster with fewer ``resource`` in all than ``asks`` take together."""
    need = _need(asks, resource)
    if need <= have + 1e-9:
        return None
    parts = " + ".join(a.describe(resource) for a in asks if a.each(resource))
    fix = ("ask for fewer or smaller actors (a fraction such as 0.5 shares a CPU)" if resource == "CPU" else
           "ask for fewer GPUs (0 runs on CPUs)")
    return (f"the Ray cluster has {_num(have)} {resource}{'s' if have != 1 else ''} in all, but the run asks for "
            f"{_num(need)}: {parts}; {fix}, or join a larger cluster with rollout.ray.address")


def _unplaceable(a: RayAsk, nodes: list[dict[str, float]]) -> str | None:
    """The message for an actor no single node can hold (Ray places each actor on one node)."""
    if not nodes or any(n.get("CPU", 0.0) + 1e-9 >= a.cpus and n.get("GPU", 0.0) + 1e-9 >= a.gpus for n in nodes):
        return None
    cpus = max(n.get("CPU", 0.0) for n in nodes)
    gpus = max(n.get("GPU", 0.0) for n in nodes)
    fields = [f for f, need in ((a.cpu_field, a.cpus), (a.gpu_field, a.gpus)) if need and f]
    return (f"no node of the Ray cluster can hold one {a.what} of {_num(a.cpus)} CPUs and {_num(a.gpus)} GPUs "
            f"({', '.join(fields)}): Ray places each actor on one node, and its {len(nodes)} node"
            f"{'s have' if len(nodes) != 1 else ' has'} at most {_num(cpus)} CPUs and {_num(gpus)} GPUs each; "
            f"ask for less per {a.what}, or join a cluster with larger nodes")


def _num(x: float) -> str:
    return f"{x:g}"


def _stderr(msg: str) -> None:
    print(msg, file=sys.stderr, flush=True)

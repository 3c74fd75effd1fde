"""``rlvr train --launcher ray``: the trainer as a Ray actor, the rollout engines as Ray actors beside it.

The driver (the ``rlvr`` process) joins the cluster (``rollout.ray.address``; ``null`` starts a local one),
starts one trainer actor with ``rollout.ray.trainer_cpus`` / ``trainer_gpus`` and runs the ordinary
``train`` (or ``resume``) inside it, with ``rollout.engine: ray`` so that generation goes to
``rollout.ray.workers`` rollout actors (each running ``rollout.ray.engine``, the run's own engine unless
set) and the trainer's weights are broadcast to them after every step (``rlvr.distributed.ray_engine``). The
run directory is resolved on the driver, so it must be on storage the trainer's node can write.

``rollout.ray.trainers: N > 1`` starts N trainer actors instead, ranks 0 .. N-1 of one data-parallel
``torch.distributed`` group (DDP or FSDP2, ``train.distributed``), rendezvousing at rank 0's node on a port
rank 0 picked: inside each actor the run is exactly a torchrun rank's (:mod:`rlvr.distributed.world`), so
it trains as a one-process run on the same global batch does. Each rank generates its share of the groups
with the run's own engine, in its actor (colocated, as under torchrun; ``vllm`` included: one engine per
actor, on the actor's GPU). Give each trainer a whole GPU
(``trainer_gpus: 1``): NCCL refuses two ranks on one device. When a rank raises, the driver kills the other
actors (they would otherwise wait in their next collective until its timeout) and raises that rank's error.

Ctrl-C or SIGTERM on the driver reaches the trainers wherever they run: they finish the step in progress,
save a checkpoint there, and the driver exits as a local run does (a second signal aborts at once).

A multi-node cluster (commands in docs/distributed.md)::

    ray start --head --port 6379                      # on the head node
    ray start --address HEAD:6379 --num-gpus 8        # on every other node
    rlvr train --launcher ray --set rollout.ray.address=auto --set rollout.ray.workers=4 \\
        --set rollout.ray.num_gpus=1 --set rollout.ray.trainer_gpus=1 ...
"""

from __future__ import annotations

import os
import signal
import sys
import threading
from pathlib import Path
from typing import Any

from rlvr.config.run import RunConfig, load_config
from rlvr.distributed.ray_engine import _connect
from rlvr.run.rundir import run_dir_path

__all__ = ["ray_train", "ray_resume", "with_ray_engine"]


class _Trainer:
    """The trainer actor: the driver's working directory, then ``train`` / ``resume`` as usual.

    It runs two calls at once (``max_concurrency=2``): while ``train`` runs, ``stop`` asks it to finish the
    step in progress, save a checkpoint and return (:func:`rlvr.run.interrupt.request_stop`), which is how
    the driver's Ctrl-C or SIGTERM reaches a trainer on another node. A stopped run returns
    ``{"interrupted": message}``, raised again on the driver as the ``KeyboardInterrupt`` a local run raises.
    """

    def __init__(self, cwd: str, rank: int = 0, size: int = 1):
        os.chdir(cwd)
        self.rank, self.size = rank, size

    def rendezvous(self) -> tuple[str, int]:
        """Rank 0's node address and a port free on it, for the group's ``MASTER_ADDR`` / ``MASTER_PORT``."""
        import socket

        import ray

        with socket.socket() as s:
            s.bind(("", 0))
            port = s.getsockname()[1]
        return ray.util.get_node_ip_address(), port

    def _join(self, master: tuple[str, int] | None) -> None:
        """The environment torchrun gives a rank (read by :func:`rlvr.distributed.world.init_world`). Ray
        shows an actor only its own GPUs, so its device is always the first: ``LOCAL_RANK`` 0."""
        if master is not None:
            os.environ.update(RANK=str(self.rank), WORLD_SIZE=str(self.size), LOCAL_RANK="0",
                              MASTER_ADDR=master[0], MASTER_PORT=str(master[1]))

    def train(self, raw: dict[str, Any], master: tuple[str, int] | None = None) -> dict[str, Any]:
        from rlvr.run.train import train

        self._join(master)
        return self._stoppable(lambda: train(RunConfig.model_validate(raw)))

    def resume(self, path: str, overrides: list[str], master: tuple[str, int] | None = None) -> dict[str, Any]:
        from rlvr.run.train import resume

        self._join(master)
        return self._stoppable(lambda: resume(path, overrides))

    def stop(self, reason: str) -> None:
        from rlvr.run.interrupt import request_stop

        request_stop(reason)

    @staticmethod
    def _stoppable(run) -> dict[str, Any]:
        try:
            return run()
        except KeyboardInterrupt as e:
            return {"interrupted": str(e) or "interrupted"}


def with_ray_engine(cfg: RunConfig) -> RunConfig:
    """``cfg`` generating through Ray rollout workers that run its own engine (unless already set so); with
    several trainers, each generates with the run's own engine (``cfg`` unchanged)."""
    several = cfg.rollout.ray.trainers > 1
    if several and cfg.rollout.engine == "ray":
        raise ValueError(f"rollout.ray.trainers={cfg.rollout.ray.trainers}: each trainer rank generates its share "
                         "with the run's own engine; set rollout.engine to hf or native (rollout.engine=ray "
                         "under several trainers is not supported yet)")
    if several or cfg.rollout.engine == "ray":
        return cfg
    ray_cfg = cfg.rollout.ray.model_copy(update={"engine": cfg.rollout.engine})
    return cfg.model_copy(update={"rollout": cfg.rollout.model_copy(update={"engine": "ray", "ray": ray_cfg})})


def _actors(cfg: RunConfig):
    """Ray, the trainer actors and the rendezvous of their group (``None`` for one trainer)."""
    ray = _connect(cfg.rollout.ray.address)
    r = cfg.rollout.ray
    cls = ray.remote(num_cpus=r.trainer_cpus, num_gpus=r.trainer_gpus, max_concurrency=2)(_Trainer)
    trainers = [cls.remote(os.getcwd(), rank, r.trainers) for rank in range(r.trainers)]
    master = ray.get(trainers[0].rendezvous.remote()) if r.trainers > 1 else None
    return ray, trainers, master


def _gather(ray, trainers, refs) -> list[dict[str, Any]]:
    """Every trainer's result, in rank order; the first error kills the other trainers and is raised."""
    pending, rank_of = list(refs), {ref: i for i, ref in enumerate(refs)}
    out: list[Any] = [None] * len(refs)
    while pending:
        done, pending = ray.wait(pending, num_returns=1)
        try:
            out[rank_of[done[0]]] = ray.get(done[0])
        except Exception:
            for t in trainers:  # the others would wait in a collective with the failed rank until its timeout
                ray.kill(t)
            raise
    return out


def _wait(ray, trainers, refs) -> dict[str, Any]:
    """Rank 0's result; the driver's Ctrl-C or SIGTERM asks every trainer to stop after its step and save (a
    second one stops waiting at once: the actors go with the driver)."""
    previous = signal.getsignal(signal.SIGTERM)

    def term(signum, frame):
        raise KeyboardInterrupt("SIGTERM")

    if threading.current_thread() is threading.main_thread():
        signal.signal(signal.SIGTERM, term)
    try:
        try:
            out = _gather(ray, trainers, refs)
        except KeyboardInterrupt as e:
            what = str(e) or "Ctrl-C"
            print(f"\n{what}: the trainer finishes its step, then saves (send it again to abort)", file=sys.stderr,
                  flush=True)
            ray.get([t.stop.remote(f"{what} on the driver") for t in trainers])
            out = _gather(ray, trainers, refs)
    finally:
        if threading.current_thread() is threading.main_thread():
            signal.signal(signal.SIGTERM, previous)
    if "interrupted" in out[0]:
        raise KeyboardInterrupt(out[0]["interrupted"])
    return out[0]


def ray_train(cfg: RunConfig) -> dict[str, Any]:
    cfg = with_ray_engine(cfg)
    cfg = cfg.model_copy(update={"out": str(Path(run_dir_path(cfg)).resolve())})
    ray, trainers, master = _actors(cfg)
    raw = cfg.model_dump(mode="json")
    return _wait(ray, trainers, [t.train.remote(raw, master) for t in trainers])


def ray_resume(path: str | Path, overrides: list[str] | None = None) -> dict[str, Any]:
    path = Path(path).resolve()
    from rlvr.run.checkpoint import latest_checkpoint

    cfg = load_config(latest_checkpoint(path).parent.parent / "config.yaml", overrides)
    ray, trainers, master = _actors(cfg)
    return _wait(ray, trainers, [t.resume.remote(str(path), list(overrides or []), master) for t in trainers])

"""``rlvr train --launcher ray``: the trainer as a Ray actor, the rollout engines as Ray actors beside it.

The driver (the ``rlvr`` process) joins the cluster (``rollout.ray.address``; ``null`` starts a local one),
starts one trainer actor with ``rollout.ray.trainer_cpus`` / ``trainer_gpus`` and runs the ordinary
``train`` (or ``resume``) inside it, with ``rollout.engine: ray`` so that generation goes to
``rollout.ray.workers`` rollout actors (each running ``rollout.ray.engine``, the run's own engine unless
set) and the trainer's weights are broadcast to them after every step (``rlvr.rollout.ray_engine``). The
run directory is resolved on the driver, so it must be on storage the trainer's node can write.

Ctrl-C or SIGTERM on the driver reaches the trainer wherever it runs: it finishes the step in progress,
saves a checkpoint there, and the driver exits as a local run does (a second signal aborts at once).

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

from rlvr.config import RunConfig, load_config
from rlvr.rollout.ray_engine import _connect
from rlvr.train.rundir import run_dir_path

__all__ = ["ray_train", "ray_resume", "with_ray_engine"]


class _Trainer:
    """The trainer actor: the driver's working directory, then ``train`` / ``resume`` as usual.

    It runs two calls at once (``max_concurrency=2``): while ``train`` runs, ``stop`` asks it to finish the
    step in progress, save a checkpoint and return (:func:`rlvr.train.interrupt.request_stop`), which is how
    the driver's Ctrl-C or SIGTERM reaches a trainer on another node. A stopped run returns
    ``{"interrupted": message}``, raised again on the driver as the ``KeyboardInterrupt`` a local run raises.
    """

    def __init__(self, cwd: str):
        os.chdir(cwd)

    def train(self, raw: dict[str, Any]) -> dict[str, Any]:
        from rlvr.train.run import train

        return self._stoppable(lambda: train(RunConfig.model_validate(raw)))

    def resume(self, path: str, overrides: list[str]) -> dict[str, Any]:
        from rlvr.train.run import resume

        return self._stoppable(lambda: resume(path, overrides))

    def stop(self, reason: str) -> None:
        from rlvr.train.interrupt import request_stop

        request_stop(reason)

    @staticmethod
    def _stoppable(run) -> dict[str, Any]:
        try:
            return run()
        except KeyboardInterrupt as e:
            return {"interrupted": str(e) or "interrupted"}


def with_ray_engine(cfg: RunConfig) -> RunConfig:
    """``cfg`` generating through Ray rollout workers that run its own engine (unless already set so)."""
    if cfg.rollout.engine == "ray":
        return cfg
    ray_cfg = cfg.rollout.ray.model_copy(update={"engine": cfg.rollout.engine})
    return cfg.model_copy(update={"rollout": cfg.rollout.model_copy(update={"engine": "ray", "ray": ray_cfg})})


def _actor(cfg: RunConfig):
    ray = _connect(cfg.rollout.ray.address)
    r = cfg.rollout.ray
    actor = ray.remote(num_cpus=r.trainer_cpus, num_gpus=r.trainer_gpus, max_concurrency=2)(_Trainer)
    return ray, actor.remote(os.getcwd())


def _wait(ray, trainer, ref) -> dict[str, Any]:
    """The trainer's result; the driver's Ctrl-C or SIGTERM asks it to stop after its step and save (a
    second one stops waiting at once: the actor goes with the driver)."""
    previous = signal.getsignal(signal.SIGTERM)

    def term(signum, frame):
        raise KeyboardInterrupt("SIGTERM")

    if threading.current_thread() is threading.main_thread():
        signal.signal(signal.SIGTERM, term)
    try:
        try:
            out = ray.get(ref)
        except KeyboardInterrupt as e:
            what = str(e) or "Ctrl-C"
            print(f"\n{what}: the trainer finishes its step, then saves (send it again to abort)", file=sys.stderr,
                  flush=True)
            ray.get(trainer.stop.remote(f"{what} on the driver"))
            out = ray.get(ref)
    finally:
        if threading.current_thread() is threading.main_thread():
            signal.signal(signal.SIGTERM, previous)
    if "interrupted" in out:
        raise KeyboardInterrupt(out["interrupted"])
    return out


def ray_train(cfg: RunConfig) -> dict[str, Any]:
    cfg = with_ray_engine(cfg)
    cfg = cfg.model_copy(update={"out": str(Path(run_dir_path(cfg)).resolve())})
    ray, trainer = _actor(cfg)
    return _wait(ray, trainer, trainer.train.remote(cfg.model_dump(mode="json")))


def ray_resume(path: str | Path, overrides: list[str] | None = None) -> dict[str, Any]:
    path = Path(path).resolve()
    from rlvr.train.checkpoint import latest_checkpoint

    cfg = load_config(latest_checkpoint(path).parent.parent / "config.yaml", overrides)
    ray, trainer = _actor(cfg)
    return _wait(ray, trainer, trainer.resume.remote(str(path), list(overrides or [])))

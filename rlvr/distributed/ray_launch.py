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

Before any actor starts, the driver checks that the cluster can hold every trainer, rollout worker and
scoring task the config asks for (:mod:`rlvr.distributed.ray_resources`): Ray would otherwise queue them and
the run would wait forever, silently. The actors' output does not reach the driver's terminal, so the driver
shows the run's progress itself: every second it reads the new lines of rank 0's ``metrics.jsonl`` (on rank
0's node) and shows each step as a local run does. An error raised in a trainer is raised again on the driver
as itself (its traceback in the actor kept as a note), so the command prints it as it would a local run's.

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
from rlvr.distributed.ray_resources import check_ray_resources, ray_asks
from rlvr.run.rundir import run_dir_path

__all__ = ["ray_train", "ray_resume", "with_ray_engine"]

POLL_S = 1.0  # how often the driver reads the run's progress


class _Trainer:
    """The trainer actor: the driver's working directory, then ``train`` / ``resume`` as usual.

    It runs three calls at once (``max_concurrency=3``): while ``train`` runs, ``stop`` asks it to finish the
    step in progress, save a checkpoint and return (:func:`rlvr.run.interrupt.request_stop`), which is how
    the driver's Ctrl-C or SIGTERM reaches a trainer on another node, and ``metrics_since`` hands the driver
    the run's new metrics lines. A stopped run returns ``{"interrupted": message}``, raised again on the
    driver as the ``KeyboardInterrupt`` a local run raises.
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
        """The environment torchrun gives a rank (read by :func:`rlvr.distributed.process_group.init_world`). Ray
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
    def metrics_since(path: str, offset: int) -> tuple[int, list[str]]:
        """The whole lines of the JSONL file ``path`` past byte ``offset``, and the offset after them; from the
        file's start when it is shorter than ``offset`` (a resumed run rewrote it)."""
        try:
            with open(path, "rb") as f:
                f.seek(0, os.SEEK_END)
                if f.tell() < offset:
                    offset = 0
                f.seek(offset)
                data = f.read()
        except FileNotFoundError:
            return 0, []
        whole = data[: data.rfind(b"\n") + 1]
        return offset + len(whole), whole.decode("utf-8", errors="replace").splitlines()

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
    """Ray, the trainer actors and the rendezvous of their group (``None`` for one trainer), once the cluster
    is known to hold everything the run asks for."""
    ray = _connect(cfg.rollout.ray.address)
    check_ray_resources(ray, ray_asks(cfg, launcher=True))
    r = cfg.rollout.ray
    cls = ray.remote(num_cpus=r.trainer_cpus, num_gpus=r.trainer_gpus, max_concurrency=3)(_Trainer)
    trainers = [cls.remote(os.getcwd(), rank, r.trainers) for rank in range(r.trainers)]
    master = ray.get(trainers[0].rendezvous.remote()) if r.trainers > 1 else None
    return ray, trainers, master


class _Progress:
    """The run's RL steps shown on the driver as a local run shows them (a bar on a terminal, a line every few
    steps in logs): rank 0's new ``metrics.jsonl`` lines, read on rank 0's node at most every ``POLL_S``.

    A resumed run (``resume_step``) shows only the lines written after its start: the log's lines up to then
    are skipped, and lines of steps past the checkpoint, which the resumed run drops and writes again, are
    read once it has (the file is then shorter, and is read again from its start).
    """

    def __init__(self, ray, trainer, metrics: Path, total: int, resume_step: int | None = None):
        self.ray, self.trainer, self.path, self.total = ray, trainer, str(metrics), total
        self.offset, self.last, self.ref, self.bar = 0, 0, None, None
        if resume_step is not None:
            self.offset, self.last = ray.get(trainer.metrics_since.remote(self.path, 0))[0], resume_step

    def poll(self, wait: bool = False) -> None:
        """Show the steps logged since the last poll (``wait``: block for them, else only if already read)."""
        if self.ref is None:
            self.ref = self.trainer.metrics_since.remote(self.path, self.offset)
        done, _ = self.ray.wait([self.ref], timeout=None if wait else 0)
        if not done:
            return
        ref, self.ref = self.ref, None
        try:
            self.offset, lines = self.ray.get(ref)
        except Exception:  # the trainer is gone: its error (or result) comes through its own call
            return
        for line in lines:
            self._show(line)

    def _show(self, line: str) -> None:
        import json

        try:
            m = json.loads(line)
        except ValueError:
            return
        step = m.get("step") if isinstance(m, dict) else None
        if not isinstance(step, int) or step <= self.last:
            return
        if self.bar is None:
            from rlvr.run.logging import ProgressDisplay

            self.bar = ProgressDisplay("RL", self.total, step - 1, every=max(1, min(10, self.total // 10)))
        self.last = step
        self.bar.update(step, step_info(m))

    def close(self, finished: bool) -> None:
        """Show the last steps (``finished``: the trainer returned, so its log is complete) and end the bar."""
        if finished:  # twice: a read already in flight may have been sent before the last steps were written
            self.poll(wait=True)
            self.poll(wait=True)
        if self.bar is not None:
            self.bar.close()


def step_info(m: dict[str, Any]) -> str:
    """One step's progress text, from its metrics: reward, accuracy and completion length where logged."""
    parts = [f"{label} {m[key]:{fmt}}" for key, label, fmt in (("reward", "reward", ".3f"),
                                                               ("accuracy", "acc", ".3f"),
                                                               ("completion_length", "len", ".1f"))
             if isinstance(m.get(key), (int, float))]
    return "  ".join(parts)


def _remote_cause(e: Exception) -> Exception:
    """The exception a trainer raised, out of Ray's wrapper (its traceback in the actor kept as a note), so
    the command reports it as it reports a local run's; any other error as it is."""
    cause = getattr(e, "cause", None)
    if not isinstance(cause, Exception) or cause is e:
        return e
    cause.add_note(f"raised in a Ray trainer actor:\n{e}")
    return cause


def _gather(ray, trainers, refs, progress: _Progress | None = None) -> list[dict[str, Any]]:
    """Every trainer's result, in rank order, showing ``progress`` meanwhile; the first error kills the other
    trainers and is raised."""
    pending, rank_of = list(refs), {ref: i for i, ref in enumerate(refs)}
    out: list[Any] = [None] * len(refs)
    while pending:
        done, pending = ray.wait(pending, num_returns=1, timeout=POLL_S if progress is not None else None)
        if progress is not None:
            progress.poll()
        if not done:
            continue
        try:
            out[rank_of[done[0]]] = ray.get(done[0])
        except Exception as e:
            for t in trainers:  # the others would wait in a collective with the failed rank until its timeout
                ray.kill(t)
            raise _remote_cause(e) from None
    return out


def _wait(ray, trainers, refs, progress: _Progress) -> dict[str, Any]:
    """Rank 0's result, with the run's ``progress`` shown meanwhile; the driver's Ctrl-C or SIGTERM asks every
    trainer to stop after its step and save (a second one stops waiting at once: the actors go with the
    driver)."""
    previous = signal.getsignal(signal.SIGTERM)

    def term(signum, frame):
        raise KeyboardInterrupt("SIGTERM")

    if threading.current_thread() is threading.main_thread():
        signal.signal(signal.SIGTERM, term)
    finished = False
    try:
        try:
            out = _gather(ray, trainers, refs, progress)
        except KeyboardInterrupt as e:
            what = str(e) or "Ctrl-C"
            print(f"\n{what}: the trainer finishes its step, then saves (send it again to abort)", file=sys.stderr,
                  flush=True)
            ray.get([t.stop.remote(f"{what} on the driver") for t in trainers])
            out = _gather(ray, trainers, refs, progress)
        finished = True
    finally:
        progress.close(finished)
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
    progress = _Progress(ray, trainers[0], Path(cfg.out) / "metrics.jsonl", cfg.train.steps)
    return _wait(ray, trainers, [t.train.remote(raw, master) for t in trainers], progress)


def ray_resume(path: str | Path, overrides: list[str] | None = None) -> dict[str, Any]:
    path = Path(path).resolve()
    from rlvr.run.checkpoint import latest_checkpoint

    ckpt = latest_checkpoint(path)
    run_dir = ckpt.parent.parent
    cfg = load_config(run_dir / "config.yaml", overrides)
    ray, trainers, master = _actors(cfg)
    progress = _Progress(ray, trainers[0], run_dir / "metrics.jsonl", cfg.train.steps, _step_of(ckpt))
    return _wait(ray, trainers, [t.resume.remote(str(path), list(overrides or []), master) for t in trainers],
                 progress)


def _step_of(ckpt: Path) -> int:
    """The step a checkpoint was saved after (0 when its state cannot be read: the resume reports why)."""
    import json

    try:
        return int(json.loads((ckpt / "state.json").read_text())["step"])
    except (OSError, ValueError, KeyError, TypeError):
        return 0

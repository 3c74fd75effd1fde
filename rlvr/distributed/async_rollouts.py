"""Asynchronous off-policy training (``rollout.max_staleness = s > 0``) and Mu-GRPO's generation stages
(``rollout.stages = S > 0``): a producer thread collects the rollouts ahead of the trainer. (With neither,
each step collects its own, in line: ``rl_step``.)

Stages (Mu-GRPO: Tian, Xie, Wei 2026, "How Off-Policy Can GRPO Be? mu-GRPO", arXiv:2605.17570; RECONSTRUCTED
loss details, stage structure confirmed): the run's ``train.steps`` are cut into S stages of
``L = ceil(steps / S)`` steps; every step of a stage is generated with the policy of the stage's first step
(``v(j) = first + floor((j - first) / L) L``), so the producer generates the whole stage's rollouts at once,
as fast as it can, into a buffer of up to L steps, while the trainer takes its L optimizer steps on
increasingly stale data (pair it with the ``mu_grpo`` clip rule: relaxed clipping and the negative-advantage
veto). A checkpoint also starts a new stage.

Asynchronous schedule. The producer collects step ``j``'s rollouts with a snapshot of the policy of
version ``v(j) = max(first, j - s)`` (a version is the number of RL steps the trainer has finished) in a
separate copy of the model (pushed to the producer's engine with its ``sync_weights``, so an engine on
weights of its own, such as ``rollout.engine: ray``'s workers, generates with the snapshot too), while the
trainer updates earlier steps; so the generation of step ``k + 1``
overlaps the update of step ``k`` and no sample is more than ``s`` optimizer steps old. Each completion
records ``policy_version``; its behaviour log-probs are the snapshot's, so the run's importance correction
(``algorithm.correction``: ``tis``, ``mis``) weighs stale samples against the current policy, and
``logp_mismatch`` reports how far they are. Metrics: ``rollout/staleness_mean`` and ``_max``.

Handshake: the producer takes snapshot ``v`` as soon as the trainer has finished step ``v - 1``, and the
trainer does not start updating step ``v`` until it has, so every snapshot is of exactly one version and a
run is as reproducible as a synchronous one. The pipeline drains at every checkpoint and at the end (the
producer never runs past the segment it was started for), so a run resumed from a checkpoint equals the
uninterrupted one; on Ctrl-C the in-flight steps are trained before the checkpoint, so no prompt is lost.

Under ``torchrun`` every rank runs its own producer on its share of the groups; the producers'
gathers go through a process group of their own (:meth:`World.split`), beside the trainers' all-reduces,
and before each step the producers agree whether to go on, so on a stop every rank hands back the same
in-flight steps. With FSDP (``trainer_copies``) a rank holds a shard, and only a collective of the
trainers can assemble the whole model, so the trainer thread takes the snapshot instead of the producer:
when its step needs one, it waits until its producer has reached that version (done with the previous
snapshot), gathers the weights into the producer's copy one tensor at a time (every rank at the same step)
and hands it over; the first snapshot of a segment is gathered in :meth:`AsyncRollouts.start`. Each rank
then holds one whole copy of the weights for generation, as FSDP's synchronous generation does.

The producer touches only rollout-side state (sampler, allocator, prompt statistics, the rollout engine
and its wrappers, the appeal estimate); the trainer only the model, optimizer and algorithm state. On
CPU the producer runs torch on ``rollout.producer_threads`` (default: the trainer's ``train.threads``);
the two sides' thread pools share the cores, so keep their sum near the core count, or let waiting threads
sleep (``OMP_WAIT_POLICY=PASSIVE``; ``benchmarks/async_rollouts.py``).
"""

from __future__ import annotations

import copy
import queue
import threading
from dataclasses import replace
from typing import Any, Callable

import torch

from rlvr.distributed.fsdp import gather_into

__all__ = ["AsyncRollouts", "async_rollouts", "rollout_copy", "wants_async"]


class AsyncRollouts:
    """The producer thread of the asynchronous schedule (module docstring)."""

    def __init__(self, collect: Callable[[Any, int], Any], c: Any, staleness: int, rollout_model: Any,
                 rollout_engine: Any, stage_steps: int = 0, world: Any = None, trainer_copies: bool = False,
                 threads: int | None = None):
        self.collect, self.c, self.s, self.stage = collect, c, staleness, stage_steps
        self.world = world if world is not None else c.world  # the producers' group (World.split)
        self.trainer_copies = trainer_copies  # FSDP: snapshots are gathered by the trainers (module docstring)
        self.model, self.engine = rollout_model, rollout_engine
        # rollout.producer_threads, or the run's count (train.threads, set in the trainer's thread)
        self.threads = threads or torch.get_num_threads()
        self.cond = threading.Condition()
        self.thread: threading.Thread | None = None

    def _version(self, j: int) -> int:
        """The policy version step ``j`` is generated with: ``s`` steps back, or its stage's first step."""
        if self.stage:
            return self.first + (j - self.first) // self.stage * self.stage
        return max(self.first, j - self.s)

    def _needed(self, t: int) -> bool:
        """Whether some step of the segment is generated with version ``t`` (its snapshot must be taken
        before the trainer updates step ``t``)."""
        if self.stage:
            return (t - self.first) % self.stage == 0
        return t == self.first or t + self.s < self.last

    def start(self, first: int, last: int) -> None:
        """Produce steps ``first .. last - 1`` (the segment up to the next checkpoint)."""
        self.first, self.last = first, last
        self.finished = first  # trainer: RL steps done (the policy version)
        self.snapshot = first - 1  # the newest version copied
        self.synced = first - 1  # producer: the newest version its engine was told of
        self.waiting = first - 1  # producer: the newest version it is ready to take (trainer_copies)
        self.halt = False
        self.error: BaseException | None = None
        self.ready: queue.Queue = queue.Queue()
        # the components as the producer sees them: its own engine and process group, and no update module (its
        # model is a whole copy; FSDP's gathers belong to the trainer thread)
        self.side = replace(self.c, engine=self.engine, world=self.world, update_module=None)
        if self.trainer_copies:  # every rank starts a segment together: the first snapshot's collective
            self._copy_weights()
            self.snapshot = first
        self.thread = threading.Thread(target=self._produce, name="rlvr-rollouts", daemon=True)
        self.thread.start()

    def _copy_weights(self) -> None:
        gather_into(self.model, self.c.model)  # FSDP shards gathered: a collective of the trainers

    def _produce(self) -> None:
        # a new thread starts with OpenMP's default count (every core), not the run's; vLLM's CPU attention
        # also checks that its kernels run with the count its metadata was planned with. (torch._C's, as
        # vLLM's CPU worker replaces torch.set_num_threads by a no-op once it has bound its threads.)
        torch._C.set_num_threads(self.threads)
        try:
            for j in range(self.first, self.last):
                v = self._version(j)
                with self.cond:
                    self.cond.wait_for(lambda: self.finished >= v or self.halt)
                # every rank's producer stops before the same step (a no-op in one process; outside the lock:
                # the trainer never waits on a snapshot the others' producers have not reached either)
                if self.world.any(self.halt):
                    return
                with self.cond:
                    if self.trainer_copies:  # ready for version v: the trainer gathers it (module docstring)
                        self.waiting = v
                        self.cond.notify_all()
                        self.cond.wait_for(lambda: self.snapshot >= v or self.halt)
                        if self.snapshot < v:
                            return
                    elif self.snapshot < v:
                        self._copy_weights()
                        self.snapshot = v
                        self.cond.notify_all()
                    if self.synced < v:
                        # an engine with weights of its own (Ray workers) takes them now; the wrappers learn
                        # the policy changed (SPEC-RL's drafts become reusable), as after a synchronous step
                        self.engine.sync_weights()
                        self.synced = v
                ro = self.collect(self.side, j)
                for g in ro.groups:
                    for i, comp in enumerate(g.completions):
                        g.completions[i] = replace(comp, policy_version=v)
                ro = type(ro)(ro.groups, {**ro.metrics, "rollout/staleness_mean": float(j - v),
                                          "rollout/staleness_max": float(j - v)})
                self.ready.put((j, ro, None))
        except BaseException as e:  # handed to the trainer, which raises it
            with self.cond:
                self.error = e
                self.cond.notify_all()
            self.ready.put((None, None, e))

    def get(self, step: int):
        if self.trainer_copies:
            with self.cond:  # gather version `step` once the producer is done with the previous snapshot (a
                # stage's own rollouts need it: before waiting for them)
                if self._needed(step) and self.snapshot < step:
                    self.cond.wait_for(lambda: self.waiting >= step or self.error is not None)
                    if self.error is None:
                        self._copy_weights()
                        self.snapshot = step
                        self.cond.notify_all()
        got, ro, err = self.ready.get()
        if err is not None:
            raise err
        assert got == step, f"rollouts of step {got} arrived for step {step}"
        with self.cond:  # the producer must copy version `step` before the trainer changes it
            need = self._needed(step)
            self.cond.wait_for(lambda: not need or self.snapshot >= step or self.halt or self.error is not None)
            if self.error is not None:
                raise self.error
        return ro

    def trained(self, step: int) -> None:
        with self.cond:
            self.finished = step + 1
            self.cond.notify_all()

    def stop(self) -> list[tuple[int, Any]]:
        """Stop producing new steps; return the in-flight ones (step, rollouts) for the trainer to finish."""
        with self.cond:
            self.halt = True
            self.cond.notify_all()
        if self.thread is not None:
            self.thread.join()
        left = []
        while not self.ready.empty():
            j, ro, err = self.ready.get()
            if err is None:
                left.append((j, ro))
        return left


def wants_async(cfg: Any) -> bool:
    """Whether the run collects its rollouts in a producer thread."""
    return bool(cfg.rollout.max_staleness or cfg.rollout.stages)


def rollout_copy(model: Any) -> Any:
    """The producer's frozen copy of ``model`` (taken before FSDP shards it: the copy stays whole)."""
    return copy.deepcopy(model).eval().requires_grad_(False)


def async_rollouts(cfg: Any, c: Any, collect: Callable[[Any, int], Any], build_engine: Callable[[Any], Any],
                   model: Any = None):
    """:class:`AsyncRollouts` over a frozen copy of ``c.model`` (``model``, or one made here) with its own
    engine (``build_engine(model)``, in the training wrappers) when ``rollout.max_staleness > 0``; else
    ``None`` (rollouts in line)."""
    r = cfg.rollout
    if not wants_async(cfg):
        return None
    stage = -(-max(cfg.train.steps, 1) // r.stages) if r.stages else 0  # steps per stage
    model = rollout_copy(c.model) if model is None else model
    return AsyncRollouts(collect, c, r.max_staleness, model, build_engine(model), stage, c.world.split(),
                         trainer_copies=c.world.sharded, threads=r.producer_threads)

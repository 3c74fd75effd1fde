"""Interleaved SFT and RL phases (``sft.interleave_every``): supervised steps between RL steps.

After every ``interleave_every``-th RL step's update (and before the rollout engine receives the new
weights) the policy takes ``interleave_steps`` SFT steps on the task's reference completions (its ``sft``
split when it has one, else ``train``), the warm-up's data and loss (:func:`rlvr.sft.supervised.sft`), at
``interleave_lr`` (when unset, the RL phase's own ``optim.lr``: a phase runs inside RL, and the warm-up's rate,
often far higher, would undo the RL steps between phases), the RL phase then continuing from the result. This is the
supervised half of methods that alternate SFT with RLVR (PROPA's interleaved SFT, MEML-GRPO's
periodic SFT).

With ``sft.interleave_source: rollouts`` a phase trains instead on the rows the training engine's rollout
strategy gathered since the last phase (:func:`rlvr.rollout.wrappers.collect_sft_rows`: PROPA's paths to
correct answers and, for questions its search never solved, their reference solutions); a phase with no
rows is skipped. The rows gathered since the last phase are part of every checkpoint, so a resumed run's next
phase trains on the same rows as the uninterrupted run's.

Under ``torchrun`` (DDP) every rank runs the same phase on the same rows with the same seed (rows from
the rollouts are gathered from every rank first, in rank order), and rank 0's weights are then broadcast,
so the replicas stay equal. With FSDP a rank holds a shard: before a phase the shards are gathered into a
whole copy of the policy (made before sharding), every rank runs the phase on it as under DDP, and each
rank then takes its own shard of rank 0's result (:func:`rlvr.distributed.fsdp.scatter_from`). The phase holds
the whole model and its AdamW state on every rank, as under DDP.

Each phase has its own AdamW, fresh, with a constant learning rate, and draws its batches with a seed of
(run seed, RL step): a phase depends only on the weights it starts from and its step, so a resumed run
repeats exactly what the uninterrupted one did (with ``interleave_source: rollouts``, from the rows the checkpoint
holds). Metrics: ``sft/loss`` (the phase's mean loss) and ``sft/steps`` at the steps with a phase.
"""

from __future__ import annotations

import json
from dataclasses import fields
from pathlib import Path
from typing import Any, Callable

from safetensors.torch import load_file, save_file

from rlvr.core.types import Completion, Segment
from rlvr.core.vision import VisionInputs

from rlvr.rollout.wrappers import collect_sft_rows
from rlvr.distributed.world import World
from rlvr.core.seeds import step_seed
from rlvr.sft.supervised import sft, sft_rows

__all__ = ["interleaved_sft", "InterleavedPhases"]


def interleaved_sft(cfg: Any, model, tokenizer, task, engine: Any = None, world: World | None = None,
                    whole: Any = None) -> Callable[[int], dict[str, float]] | None:
    """The phase to run after each RL step's update (a no-op at steps without one), or None when off;
    ``engine``: the training engine, whose strategy supplies the rows with ``interleave_source: rollouts``;
    ``world``: the data-parallel group, whose replicas (DDP) or shards (FSDP) every phase leaves consistent;
    ``whole``: with FSDP, a plain copy of the policy made before sharding, which the phases train."""
    every = cfg.sft.interleave_every
    if not every:
        return None
    world = world or World()
    if world.sharded and whole is None:
        raise ValueError("interleaved SFT with FSDP needs a whole copy of the policy made before sharding")
    trained = whole if world.sharded else model
    phase = (_RolloutPhase(cfg, trained, tokenizer, engine, every, world) if cfg.sft.interleave_source == "rollouts"
             else _reference_phase(cfg, trained, tokenizer, task, every))
    if not world.distributed:
        return phase
    if world.sharded:
        from rlvr.distributed.fsdp import gather_into, scatter_from

        def sharded(step: int) -> dict[str, float]:
            if (step + 1) % every == 0:  # a phase runs: the whole current policy on every rank
                gather_into(whole, model)
            out = phase(step)
            if out.get("sft/steps"):  # every rank ran the same phase: each takes its shard of rank 0's result
                scatter_from(whole, model)
            return out

        sharded.inner = phase
        return sharded

    def replicated(step: int) -> dict[str, float]:
        out = phase(step)
        if out.get("sft/steps"):  # the same phase ran on every rank: rank 0's result, bit for bit, everywhere
            world.sync_params(model)
        return out

    replicated.inner = phase
    return replicated


def _reference_phase(cfg: Any, model, tokenizer, task, every: int) -> Callable[[int], dict[str, float]]:
    split = "sft" if "sft" in task.splits else "train"
    examples = [ex for ex in task.examples(split) if ex.sft_target]
    if not examples:
        raise ValueError(f"sft.interleave_every={every}: the task's {split!r} split has no reference completions "
                         "(Example.sft_target) to train on")
    lr = cfg.sft.interleave_lr or cfg.optim.lr
    rows = sft_rows(tokenizer, examples, cfg.model.chat_template)  # tokenised once, trained on every phase

    def phase(step: int) -> dict[str, float]:
        if (step + 1) % every:
            return {}
        losses = sft(model, tokenizer, examples, cfg.sft.interleave_steps, cfg.sft.batch_size, lr,
                     seed=step_seed(cfg.seed, step, salt=7), chat_template=cfg.model.chat_template,
                     micro_batch_size=cfg.train.micro_batch_size, schedule="constant", rows=rows)
        return {"sft/loss": sum(losses) / len(losses), "sft/steps": float(len(losses))}

    return phase


class _RolloutPhase:
    """The phase of ``interleave_source: rollouts``: every step's rows (every rank's, in rank order) wait in
    ``pending`` for the next phase; they are part of a checkpoint (:class:`InterleavedPhases`)."""

    def __init__(self, cfg: Any, model, tokenizer, engine: Any, every: int, world: World):
        self.cfg, self.model, self.tokenizer, self.engine, self.every, self.world = \
            cfg, model, tokenizer, engine, every, world
        self.lr = cfg.sft.interleave_lr or cfg.optim.lr
        self.pending: list[Completion] = []

    def __call__(self, step: int) -> dict[str, float]:
        cfg = self.cfg
        self.pending.extend(row for rows in self.world.gather(collect_sft_rows(self.engine)) for row in rows)
        if (step + 1) % self.every:
            return {}
        rows, self.pending = self.pending, []
        if not rows:
            return {"sft/rows": 0.0}
        losses = sft(self.model, self.tokenizer, None, cfg.sft.interleave_steps, cfg.sft.batch_size, self.lr,
                     seed=step_seed(cfg.seed, step, salt=7), chat_template=cfg.model.chat_template,
                     micro_batch_size=cfg.train.micro_batch_size, schedule="constant", rows=rows)
        return {"sft/loss": sum(losses) / len(losses), "sft/steps": float(len(losses)), "sft/rows": float(len(rows))}


ROWS_FILE = "interleave_rows"


def save_rows(rows: list[Completion], folder: Path) -> None:
    """``rows`` into ``folder/interleave_rows.json`` (their images in ``.safetensors`` beside it)."""
    records, tensors = [], {}
    for i, r in enumerate(rows):
        rec = {f.name: getattr(r, f.name) for f in fields(r) if f.name not in ("segments", "vision")}
        rec["segments"] = None if r.segments is None else [[s.start, s.end, s.source] for s in r.segments]
        if r.vision is not None:
            rec["vision"] = {"num_images": r.vision.num_images, "names": sorted(r.vision.tensors)}
            tensors.update({f"{i}.{k}": v.detach().cpu().contiguous() for k, v in r.vision.tensors.items()})
        records.append(rec)
    (folder / f"{ROWS_FILE}.json").write_text(json.dumps(records))
    if tensors:
        save_file(tensors, str(folder / f"{ROWS_FILE}.safetensors"))


def load_rows(folder: Path) -> list[Completion]:
    """The rows :func:`save_rows` wrote (none when the file is absent: a checkpoint from before a phase)."""
    path = folder / f"{ROWS_FILE}.json"
    if not path.is_file():
        return []
    tensors = load_file(str(folder / f"{ROWS_FILE}.safetensors")) if (folder / f"{ROWS_FILE}.safetensors").is_file() \
        else {}
    rows = []
    for i, rec in enumerate(json.loads(path.read_text())):
        vision = rec.pop("vision", None)
        segs = rec.pop("segments")
        if vision is not None:
            vision = VisionInputs(tensors={k: tensors[f"{i}.{k}"] for k in vision["names"]},
                                  num_images=vision["num_images"])
        rows.append(Completion(**rec, segments=None if segs is None else [Segment(*s) for s in segs],
                               vision=vision))
    return rows


class InterleavedPhases:
    """The phases of :func:`interleaved_sft` as a learner (:mod:`rlvr.learners.base`): the step runs them after
    the policy's update and the other learners', before the engine takes the new weights. A phase on the task's
    reference completions depends only on the weights it starts from and its step; a phase on the rollouts'
    rows also on the rows gathered since the last phase, which a checkpoint holds (``interleave_rows.json``),
    so a run resumed between two phases trains the next one on every row the uninterrupted run would."""

    def __init__(self, phase: Callable[[int], dict[str, float]]):
        self.phase = phase

    def _rows(self) -> "_RolloutPhase | None":
        inner = getattr(self.phase, "inner", self.phase)
        return inner if isinstance(inner, _RolloutPhase) else None

    def update(self, batch: Any, step: int) -> dict[str, float]:
        return self.phase(step)

    def save(self, folder: Any) -> None:
        if (rp := self._rows()) is not None and rp.pending:
            save_rows(rp.pending, Path(folder))

    def load(self, folder: Any) -> None:
        if (rp := self._rows()) is not None:
            rp.pending = load_rows(Path(folder))

"""The SFT warm-up under FSDP: data-parallel over the ranks, on shards, never a whole model's optimizer per rank.

Replicated, a warm-up holds on every rank the whole model, its gradients and AdamW's two moments (16 bytes a
parameter in float32: 122 GB for a 7B). Here a copy of the policy is sharded (:func:`rlvr.distributed.fsdp.shard`,
placed on the device unit by unit), each rank runs the forwards and backwards of its share of each step's rows
(``rows[rank::N]``), FSDP2 reduce-scatters the gradients, and each rank's optimizer steps its own shard. After the
phase the trained shards are gathered into the policy (still in host memory, whole, as the RL set-up takes it)
and the sharded copy is freed.

Each step equals the one-process step (:func:`rlvr.sft.supervised.sft`) up to float rounding: the loss is the
token mean over the whole step's rows (every rank counts the step's target tokens from the rows themselves, no
collective), times N because FSDP averages the ranks' gradients. Every rank runs the same number of
micro-batches (FSDP's collectives run in each forward): a rank whose share is shorter runs its first row again
with weight 0.
"""

from __future__ import annotations

import copy
import math
from typing import Any, Callable, Sequence

import torch

from rlvr.core.batch import build_batch
from rlvr.core.types import Completion, Example
from rlvr.distributed.fsdp import gather_into
from rlvr.distributed.world import World
from rlvr.models.logprobs import CompletionLogprobs
from rlvr.sft.supervised import sft_rows, train_steps

__all__ = ["sft_sharded", "sharded_step_loss"]


def sharded_step_loss(wrapper, rows: Sequence[Completion], pad: int, world: World, micro_batch_size: int,
                      device: torch.device) -> Callable[[list[int]], float]:
    """``step_loss(picked)`` for :func:`rlvr.sft.supervised.train_steps`: this rank's forwards and backwards of
    its share of the step's rows through the sharded ``wrapper``; returns the whole step's loss (a collective)."""
    n = world.size

    def step_loss(picked: list[int]) -> float:
        n_tok = float(sum(len(rows[i].completion_ids) for i in picked))  # the whole step's, on every rank
        mine = picked[world.rank::n]
        micros = math.ceil(math.ceil(len(picked) / n) / micro_batch_size)
        total = 0.0
        for k in range(micros):
            part, weight = mine[k * micro_batch_size:(k + 1) * micro_batch_size], 1.0
            if not part:  # this rank's share is shorter: the same collectives, nothing learnt
                part, weight = [picked[0]], 0.0
            batch = build_batch([rows[i] for i in part], [0.0] * len(part), pad).to(device)
            logp, _ = wrapper(batch)
            loss = -(logp * batch.completion_mask).sum() / n_tok * weight
            (loss * n).backward()  # FSDP averages the ranks' gradients: n x each rank's part sums them
            total += float(loss.detach())
        return world.sum([total])[0]

    return step_loss


def sft_sharded(model, tokenizer, examples: Sequence[Example], steps: int, batch_size: int, lr: float,
                warmup_steps: int = 0, seed: int = 0, chat_template: bool = False, micro_batch_size: int = 256,
                on_step: Callable[[int, float], None] | None = None, stop: Callable[[], bool] | None = None,
                schedule: str = "warmup_cosine", rows: Sequence[Completion] | None = None, checkpoint: Any = None,
                *, world: World, device: torch.device | str) -> list[float]:
    """:func:`rlvr.sft.supervised.sft` under FSDP (module docstring): ``model`` (a plain module, anywhere) ends
    with the trained weights; returns each step's loss (the whole step's, on every rank). ``stop()`` must give
    the same answer on every rank (ask ``world.any``): the ranks stop at the same step. ``checkpoint``: as in
    :func:`~rlvr.sft.supervised.sft` (the saved weights loaded into ``model`` before the call; the optimizer's
    shards restored and saved through DCP)."""
    if steps == 0:
        return []
    rows = list(rows) if rows is not None else sft_rows(tokenizer, examples, chat_template)
    device = torch.device(device)
    trained = copy.deepcopy(model)
    wrapper = world.wrap(CompletionLogprobs(trained), device)
    step_loss = sharded_step_loss(wrapper, rows, tokenizer.pad_token_id, world, micro_batch_size, device)
    try:
        keeper = checkpoint.keeper(wrapper, sharded=True) if checkpoint is not None else None
        losses = train_steps(trained, len(rows), steps, batch_size, lr, warmup_steps, seed, step_loss, schedule,
                             on_step, stop, keeper)
        gather_into(model, trained)  # (a collective) the policy, whole, with the trained weights
    finally:
        del wrapper, trained
        if device.type == "cuda":
            torch.cuda.empty_cache()
    return losses

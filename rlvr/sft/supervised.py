"""Supervised fine-tuning on a task's reference completions (the warm-up before RL, and ``rlvr sft``).

Each example becomes ``prompt + target + eos``; the loss is the token-mean cross-entropy on the
target and eos tokens only. AdamW with linear warm-up and cosine decay to 10% of the peak rate.
"""

from __future__ import annotations

import math
import random
from typing import Any, Callable, Sequence

import torch

from rlvr.core.batch import build_batch
from rlvr.core.types import Completion, Example
from rlvr.models.logprobs import completion_logprobs
from rlvr.models.prompts import encode_example

__all__ = ["sft", "sft_rows", "warmup_cosine", "train_steps"]


def warmup_cosine(warmup: int, total: int, floor: float = 0.1) -> Callable[[int], float]:
    def f(step: int) -> float:
        if step < warmup:
            return (step + 1) / warmup
        frac = (step - warmup) / max(1, total - warmup)
        return floor + (1 - floor) * 0.5 * (1 + math.cos(math.pi * min(frac, 1.0)))
    return f


def sft_rows(tokenizer, examples: Sequence[Example], chat: bool) -> list[Completion]:
    """Each example as ``prompt + target + eos``, the target and eos the completion trained on."""
    rows = []
    for ex in examples:
        p, vision = encode_example(tokenizer, ex, chat)
        t = tokenizer(ex.sft_target, add_special_tokens=False)["input_ids"] + [tokenizer.eos_token_id]
        rows.append(Completion(ex.id, p, t, None, "stop", ex.sft_target, vision=vision))
    return rows


def train_steps(model, n_rows: int, steps: int, batch_size: int, lr: float, warmup_steps: int, seed: int,
                step_loss: Callable[[list[int]], float], schedule: str = "warmup_cosine",
                on_step: Callable[[int, float], None] | None = None,
                stop: Callable[[], bool] | None = None, keeper: Any = None) -> list[float]:
    """The supervised loop SFT and SSB's distillation share: AdamW over the trainable parameters (the
    ``schedule``: warm-up then cosine, or constant), ``batch_size`` row indices a step drawn epoch by epoch in a
    seeded shuffle; ``step_loss(rows)`` runs the step's forwards and backwards and returns its loss; the gradient
    is clipped at norm 1. ``stop()`` is asked after each step. Returns each step's loss (a resumed loop's
    earlier ones included).

    ``keeper`` (:class:`rlvr.sft.checkpoint.Keeper`): the loop starts from its saved optimizer, scheduler,
    data order and RNG (the caller loads the weights) and saves them after each step where a save is due."""
    rng = random.Random(seed)
    opt = torch.optim.AdamW([p for p in model.parameters() if p.requires_grad], lr=lr, weight_decay=0.0)
    shape = warmup_cosine(warmup_steps, steps) if schedule == "warmup_cosine" else (lambda i: 1.0)
    sched = torch.optim.lr_scheduler.LambdaLR(opt, shape)
    model.train()
    order, pos, losses = [], 0, []
    saved = keeper.restore(opt, sched) if keeper is not None else None
    if saved is not None:
        order, pos, losses = saved["order"], saved["pos"], saved["losses"]
        rng.setstate(saved["rng"])
    for step in range(len(losses), steps):
        picked = []
        while len(picked) < batch_size:
            if pos >= len(order):
                order, pos = list(range(n_rows)), 0
                rng.shuffle(order)
            picked.append(order[pos])
            pos += 1
        opt.zero_grad(set_to_none=True)
        total = step_loss(picked)
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        sched.step()
        losses.append(total)
        if on_step is not None:
            on_step(step, total)
        stopping = stop is not None and stop()
        if keeper is not None:
            keeper.after_step(step + 1, steps, opt, sched,
                              lambda: {"losses": losses, "order": order, "pos": pos, "rng": rng.getstate()},
                              stopping)
        if stopping:
            break
    return losses

def sft(model, tokenizer, examples: Sequence[Example], steps: int, batch_size: int, lr: float,
        warmup_steps: int = 0, seed: int = 0, chat_template: bool = False, micro_batch_size: int = 256,
        on_step: Callable[[int, float], None] | None = None,
        stop: Callable[[], bool] | None = None, schedule: str = "warmup_cosine",
        rows: Sequence[Completion] | None = None, checkpoint: Any = None) -> list[float]:
    """Train ``steps`` steps on ``examples``; returns the loss of each step. ``stop()`` is asked after each
    step; when it is true training ends there (the losses so far are returned). ``schedule``:
    ``warmup_cosine`` (the warm-up's) or ``constant`` (the interleaved phases'). ``rows``: the examples
    already tokenised (:func:`sft_rows`), for callers that train on them again and again. ``checkpoint``
    (:class:`rlvr.sft.checkpoint.WarmupCheckpoint`): resume from it and save into it (the caller loads the saved
    weights into ``model`` first)."""
    if steps == 0:
        return []
    rows = list(rows) if rows is not None else sft_rows(tokenizer, examples, chat_template)
    device = next(model.parameters()).device

    def step_loss(picked: list[int]) -> float:
        batch = build_batch([rows[i] for i in picked], [0.0] * len(picked), tokenizer.pad_token_id).to(device)
        n_tok = float(batch.completion_mask.sum())
        total = 0.0
        for micro in batch.micro_batches(micro_batch_size):
            logp, _ = completion_logprobs(model, micro)
            loss = -(logp * micro.completion_mask).sum() / n_tok
            loss.backward()
            total += float(loss.detach())
        return total

    return train_steps(model, len(rows), steps, batch_size, lr, warmup_steps, seed, step_loss, schedule, on_step,
                       stop, checkpoint.keeper(model) if checkpoint is not None else None)

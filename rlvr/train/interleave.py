"""Interleaved SFT and RL phases (``sft.interleave_every``): supervised steps between RL steps.

After every ``interleave_every``-th RL step's update (and before the rollout engine receives the new
weights) the policy takes ``interleave_steps`` SFT steps on the task's reference completions (its ``sft``
split when it has one, else ``train``), the warm-up's data and loss (:func:`rlvr.train.sft.sft`), at
``interleave_lr`` (``sft.lr`` when unset), the RL phase then continuing from the result. This is the
supervised half of methods that alternate SFT with RLVR (PRISM's stages, PROPA's interleaved SFT, MEML-GRPO's
periodic SFT).

Each phase has its own AdamW, fresh, with a constant learning rate, and draws its batches with a seed of
(run seed, RL step): a phase depends only on the weights it starts from and its step, so a resumed run
repeats exactly what the uninterrupted one did, with no state to checkpoint. Metrics: ``sft/loss`` (the
phase's mean loss) and ``sft/steps`` at the steps with a phase.
"""

from __future__ import annotations

from typing import Any, Callable

from rlvr.train.loop import step_seed
from rlvr.train.sft import sft, sft_rows

__all__ = ["interleaved_sft"]


def interleaved_sft(cfg: Any, model, tokenizer, task) -> Callable[[int], dict[str, float]] | None:
    """The phase to run after each RL step's update (a no-op at steps without one), or None when off."""
    every = cfg.sft.interleave_every
    if not every:
        return None
    split = "sft" if "sft" in task.splits else "train"
    examples = [ex for ex in task.examples(split) if ex.sft_target]
    if not examples:
        raise ValueError(f"sft.interleave_every={every}: the task's {split!r} split has no reference completions "
                         "(Example.sft_target) to train on")
    lr = cfg.sft.interleave_lr or cfg.sft.lr
    rows = sft_rows(tokenizer, examples, cfg.model.chat_template)  # tokenised once, trained on every phase

    def phase(step: int) -> dict[str, float]:
        if (step + 1) % every:
            return {}
        losses = sft(model, tokenizer, examples, cfg.sft.interleave_steps, cfg.sft.batch_size, lr,
                     seed=step_seed(cfg.seed, step, salt=7), chat_template=cfg.model.chat_template,
                     micro_batch_size=cfg.train.micro_batch_size, schedule="constant", rows=rows)
        return {"sft/loss": sum(losses) / len(losses), "sft/steps": float(len(losses))}

    return phase

"""A readable sample of a step's rollouts: prompts, completions, rewards and advantages, whole groups first.

:func:`step_samples` picks the first groups of the trained batch until ``n`` rows are taken (a group's
completions side by side are what one compares), and gives each row as plain JSON: the example's id, prompt
and answer, the completion's text, its reward, its score components, its mean advantage over its tokens, its
length and whether it was cut at the length limit. ``rlvr train`` writes them to ``RUN_DIR/completions.jsonl``
every ``logging.completions_every`` steps, and to the logging backends' tables where they are on.
"""

from __future__ import annotations

from typing import Any

from rlvr.lazy import torch

__all__ = ["step_samples"]


def _plain(v: Any) -> Any:
    if isinstance(v, (str, int, float, bool)) or v is None:
        return v
    if isinstance(v, dict):
        return {str(k): _plain(x) for k, x in v.items()}
    if isinstance(v, (list, tuple)):
        return [_plain(x) for x in v]
    return str(v)


def step_samples(ro: Any, batch: Any, n: int) -> list[dict[str, Any]]:
    """Up to ``n`` rows of the step's rollouts ``ro`` (whole groups first, in order) with ``batch``'s rewards and
    advantages (the trained batch, in the order of ``ro.completions``)."""
    order: dict[int, list[int]] = {}
    for i, comp in enumerate(ro.completions):
        order.setdefault(comp.group, []).append(i)
    picked = [i for rows in order.values() for i in rows][:n]
    rows = torch.tensor(picked, dtype=torch.long)
    mask = batch.completion_mask[rows.to(batch.completion_mask.device)].detach().cpu()
    adv = (batch.advantages[rows.to(batch.advantages.device)].detach().cpu() * mask).sum(-1) / mask.sum(-1).clamp(min=1)
    rewards = batch.rewards[rows.to(batch.rewards.device)].detach().cpu()
    out = []
    for k, i in enumerate(picked):
        comp, sc = ro.completions[i], ro.scores[i]
        ex = ro.requests[comp.group].example
        out.append({"example_id": ex.id, "group": comp.group, "prompt": _plain(ex.prompt),
                    "answer": _plain(ex.answer), "completion": comp.text, "reward": float(rewards[k]),
                    "components": {k: float(v) for k, v in sc.components.items() if isinstance(v, (int, float))},
                    "advantage": float(adv[k]), "length": len(comp.completion_ids),
                    "truncated": comp.finish_reason == "length"})
    return out

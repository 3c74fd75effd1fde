"""Prompts against the model's context, checked when data and model are loaded, before any work.

A prompt of ``P`` tokens generates up to ``rollout.max_new_tokens`` more, so it fits when ``P <= limit``
with ``limit = min(data.max_prompt_tokens, max_positions - max_new_tokens)``. A RoPE model would otherwise
run silently past the positions it was trained on, and a learned-position model die with a bare
``IndexError`` deep inside its embedding. ``data.prompt_overflow`` says what happens to longer prompts:

- ``error`` (default): stop with the counts, the longest prompt and the settings that would fit it;
- ``drop``: leave them out of every split, counted in the report;
- ``truncate_left``: keep the last ``limit`` tokens of a text prompt (the question usually comes last);
  chat-message prompts cannot be cut without breaking their template, so they are dropped and counted.

Prompts are measured exactly as the engine renders them (:func:`rlvr.models.prompts.encode_prompt`).
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import Any

from rlvr.core.types import Example
from rlvr.models.prompts import encode_prompt, example_length

__all__ = ["PromptLimitError", "PromptReport", "max_positions", "fit_prompts"]

_POSITION_KEYS = ("max_position_embeddings", "n_positions", "max_sequence_length", "seq_length", "n_ctx")


class PromptLimitError(ValueError):
    """Prompts that do not fit the model's context (or the configured limit)."""


@dataclass
class PromptReport:
    limit: int | None
    max_positions: int | None
    splits: dict[str, dict[str, int]] = field(default_factory=dict)  # split -> {prompts, longest, over, dropped, truncated}

    def summary(self) -> str:
        parts = [f"{name}: {s['prompts']} prompts, longest {s['longest']} tokens"
                 + (f", {s['dropped']} dropped" if s["dropped"] else "")
                 + (f", {s['truncated']} truncated" if s["truncated"] else "") for name, s in self.splits.items()]
        return f"prompt limit {self.limit} tokens ({'; '.join(parts)})"


def max_positions(model: Any) -> int | None:
    """The longest sequence the model's config admits (None when the config does not say)."""
    cfg = getattr(model, "config", None)
    cfg = getattr(cfg, "text_config", None) or cfg
    for key in _POSITION_KEYS:
        value = getattr(cfg, key, None)
        if isinstance(value, int) and value > 0:
            return value
    return None


def _truncate(tokenizer, ex: Example, limit: int, chat: bool) -> Example | None:
    """``ex`` with its text prompt cut to its last ``limit`` tokens; None when it cannot be cut."""
    if isinstance(ex.prompt, list) or chat or ex.images:
        return None
    ids = tokenizer(ex.prompt, add_special_tokens=False)["input_ids"]
    special = len(encode_prompt(tokenizer, ex.prompt, False)) - len(ids)  # BOS and friends
    keep = limit - special
    while keep > 0:
        text = tokenizer.decode(ids[-keep:], skip_special_tokens=True)
        if text and len(encode_prompt(tokenizer, text, False)) <= limit:  # re-encoding may merge differently
            return replace(ex, prompt=text)
        keep -= 1
    return None


def fit_prompts(task, tokenizer, model, max_new_tokens: int, max_prompt_tokens: int | None = None,
                overflow: str = "error", chat_template: bool = False,
                completion_name: str = "rollout.max_new_tokens") -> PromptReport:
    """Check (and per ``overflow``, drop or truncate in place) every split's prompts; see the module doc.
    ``completion_name`` names where the completion bound ``max_new_tokens`` comes from, for messages."""
    positions = max_positions(model)
    if positions is not None and positions <= max_new_tokens:
        raise PromptLimitError(f"{completion_name}={max_new_tokens} leaves no room for a prompt: the model "
                               f"takes at most {positions} positions")
    room = None if positions is None else positions - max_new_tokens
    bounds = [x for x in (room, max_prompt_tokens) if x is not None]
    limit = min(bounds) if bounds else None
    report = PromptReport(limit, positions)
    for split in task.splits:
        examples = task.examples(split)
        lengths = [example_length(tokenizer, ex, chat_template) for ex in examples]
        over = [i for i, n in enumerate(lengths) if limit is not None and n > limit]
        stats = {"prompts": len(examples), "longest": max(lengths, default=0), "over": len(over),
                 "dropped": 0, "truncated": 0}
        report.splits[split] = stats
        if not over:
            continue
        if overflow == "error":
            worst = max(over, key=lambda i: lengths[i])
            why = (f"data.max_prompt_tokens={max_prompt_tokens}" if max_prompt_tokens is not None and
                   (room is None or max_prompt_tokens < room) else
                   f"the model's {positions} positions minus {completion_name}={max_new_tokens}")
            raise PromptLimitError(
                f"{len(over)} of {len(examples)} prompts in split {split!r} are longer than {limit} tokens ({why}); "
                f"the longest, {examples[worst].id!r}, has {lengths[worst]}. Shorten them, lower "
                f"{completion_name.split(' ')[0]}, or set data.prompt_overflow to drop or truncate_left")
        kept, bad = [], set(over)
        for i, ex in enumerate(examples):
            if i not in bad:
                kept.append(ex)
                continue
            cut = _truncate(tokenizer, ex, limit, chat_template) if overflow == "truncate_left" else None
            if cut is None:
                stats["dropped"] += 1
            else:
                kept.append(cut)
                stats["truncated"] += 1
        if not kept:
            raise PromptLimitError(f"every prompt of split {split!r} is longer than {limit} tokens")
        examples[:] = kept  # the task's own list: samplers and evaluation see the fitted split
    return report

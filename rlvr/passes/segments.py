"""Where a completion's sub-sentences end (the extra ``segment_end``; no model pass): the segments SSPO's
ratios and GRPO-VPS's belief probe are computed over."""

from __future__ import annotations

import torch

from rlvr.algorithms.extra_producers import ExtraContext, produces
from rlvr.core.batch import RolloutBatch

__all__ = ["SEGMENT_DELIMITERS", "segment_ends"]

SEGMENT_DELIMITERS = ",.;:!?\uff0c\u3002\uff1b\uff1a\uff01\uff1f"  # ASCII and full-width sub-sentence ends


def segment_ends(batch: RolloutBatch, tokenizer) -> torch.Tensor:
    """``[N, T]`` 1.0 at completion tokens whose text ends a sub-sentence: it ends (trailing spaces aside) in
    one of :data:`SEGMENT_DELIMITERS` or holds a newline. Each distinct token id is decoded once."""
    ids = batch.input_ids[:, batch.prompt_len: batch.prompt_len + batch.completion_mask.shape[1]].cpu().contiguous()
    uniq = torch.unique(ids)
    flags = []
    for u in uniq.tolist():
        text = tokenizer.decode([u])
        flags.append("\n" in text or text.rstrip(" \t").endswith(tuple(SEGMENT_DELIMITERS)))
    ends = torch.tensor(flags, dtype=torch.float32)[torch.searchsorted(uniq, ids)]
    return ends * (batch.completion_mask.cpu() > 0)


@produces("segment_end")
def _segment_end(ctx: ExtraContext, keys: frozenset[str]) -> dict[str, torch.Tensor]:
    """Sub-sentence ends from the decoded completion tokens (no model pass)."""
    return {"segment_end": segment_ends(ctx.batch, ctx.tokenizer)}

"""A completion as plain JSON (replay buffers kept in checkpoints) and back, everything the batch reads kept:
token ids, behaviour log-probs, finish reason, text, loss mask, segments and policy version. Images are not
stored: a replayed row takes its prompt's images from a fresh completion of the same prompt."""

from __future__ import annotations

from typing import Any

from rlvr.core.types import Completion, Segment

__all__ = ["completion_to_json", "completion_from_json"]


def completion_to_json(c: Completion) -> dict[str, Any]:
    return {"prompt_ids": list(c.prompt_ids), "completion_ids": list(c.completion_ids),
            "logprobs": None if c.logprobs is None else [float(x) for x in c.logprobs],
            "finish_reason": c.finish_reason, "text": c.text,
            "loss_mask": None if c.loss_mask is None else [float(x) for x in c.loss_mask],
            "segments": None if c.segments is None else [[s.start, s.end, s.source] for s in c.segments],
            "policy_version": c.policy_version}


def completion_from_json(example_id: str, d: dict[str, Any], vision: Any = None) -> Completion:
    """The completion of :func:`completion_to_json` (keys it lacks, as in older checkpoints, read as unset)."""
    return Completion(example_id, list(d["prompt_ids"]), list(d["completion_ids"]),
                      None if d.get("logprobs") is None else list(d["logprobs"]), d["finish_reason"], d["text"],
                      loss_mask=None if d.get("loss_mask") is None else list(d["loss_mask"]),
                      segments=None if d.get("segments") is None else [Segment(*s) for s in d["segments"]],
                      policy_version=d.get("policy_version"), vision=vision)

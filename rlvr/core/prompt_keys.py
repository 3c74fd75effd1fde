"""``prompt_key``: a prompt's example id as a 63-bit integer, for per-prompt state read from tensors.

Components keep per-prompt state keyed by ``Example.id`` (stable across shuffles and resumes), but tensors
cannot hold strings: the extra ``prompt_key`` ([N] int64, produced beside the tb objective) carries each row's key, and a
sampler that reads the same state hashes its examples' ids with the same function. The key is the first 8
bytes of BLAKE2b of the UTF-8 id, top bit cleared (so it fits int64): process-independent (unlike
``hash``), with a collision among a million prompts about 5e-8 likely.
"""

from __future__ import annotations

import hashlib
from typing import Iterable

__all__ = ["prompt_key", "prompt_keys"]


def prompt_key(example_id: str) -> int:
    """The 63-bit key of one example id."""
    return int.from_bytes(hashlib.blake2b(example_id.encode("utf-8"), digest_size=8).digest(), "little") >> 1


def prompt_keys(example_ids: Iterable[str]) -> list[int]:
    return [prompt_key(i) for i in example_ids]

"""How many CPU threads torch uses (``train.threads``).

``None`` (auto) keeps torch's default, one thread per core, unless ``RLVR_THREADS`` is set. An explicit
count is applied with ``torch.set_num_threads`` before the model is built.
"""

from __future__ import annotations

import os

import torch

__all__ = ["apply_threads", "auto_threads"]


def auto_threads() -> int:
    env = os.environ.get("RLVR_THREADS")
    if env:
        return max(1, int(env))
    return torch.get_num_threads()


def apply_threads(threads: int | None) -> int:
    """Set torch's intra-op thread count (``None``: :func:`auto_threads`); returns the count in force."""
    n = threads if threads is not None else auto_threads()
    if n != torch.get_num_threads():
        torch.set_num_threads(n)
    return n

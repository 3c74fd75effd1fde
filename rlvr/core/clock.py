"""``train.checkpoint_minutes``: when a save is due by time, the same for every rank.

One :class:`SaveClock` serves the RL loop (:mod:`rlvr.train.loop`) and the warm-up's checkpoint
(:mod:`rlvr.sft.checkpoint`): a save is due when ``minutes`` have passed since the last one (or the start), and
in a distributed run rank 0's clock decides for every rank (one small broadcast per question; none when
``minutes`` is None).
"""

from __future__ import annotations

import time
from typing import Any, Callable

__all__ = ["SaveClock"]


class SaveClock:
    """Due every ``minutes`` (None: never by time); ``world``: the group whose rank 0 decides (its
    ``broadcast``)."""

    now = staticmethod(time.monotonic)  # (tests replace it)

    def __init__(self, minutes: float | None, world: Any):
        self.minutes, self.world = minutes, world
        self.last = self.now()

    def due(self) -> bool:
        """Whether a save is due by time (a collective in a distributed run: every rank asks together)."""
        if self.minutes is None:
            return False
        return bool(self.world.broadcast(self.now() - self.last >= 60 * self.minutes))

    def reset(self) -> None:
        """A save just happened."""
        self.last = self.now()

    def wrap(self, save: Callable[[int], None]) -> Callable[[int], None]:
        """``save`` that resets the clock after it runs."""
        def saved(step: int) -> None:
            save(step)
            self.reset()
        return saved

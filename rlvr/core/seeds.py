"""Seeds derived from the run's seed, so a resumed run draws what an uninterrupted one does."""

from __future__ import annotations

__all__ = ["step_seed"]


def step_seed(seed: int, step: int, salt: int = 0) -> int:
    """A per-step seed that depends only on (seed, step, salt): each use in a step takes its own ``salt``
    (rollouts 10 r for generation round r, the update's shuffling 1, the critic's bootstrap masks 2,
    preference pairs 3)."""
    return (seed * 1_000_003 + step * 7_919 + salt * 104_729) % (2**31 - 1)

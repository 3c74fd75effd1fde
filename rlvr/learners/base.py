"""What trains after the policy's update in a step, each on its own schedule: models beside the policy (the
critic, PRISM's discriminator) and the interleaved SFT phases of the policy itself.

The step treats them alike: after the policy's update it calls each learner's :meth:`Learner.update` in the
order the run built them (before the engine takes the new weights) and reports their metrics; checkpoints
call :meth:`Learner.save` and a resumed run :meth:`Learner.load`. What a learner offers the components (the
critic's values, the discriminator's scores) reaches them as extra tensors, through producers registered
beside it (:mod:`rlvr.algorithms.extra_producers`), which find it among the run's learners by its type.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Protocol, runtime_checkable

__all__ = ["Learner"]


@runtime_checkable
class Learner(Protocol):
    def update(self, batch: Any, step: int) -> dict[str, float]:
        """Train on the step's batch (a RolloutBatch on the device, its advantages set); the step's metrics."""
        ...

    def save(self, folder: str | Path) -> None:
        """Write what a resumed run needs into a checkpoint folder (nothing, for a learner without state)."""
        ...

    def load(self, folder: str | Path) -> None:
        """Restore what :meth:`save` wrote."""
        ...

"""The KL coefficient across steps: a registered schedule plus the little state it needs.

Step 0 uses the configured ``algorithm.kl.coef``; each later step asks the schedule with the previous step's
measurements (``kl``, ``accuracy``) and the current coefficient (``coef``, the adaptive controller's state).
The state is saved in checkpoints so a resumed run continues the same sequence of coefficients.
"""

from __future__ import annotations

from typing import Any

from rlvr.algorithms.kl_schedules import KL_SCHEDULES

__all__ = ["KLController"]


class KLController:
    def __init__(self, kl_cfg, total_steps: int):
        self.cfg, self.total = kl_cfg, total_steps
        self.coef = float(kl_cfg.coef)
        self.stats: dict[str, float] = {}

    def coef_at(self, step: int) -> float:
        if self.stats:
            entry = KL_SCHEDULES.get(self.cfg.schedule.name)
            self.coef = float(entry.fn(step, self.total, self.cfg.coef, {**self.stats, "coef": self.coef},
                                       self.cfg.schedule.params))
        return self.coef

    def observe(self, metrics: dict[str, float]) -> None:
        self.stats = {k: float(metrics[k]) for k in ("kl", "accuracy") if k in metrics}

    def state_dict(self) -> dict[str, Any]:
        return {"coef": self.coef, "stats": self.stats}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        self.coef, self.stats = float(state["coef"]), dict(state["stats"])

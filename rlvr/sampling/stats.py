"""Per-prompt statistics kept across steps, keyed by the example's stable id."""

from __future__ import annotations

from typing import Any, Sequence

__all__ = ["PromptStats"]


class PromptStats:
    """Rollout count, correct count, an exponentially decayed pass rate and the last step seen."""

    def __init__(self, decay: float = 0.5):
        self.decay = decay
        self._rows: dict[str, list[float]] = {}  # id -> [rollouts, correct, ema_pass_rate, last_step]

    def update(self, example_ids: Sequence[str], correct: Sequence[float], step: int) -> None:
        per: dict[str, list[float]] = {}
        for ex_id, c in zip(example_ids, correct):
            per.setdefault(ex_id, []).append(float(c))
        for ex_id, cs in per.items():
            rate = sum(cs) / len(cs)
            row = self._rows.get(ex_id)
            if row is None:
                self._rows[ex_id] = [len(cs), sum(cs), rate, step]
            else:
                row[0] += len(cs)
                row[1] += sum(cs)
                row[2] = self.decay * row[2] + (1 - self.decay) * rate
                row[3] = step

    def pass_rate(self, example_id: str) -> float | None:
        row = self._rows.get(example_id)
        return None if row is None else row[2]

    def rollouts(self, example_id: str) -> int:
        row = self._rows.get(example_id)
        return 0 if row is None else int(row[0])

    def __len__(self) -> int:
        return len(self._rows)

    def state_dict(self) -> dict[str, Any]:
        return {"decay": self.decay, "rows": self._rows}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        self.decay, self._rows = state["decay"], {k: list(v) for k, v in state["rows"].items()}

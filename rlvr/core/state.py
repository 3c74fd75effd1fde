"""``DictState``: the state object of a stateful component whose state is a few numbers or lists.

A component registered with ``state=factory`` gets ``factory(params)`` once per run; the object must have
``state_dict() -> JSON-able dict`` and ``load_state_dict(dict)`` (rlvr.train.algo_state checkpoints it).
It lives in the lowest layer so that algorithm components can build their state without importing the
training loop.
"""

from __future__ import annotations

from typing import Any

__all__ = ["DictState"]


class DictState(dict):
    """A plain JSON-able dict as a component state (for components whose state is a few numbers/lists)."""

    def state_dict(self) -> dict[str, Any]:
        return dict(self)

    def load_state_dict(self, state: dict[str, Any]) -> None:
        self.clear()
        self.update(state)

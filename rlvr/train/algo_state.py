"""The explicit state of stateful algorithm components, saved in and restored from checkpoints.

A component registered with ``state=factory`` (a history anchor, a learned probe, dual variables, a
schedule's progress) gets ``factory(params)`` once per run; the object is passed to each call and must have
``state_dict() -> JSON-able dict`` and ``load_state_dict(dict)``; a factory may return None when the
component's params need no state (``tb`` with ``log_z: optimum``), and the component then gets None. States
are keyed by the component's config path (``algorithm.advantage_transforms.1``), so two instances of one
method keep separate state.
``DictState`` (rlvr.core.state) is the plain-dict state most components use.
"""

from __future__ import annotations

from typing import Any

from rlvr.config.run import RunConfig, configured_components
from rlvr.core.state import DictState  # re-exported: components build their state with it

__all__ = ["AlgorithmState", "DictState"]


class AlgorithmState:
    def __init__(self, cfg: RunConfig):
        self.states: dict[str, Any] = {}
        for path, registry, comp in configured_components(cfg):
            entry = registry.get(comp.name)
            st = entry.state(comp.params) if entry.state is not None else None
            if st is not None:  # a factory returns None when these params keep no state
                self.states[path] = st

    def get(self, path: str) -> Any:
        return self.states.get(path)

    def state_dict(self) -> dict[str, Any]:
        return {path: st.state_dict() for path, st in self.states.items()}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        if set(state) != set(self.states):
            raise ValueError(f"checkpoint holds algorithm state for {sorted(state)}, the run's config has "
                             f"stateful components {sorted(self.states)}: the algorithm changed since the checkpoint")
        for path, st in state.items():
            self.states[path].load_state_dict(st)

"""``rollout.native``: settings of the ``native`` rollout engine (:mod:`rlvr.engines.native`).

Kept apart from the engine so the config can be read, checked and documented without importing torch.
"""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, ConfigDict, Field

__all__ = ["NativeConfig", "native_problems"]


class NativeConfig(BaseModel):
    """rlvr's own decode loop (used when ``rollout.engine=native``, and by Ray rollout workers with
    ``rollout.ray.engine=native``)."""

    model_config = ConfigDict(extra="forbid", frozen=True)
    compile: bool = Field(False, description="run the decode step through torch.compile (compiled on first use, "
                          "recompiled at most a few times as batch shapes change; pays on short decodes; needs a C++ "
                          "compiler on CPU; the same distribution, not bit for bit the hf engine's draws)")


def native_problems(rollout: Any) -> list[str]:
    """What is wrong with ``rollout.native`` given the rest of the rollout section (``RunConfig``'s check)."""
    engines = (rollout.engine, rollout.ray.engine if rollout.engine == "ray" else None)  # Ray workers run one too
    if rollout.native.compile and "native" not in engines:
        return [f"rollout.native.compile applies to the native engine, not {rollout.engine!r}"]
    return []

"""``rollout.native``: settings of the ``native`` rollout engine (:mod:`rlvr.rollout.native`).

Kept apart from the engine so the config can be read, checked and documented without importing torch.
"""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, Field

__all__ = ["NativeConfig"]


class NativeConfig(BaseModel):
    """rlvr's own decode loop (used when ``rollout.engine=native``, and by Ray rollout workers with
    ``rollout.ray.engine=native``)."""

    model_config = ConfigDict(extra="forbid", frozen=True)
    compile: bool = Field(False, description="run the decode step through torch.compile (compiled on first use, "
                          "recompiled at most a few times as batch shapes change; pays on short decodes; needs a C++ "
                          "compiler on CPU; the same distribution, not bit for bit the hf engine's draws)")

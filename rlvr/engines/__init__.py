"""Rollout engines: how tokens are generated, behind one protocol (:class:`RolloutEngine`).

``hf`` (transformers ``generate``, the CPU-friendly default), ``native`` (rlvr's own decode loop for Llama /
Qwen2 / Mistral) and ``vllm`` (vLLM's offline engine in the trainer's process); ``ray`` (rollout workers as
Ray actors) is in :mod:`rlvr.distributed.ray_engine`. Each engine's module loads when its name is first looked
up in ``ENGINES`` (:mod:`rlvr.registry_index`).
"""

from rlvr.engines.base import ENGINES, RolloutEngine, seeded_sampling
from rlvr.lazy import lazy_exports

__all__ = ["ENGINES", "HFEngine", "NativeEngine", "RolloutEngine", "seeded_sampling"]

__getattr__ = lazy_exports(__name__, {"HFEngine": "hf", "NativeEngine": "native"})

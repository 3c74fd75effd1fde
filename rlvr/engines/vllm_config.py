"""``rollout.vllm``: settings of the ``vllm`` rollout engine (:mod:`rlvr.engines.vllm`).

Kept apart from the engine so the config can be read, checked and documented without importing vLLM.
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

__all__ = ["VLLMConfig"]


class VLLMConfig(BaseModel):
    """vLLM's offline engine, colocated with the trainer in its process (used when ``rollout.engine=vllm``)."""

    model_config = ConfigDict(extra="forbid", frozen=True)
    gpu_memory_utilization: float = Field(0.3, gt=0.0, le=1.0, description="share of the GPU's memory vLLM may "
                                          "take for weights and KV cache (the trainer shares the device)")
    tensor_parallel_size: int = Field(1, ge=1, description="GPUs one engine shards the model over (one "
                                      "process; under torchrun each rank runs its own engine, and this must be 1)")
    enable_prefix_caching: bool = Field(True, description="reuse the KV cache of shared prompt prefixes (a "
                                        "group's n samples, multi-turn episodes); reset after every weight sync")
    sleep_mode: bool = Field(False, description="free the engine's weights and KV cache during the update and "
                             "restore them at the next weight sync (vLLM's sleep mode; GPU only)")
    kv_cache_gib: float = Field(1.0, gt=0.0, description="KV cache size in GiB on CPU (VLLM_CPU_KVCACHE_SPACE; on "
                                "GPU gpu_memory_utilization decides)")
    max_model_len: int | None = Field(None, gt=0, description="longest sequence the engine serves (default: the "
                                      "model's max_position_embeddings)")
    dtype: Literal["auto", "float32", "bfloat16", "float16"] = Field(
        "auto", description="engine precision (auto: the trainer's parameter dtype, so log-probs match)")
    enforce_eager: bool | None = Field(None, description="skip CUDA graphs and torch.compile (default: eager on "
                                       "CPU, where compiling costs minutes, vLLM's default on GPU)")
    sync_bucket_mb: int = Field(512, gt=0, description="FSDP: the weights reach the engine in buckets of about "
                                "this many MB of whole tensors (one all-gather per bucket, in the engine's dtype)")
    engine_args: dict[str, Any] = Field(default_factory=dict, description="further keyword arguments for "
                                        "vllm.LLM (they override the settings above)")

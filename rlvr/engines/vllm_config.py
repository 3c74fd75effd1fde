"""``rollout.vllm``: settings of the ``vllm`` rollout engine (:mod:`rlvr.engines.vllm`).

Kept apart from the engine so the config can be read, checked and documented without importing vLLM:
:func:`vllm_problems` finds, from the config alone, a model that vLLM's CPU attention would refuse only once
the engine starts (after the SFT warm-up).
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

__all__ = ["VLLMConfig", "VLLM_CPU_HEAD_SIZES", "vllm_problems"]

# The head sizes vLLM's CPU attention kernels serve: CPUAttentionBackend.get_supported_head_sizes() in
# vllm/v1/attention/backends/cpu_attn.py of vLLM 0.32 (vllm-cpu, which scripts/setup_vllm.sh installs). vLLM
# itself raises on any other size when the engine is built. GPU backends serve other sets; they are not checked.
VLLM_CPU_HEAD_SIZES = (32, 64, 80, 96, 112, 128, 160, 192, 224, 256, 512)


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


def vllm_problems(cfg: Any, device: Any = None, model_cfg: Any = None,
                  model_config: dict[str, Any] | None = None) -> list[str]:
    """What vLLM would refuse about ``cfg`` (a ``RunConfig``) only once its engine starts: a model whose
    attention head size its CPU kernels do not serve, where vLLM runs on a CPU. That is ``rollout.engine=vllm``
    with the trainer on a CPU (``device``, the run's device where known; else ``cfg.device`` cpu, or auto on a
    machine without CUDA), or Ray rollout workers running vLLM with no GPU (``rollout.ray.num_gpus=0``).
    ``model_cfg`` (a ``ModelConfig``: a checkpoint's, an evaluated directory's) or ``model_config`` (a model
    object's ``config.to_dict()``) stands for ``cfg.model`` where the run loads another model."""
    r = cfg.rollout
    if r.engine == "vllm":
        where, gpu_fix = "rollout.engine=vllm on a CPU", "run on a GPU (device=cuda)"
        if not _trainer_on_cpu(cfg.device, device):
            return []
    elif r.engine == "ray" and r.ray.engine == "vllm" and not r.ray.num_gpus:
        where, gpu_fix = "rollout.ray.engine=vllm on CPU workers", "give the workers GPUs (rollout.ray.num_gpus)"
    else:
        return []
    from rlvr.models.shape import config_head_size, head_size

    model_cfg = model_cfg or cfg.model
    size = head_size(model_cfg) if model_config is None else config_head_size(model_config)
    if size is None or size in VLLM_CPU_HEAD_SIZES:
        return []
    supported = ", ".join(map(str, VLLM_CPU_HEAD_SIZES))
    source, fix = (("the given model's config", "use a model whose head size is one of those") if model_config
                   else (_head_source(model_cfg), _head_fix(model_cfg)))
    return [f"{where}: vLLM's CPU attention serves head sizes {supported}, and the model's is {size} "
            f"({source}); {fix}, {gpu_fix}, or use rollout.engine=hf"]


def _trainer_on_cpu(name: str, device: Any) -> bool:
    """Whether the trainer (and so a colocated vLLM) runs on a CPU."""
    if device is not None:
        return getattr(device, "type", str(device)) == "cpu"
    if name != "auto":
        return name == "cpu"
    import torch

    return not torch.cuda.is_available()


def _head_source(model: Any) -> str:
    if model.path is None:
        t = model.tiny
        return f"model.tiny.hidden_size={t.hidden_size} / model.tiny.num_heads={t.num_heads}"
    return f"from {model.path}/config.json"


def _head_fix(model: Any) -> str:
    """How to reach a supported head size: the tiny model's width for its head count, or another model."""
    if model.path is not None:
        return "use a model whose head size is one of those"
    t = model.tiny
    sizes = [s for s in VLLM_CPU_HEAD_SIZES if t.hidden_size % s == 0 and (t.hidden_size // s) % t.num_kv_heads == 0]
    heads = f" or model.tiny.num_heads={t.hidden_size // max(sizes)}" if sizes else ""
    return (f"set model.tiny.hidden_size={VLLM_CPU_HEAD_SIZES[0] * t.num_heads} (head size "
            f"{VLLM_CPU_HEAD_SIZES[0]}){heads}")

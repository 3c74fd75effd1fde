"""``rlvr plan``: the memory a run takes on each device, by part, before anything is launched.

For a config and a world size, the plan counts the policy's parameters exactly (the model built on the
``meta`` device from its ``config.json``: no weights are read) and derives, per device:

    weights      P b_w (FSDP: P b_w / N, plus the whole model while generating when the engine runs the
                 trainer's model: hf, native; vLLM holds its own and receives shards in buckets)
    gradients    P_t b_w (FSDP: / N)                       P_t: trainable parameters (LoRA: the adapters)
    optimizer    2 P_t b_w for AdamW's moments (FSDP: / N)
    reference    P b_w when a component reads the reference (FSDP: / N, sharded like the policy; its passes run
                 after the policy's, gathering its own embeddings, head and one layer at a time)
    critic       P b_w + 3 P_t b_w when algorithm.critic is set (a whole replica with its own AdamW)
    activations  the update's micro-batch (a minibatch's rows split over the ranks, at most
                 train.micro_batch_size, and train.micro_batch_tokens): T tokens (rows x (prompt + completion), the prompt once per group
                 with train.shared_prefix), per layer c_h h + c_i I values of b_c bytes each without activation
                 checkpointing; with it, h values per layer plus one layer's
    log-probs    the LM head on the micro-batch's K completion tokens: 3 K V float32 (logits, log-softmax,
                 softmax) while K <= model.logprob_chunk_tokens, else one chunk's worth (recomputed in backward)
    engine       the engine's own rule (registered beside it, rlvr.engines.base.ENGINE_MEMORY): hf / native,
                 the KV cache of rollout.batch_size rows, 2 L kv (prompt + completion) b_w bytes each, and their
                 last-position logits; vllm on a GPU, rollout.vllm.gpu_memory_utilization of the card (freed
                 during the update with sleep mode), on the CPU its weights and kv_cache_gib; ray, nothing
    runtime      what a process holds before any tensor: the CUDA context on a GPU, the interpreter and the
                 libraries' code on the CPU

b_w is model.dtype's bytes (auto: bfloat16 on a GPU, float32 on the CPU), b_c the compute dtype's (FSDP mixed
precision or autocast: 2). In the update, what the forward keeps for the backward (activations, logits) and the
gradients are not held at once (set to None before each minibatch, they are allocated as the backward frees
the activations): the update takes what is held plus the larger of the two. The peak is the larger of the
update, the no-grad passes (old and reference log-probs; under FSDP on the shards, with the embeddings, the head
and one decoder layer gathered in the compute dtype) and generation. The activation constants were fitted on CPU runs (``benchmarks/plan_memory.py``, figures in
``benchmarks/README.md``); a GPU's allocator and kernels (FlashAttention) differ, so on a GPU read the
activations as an estimate and leave a margin.
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

__all__ = ["Part", "Plan", "plan_memory", "longest_prompt", "describe"]

GIB = 2**30
BYTES = {"float32": 4, "bfloat16": 2, "float16": 2}
C_H, C_I = 18.0, 4.0  # activation values saved per token and layer: c_h h + c_i I (fitted on CPU, see above)
CPU_RUNTIME = 0.55 * GIB  # the interpreter, torch, transformers and rlvr's modules, before any tensor (measured)
CUDA_RUNTIME = 0.75 * GIB  # a CUDA context and the kernels' workspaces


PHASES = ("generation", "passes", "update")  # in a step's order: rollouts, the no-grad passes, the update


@dataclass(frozen=True)
class Part:
    name: str
    update: float  # bytes during the update
    generation: float  # bytes while generating
    note: str = ""
    when: str = "held"  # in the update: "held" throughout, or only in the "forward" (activations, logits, freed
    #                     as the backward goes) or only from the "backward" on (gradients, allocated as they go)
    passes: float | None = None  # bytes during the no-grad passes (old / reference log-probs); None: what is
    #                              held in the update

    def during(self, phase: str) -> float:
        if phase == "passes":
            return self.passes if self.passes is not None else (self.update if self.when == "held" else 0.0)
        return getattr(self, phase)


@dataclass
class Plan:
    device: str
    world_size: int
    parts: list[Part] = field(default_factory=list)
    tokens: dict[str, int] = field(default_factory=dict)  # the micro-batch's tokens, for the report

    def total(self, phase: str) -> float:
        """Bytes at the phase's peak: for the update, what is held plus the larger of what the forward keeps for
        the backward and the gradients (the backward frees the one as it allocates the other)."""
        if phase != "update":
            return sum(p.during(phase) for p in self.parts)
        by = {w: sum(p.update for p in self.parts if p.when == w) for w in ("held", "forward", "backward")}
        return by["held"] + max(by["forward"], by["backward"])

    @property
    def peak(self) -> float:
        return max(self.total(phase) for phase in PHASES)

    def fits(self, card_gib: float) -> bool:
        return self.peak <= card_gib * GIB

    def table(self) -> list[tuple[str, ...]]:
        rows = [(p.name, *(f"{p.during(ph) / GIB:.2f}" for ph in PHASES), p.note) for p in self.parts]
        rows.append(("total", *(f"{self.total(ph) / GIB:.2f}" for ph in PHASES),
                     f"peak {self.peak / GIB:.2f} GiB per device"))
        return rows


def longest_prompt(cfg: Any, limit: int = 5000) -> int | None:
    """The longest of the first ``limit`` training prompts in tokens, as the engine renders them, capped at
    ``data.max_prompt_tokens``; None when the task or the tokenizer cannot be read (the caller falls back)."""
    from rlvr.models.prompts import example_length
    from rlvr.run.setup import build_task

    try:
        if cfg.model.path is not None:
            from rlvr.models.loading import load_tokenizer

            tok = load_tokenizer(Path(cfg.model.path).expanduser())
        else:
            from rlvr.models.tiny import char_tokenizer, vlm_tokenizer

            tok = vlm_tokenizer() if cfg.model.tiny.arch == "qwen2_vl" else char_tokenizer()
            if cfg.model.tiny.tokens:
                tok.add_tokens(list(dict.fromkeys(cfg.model.tiny.tokens)))
        task = build_task(cfg)
        split = "train" if "train" in task.splits else task.splits[0]
        examples = task.examples(split)[:limit]
        longest = max(example_length(tok, ex, cfg.model.chat_template) for ex in examples)
    except Exception:  # noqa: BLE001 - a plan must not fail on what only the run needs
        return None
    return min(longest, cfg.data.max_prompt_tokens) if cfg.data.max_prompt_tokens else longest


def _layer_params(s) -> int:
    """One decoder layer's parameters from the shape: attention (q, k, v, o), the gated MLP and two norms."""
    q, kv = s.heads * s.head_dim, s.kv_heads * s.head_dim
    return s.hidden * (2 * q + 2 * kv) + 3 * s.hidden * s.intermediate + 2 * s.hidden


def plan_memory(cfg: Any, world_size: int = 1, device: str | None = None, prompt_tokens: int | None = None,
                shape: Shape | None = None, card_gib: float | None = None) -> Plan:
    """The per-device memory of ``cfg``'s run on ``world_size`` ranks (:class:`Plan`; module docstring).
    ``device``: "cpu" or "cuda" (default: the config's, auto meaning CUDA when present); ``prompt_tokens``:
    the longest prompt (default: ``data.max_prompt_tokens``, else 128; ``rlvr plan`` measures the task's);
    ``card_gib``: the GPU's memory, for vLLM's share."""
    from rlvr.config.run import length_limits, needs_reference
    from rlvr.engines.base import MemoryQuery, engine_memory
    from rlvr.models.loading import resolve_dtype
    from rlvr.models.shape import model_shape

    if device is None:
        import torch

        device = "cuda" if cfg.device == "cuda" or (cfg.device == "auto" and torch.cuda.is_available()) else "cpu"
    s = shape or model_shape(cfg.model)
    n = max(world_size, 1)
    d = cfg.train.distributed
    fsdp = n > 1 and d.strategy == "fsdp"
    bw = BYTES[resolve_dtype(cfg.model.dtype, device)]
    bc = 2 if (cfg.train.autocast or (fsdp and d.mixed_precision)) else bw
    shard = n if fsdp else 1
    r, limits = cfg.rollout, length_limits(cfg)
    p_len = prompt_tokens or cfg.data.max_prompt_tokens or 128
    c_len = limits.episode
    out = Plan(device, n)
    runtime = CUDA_RUNTIME if device == "cuda" else CPU_RUNTIME
    out.parts.append(Part("runtime", runtime, runtime, "CUDA context" if device == "cuda" else "interpreter, libraries"))
    weights = s.params * bw
    gen_rows = max(1, r.prompts_per_step * r.group_size // n)
    mem = engine_memory(r.engine, MemoryQuery(shape=s, device=device, rollout=r, rows=gen_rows,
                                              sequence=p_len + c_len, bytes_per_value=bw,
                                              card_bytes=(card_gib or 80.0) * GIB, sharded=fsdp))
    # FSDP: the whole model gathered on every rank while generating, for an engine that runs the trainer's model
    whole = weights if fsdp and mem.trainer_weights else 0.0
    # FSDP: the passes run on the shards in lockstep, the root unit (embeddings, norm, head) and one decoder layer
    # gathered in the compute dtype (rlvr.distributed.fsdp.lockstep_passes)
    layer = _layer_params(s)
    passes = weights / shard + ((max(0, s.params - s.layers * layer) + layer) * bc if fsdp else 0.0)
    out.parts.append(Part("weights", weights / shard, weights / shard + whole,
                          f"{s.params / 1e9:.2f}B params x {bw} B" + (f", 1/{n} sharded" if fsdp else "")
                          + (", gathered whole to generate" if whole else "")
                          + (", one layer at a time for the no-grad passes" if fsdp else ""), passes=passes))
    t = s.trainable
    out.parts.append(Part("gradients", t * bw / shard, 0.0, "from the backward on; freed after each step",
                          "backward"))
    out.parts.append(Part("optimizer", 2 * t * bw / shard, 2 * t * bw / shard, "AdamW's two moments"))
    if needs_reference(cfg):
        out.parts.append(Part("reference", weights / shard, weights / shard,
                              "a frozen copy" + (f", 1/{n} sharded, one layer at a time for its passes" if fsdp
                                                 else " (every rank)")))
    if cfg.algorithm.critic.heads:
        critic = weights + 3 * t * bw
        out.parts.append(Part("critic", critic, weights + 2 * t * bw, "a replica with its own AdamW"))

    # the update's micro-batch: a minibatch's rows are split over the ranks
    rows = max(1, r.prompts_per_step * r.group_size // (cfg.algorithm.minibatches * n))
    m = min(cfg.train.micro_batch_size, rows)
    if cfg.train.micro_batch_tokens:
        m = max(1, min(m, cfg.train.micro_batch_tokens // (p_len + c_len)))
    groups = math.ceil(m / r.group_size) if cfg.train.shared_prefix else m
    tokens, completion = groups * p_len + m * c_len, m * c_len
    out.tokens = {"prompt": p_len, "micro_batch_rows": m, "micro_batch_tokens": tokens, "completion_tokens": completion}
    layer = (C_H * s.hidden + C_I * s.intermediate) * bc  # bytes per token and layer
    acts = tokens * (s.layers * s.hidden * bc + layer) if cfg.train.activation_checkpointing else \
        tokens * s.layers * layer
    head_tokens = min(completion, cfg.model.logprob_chunk_tokens) if completion > cfg.model.logprob_chunk_tokens \
        else completion
    head = 3 * head_tokens * s.vocab * 4
    out.parts.append(Part("activations", acts, 0.0, f"{tokens} tokens per micro-batch"
                          + (", checkpointed" if cfg.train.activation_checkpointing else ""), "forward"))
    out.parts.append(Part("log-probs", head, 0.0, f"{head_tokens} tokens x {s.vocab} vocab x fp32 x 3", "forward",
                          passes=head))  # (the no-grad passes take the same chunks)

    # generation: the engine's own rule, registered beside it (above)
    out.parts.append(Part("engine", mem.update, mem.generation, mem.note))
    return out


def describe(plan: Plan) -> str:
    """The plan as a plain-text table."""
    head = ("part", *(f"{ph} GiB" for ph in PHASES), "")
    rows = [head, *plan.table()]
    widths = [max(len(row[i]) for row in rows) for i in range(len(head))]
    return "\n".join("  ".join(x.ljust(w) for x, w in zip(row, widths)).rstrip() for row in rows) + "\n" + \
        json.dumps(plan.tokens)

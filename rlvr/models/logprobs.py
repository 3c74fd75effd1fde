"""Per-token log-probs (and entropies) of completions, chunked over tokens.

The model's trunk runs once; the LM head and log-softmax run on chunks of completion tokens only (padding
is skipped), each chunk under activation checkpointing when gradients are needed. Peak extra memory is
``chunk_tokens x vocab`` floats instead of a float32 ``[N, T, vocab]`` tensor, which for a 150k vocabulary
and 8k tokens per micro-batch is the difference between ~5 GB and ~0.6 GB per chunk-set.
"""

from __future__ import annotations

import contextlib

import torch
import torch.nn.functional as F
from torch.utils.checkpoint import checkpoint
from transformers import PreTrainedModel

from rlvr.core.batch import RolloutBatch
from rlvr.models import shared_prefix
from rlvr.models.vision import SUPPRESSED_LOGIT, own_positions, position_offset, suppressed_tokens, \
    vision_forward_kwargs

__all__ = ["completion_logprobs", "token_logprobs_from_hidden", "CompletionLogprobs", "trunk_hidden", "forward_inputs",
           "output_head", "SUPPRESSED_LOGIT", "logit_softcap", "capped", "batch_logprobs", "autocast_to", "pass_args"]


class _SuppressingHead(torch.nn.Module):
    """An LM head whose logits of ``ids`` are :data:`SUPPRESSED_LOGIT`: tokens the policy never samples."""

    def __init__(self, head: torch.nn.Module, ids: list[int]):
        super().__init__()
        self.head = head
        self.register_buffer("mask", torch.zeros(head.out_features, dtype=torch.bool), persistent=False)
        self.mask[ids] = True
        self.in_features, self.out_features = head.in_features, head.out_features

    def forward(self, h: torch.Tensor) -> torch.Tensor:
        z = self.head(h)
        return z.masked_fill(self.mask.to(z.device), SUPPRESSED_LOGIT)


def output_head(model) -> torch.nn.Module:
    """``model``'s LM head as every log-prob computation applies it: with a VLM's image tokens suppressed
    (:func:`~rlvr.models.vision.suppressed_tokens`), as the rollout engines suppress them when sampling, so
    behaviour and trainer log-probs are of the same distribution."""
    head = model.get_output_embeddings()
    ids = suppressed_tokens(model)
    return _SuppressingHead(head, ids) if ids else head


def logit_softcap(model) -> float | None:
    """The final-logit soft-capping of ``model``'s language model (Gemma 2, PaliGemma 2), or None; a VLM's
    lives in its text config."""
    cfg = model.config
    text = cfg.get_text_config() if hasattr(cfg, "get_text_config") else cfg
    return getattr(text, "final_logit_softcapping", None) or getattr(cfg, "final_logit_softcapping", None)


def forward_inputs(model, batch: RolloutBatch) -> dict:
    """The keyword arguments of ``model``'s (or its trunk's) forward over ``batch``: ids, mask and positions,
    and for rows with images the family's image tensors. A Qwen2-VL-family model computes its own multimodal
    rotary positions from the image grids, so with images its batch's 1-D positions are left out; the other
    families take them (PaliGemma's counted from 1, and its prompt marked as the bidirectional prefix)."""
    extra = vision_forward_kwargs(model, batch.input_ids, batch.vision, completion_start=batch.prompt_len)
    if batch.vision is not None and own_positions(model):
        positions = None
    else:
        offset = position_offset(model)
        positions = batch.position_ids + offset if offset else batch.position_ids
    return dict(input_ids=batch.input_ids, attention_mask=batch.attention_mask, position_ids=positions,
                use_cache=False, **extra)


def trunk_hidden(trunk: torch.nn.Module, batch: RolloutBatch) -> torch.Tensor:
    """``[N, P+T, H]``: the last hidden state of ``trunk`` (a model's base, before the LM head) over ``batch``."""
    return trunk(**forward_inputs(trunk, batch)).last_hidden_state


def capped(head: torch.nn.Module, h: torch.Tensor, softcap: float | None) -> torch.Tensor:
    """Float32 logits of ``head`` over ``h``, soft-capped when the model caps them; a suppressing head's tokens
    are suppressed after the cap (as the engines suppress the capped logits the model returns), so they stay
    at :data:`SUPPRESSED_LOGIT` instead of ``-softcap``."""
    logits = head(h).float()
    if softcap:
        logits = torch.tanh(logits / softcap) * softcap
        if isinstance(head, _SuppressingHead):
            logits = logits.masked_fill(head.mask.to(logits.device), SUPPRESSED_LOGIT)
    return logits


def _head_logp(head: torch.nn.Module, h: torch.Tensor, targets: torch.Tensor, temperature: float,
               softcap: float | None, with_entropy: bool) -> tuple[torch.Tensor, torch.Tensor]:
    logits = capped(head, h, softcap)
    if temperature != 1.0:
        logits = logits / temperature
    logsm = F.log_softmax(logits, dim=-1)
    logp = logsm.gather(-1, targets.unsqueeze(-1)).squeeze(-1)
    if with_entropy:  # a metric: no gradient flows through it, so no graph is kept for it
        with torch.no_grad():
            ent = -(logsm.exp() * logsm).sum(-1)
    else:
        ent = torch.zeros_like(logp)
    return logp, ent


def token_logprobs_from_hidden(head: torch.nn.Module, hidden: torch.Tensor, targets: torch.Tensor,
                               temperature: float = 1.0, chunk_tokens: int = 4096, with_entropy: bool = False,
                               softcap: float | None = None) -> tuple[torch.Tensor, torch.Tensor | None]:
    """``hidden [K, H]`` and ``targets [K]`` -> log-probs ``[K]`` (and entropies), ``chunk_tokens`` at a time."""
    outs_lp, outs_ent = [], []
    use_ckpt = torch.is_grad_enabled() and hidden.requires_grad and hidden.shape[0] > chunk_tokens
    for start in range(0, hidden.shape[0], chunk_tokens):
        h, t = hidden[start: start + chunk_tokens], targets[start: start + chunk_tokens]
        if use_ckpt:
            lp, ent = checkpoint(_head_logp, head, h, t, temperature, softcap, with_entropy, use_reentrant=False)
        else:
            lp, ent = _head_logp(head, h, t, temperature, softcap, with_entropy)
        outs_lp.append(lp)
        outs_ent.append(ent)
    lp = torch.cat(outs_lp) if outs_lp else hidden.new_zeros(0)
    ent = (torch.cat(outs_ent) if outs_ent else hidden.new_zeros(0)) if with_entropy else None
    return lp, ent


def completion_logprobs(model: PreTrainedModel, batch: RolloutBatch, temperature: float = 1.0,
                        chunk_tokens: int = 4096, with_entropy: bool = False
                        ) -> tuple[torch.Tensor, torch.Tensor | None]:
    """Log-probs ``[N, T]`` of the completion tokens under ``model`` at ``temperature`` (0 on padding).

    With the shared-prefix attention enabled on ``model`` (:mod:`rlvr.models.shared_prefix`), rows that share
    a prompt run it through the trunk once when that saves enough tokens; the result is the same."""
    trunk = getattr(model, model.base_model_prefix)
    head = output_head(model)
    p, t = batch.prompt_len, batch.completion_mask.shape[1]
    packed = shared_prefix.pack(batch) if shared_prefix.enabled(model) else None
    if packed is not None:
        hidden = shared_prefix.packed_hidden(trunk, packed)
    else:
        hidden = trunk_hidden(trunk, batch)[:, p - 1: p + t - 1]  # position j predicts token j + 1
    targets = batch.input_ids[:, p: p + t]
    sel = batch.completion_mask.bool()
    softcap = logit_softcap(model)
    lp, ent = token_logprobs_from_hidden(head, hidden[sel], targets[sel], temperature, chunk_tokens,
                                         with_entropy, softcap)
    logp = hidden.new_zeros(sel.shape, dtype=torch.float32).masked_scatter(sel, lp)
    entropy = None
    if with_entropy:
        entropy = hidden.new_zeros(sel.shape, dtype=torch.float32).masked_scatter(sel, ent)
    return logp, entropy


class CompletionLogprobs(torch.nn.Module):
    """:func:`completion_logprobs` of ``model`` as a module's forward: what DDP wraps for the update (its
    gradient hooks are prepared on a module's forward, and the log-probs bypass ``model.forward`` to chunk
    the head)."""

    def __init__(self, model: torch.nn.Module):
        super().__init__()
        self.model = model

    def forward(self, batch: RolloutBatch, temperature: float = 1.0, chunk_tokens: int = 4096,
                with_entropy: bool = False, also: tuple[RolloutBatch, ...] = ()) -> tuple:
        """``(logp, entropy)`` of ``batch``; with ``also``, a third item: the log-probs of each of those
        batches (without entropy), in the same forward call -- DDP prepares its gradient hooks once per
        call, so every pass that the backward goes through must happen inside one."""
        main = completion_logprobs(self.model, batch, temperature, chunk_tokens, with_entropy)
        if not also:
            return main
        return (*main, tuple(completion_logprobs(self.model, b, temperature, chunk_tokens)[0] for b in also))


def autocast_to(dtype: str | None, device: torch.device):
    """``torch.autocast`` to ``dtype`` (``"bfloat16"``) for a forward on ``device`` (the weights stay in their
    own dtype); a no-op context for ``None``."""
    if dtype is None:
        return contextlib.nullcontext()
    return torch.autocast(device.type, dtype=getattr(torch, dtype))


@torch.no_grad()
def batch_logprobs(model, batch: RolloutBatch, temperature: float, chunk_tokens: int, micro_batch_size: int,
                   micro_batch_tokens: int | None = None, autocast: str | None = None) -> torch.Tensor:
    """Log-probs ``[N, T]`` of the whole batch under ``model``, micro-batch by micro-batch (at most
    ``micro_batch_size`` rows and ``micro_batch_tokens`` padded tokens each), without gradients."""
    out = torch.zeros_like(batch.completion_mask)
    for idx in batch.micro_batch_rows(micro_batch_size, max_tokens=micro_batch_tokens):
        micro = batch.select(idx).trim()
        with autocast_to(autocast, micro.input_ids.device):
            lp, _ = completion_logprobs(model, micro, temperature, chunk_tokens)
        out[idx, : lp.shape[1]] = lp.float()
    return out


def pass_args(settings) -> dict:
    """:func:`batch_logprobs`' keyword arguments from a settings object with ``temperature``, ``chunk_tokens``,
    ``micro_batch_size`` and optionally ``micro_batch_tokens`` and ``autocast``."""
    return {"temperature": settings.temperature, "chunk_tokens": settings.chunk_tokens,
            "micro_batch_size": settings.micro_batch_size,
            "micro_batch_tokens": getattr(settings, "micro_batch_tokens", None),
            "autocast": getattr(settings, "autocast", None)}

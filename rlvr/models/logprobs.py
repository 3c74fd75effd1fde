"""Per-token log-probs (and entropies) of completions, chunked over tokens.

The model's trunk runs once; the LM head and log-softmax run on chunks of completion tokens only (padding
is skipped), each chunk under activation checkpointing when gradients are needed. Peak extra memory is
``chunk_tokens x vocab`` floats instead of a float32 ``[N, T, vocab]`` tensor, which for a 150k vocabulary
and 8k tokens per micro-batch is the difference between ~5 GB and ~0.6 GB per chunk-set.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch.utils.checkpoint import checkpoint
from transformers import PreTrainedModel

from rlvr.core.batch import RolloutBatch

__all__ = ["completion_logprobs", "token_logprobs_from_hidden", "CompletionLogprobs"]


def _head_logp(head: torch.nn.Module, h: torch.Tensor, targets: torch.Tensor, temperature: float,
               softcap: float | None, with_entropy: bool) -> tuple[torch.Tensor, torch.Tensor]:
    logits = head(h).float()
    if softcap:
        logits = torch.tanh(logits / softcap) * softcap
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
    """Log-probs ``[N, T]`` of the completion tokens under ``model`` at ``temperature`` (0 on padding)."""
    trunk = getattr(model, model.base_model_prefix)
    head = model.get_output_embeddings()
    out = trunk(input_ids=batch.input_ids, attention_mask=batch.attention_mask,
                position_ids=batch.position_ids, use_cache=False)
    p, t = batch.prompt_len, batch.completion_mask.shape[1]
    hidden = out.last_hidden_state[:, p - 1: p + t - 1]  # position j predicts token j + 1
    targets = batch.input_ids[:, p: p + t]
    sel = batch.completion_mask.bool()
    softcap = getattr(model.config, "final_logit_softcapping", None)
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
                with_entropy: bool = False) -> tuple[torch.Tensor, torch.Tensor | None]:
        return completion_logprobs(self.model, batch, temperature, chunk_tokens, with_entropy)

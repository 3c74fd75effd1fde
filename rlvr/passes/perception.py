"""The ``vision_similarity`` extra: how much each completion token's hidden state looks like the image.

PEPO's perception score (Perception-Exploration Policy Optimization; code ``xzxxntxdy/PEPO``,
``PepoGRPOTrainer._compute_vision_scores_cosine``; EXACT): for completion token t of a row with image
tokens V (the rows' ``<|image_pad|>`` positions) and the hidden states ``h^l`` of every layer ``l = 0..L``
(the embeddings and each decoder layer's output, as ``output_hidden_states`` returns them),

    s_t = 1/(L+1) * sum_l  1/|V| * sum_{j in V} cos(h^l_t, h^l_j)

with ``h^l_t`` at the completion token's own position. The mean over image tokens of a cosine is the dot of
the normalised token with the mean of the normalised image states, which is how it is computed here:
``O(T * H)`` per layer and row, not ``O(T * |V| * H)``. A row without images gets 0 (the reference falls back
to every position of the sequence, padding included; a zero score makes PEPO's weights uniform for such a
row, which is plain GRPO there).
"""

from __future__ import annotations

import torch
import torch.nn.functional as F

from rlvr.algorithms.extra_producers import ExtraContext, produces
from rlvr.core.batch import RolloutBatch
from rlvr.models.logprobs import forward_inputs
from rlvr.models.vision import image_token_id

__all__ = ["vision_similarity"]


@torch.no_grad()
def vision_similarity(model, batch: RolloutBatch, micro_batch_size: int) -> torch.Tensor:
    """``[N, T]`` PEPO's perception score of every completion token (0 on padding and image-less rows)."""
    n, t = batch.completion_mask.shape
    out = torch.zeros(n, t)
    tok = image_token_id(model)
    if tok is None or batch.vision is None:
        return out
    trunk = getattr(model, model.base_model_prefix)
    for idx in batch.micro_batch_rows(micro_batch_size):
        mb = batch.select(idx).trim()
        if mb.vision is None:
            continue
        states = trunk(**forward_inputs(trunk, mb), output_hidden_states=True).hidden_states
        p, tm = mb.prompt_len, mb.completion_mask.shape[1]
        image = (mb.input_ids[:, :p] == tok).to(states[0].dtype)  # [n, p]
        count = image.sum(1, keepdim=True)
        score = torch.zeros(mb.size, tm, dtype=torch.float32, device=states[0].device)
        for h in states:
            hn = F.normalize(h.float(), dim=-1)
            vbar = (hn[:, :p] * image[..., None]).sum(1) / count.clamp(min=1)  # [n, H] mean normalised image state
            score += (hn[:, p: p + tm] * vbar[:, None, :]).sum(-1)
        score = score / len(states) * (count > 0) * mb.completion_mask.to(score.device)
        out[idx, :tm] = score.cpu()
    return out


@produces("vision_similarity")
def _vision_similarity(ctx: ExtraContext, keys: frozenset[str]) -> dict[str, torch.Tensor]:
    """One no-grad policy forward keeping every layer's hidden states (PEPO)."""
    return {"vision_similarity": vision_similarity(ctx.model, ctx.batch, ctx.settings.micro_batch_size)}

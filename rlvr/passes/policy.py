"""The policy's and the reference's no-grad passes over a step's batch: old and reference log-probs, and the
token statistics some components read (entropy, self-certainty, the chosen token's raw logit, pooled hidden
states).

Costs: ``old_logp`` one policy forward; ``ref_logp`` one reference forward; ``entropy``, ``self_certainty``,
``chosen_logit`` and ``hidden`` share one policy forward that keeps full-vocabulary logits per chunk of tokens,
and that pass yields ``old_logp`` too when it is needed as well (no second forward).

Logits are those the log-probs use: after the model's final-logit soft-capping when it has one (Gemma 2),
divided by the training temperature (``algorithm.train_temperature``, default the rollout temperature) for
entropy and self-certainty; ``chosen_logit`` is before temperature. ``hidden`` pools the last hidden states at
the completion tokens' own positions (the last one has read the whole completion).
"""

from __future__ import annotations

from typing import Sequence

import torch

from rlvr.algorithms.extra_producers import ExtraContext, produces
from rlvr.core.batch import RolloutBatch
from rlvr.models import logprobs
from rlvr.models.logprobs import autocast_to, capped, logit_softcap, output_head, pass_args, trunk_hidden

__all__ = ["token_statistics", "capped_logits"]

_STATS = ("entropy", "self_certainty", "chosen_logit", "hidden")


def capped_logits(head, hidden: torch.Tensor, softcap: float | None) -> torch.Tensor:
    """Float32 logits of ``hidden``, after the model's final-logit soft-capping when it has one (Gemma 2,
    PaliGemma 2), with a suppressing head's tokens suppressed after the cap (:func:`rlvr.models.logprobs.capped`)."""
    return capped(head, hidden, softcap)


@torch.no_grad()
def token_statistics(model, batch: RolloutBatch, temperature: float, micro_batch_size: int,
                     chunk_tokens: int, wanted: Sequence[str], max_tokens: int | None = None,
                     autocast: str | None = None) -> dict[str, torch.Tensor]:
    """Entropy, self-certainty and raw chosen logit per token, and mean-pooled hidden states per row; with
    ``logp`` in ``wanted``, the log-probs of the sampled tokens from the same pass (what ``batch_logprobs``
    computes), so old log-probs cost no second forward when token statistics are needed anyway."""
    n, t = batch.completion_mask.shape
    out = {k: torch.zeros(n, t) for k in wanted if k != "hidden"}
    trunk = getattr(model, model.base_model_prefix)
    head = output_head(model)
    softcap = logit_softcap(model)
    for idx in batch.micro_batch_rows(micro_batch_size, max_tokens=max_tokens):
        mb = batch.select(idx).trim()
        with autocast_to(autocast, mb.input_ids.device):
            h = trunk_hidden(trunk, mb)
        p, tm = mb.prompt_len, mb.completion_mask.shape[1]
        hid = h[:, p - 1: p + tm - 1]  # position j predicts token j + 1
        sel = mb.completion_mask.bool()
        if "hidden" in wanted:
            m = mb.completion_mask[..., None].to(h.dtype)
            pooled = (h[:, p: p + tm] * m).sum(1) / m.sum(1).clamp(min=1)
            out.setdefault("hidden", torch.zeros(n, pooled.shape[-1]))[idx] = pooled.float().cpu()
        flat_h, flat_t = hid[sel], mb.input_ids[:, p: p + tm][sel]
        vals: dict[str, list[torch.Tensor]] = {k: [] for k in wanted if k != "hidden"}
        for s in range(0, flat_h.shape[0], chunk_tokens):
            with autocast_to(autocast, mb.input_ids.device):
                z = capped_logits(head, flat_h[s: s + chunk_tokens], softcap)
            tgt = flat_t[s: s + chunk_tokens]
            zt = z / temperature if temperature != 1.0 else z
            if "chosen_logit" in vals:
                vals["chosen_logit"].append(z.gather(-1, tgt[:, None]).squeeze(-1))
            if "self_certainty" in vals:
                vals["self_certainty"].append(torch.logsumexp(zt, -1) - zt.mean(-1))
            if "entropy" in vals or "logp" in vals:
                logsm = torch.log_softmax(zt, -1)
                if "entropy" in vals:
                    vals["entropy"].append(-(logsm.exp() * logsm).sum(-1))
                if "logp" in vals:
                    vals["logp"].append(logsm.gather(-1, tgt[:, None]).squeeze(-1))
        for k, parts in vals.items():
            full = torch.zeros(sel.shape)
            if parts:
                full[sel.cpu()] = torch.cat(parts).cpu()
            out[k][idx, : full.shape[1]] = full
    return out




@produces("old_logp")
def _old_logp(ctx: ExtraContext, keys: frozenset[str]) -> dict[str, torch.Tensor]:
    """The sampling policy's log-probs, recomputed: one policy forward."""
    return {"old_logp": logprobs.batch_logprobs(ctx.model, ctx.batch, **pass_args(ctx.settings)).cpu()}


@produces("ref_logp", reference=True)
def _ref_logp(ctx: ExtraContext, keys: frozenset[str]) -> dict[str, torch.Tensor]:
    """The frozen reference's log-probs: one reference forward."""
    if ctx.ref_model is None:
        raise ValueError("a component needs reference log-probs but no reference model is loaded")
    return {"ref_logp": logprobs.batch_logprobs(ctx.ref_model, ctx.batch, **pass_args(ctx.settings)).cpu()}


@produces(*_STATS, also=("old_logp",))
def _token_statistics(ctx: ExtraContext, keys: frozenset[str]) -> dict[str, torch.Tensor]:
    """Entropies, self-certainty, chosen logits, pooled hidden states (and old log-probs): one policy forward."""
    s = ctx.settings
    wanted = [k for k in _STATS if k in keys] + (["logp"] if "old_logp" in keys else [])
    out = token_statistics(ctx.model, ctx.batch, s.temperature, s.micro_batch_size, s.chunk_tokens, wanted,
                           getattr(s, "micro_batch_tokens", None), getattr(s, "autocast", None))
    if "logp" in out:
        out["old_logp"] = out.pop("logp")
    return out

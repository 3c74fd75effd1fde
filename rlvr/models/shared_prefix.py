"""Shared-prefix forwards: a group's prompt runs through the model once, not once per completion.

A GRPO batch holds ``n`` completions of each prompt. The standard layout (``RolloutBatch``: ``[N, P+T]``,
prompt left-padded, completion right-padded) runs every prompt's ``P`` tokens through every layer ``n``
times, in the forward and again in the backward. The shared-prefix layout packs a group into one row::

    [ prompt (P) | completion 1 (T) | completion 2 (T) | ... | completion n (T) ]

and changes only the attention: the prompt attends to itself causally, as before; each completion segment
attends to the whole prompt and causally to itself, never to the other segments. Every token therefore
sees exactly the keys and values (and positions: segment ``s`` counts on from the prompt's length, as each
copy did) that it sees in the standard layout, so the log-probs are the same function of the weights, float
rounding aside; in the backward, the prompt's activations receive the sum of their ``n`` completions'
gradients, which is what the ``n`` copies' gradients summed to before. What is saved is ``(n - 1) x P``
tokens of every projection, MLP and norm per group: about half the update's work on the demo workload
(16-token prompts, 16-token completions), ~2x on long prompts, nothing when prompts are short next to the
completions (then the standard layout is used; :data:`MIN_SAVING`). The same idea as "Prefix Grouper"
(shared-prefix forward for GRPO training); this implementation is rlvr's own.

Mechanics. :func:`enable` points the model's attention implementation at :data:`NAME`, a function
registered in transformers' ``AttentionInterface`` that is ``sdpa`` (with ``sdpa``'s masks) on every
ordinary forward and splits the attention only when the forward carries a :class:`Layout`
(``rlvr_layout=...``: transformers passes extra forward keywords down to the attention function, also
when activation checkpointing recomputes a layer in the backward). Everything else in the model -- the
embedding, norms, MLPs, rotary embeddings from the packed ``position_ids``, DDP, FSDP2, LoRA adapters,
autocast -- is the model's own code. Only decoder families whose attention goes through that interface and
whose tokens mix nowhere else are enabled (:data:`FAMILIES`); a model the layout cannot serve, a VLM
batch, or a batch without shared prompts takes the standard forward.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import torch
import torch.nn.functional as F

__all__ = ["NAME", "FAMILIES", "MIN_SAVING", "Layout", "Packed", "unsupported_reason", "enable", "enabled",
           "pack", "packed_hidden"]



class _Name(str):
    """The implementation's name, as stored in an enabled model's config. A model (or its config) pickled into
    another process -- a Ray actor, a deep copy -- brings the name along; unpickling it imports this module,
    which registers the function, so the name always resolves where it arrives."""

    def __reduce__(self):
        return _name, ()


def _name() -> str:
    return NAME


NAME = _Name("rlvr_shared_prefix")
# decoder-only families whose attention runs through transformers' AttentionInterface and whose tokens
# interact only there (no token shift, no convolution, no recurrent state): each is tested equal to the
# standard forward in tests/test_shared_prefix.py
FAMILIES = ("llama", "qwen2", "qwen3", "mistral", "qwen2_moe", "qwen3_moe", "olmo2", "gemma", "phi3")
MIN_SAVING = 0.1  # the packed layout is used when it has at least 10% fewer (padded) tokens than the standard

_GQA = tuple(int(x) for x in torch.__version__.split("+")[0].split(".")[:2]) >= (2, 5)  # SDPA's enable_gqa


def _interfaces():
    try:
        from transformers import AttentionInterface
        from transformers.integrations.sdpa_attention import sdpa_attention_forward
        from transformers.masking_utils import AttentionMaskInterface, sdpa_mask
    except ImportError:  # transformers < 4.48 has no attention interface
        return None
    return AttentionInterface, AttentionMaskInterface, sdpa_attention_forward, sdpa_mask


def unsupported_reason(model) -> str | None:
    """Why the shared-prefix layout cannot serve ``model``'s forward, or None when it can."""
    cfg = getattr(model, "config", None)
    kind = getattr(cfg, "model_type", None)
    if kind not in FAMILIES:
        return f"model type {kind!r} is not one of {', '.join(FAMILIES)}"
    if _interfaces() is None:
        return "this transformers has no AttentionInterface (4.48 or newer has)"
    impl = getattr(cfg, "_attn_implementation", None)
    if impl not in ("sdpa", NAME):
        return f"the model's attention implementation is {impl!r}, not sdpa"
    return None


def enable(model) -> str | None:
    """Route ``model``'s attention through :data:`NAME`; returns why not (and changes nothing) when the model
    is unsupported. Idempotent; the setting is not saved with the model (``config.json`` never holds it)."""
    reason = unsupported_reason(model)
    if reason is None:
        model.config._attn_implementation = NAME
    return reason


def enabled(model) -> bool:
    return getattr(getattr(model, "config", None), "_attn_implementation", None) == NAME


@dataclass
class Layout:
    """How a packed row is cut: ``width`` prompt columns, then ``n`` segments of ``seg`` columns.

    ``key_valid [G, P]`` marks each row's real prompt tokens (left padding is not); ``prefix_pos [G, P]`` and
    ``seg_pos [G, n, T]`` are the tokens' positions (for sliding windows)."""

    width: int
    seg: int
    n: int
    key_valid: torch.Tensor
    prefix_pos: torch.Tensor
    seg_pos: torch.Tensor
    _masks: dict = field(default_factory=dict, repr=False)

    def masks(self, window: int | None) -> tuple[torch.Tensor, torch.Tensor]:
        """Boolean SDPA masks (True: attend): the prompt's ``[G, 1, P, P]`` and the segments'
        ``[G*n, 1, T, P+T]``, with a sliding window of ``window`` positions when given."""
        if window not in self._masks:
            self._masks[window] = self._build(window)
        return self._masks[window]

    def _build(self, window: int | None) -> tuple[torch.Tensor, torch.Tensor]:
        g, p, t, n = self.key_valid.shape[0], self.width, self.seg, self.n
        dev = self.key_valid.device
        causal_p = torch.ones(p, p, dtype=torch.bool, device=dev).tril()
        prefix = causal_p[None] & self.key_valid[:, None, :]  # [G, P, P]
        causal_t = torch.ones(t, t, dtype=torch.bool, device=dev).tril()
        to_prompt = self.key_valid[:, None, None, :].expand(g, n, t, p)  # [G, n, T, P]
        to_self = causal_t.expand(g, n, t, t)
        if window is not None:
            prefix = prefix & (self.prefix_pos[:, :, None] - self.prefix_pos[:, None, :] < window)
            to_prompt = to_prompt & (self.seg_pos[..., None] - self.prefix_pos[:, None, None, :] < window)
            to_self = to_self & (self.seg_pos[..., :, None] - self.seg_pos[..., None, :] < window)
        # a padding query of the prompt sees no key: let it see itself, so SDPA gives no NaN (its output is
        # never read, and no real query attends to it)
        prefix = prefix | torch.eye(p, dtype=torch.bool, device=dev)
        seg = torch.cat([to_prompt, to_self], dim=-1).reshape(g * n, 1, t, p + t)
        return prefix[:, None], seg


def _sdpa(q, k, v, mask, scaling, dropout):
    if k.shape[1] != q.shape[1] and not _GQA:
        rep = q.shape[1] // k.shape[1]
        k, v = k.repeat_interleave(rep, 1), v.repeat_interleave(rep, 1)
    kw = {"enable_gqa": True} if k.shape[1] != q.shape[1] else {}
    return F.scaled_dot_product_attention(q, k, v, attn_mask=mask, dropout_p=dropout, scale=scaling, **kw)


def _attention(module, query, key, value, attention_mask, dropout: float = 0.0, scaling: float | None = None,
               sliding_window: int | None = None, rlvr_layout: Layout | None = None, **kwargs):
    """The registered attention: ``sdpa`` without a layout; with one, the prompt part and the segments'
    part separately (queries ``[G, H, P+nT, D]``, keys and values ``[G, Hkv, P+nT, D]``)."""
    if rlvr_layout is None:
        sdpa_forward = _interfaces()[2]
        return sdpa_forward(module, query, key, value, attention_mask, dropout=dropout, scaling=scaling,
                            sliding_window=sliding_window, **kwargs)
    if kwargs.get("softcap") is not None or kwargs.get("s_aux") is not None:
        raise ValueError("the shared-prefix layout does not support attention soft-capping or sinks")
    lay = rlvr_layout
    g, h, _, d = query.shape
    hk = key.shape[1]
    p, t, n = lay.width, lay.seg, lay.n
    prefix_mask, seg_mask = lay.masks(sliding_window)
    out_p = _sdpa(query[:, :, :p], key[:, :, :p], value[:, :, :p], prefix_mask, scaling, dropout)

    def segments(x: torch.Tensor, heads: int) -> torch.Tensor:  # [G, h, nT, D] -> [G, n, h, T, D]
        return x[:, :, p:].reshape(g, heads, n, t, d).transpose(1, 2)

    q_s = segments(query, h).reshape(g * n, h, t, d)
    k_s = torch.cat([key[:, None, :, :p].expand(g, n, hk, p, d), segments(key, hk)], dim=3).reshape(g * n, hk, p + t, d)
    v_s = torch.cat([value[:, None, :, :p].expand(g, n, hk, p, d), segments(value, hk)], dim=3).reshape(
        g * n, hk, p + t, d)
    out_s = _sdpa(q_s, k_s, v_s, seg_mask, scaling, dropout)
    out_s = out_s.reshape(g, n, h, t, d).transpose(1, 2).reshape(g, h, n * t, d)
    return torch.cat([out_p, out_s], dim=2).transpose(1, 2).contiguous(), None


@dataclass
class Packed:
    """A batch in the shared-prefix layout: ``input_ids`` / ``position_ids [G, P+nT]``, the :class:`Layout`, and
    ``gather [N, T]``: where, in the flattened ``[G*(P+nT)]`` hidden states, the state that predicts each
    completion token of each original row lies (the prompt's last token for the first, then the
    segment's own tokens)."""

    input_ids: torch.Tensor
    position_ids: torch.Tensor
    layout: Layout
    gather: torch.Tensor


def pack(batch, min_saving: float | None = None) -> Packed | None:
    """``batch`` (a :class:`~rlvr.core.batch.RolloutBatch`) in the shared-prefix layout, or None when that
    would not save ``min_saving`` of its tokens (few rows share a prompt, or prompts are short next to
    the completions) or the batch has images."""
    if batch.vision is not None or batch.size < 2:
        return None
    min_saving = MIN_SAVING if min_saving is None else min_saving
    p = batch.prompt_len
    t = batch.completion_mask.shape[1]
    if p == 0:
        return None
    ids, mask = batch.input_ids, batch.attention_mask
    # rows share a prefix when their prompt columns agree token for token, padding included
    key = ids[:, :p].masked_fill(mask[:, :p] == 0, -1)
    _, group = torch.unique(key, dim=0, return_inverse=True)
    g = int(group.max()) + 1
    order = torch.argsort(group, stable=True)
    counts = torch.bincount(group, minlength=g)
    starts = torch.cumsum(counts, 0) - counts
    slot = torch.empty_like(group)
    slot[order] = torch.arange(batch.size, device=group.device) - starts[group[order]]
    n = int(counts.max())
    if g * (p + n * t) > (1.0 - min_saving) * batch.size * (p + t):
        return None
    first = order[starts]  # one row of each group
    width = p + n * t
    packed = torch.zeros(g, width, dtype=ids.dtype, device=ids.device)
    positions = torch.zeros(g, width, dtype=batch.position_ids.dtype, device=ids.device)
    packed[:, :p], positions[:, :p] = ids[first, :p], batch.position_ids[first, :p]
    cols = p + slot[:, None] * t + torch.arange(t, device=ids.device)  # [N, T]: each row's segment columns
    packed[group[:, None], cols] = ids[:, p:]
    positions[group[:, None], cols] = batch.position_ids[:, p:]
    seg_pos = positions[:, p:].reshape(g, n, t)
    layout = Layout(p, t, n, mask[first, :p].bool(), positions[:, :p], seg_pos)
    # the state predicting completion token j is the one at token j - 1: the prompt's last for j = 0
    src = torch.cat([torch.full_like(cols[:, :1], p - 1), cols[:, :-1]], dim=1)
    gather = group[:, None] * width + src
    return Packed(packed, positions, layout, gather)


def packed_hidden(trunk: torch.nn.Module, packed: Packed) -> torch.Tensor:
    """``[N, T, H]``: for each original row, the trunk's last hidden states that predict its completion
    tokens (the standard layout's ``hidden[:, P-1 : P+T-1]``), computed in the packed layout."""
    g, width = packed.input_ids.shape
    # a 4-D mask is taken as given by transformers' mask builders, which would otherwise build a [G, L, L] one
    # that this attention never reads
    placeholder = torch.ones(g, 1, 0, 0, dtype=torch.bool, device=packed.input_ids.device)
    hidden = trunk(input_ids=packed.input_ids, position_ids=packed.position_ids, attention_mask=placeholder,
                   use_cache=False, rlvr_layout=packed.layout).last_hidden_state
    flat = hidden.reshape(g * width, hidden.shape[-1])
    return flat[packed.gather.reshape(-1)].reshape(*packed.gather.shape, hidden.shape[-1])


def _register() -> None:
    found = _interfaces()
    if found is not None:
        attn, masks, _, sdpa_mask = found
        attn.register(NAME, _attention)
        masks.register(NAME, sdpa_mask)  # ordinary forwards get sdpa's masks


_register()  # on import: wherever an enabled model's config is unpickled, this module has been imported

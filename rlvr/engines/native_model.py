"""The ``native`` engine's decoder: a lean forward of Llama / Qwen2 / Mistral over a preallocated KV cache.

The decoder reads the weights of the trainer's own ``transformers`` module (no copy of the model) and runs
the same arithmetic as its ``forward`` -- RMSNorm, q/k/v projections (with Qwen2's biases), rotary
embeddings from the module's own ``rotary_emb`` (so every RoPE scaling type it supports is supported),
grouped-query attention (``scaled_dot_product_attention`` in prefill, two batched matmuls per decode
step), the gated MLP, the LM head -- without what
makes ``generate`` slow on small models: a mask builder, a cache object and a dozen logits processors and
stopping criteria per step. On the tiny models of the demo and the tests the per-token cost is almost
all Python and op-dispatch overhead, so fewer, larger ops are what speeds decoding up.

The cache is one ``[rows, kv_heads, prompt_width + max_new_tokens, head_dim]`` key and value tensor per
layer, allocated once per batch. A group's prompt is prefilled once; its keys and values are copied into
the rows of the group's ``n`` samples (an ``index_select`` along the batch dimension), so a group of 8
costs one prompt forward, not 8.

Left padding: row ``r``'s prompt occupies cache slots ``[pad_r, width)``; its positions (for RoPE) count
from 0 at the first real token, as ``generate`` computes them (``cumsum(mask) - 1``). Decode step ``t``
writes slot ``width + t`` of every row at position ``len_r + t``, and attends over slots ``[0, width + t]``
with the pad slots masked out; a sliding-window layer (Mistral, or a Qwen2 layer marked
``sliding_attention``) also masks slots ``window`` or more behind the query, as transformers does.

Decoding reads each projection's weight at call time; on small models (:data:`FUSE_BYTES`) each ``generate``
call first concatenates the q/k/v and gate/up weights into one product each, and drops the copies at its end;
nothing is cached across calls, so after an optimizer step the next ``generate`` uses the new weights (the
engine shares the trainer's module).

Compiled decoding (``compile=True``, ``rollout.native.compile``): the eager step attends over the slots written
so far, a slice that grows by one each step, which ``torch.compile`` would recompile at every step. The compiled
step instead attends over the whole cache (future and pad slots masked out: zero weight, and the cache starts at
zero so an unwritten slot is never NaN) and takes the slot as a tensor, so every step of a batch runs one graph;
the cache length is rounded up to a multiple of :data:`COMPILE_BUCKET`, so prompts of nearby widths share a
graph. The first batch shape compiles a static graph, a second one a graph with dynamic sizes that serves every
later shape. It pays where a step is per-op overhead (short caches, few rows) and not where the longer
attention costs more than the fused ops save (``benchmarks/README.md``). Compiled kernels round differently from
eager ones, so a seed no longer gives exactly the ``hf`` engine's tokens; the logits agree to float tolerance
(``tests/test_native_compile.py``).
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
import torch.nn.functional as F
from torch import nn

__all__ = ["SUPPORTED_TYPES", "COMPILE_BUCKET", "unsupported_reason", "Decoder"]

SUPPORTED_TYPES = ("llama", "qwen2", "mistral")
# the decode step fuses projections (a per-batch copy of their weights) while the copies take at most this much
# memory: on small models a step is mostly per-op overhead, which fusing cuts (1.05-1.10x on the tiny demo
# model); on larger ones the products dominate and the copy costs more than it saves (0.96x at 512 x 8 layers)
FUSE_BYTES = 16 * 2**20
COMPILE_BUCKET = 8  # compiled decoding: the cache length is a multiple of this (a longer cache attends more slots)
_LAYER_LINEARS = ("self_attn.q_proj", "self_attn.k_proj", "self_attn.v_proj", "self_attn.o_proj",
                  "mlp.gate_proj", "mlp.up_proj", "mlp.down_proj")


def unsupported_reason(model) -> str | None:
    """Why the decoder cannot run ``model`` exactly as its ``forward`` does, or None when it can.

    Checked structurally as well as by name, so a model whose layers were replaced (LoRA adapters,
    quantised linears) is refused rather than decoded with the wrong arithmetic.
    """
    cfg = getattr(model, "config", None)
    kind = getattr(cfg, "model_type", None)
    if kind not in SUPPORTED_TYPES:
        return f"model type {kind!r} is not one of {', '.join(SUPPORTED_TYPES)}"
    trunk = getattr(model, "model", None)
    if trunk is None or not hasattr(trunk, "layers") or not hasattr(trunk, "rotary_emb"):
        return f"{type(model).__name__} does not have the {kind} decoder layout (model.layers, rotary_emb)"
    head = model.get_output_embeddings()
    if type(head) is not nn.Linear or type(trunk.embed_tokens) is not nn.Embedding:
        return "the embedding or LM head is not a plain nn.Embedding / nn.Linear"
    for i, layer in enumerate(trunk.layers):
        for name in _LAYER_LINEARS:
            mod = layer.get_submodule(name)
            if type(mod) is not nn.Linear:
                return f"layer {i} {name} is a {type(mod).__name__}, not nn.Linear (adapters or quantisation)"
    if getattr(cfg, "final_logit_softcapping", None) or getattr(cfg, "attn_logit_softcapping", None):
        return "logit soft-capping is not implemented"
    if getattr(cfg, "hidden_act", "silu") not in ("silu", "swish"):
        return f"activation {cfg.hidden_act!r} is not silu"
    return None


@dataclass
class _Layer:
    ln1: torch.Tensor
    ln2: torch.Tensor
    q: nn.Linear
    k: nn.Linear
    v: nn.Linear
    o: nn.Linear
    gate: nn.Linear
    up: nn.Linear
    down: nn.Linear
    window: int | None
    # per batch (Decoder.start), when fusing: q, k and v in one weight (and bias), gate and up in another
    qkv: tuple[torch.Tensor, torch.Tensor | None] | None = None
    gate_up: torch.Tensor | None = None


def _rms(x: torch.Tensor, w: torch.Tensor, eps: float) -> torch.Tensor:
    """transformers' RMSNorm: normalise in float32, cast back, then scale."""
    if x.dtype == torch.float32:
        return F.rms_norm(x, w.shape, w, eps)
    h = x.float()
    h = h * torch.rsqrt(h.pow(2).mean(-1, keepdim=True) + eps)
    return w * h.to(x.dtype)


def _lin(x: torch.Tensor, m: nn.Linear) -> torch.Tensor:
    return F.linear(x, m.weight, m.bias)  # the module's current weights, without Module.__call__'s hooks


def _rope(x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor) -> torch.Tensor:
    half = x.shape[-1] // 2
    rot = torch.cat((-x[..., half:], x[..., :half]), dim=-1)
    return x * cos + rot * sin


def _window_of(model, attn) -> int | None:
    """The layer's sliding window as transformers applies it: every Mistral layer, marked Qwen2 layers."""
    if model.config.model_type == "mistral":
        return getattr(model.config, "sliding_window", None)
    return getattr(attn, "sliding_window", None)


class Decoder:
    """Prefill and one-token decode steps of one batch of rows against one static KV cache.

    ``row_group[r]`` is the prompt (row of the prefill batch) that cache row ``r`` continues.
    """

    def __init__(self, model, fuse: bool | None = None, compile: bool = False):
        cfg = model.config
        trunk = model.model
        self.embed = trunk.embed_tokens
        self.norm = trunk.norm
        self.head = model.get_output_embeddings()
        self.rotary = trunk.rotary_emb
        self.eps = cfg.rms_norm_eps
        self.n_heads = cfg.num_attention_heads
        self.n_kv = cfg.num_key_value_heads
        self.head_dim = getattr(cfg, "head_dim", None) or cfg.hidden_size // cfg.num_attention_heads
        self.scale = self.head_dim ** -0.5
        self.layers = []
        for layer in trunk.layers:
            a, m = layer.self_attn, layer.mlp
            self.layers.append(_Layer(layer.input_layernorm.weight, layer.post_attention_layernorm.weight,
                                      a.q_proj, a.k_proj, a.v_proj, a.o_proj, m.gate_proj, m.up_proj,
                                      m.down_proj, _window_of(model, a)))
        if fuse is None:  # fused copies cost little memory on models whose decode is overhead-bound
            fuse = sum(L.q.weight.numel() + L.k.weight.numel() + L.v.weight.numel() + L.gate.weight.numel()
                       + L.up.weight.numel() for L in self.layers) * self.embed.weight.element_size() <= FUSE_BYTES
        self.fuse = fuse
        # the first batch shape compiles a static graph; a second shape recompiles once with dynamic sizes, which
        # every later shape reuses (torch.compile's automatic dynamic shapes)
        self.compiled = torch.compile(self._full_step) if compile else None

    # -- setup ---------------------------------------------------------------------------------------------
    def start(self, prompt_ids: torch.Tensor, prompt_mask: torch.Tensor, row_group: torch.Tensor,
              max_new_tokens: int) -> torch.Tensor:
        """Prefill the ``[G, W]`` left-padded prompts, allocate the ``[R, ...]`` cache, copy each prompt's
        keys and values into its rows; returns the ``[R, vocab]`` float32 logits of the first new token."""
        g, width = prompt_ids.shape
        device, dtype = prompt_ids.device, self.embed.weight.dtype
        rows = row_group.shape[0]
        self.width, self.total = width, width + max_new_tokens
        if self.compiled is not None:  # nearby widths share a graph; the extra slots stay masked
            self.total = -(-self.total // COMPILE_BUCKET) * COMPILE_BUCKET
        positions = torch.arange(self.total, device=device)[None]
        cos, sin = self.rotary(self.embed.weight[:1], positions)  # [1, total, D], scaling applied
        self.cos, self.sin = cos[0], sin[0]
        self.key_valid = torch.ones(rows, self.total, dtype=torch.bool, device=device)
        self.key_valid[:, :width] = prompt_mask.bool()[row_group]
        self.prompt_len = prompt_mask.sum(-1)[row_group]  # [R]; decode step t is at position len + t
        # keys are cached transposed, [R, kv, D, total]: the decode step's q @ k^T is then a plain bmm over
        # contiguous rows (half the time of a transposed operand on CPU)
        # the compiled step reads every slot: unwritten ones must be finite (zero) to get zero attention weight
        alloc = torch.zeros if self.compiled is not None else torch.empty
        self.k_cache = [alloc(rows, self.n_kv, self.head_dim, self.total, dtype=dtype, device=device)
                        for _ in self.layers]
        self.v_cache = [alloc(rows, self.n_kv, self.total, self.head_dim, dtype=dtype, device=device)
                        for _ in self.layers]
        self.slots = torch.arange(self.total, device=device)
        self.key_bias = self.pad_slots = None
        if self.compiled is None:  # added to the eager step's scores
            self.key_bias = torch.zeros(rows, 1, 1, self.total, device=device).masked_fill_(
                ~self.key_valid[:, None, None], float("-inf"))
        else:  # the compiled step masks these slots and the future ones (a bias would read what they hold)
            self.pad_slots = ~self.key_valid[:, None, None]  # [R, 1, 1, total]
        last = self._prefill(prompt_ids, prompt_mask.bool(), row_group)
        if self.fuse:
            self._fuse()
        return self._logits(last)[row_group]

    def _fuse(self) -> None:
        """Concatenate each layer's current projection weights for this batch's decode steps: one product for
        q, k and v, one for gate and up, and RoPE on q and k together: 7 products and two RoPEs per layer become
        4 products and one RoPE (each output element is the same dot product as before)."""
        for L in self.layers:
            ws = (L.q.weight, L.k.weight, L.v.weight)
            bias = None
            if L.q.bias is not None:
                bias = torch.cat((L.q.bias, L.k.bias, L.v.bias))
            L.qkv = (torch.cat(ws), bias)
            L.gate_up = torch.cat((L.gate.weight, L.up.weight))

    def _prefill_mask(self, valid: torch.Tensor, window: int | None) -> torch.Tensor:
        w = valid.shape[1]
        q_idx = torch.arange(w, device=valid.device)[:, None]
        k_idx = torch.arange(w, device=valid.device)[None, :]
        allowed = (k_idx <= q_idx) & valid[:, None, :]
        if window is not None:
            allowed &= (q_idx - k_idx) < window
        # a pad query sees no key at all; let it see itself so SDPA yields no NaN (its output is unused,
        # and no real query ever attends to it)
        allowed |= torch.eye(w, dtype=torch.bool, device=valid.device)
        return allowed[:, None]  # [G, 1, W, W]

    def _prefill(self, ids: torch.Tensor, valid: torch.Tensor, row_group: torch.Tensor) -> torch.Tensor:
        g, w = ids.shape
        pos = (valid.long().cumsum(-1) - 1).clamp_min(0)
        cos, sin = self.cos[pos][:, None], self.sin[pos][:, None]  # [G, 1, W, D]
        masks = {}
        x = F.embedding(ids, self.embed.weight)
        for li, L in enumerate(self.layers):
            h = _rms(x, L.ln1, self.eps)
            q = _lin(h, L.q).view(g, w, self.n_heads, self.head_dim).transpose(1, 2)
            k = _lin(h, L.k).view(g, w, self.n_kv, self.head_dim).transpose(1, 2)
            v = _lin(h, L.v).view(g, w, self.n_kv, self.head_dim).transpose(1, 2)
            q, k = _rope(q, cos, sin), _rope(k, cos, sin)
            self.k_cache[li][:, :, :, :w] = k[row_group].transpose(2, 3)
            self.v_cache[li][:, :, :w] = v[row_group]
            if L.window not in masks:
                masks[L.window] = self._prefill_mask(valid, L.window)
            att = F.scaled_dot_product_attention(q, k, v, attn_mask=masks[L.window],
                                                 enable_gqa=self.n_kv != self.n_heads)
            x = x + _lin(att.transpose(1, 2).reshape(g, w, -1), L.o)
            x = x + self._mlp(x, L)
        return x[:, -1]  # left padding: every prompt's last token is in the last column

    def _mlp(self, x: torch.Tensor, L: _Layer) -> torch.Tensor:
        h = _rms(x, L.ln2, self.eps)
        return _lin(F.silu(_lin(h, L.gate)) * _lin(h, L.up), L.down)

    def _logits(self, x: torch.Tensor) -> torch.Tensor:
        return self.head(_rms(x, self.norm.weight, self.eps)).float()

    def release(self) -> None:
        """Drop the batch's cache and masks."""
        self.k_cache = self.v_cache = self.key_valid = self.key_bias = self.pad_slots = self.cos = self.sin = self.slots = None
        for L in self.layers:
            L.qkv = L.gate_up = None

    # -- decoding ------------------------------------------------------------------------------------------
    def step(self, tokens: torch.Tensor, t: int) -> torch.Tensor:
        """Feed decode step ``t``'s ``[R]`` tokens (cache slot ``width + t``); the next ``[R, vocab]`` logits."""
        slot = self.width + t
        if self.compiled is not None:
            return self.compiled(tokens, self.prompt_len + t, self.slots[slot: slot + 1])
        rows = tokens.shape[0]
        pos = self.prompt_len + t
        cos, sin = self.cos[pos][:, None], self.sin[pos][:, None]  # [R, 1, D]
        x = F.embedding(tokens, self.embed.weight)  # [R, H]
        for li, L in enumerate(self.layers):
            lo = 0 if L.window is None else max(0, slot - L.window + 1)
            q, k, v = self._qkv(x, L, cos, sin)
            kc, vc = self.k_cache[li], self.v_cache[li]
            kc[:, :, :, slot] = k
            vc[:, :, slot] = v
            scores = torch.matmul(q, kc[..., lo: slot + 1]).float()
            scores = scores.mul_(self.scale).add_(self.key_bias[..., lo: slot + 1])  # softmax in float32
            x = self._decode_rest(x, L, scores, vc[:, :, lo: slot + 1])
        return self._logits(x)

    def _full_step(self, tokens: torch.Tensor, pos: torch.Tensor, slot: torch.Tensor) -> torch.Tensor:
        """:meth:`step` over the whole cache, the slot a ``[1]`` tensor: the same shapes at every step (the
        function ``compile=True`` compiles)."""
        cos, sin = self.cos[pos][:, None], self.sin[pos][:, None]
        x = F.embedding(tokens, self.embed.weight)
        hidden = self.pad_slots | (self.slots > slot)  # [R, 1, 1, total]: pad and future slots
        for li, L in enumerate(self.layers):
            q, k, v = self._qkv(x, L, cos, sin)
            kc, vc = self.k_cache[li], self.v_cache[li]
            kc.index_copy_(3, slot, k[..., None])
            vc.index_copy_(2, slot, v[:, :, None])
            masked = hidden if L.window is None else hidden | (self.slots <= slot - L.window)
            scores = torch.matmul(q, kc).float().mul_(self.scale)
            # masked_fill, not the bias: a masked slot's score must not depend on what the slot holds
            scores = scores.masked_fill_(masked, float("-inf"))
            x = self._decode_rest(x, L, scores, vc)
        return self._logits(x)

    def _qkv(self, x: torch.Tensor, L: _Layer, cos: torch.Tensor, sin: torch.Tensor):
        """One decode token's rotated queries ``[R, kv, groups, D]`` (the ``groups`` query heads sharing a key/value
        head attend as ``groups`` query rows of that head, so no key/value repeat is materialised), keys and values
        ``[R, kv, D]``."""
        rows = x.shape[0]
        nq, nk = self.n_heads * self.head_dim, self.n_kv * self.head_dim
        h = _rms(x, L.ln1, self.eps)
        if L.qkv is not None:
            z = F.linear(h, *L.qkv)  # [R, q | k | v]
            qk = _rope(z[:, : nq + nk].view(rows, self.n_heads + self.n_kv, self.head_dim), cos, sin)
            q, k = qk[:, : self.n_heads], qk[:, self.n_heads:]
            v = z[:, nq + nk:].view(rows, self.n_kv, self.head_dim)
        else:
            q = _rope(_lin(h, L.q).view(rows, self.n_heads, self.head_dim), cos, sin)
            k = _rope(_lin(h, L.k).view(rows, self.n_kv, self.head_dim), cos, sin)
            v = _lin(h, L.v).view(rows, self.n_kv, self.head_dim)
        return q.reshape(rows, self.n_kv, self.n_heads // self.n_kv, self.head_dim), k, v

    def _decode_rest(self, x: torch.Tensor, L: _Layer, scores: torch.Tensor, values: torch.Tensor) -> torch.Tensor:
        """The layer after its attention scores: softmax (float32), values, output projection, MLP."""
        att = torch.matmul(scores.softmax(-1).to(values.dtype), values)
        x = x + _lin(att.reshape(x.shape[0], -1), L.o)
        if L.gate_up is None:
            return x + self._mlp(x, L)
        gu = F.linear(_rms(x, L.ln2, self.eps), L.gate_up)
        gate, up = gu.split(L.gate.weight.shape[0], dim=-1)
        return x + F.linear(F.silu(gate) * up, L.down.weight, L.down.bias)

"""A policy's shape: parameter counts and the dimensions its memory scales with, counted without loading it.

:func:`model_shape` builds the model from its ``config.json`` on the ``meta`` device (no weights are read, no
memory is taken) and counts its parameters exactly, and those of ``model.lora``'s adapters. ``rlvr plan``
(:mod:`rlvr.run.plan`) and the engines' memory rules (:data:`rlvr.engines.base.ENGINE_MEMORY`) read it.
:func:`head_size` reads the attention head size alone, from the config's numbers (no transformers import),
for checks that run when a config is loaded.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

__all__ = ["Shape", "model_shape", "head_size", "config_head_size"]


@dataclass(frozen=True)
class Shape:
    """What the plan reads of a model: parameter counts and the dimensions activations scale with."""

    params: int
    hidden: int
    layers: int
    heads: int
    kv_heads: int
    intermediate: int
    vocab: int
    lora_params: int = 0  # the adapters' parameters with model.lora (0: full fine-tuning)
    head_size: int = 0  # the config's head_dim where it sets one (Qwen3, Gemma), else hidden / heads

    @property
    def head_dim(self) -> int:
        return self.head_size or self.hidden // self.heads

    @property
    def trainable(self) -> int:
        return self.lora_params or self.params


def _hf_config(model_cfg: Any):
    """The policy's transformers config: its directory's ``config.json``, or the built-in tiny model's."""
    if model_cfg.path is not None:
        from transformers import AutoConfig

        path = Path(model_cfg.path).expanduser()
        if not (path / "config.json").is_file():
            raise FileNotFoundError(f"model.path {model_cfg.path!r}: no config.json (a local model directory)")
        return AutoConfig.from_pretrained(str(path), local_files_only=True)
    from rlvr.models.tiny import build_tiny_model, char_tokenizer, vlm_tokenizer

    tok = vlm_tokenizer() if model_cfg.tiny.arch == "qwen2_vl" else char_tokenizer()
    if model_cfg.tiny.tokens:
        tok.add_tokens(list(dict.fromkeys(model_cfg.tiny.tokens)))
    return build_tiny_model(model_cfg.tiny, tok).config  # (tiny: building it costs milliseconds)


def model_shape(model_cfg: Any) -> Shape:
    """The policy's :class:`Shape`, counted on a model built on the meta device (nothing is loaded)."""
    import torch
    from transformers import AutoModelForCausalLM

    config = _hf_config(model_cfg)
    text = getattr(config, "text_config", None) or config
    with torch.device("meta"):
        try:
            model = AutoModelForCausalLM.from_config(config)
        except ValueError:  # a vision-language model
            from transformers import AutoModelForImageTextToText

            model = AutoModelForImageTextToText.from_config(config)
    params = sum(p.numel() for p in model.parameters())
    lora = 0
    if model_cfg.lora.rank:  # the adapters exactly as the run injects them (peft works on the meta device)
        from rlvr.models.lora import apply_lora

        apply_lora(model, model_cfg.lora)
        lora = sum(p.numel() for p in model.parameters() if p.requires_grad)
    return Shape(params, text.hidden_size, text.num_hidden_layers, text.num_attention_heads,
                 getattr(text, "num_key_value_heads", None) or text.num_attention_heads, text.intermediate_size,
                 text.vocab_size, lora, getattr(text, "head_dim", None) or 0)


def config_head_size(config: dict[str, Any]) -> int | None:
    """The attention head size a transformers ``config.json`` (as a dict) gives its text model: its
    ``head_dim`` where it sets one (Qwen3, Gemma), else width / heads; ``None`` when the fields are absent."""
    text = config.get("text_config") if isinstance(config.get("text_config"), dict) else config
    if isinstance(text.get("head_dim"), int) and text["head_dim"] > 0:
        return text["head_dim"]
    width = _first_int(text, ("hidden_size", "n_embd", "d_model"))
    heads = _first_int(text, ("num_attention_heads", "n_head", "num_heads"))
    return width // heads if width and heads else None


def _first_int(config: dict[str, Any], keys: tuple[str, ...]) -> int | None:
    """The first of ``keys`` that ``config`` sets to an integer (architectures name a field differently)."""
    return next((config[k] for k in keys if isinstance(config.get(k), int)), None)


def head_size(model_cfg: Any) -> int | None:
    """The policy's attention head size: ``model.tiny.hidden_size / num_heads``, or read from
    ``model.path``'s ``config.json``; ``None`` when that file is missing or unreadable (the model's loading
    reports it)."""
    if model_cfg.path is None:
        return model_cfg.tiny.hidden_size // model_cfg.tiny.num_heads
    import json

    try:
        config = json.loads((Path(model_cfg.path).expanduser() / "config.json").read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    return config_head_size(config) if isinstance(config, dict) else None

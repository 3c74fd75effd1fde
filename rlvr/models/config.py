"""The model section of the config (``model``, ``model.tiny``, ``model.lora``): plain settings, so a
config validates without importing torch or transformers."""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

from rlvr.core.paths import LocalPathStr
__all__ = ["ModelConfig", "TinyModelConfig", "TinyVisionConfig", "LoRAConfig"]


class TinyVisionConfig(BaseModel):
    """The vision tower of the tiny vision-language model (``model.tiny.arch: qwen2_vl``)."""

    model_config = ConfigDict(extra="forbid", frozen=True)
    depth: int = Field(2, gt=0, description="vision transformer blocks")
    embed_dim: int = Field(64, gt=0, description="vision transformer width")
    num_heads: int = Field(4, gt=0, description="vision attention heads")
    patch_size: int = Field(8, gt=0, description="pixels per patch side")
    merge_size: int = Field(2, gt=0, description="patches merged per side into one language token")
    min_pixels: int = Field(32 * 32, gt=0, description="images are resized up to at least this many pixels")
    max_pixels: int = Field(64 * 64, gt=0, description="and down to at most this many")


class TinyModelConfig(BaseModel):
    """Size of the built-in tiny model (used when ``model.path`` is not set)."""

    model_config = ConfigDict(extra="forbid", frozen=True)
    arch: Literal["qwen2", "llama", "qwen2_vl"] = Field(
        "qwen2", description="transformers architecture (qwen2_vl: a vision-language model with `vision`)")
    hidden_size: int = Field(128, gt=0, description="model width")
    num_layers: int = Field(2, gt=0, description="number of transformer blocks")
    num_heads: int = Field(4, gt=0, description="attention heads")
    num_kv_heads: int = Field(2, gt=0, description="key/value heads (grouped-query attention)")
    intermediate_size: int = Field(512, gt=0, description="MLP width")
    max_positions: int = Field(128, gt=0, description="maximum sequence length")
    vision: TinyVisionConfig = Field(default_factory=TinyVisionConfig, description="vision tower (arch qwen2_vl)")
    tokens: list[str] = Field(default_factory=list, description="strings the character-level tokenizer keeps "
                                                                "whole, one token each (e.g. a response format's tags)")


class LoRAConfig(BaseModel):
    """LoRA adapters for the RL phase (``peft``); off while ``rank`` is 0."""

    model_config = ConfigDict(extra="forbid", frozen=True)
    rank: int = Field(0, ge=0, description="adapter rank r (0: full fine-tuning)")
    alpha: float = Field(16.0, gt=0.0, description="scaling numerator: updates are (alpha / r) B A")
    dropout: float = Field(0.0, ge=0.0, lt=1.0, description="dropout on the adapter's input")
    target_modules: list[str] | str = Field(
        default_factory=lambda: ["q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj"],
        description="names (suffixes) of the linear layers to adapt, or 'all-linear'")


class ModelConfig(BaseModel):
    """Which policy to train."""

    model_config = ConfigDict(extra="forbid", frozen=True)
    path: LocalPathStr | None = Field(None, description="local Hugging Face model directory; unset builds the tiny model")
    tiny: TinyModelConfig = Field(default_factory=TinyModelConfig, description="tiny model size (no path)")
    dtype: Literal["auto", "float32", "bfloat16", "float16"] = Field(
        "auto", description="parameter dtype (auto: bfloat16 on a GPU that supports it, else float32)")
    chat_template: bool = Field(False, description="render prompts with the tokenizer's chat template")
    logprob_chunk_tokens: int = Field(4096, gt=0, description="tokens per log-prob chunk (bounds [tokens, vocab] memory)")
    lora: LoRAConfig = Field(default_factory=LoRAConfig, description="LoRA adapters for the RL phase (peft)")

"""A tiny causal LM and character-level tokenizer built locally, for the demo and the tests.

Nothing is downloaded: the tokenizer is assembled with the ``tokenizers`` library from a fixed character
set and the model is a randomly initialised Qwen2 or Llama architecture from ``transformers``. Both save
with ``save_pretrained`` and load back through the ordinary local-directory path.
"""

from __future__ import annotations

import string

import torch
from tokenizers import Regex, Tokenizer, decoders, models, pre_tokenizers
from transformers import (LlamaConfig, LlamaForCausalLM, PreTrainedModel, PreTrainedTokenizerFast,
                          Qwen2Config, Qwen2ForCausalLM)

from rlvr.models.config import TinyModelConfig

__all__ = ["TinyModelConfig", "char_tokenizer", "build_tiny_model", "SPECIAL_TOKENS"]

SPECIAL_TOKENS = ("<pad>", "<eos>", "<unk>")
CHARSET = string.digits + string.ascii_letters + string.punctuation + " \n"


def char_tokenizer(charset: str = CHARSET) -> PreTrainedTokenizerFast:
    """One token per character, plus ``<pad>``, ``<eos>`` and ``<unk>``; left padding for generation."""
    vocab = {tok: i for i, tok in enumerate(SPECIAL_TOKENS)}
    for ch in charset:
        vocab.setdefault(ch, len(vocab))
    tok = Tokenizer(models.WordLevel(vocab=vocab, unk_token="<unk>"))
    tok.pre_tokenizer = pre_tokenizers.Split(Regex(r"[\s\S]"), behavior="isolated")
    tok.decoder = decoders.Fuse()
    return PreTrainedTokenizerFast(tokenizer_object=tok, pad_token="<pad>", eos_token="<eos>",
                                   unk_token="<unk>", padding_side="left")


def build_tiny_model(cfg: TinyModelConfig, tokenizer: PreTrainedTokenizerFast, seed: int = 0) -> PreTrainedModel:
    """A randomly initialised model sized by ``cfg``; the same seed gives the same weights."""
    if cfg.num_heads % cfg.num_kv_heads or cfg.hidden_size % cfg.num_heads:
        raise ValueError("tiny model: hidden_size must divide by num_heads, num_heads by num_kv_heads")
    common = dict(vocab_size=len(tokenizer), hidden_size=cfg.hidden_size, intermediate_size=cfg.intermediate_size,
                  num_hidden_layers=cfg.num_layers, num_attention_heads=cfg.num_heads,
                  num_key_value_heads=cfg.num_kv_heads, max_position_embeddings=cfg.max_positions,
                  tie_word_embeddings=True, pad_token_id=tokenizer.pad_token_id,
                  eos_token_id=tokenizer.eos_token_id, bos_token_id=tokenizer.eos_token_id)
    config_cls, model_cls = (Qwen2Config, Qwen2ForCausalLM) if cfg.arch == "qwen2" else (LlamaConfig, LlamaForCausalLM)
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        model = model_cls(config_cls(**common))
    model.generation_config.pad_token_id = tokenizer.pad_token_id
    model.generation_config.eos_token_id = tokenizer.eos_token_id
    return model

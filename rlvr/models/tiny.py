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

__all__ = ["TinyModelConfig", "char_tokenizer", "build_tiny_model", "SPECIAL_TOKENS", "vlm_tokenizer",
           "tiny_image_processor"]

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


VISION_TOKENS = ("<|vision_start|>", "<|vision_end|>", "<|image_pad|>", "<|video_pad|>")


def vlm_tokenizer(charset: str = CHARSET) -> PreTrainedTokenizerFast:
    """:func:`char_tokenizer` with the Qwen2-VL image tokens (each one token)."""
    tok = char_tokenizer(charset)
    tok.add_special_tokens({"additional_special_tokens": list(VISION_TOKENS)})
    return tok


def tiny_image_processor(cfg: TinyModelConfig):
    """The Qwen2-VL image processor (PIL backend) for the tiny VLM's patch and image sizes."""
    from transformers.models.qwen2_vl.image_processing_pil_qwen2_vl import Qwen2VLImageProcessorPil

    v = cfg.vision
    return Qwen2VLImageProcessorPil(patch_size=v.patch_size, merge_size=v.merge_size, temporal_patch_size=2,
                                    size={"shortest_edge": v.min_pixels, "longest_edge": v.max_pixels})


def _tiny_vlm(cfg: TinyModelConfig, tokenizer: PreTrainedTokenizerFast, text: dict) -> PreTrainedModel:
    from transformers import Qwen2VLConfig, Qwen2VLForConditionalGeneration

    half = cfg.hidden_size // cfg.num_heads // 2
    side = half * 3 // 8  # Qwen2-VL's split of the rotary dimensions over (time, height, width): 16/24/24 of 64
    if half < 4:
        raise ValueError("tiny model: a vision-language model needs head dimensions of at least 8")
    ids = {t: tokenizer.convert_tokens_to_ids(t) for t in VISION_TOKENS}
    if any(i is None or i == tokenizer.unk_token_id for i in ids.values()):
        raise ValueError(f"the tokenizer lacks the image tokens {VISION_TOKENS} (use vlm_tokenizer())")
    v = cfg.vision
    if v.embed_dim % v.num_heads:
        raise ValueError("tiny model: vision.embed_dim must divide by vision.num_heads")
    config = Qwen2VLConfig(
        text_config=dict(text, rope_parameters={"rope_type": "default", "rope_theta": 10000.0,
                                                "mrope_section": [half - 2 * side, side, side]}),
        vision_config=dict(depth=v.depth, embed_dim=v.embed_dim, hidden_size=cfg.hidden_size, num_heads=v.num_heads,
                           mlp_ratio=2, patch_size=v.patch_size, spatial_merge_size=v.merge_size,
                           temporal_patch_size=2, in_channels=3),
        image_token_id=ids["<|image_pad|>"], video_token_id=ids["<|video_pad|>"],
        vision_start_token_id=ids["<|vision_start|>"], vision_end_token_id=ids["<|vision_end|>"],
        tie_word_embeddings=True)
    return Qwen2VLForConditionalGeneration(config)


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
        model = _tiny_vlm(cfg, tokenizer, common) if cfg.arch == "qwen2_vl" else model_cls(config_cls(**common))
    model.generation_config.pad_token_id = tokenizer.pad_token_id
    model.generation_config.eos_token_id = tokenizer.eos_token_id
    return model

"""Tiny randomly initialised VLMs of each family rlvr reads, saved as local Hugging Face directories.

Each directory holds what ``save_pretrained`` writes for a real checkpoint: ``config.json`` and the weights,
the tokenizer (rlvr's character tokenizer plus the family's image tokens, marked as the family's processor
expects them) and the image processor's ``preprocessor_config.json`` (PIL backend).
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import torch
from PIL import Image

from rlvr.models.tiny import char_tokenizer

FAMILY_TOKENS = {
    "llava": ["<image>"],
    "gemma3": ["<start_of_image>", "<image_soft_token>", "<end_of_image>"],
    "idefics3": ["<fake_token_around_image>", "<image>", "<global-img>", "<end_of_utterance>"]
                + [f"<row_{r}_col_{c}>" for r in range(1, 7) for c in range(1, 7)],
    "qwen2_5_vl": ["<|vision_start|>", "<|vision_end|>", "<|image_pad|>", "<|video_pad|>"],
    "internvl": ["<img>", "</img>", "<IMG_CONTEXT>", "<video>"],
    "llava_onevision": ["<image>", "<video>"],
    "paligemma": ["<image>", "<bos>"],
}
FAMILY_TOKENS["smolvlm"] = FAMILY_TOKENS["idefics3"]
FAMILY_TOKENS["llava_next"] = FAMILY_TOKENS["llava"]
FAMILY_TOKENS["qwen3_vl"] = FAMILY_TOKENS["qwen3_vl_moe"] = FAMILY_TOKENS["qwen2_5_vl"]
SIZE = 32  # the vision towers' image side; 8-pixel patches (Qwen3-VL: 16)
PINPOINTS = [[32, 64], [64, 32], [64, 64], [96, 32]]  # LLaVA-NeXT's anyres grids
OV_PINPOINTS = PINPOINTS + [[96, 96], [128, 128]]  # LLaVA-OneVision's, pooled past anyres_max_2


def img(h, w, seed=0):
    rng = np.random.default_rng(seed)
    return Image.fromarray((rng.random((h, w, 3)) * 255).astype("uint8"))


def family_tokenizer(family: str):
    tok = char_tokenizer()
    tok.add_special_tokens({"additional_special_tokens": FAMILY_TOKENS[family]})
    if family == "gemma3":  # what Gemma3Processor reads off a Gemma tokenizer
        tok._set_model_specific_special_tokens({"boi_token": "<start_of_image>", "eoi_token": "<end_of_image>",
                                                "image_token": "<image_soft_token>"})
    if family == "internvl":  # what InternVLProcessor reads off an InternVL tokenizer
        tok._set_model_specific_special_tokens({"start_image_token": "<img>", "end_image_token": "</img>",
                                                "context_image_token": "<IMG_CONTEXT>", "video_token": "<video>"})
    if family == "paligemma":
        tok.bos_token = "<bos>"
    return tok


def _text(tok, layers=1, **extra):
    return dict(vocab_size=len(tok), hidden_size=64, intermediate_size=128, num_hidden_layers=layers,
                num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=512,
                pad_token_id=tok.pad_token_id, eos_token_id=tok.eos_token_id, bos_token_id=tok.eos_token_id,
                **extra)


def _vision(**extra):
    return dict(hidden_size=32, intermediate_size=64, num_hidden_layers=1, num_attention_heads=2, image_size=SIZE,
                patch_size=8, **extra)


def build(family: str, seed: int = 0, **processor):
    """``(model, tokenizer, image_processor)`` of a tiny ``family`` VLM; ``processor`` overrides the image
    processor's settings (``do_image_splitting``, ``do_pan_and_scan``, ...)."""
    import transformers as tf

    tok = family_tokenizer(family)
    ids = {t: tok.convert_tokens_to_ids(t) for t in FAMILY_TOKENS[family]}
    torch.manual_seed(seed)
    if family == "llava":
        from transformers.models.clip.image_processing_pil_clip import CLIPImageProcessorPil

        cfg = tf.LlavaConfig(vision_config=_vision(model_type="clip_vision_model"),
                             text_config=_text(tok, model_type="llama"), image_token_index=ids["<image>"],
                             vision_feature_layer=-1, tie_word_embeddings=True)
        model = tf.LlavaForConditionalGeneration(cfg)
        ip = CLIPImageProcessorPil(**{"size": {"shortest_edge": SIZE}, "crop_size": {"height": SIZE, "width": SIZE},
                                      **processor})
    elif family == "llava_next":
        from transformers.models.llava_next.image_processing_pil_llava_next import LlavaNextImageProcessorPil

        cfg = tf.LlavaNextConfig(vision_config=_vision(model_type="clip_vision_model"),
                                 text_config=_text(tok, model_type="llama"), image_token_index=ids["<image>"],
                                 vision_feature_layer=-1, image_grid_pinpoints=PINPOINTS, tie_word_embeddings=True)
        model = tf.LlavaNextForConditionalGeneration(cfg)
        ip = LlavaNextImageProcessorPil(**{"size": {"shortest_edge": SIZE}, "image_grid_pinpoints": PINPOINTS,
                                           "crop_size": {"height": SIZE, "width": SIZE}, **processor})
    elif family == "gemma3":
        from transformers.models.gemma3.image_processing_pil_gemma3 import Gemma3ImageProcessorPil

        text = _text(tok, layers=2, model_type="gemma3_text", head_dim=16, sliding_window=24,
                     layer_types=["sliding_attention", "full_attention"])
        cfg = tf.Gemma3Config(vision_config=_vision(model_type="siglip_vision_model"), text_config=text,
                              mm_tokens_per_image=4, image_token_index=ids["<image_soft_token>"],
                              boi_token_index=ids["<start_of_image>"], eoi_token_index=ids["<end_of_image>"])
        model = tf.Gemma3ForConditionalGeneration(cfg)
        with torch.no_grad():  # transformers initialises the projection to zeros: images would read as nothing
            model.model.multi_modal_projector.mm_input_projection_weight.normal_(0.0, 0.5)
        ip = Gemma3ImageProcessorPil(**{"size": {"height": SIZE, "width": SIZE}, **processor})
    elif family in ("idefics3", "smolvlm"):
        if family == "idefics3":
            from transformers.models.idefics3.image_processing_pil_idefics3 import Idefics3ImageProcessorPil as IP
            config_cls, model_cls = tf.Idefics3Config, tf.Idefics3ForConditionalGeneration
        else:
            from transformers.models.smolvlm.image_processing_pil_smolvlm import SmolVLMImageProcessorPil as IP
            config_cls, model_cls = tf.SmolVLMConfig, tf.SmolVLMForConditionalGeneration
        cfg = config_cls(vision_config=_vision(), text_config=_text(tok, model_type="llama"),
                         image_token_id=ids["<image>"], scale_factor=2, tie_word_embeddings=True)
        model = model_cls(cfg)
        ip = IP(**{"size": {"longest_edge": 2 * SIZE}, "max_image_size": {"longest_edge": SIZE}, **processor})
    elif family == "qwen2_5_vl":
        from transformers.models.qwen2_vl.image_processing_pil_qwen2_vl import Qwen2VLImageProcessorPil

        rope = {"rope_type": "default", "rope_theta": 10000.0, "mrope_section": [2, 3, 3]}
        cfg = tf.Qwen2_5_VLConfig(
            text_config=_text(tok, rope_parameters=rope),
            vision_config=dict(depth=2, hidden_size=32, intermediate_size=64, num_heads=2, out_hidden_size=64,
                               patch_size=8, spatial_merge_size=2, temporal_patch_size=2, window_size=32,
                               fullatt_block_indexes=[1]),
            image_token_id=ids["<|image_pad|>"], video_token_id=ids["<|video_pad|>"],
            vision_start_token_id=ids["<|vision_start|>"], vision_end_token_id=ids["<|vision_end|>"],
            tie_word_embeddings=True)
        model = tf.Qwen2_5_VLForConditionalGeneration(cfg)
        ip = Qwen2VLImageProcessorPil(**{"patch_size": 8, "merge_size": 2, "temporal_patch_size": 2,
                                         "size": {"shortest_edge": 16 * 16, "longest_edge": 64 * 64}, **processor})
    elif family in ("qwen3_vl", "qwen3_vl_moe"):
        from transformers.models.qwen2_vl.image_processing_pil_qwen2_vl import Qwen2VLImageProcessorPil

        rope = {"rope_type": "default", "rope_theta": 10000.0, "mrope_section": [2, 3, 3], "mrope_interleaved": True}
        text = _text(tok, rope_parameters=rope, head_dim=16)
        if family == "qwen3_vl_moe":
            text.update(num_experts=4, num_experts_per_tok=2, moe_intermediate_size=32, decoder_sparse_step=1)
        config_cls, model_cls = ((tf.Qwen3VLConfig, tf.Qwen3VLForConditionalGeneration) if family == "qwen3_vl"
                                 else (tf.Qwen3VLMoeConfig, tf.Qwen3VLMoeForConditionalGeneration))
        cfg = config_cls(
            text_config=text,
            vision_config=dict(depth=2, hidden_size=32, intermediate_size=64, num_heads=2, out_hidden_size=64,
                               patch_size=16, spatial_merge_size=2, temporal_patch_size=2, num_position_embeddings=16,
                               deepstack_visual_indexes=[0]),
            image_token_id=ids["<|image_pad|>"], video_token_id=ids["<|video_pad|>"],
            vision_start_token_id=ids["<|vision_start|>"], vision_end_token_id=ids["<|vision_end|>"],
            tie_word_embeddings=True)
        model = model_cls(cfg)
        ip = Qwen2VLImageProcessorPil(**{"patch_size": 16, "merge_size": 2, "temporal_patch_size": 2,
                                         "image_mean": [0.5] * 3, "image_std": [0.5] * 3,
                                         "size": {"shortest_edge": 32 * 32, "longest_edge": 128 * 128}, **processor})
    elif family == "internvl":
        from transformers.models.got_ocr2.image_processing_pil_got_ocr2 import GotOcr2ImageProcessorPil

        cfg = tf.InternVLConfig(vision_config=dict(_vision(), image_size=[SIZE, SIZE], patch_size=[8, 8]),
                                text_config=_text(tok, model_type="qwen2"), image_token_id=ids["<IMG_CONTEXT>"],
                                image_seq_length=4, downsample_ratio=0.5, tie_word_embeddings=True)
        model = tf.InternVLForConditionalGeneration(cfg)
        ip = GotOcr2ImageProcessorPil(**{"size": {"height": SIZE, "width": SIZE}, "crop_to_patches": False,
                                         "max_patches": 6, **processor})
    elif family == "llava_onevision":
        from transformers.models.llava_onevision.image_processing_pil_llava_onevision import \
            LlavaOnevisionImageProcessorPil

        cfg = tf.LlavaOnevisionConfig(vision_config=_vision(model_type="siglip_vision_model"),
                                      text_config=_text(tok, model_type="qwen2"), image_token_index=ids["<image>"],
                                      video_token_index=ids["<video>"], vision_feature_layer=-1,
                                      vision_feature_select_strategy="full", image_grid_pinpoints=OV_PINPOINTS,
                                      vision_aspect_ratio="anyres_max_2", tie_word_embeddings=True)
        model = tf.LlavaOnevisionForConditionalGeneration(cfg)
        ip = LlavaOnevisionImageProcessorPil(**{"size": {"height": SIZE, "width": SIZE},
                                                "image_grid_pinpoints": OV_PINPOINTS, **processor})
    elif family == "paligemma":  # PaliGemma 2: a Gemma 2 language model, its final logits soft-capped (here at 3,
        # low enough that a cap left out, or image tokens suppressed before it instead of after, shows)
        from transformers.models.siglip.image_processing_pil_siglip import SiglipImageProcessorPil

        text = _text(tok, layers=2, model_type="gemma2", head_dim=16, sliding_window=24, final_logit_softcapping=3.0,
                     layer_types=["sliding_attention", "full_attention"])
        cfg = tf.PaliGemmaConfig(vision_config=_vision(model_type="siglip_vision_model"), text_config=text,
                                 image_token_index=ids["<image>"], projection_dim=64)
        model = tf.PaliGemmaForConditionalGeneration(cfg)
        ip = SiglipImageProcessorPil(**{"size": {"height": SIZE, "width": SIZE},
                                        "image_seq_length": (SIZE // 8) ** 2, **processor})
    else:
        raise ValueError(family)
    model.generation_config.pad_token_id = tok.pad_token_id
    model.generation_config.eos_token_id = tok.eos_token_id
    return model.eval(), tok, ip


def save_family(family: str, directory: Path, seed: int = 0, **processor) -> Path:
    """A tiny ``family`` VLM saved to ``directory`` as a local model directory."""
    model, tok, ip = build(family, seed, **processor)
    directory = Path(directory)
    model.save_pretrained(directory)
    tok.save_pretrained(directory)
    ip.save_pretrained(directory)
    return directory

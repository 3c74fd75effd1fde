"""Vision-language models: image prompts encoded per VLM family, and what every forward over images needs.

rlvr encodes image prompts itself (:mod:`rlvr.models.vlm.base`: render, process, expand, tokenize), with one
encoder per family, registered by the ``model_type`` of the model's ``config.json``:

- ``qwen2_vl``, ``qwen2_5_vl``, ``qwen3_vl``, ``qwen3_vl_moe`` (:mod:`rlvr.models.vlm.qwen`): patches and
  grids, M-RoPE positions;
- ``llava``, ``llava_next``, ``gemma3``, ``idefics3``, ``smolvlm`` (:mod:`rlvr.models.vlm.llava_gemma_idefics`);
- ``internvl``, ``llava_onevision``, ``paligemma`` (:mod:`rlvr.models.vlm.internvl_paligemma`; PaliGemma's prompt is a
  bidirectional prefix, marked by token types in every forward, and its positions count from 1).

Any other VLM directory is refused at load, naming these (:data:`SUPPORTED_VLMS`).

The encoder travels with the tokenizer (:func:`attach_vision`, :func:`vision_of`), so every component that
encodes prompts with a tokenizer encodes image prompts too, and :func:`save_tokenizer` writes the image
processor beside the tokenizer, so a checkpoint loads back as the same VLM. The model carries the tokens its
policy never samples (:func:`bind_vision`, :func:`suppressed_tokens`), and :func:`vision_forward_kwargs` gives
every forward and ``generate`` the family's image arguments.
"""

from __future__ import annotations

from pathlib import Path

from rlvr.lazy import torch
from rlvr.models.vlm import internvl_paligemma, llava_gemma_idefics, qwen
from rlvr.models.vlm.base import FAMILIES, IMAGE_MARKER, ImageError, VisionProcessor, image_size, load_image

__all__ = ["VisionProcessor", "ImageError", "attach_vision", "vision_of", "save_tokenizer", "load_image",
           "image_size", "SUPPORTED_VLMS", "image_token_id", "vision_forward_kwargs", "suppressed_tokens",
           "SUPPRESSED_LOGIT", "IMAGE_MARKER", "bind_vision", "own_positions", "family_of", "position_offset"]

_ = (qwen, llava_gemma_idefics, internvl_paligemma)  # imported for their registrations
SUPPORTED_VLMS = tuple(sorted(FAMILIES))
SUPPRESSED_LOGIT = -1e9  # finite, so 0 * log p stays 0 in entropies; exp() of it is 0 in float32 and bfloat16
_ATTR = "_rlvr_vision"
_SUPPRESSED = "_rlvr_suppressed_tokens"


def family_of(model) -> type[VisionProcessor] | None:
    """The encoder class of ``model``'s VLM family (None for a text-only model; an error for a VLM of a
    family rlvr does not read)."""
    cfg = getattr(model, "config", None)
    if getattr(cfg, "vision_config", None) is None:
        return None
    kind = getattr(cfg, "model_type", None)
    if kind not in FAMILIES:
        raise ValueError(f"rlvr reads vision-language models of the families {', '.join(SUPPORTED_VLMS)}; "
                         f"{kind!r} is not supported yet")
    return FAMILIES[kind]


def image_token_id(model) -> int | None:
    """The image feature placeholder token of a vision-language ``model`` (None for a text-only model)."""
    cfg = getattr(model, "config", None)
    return getattr(cfg, "image_token_id", None) if getattr(cfg, "vision_config", None) is not None else None


def bind_vision(model, tokenizer, processor: VisionProcessor | None):
    """``tokenizer`` carrying ``processor`` (:func:`attach_vision`), and ``model`` the tokens its policy never
    samples, tokenizer-only ones included (Idefics3's ``<fake_token_around_image>``, row/column tokens)."""
    attach_vision(tokenizer, processor)
    if processor is not None:
        setattr(model, _SUPPRESSED, tuple(processor.suppressed_ids()))
    return tokenizer


def suppressed_tokens(model) -> list[int]:
    """Token ids the policy never samples: a VLM's image placeholders and their delimiters (a sampled
    placeholder would claim image features that do not exist). Empty for a text-only model."""
    cfg = getattr(model, "config", None)
    if getattr(cfg, "vision_config", None) is None:
        return []
    family = FAMILIES.get(getattr(cfg, "model_type", None))
    ids = set(family.config_suppressed(cfg)) if family is not None else {int(cfg.image_token_id)}
    return sorted(ids | set(getattr(model, _SUPPRESSED, ())))


def own_positions(model) -> bool:
    """Whether ``model`` computes its positions itself for a forward with images (Qwen2-VL's M-RoPE); the
    other families take the batch's 1-D positions."""
    family = family_of(model)
    return bool(family is not None and family.own_positions)


def position_offset(model) -> int:
    """What ``model`` adds to the batch's positions (0-based, counting real tokens): 1 for PaliGemma, whose
    positions count from 1 (as its ``generate`` computes them), 0 otherwise."""
    family = family_of(model)
    return int(family.position_offset) if family is not None else 0


def attach_vision(tokenizer, processor: VisionProcessor | None):
    """``tokenizer`` carrying ``processor``: what every prompt encoder reads images with."""
    setattr(tokenizer, _ATTR, processor)
    return tokenizer


def vision_of(tokenizer) -> VisionProcessor | None:
    """The :class:`VisionProcessor` attached to ``tokenizer`` (None for a text-only model)."""
    return getattr(tokenizer, _ATTR, None)


def save_tokenizer(tokenizer, directory: str | Path) -> None:
    """``tokenizer.save_pretrained(directory)``, with the image processor beside it for a VLM."""
    tokenizer.save_pretrained(str(directory))
    vp = vision_of(tokenizer)
    if vp is not None:
        vp.save(directory)


def vision_forward_kwargs(model, input_ids: torch.Tensor, vision, completion_start=None) -> dict:
    """The extra keyword arguments a VLM's trunk (or ``generate``) needs for ``vision`` (a
    :class:`~rlvr.core.vision.BatchVision` or :class:`~rlvr.core.vision.VisionInputs`), in the family's
    layout (Qwen2-VL: patches, grids and image-token types; Gemma 3: pixels and token types; Idefics3: tiles
    and their pixel mask); empty without images.

    A prefix-LM family (PaliGemma) also gets, with images or without, the token types that make the prompt
    its bidirectional prefix and the completion its causal suffix: ``completion_start`` is the column where
    the completion begins (an int for every row, or one per row; ``None``: the whole input is the prompt)."""
    family = family_of(model)
    extra = {}
    if vision is not None:
        if family is None:
            raise ValueError("the batch has images but the model is text-only")
        extra = family.forward_kwargs(model.config, input_ids, vision)
    if family is not None and family.prefix_lm:
        extra.update(family.prefix_kwargs(model.config, input_ids, completion_start))
    return extra

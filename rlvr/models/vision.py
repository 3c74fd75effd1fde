"""Vision-language models: prompts with images encoded for the Qwen2-VL family, and a tiny one for the demo.

rlvr encodes image prompts itself instead of through transformers' ``Qwen2VLProcessor``, which will not
build without ``torchvision`` (it insists on a video processor) and whose CUDA wheels break a CPU torch. It
needs only the model's image processor (``preprocessor_config.json``, read by ``AutoImageProcessor``,
PIL backend) and the tokenizer:

1. the prompt is rendered with one ``<|vision_start|><|image_pad|><|vision_end|>`` per image: a text
   prompt's ``<image>`` markers (images without a marker open the prompt), or a chat prompt's
   ``{"type": "image"}`` parts through the tokenizer's chat template;
2. the image processor turns the images into patches and each image's grid ``(t, h, w)``;
3. image ``k``'s single ``<|image_pad|>`` token becomes ``t * h * w / merge_size**2`` of them, one per
   merged patch the vision tower emits, as the processor would write them.

The :class:`VisionProcessor` travels with the tokenizer (:func:`attach_vision`, :func:`vision_of`), so every
component that encodes prompts with a tokenizer encodes image prompts too, and :func:`save_tokenizer` writes
the image processor beside the tokenizer, so a checkpoint loads back as the same VLM.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Sequence

from rlvr.core.vision import VisionInputs
from rlvr.lazy import torch

__all__ = ["VisionProcessor", "ImageError", "attach_vision", "vision_of", "save_tokenizer", "load_image",
           "SUPPORTED_VLMS", "image_token_id", "vision_forward_kwargs", "suppressed_tokens",
           "SUPPRESSED_LOGIT"]

SUPPORTED_VLMS = ("qwen2_vl", "qwen2_5_vl")
IMAGE_MARKER = "<image>"
SUPPRESSED_LOGIT = -1e9  # finite, so 0 * log p stays 0 in entropies; exp() of it is 0 in float32 and bfloat16
_ATTR = "_rlvr_vision"


class ImageError(ValueError):
    """An image that cannot be read, or a prompt whose image placeholders do not match its images."""


def load_image(item: Any):
    """``item`` (a PIL image, or a path to an image file) as an RGB PIL image."""
    from PIL import Image, UnidentifiedImageError

    if isinstance(item, Image.Image):
        return item.convert("RGB") if item.mode != "RGB" else item
    if isinstance(item, (str, Path)):
        path = Path(item)
        if not path.is_file():
            raise ImageError(f"image {str(path)!r} does not exist")
        try:
            with Image.open(path) as im:
                im.load()
                return im.convert("RGB")
        except (UnidentifiedImageError, OSError, ValueError) as e:
            raise ImageError(f"image {str(path)!r} cannot be read ({type(e).__name__}: {e})") from None
    raise ImageError(f"an image must be a PIL image or a file path, got {type(item).__name__}")


def _image_size(item: Any) -> tuple[int, int]:
    """``(width, height)`` of an image or image file, reading only the file's header."""
    from PIL import Image, UnidentifiedImageError

    if isinstance(item, Image.Image):
        return item.size
    if isinstance(item, (str, Path)):
        if not Path(item).is_file():
            raise ImageError(f"image {str(item)!r} does not exist")
        try:
            with Image.open(item) as im:
                return im.size
        except (UnidentifiedImageError, OSError, ValueError) as e:
            raise ImageError(f"image {str(item)!r} cannot be read ({type(e).__name__}: {e})") from None
    raise ImageError(f"an image must be a PIL image or a file path, got {type(item).__name__}")


class VisionProcessor:
    """Encodes a prompt with images into token ids and :class:`VisionInputs` for a Qwen2-VL-family model."""

    def __init__(self, image_processor, tokenizer, image_token_id: int, vision_start_id: int, vision_end_id: int,
                 merge_size: int):
        self.image_processor, self.tokenizer = image_processor, tokenizer
        self.image_token_id, self.merge_size = int(image_token_id), int(merge_size)
        self.vision_start_id, self.vision_end_id = int(vision_start_id), int(vision_end_id)
        self.placeholder = "".join(tokenizer.convert_ids_to_tokens([self.vision_start_id, self.image_token_id,
                                                                     self.vision_end_id]))

    @classmethod
    def for_model(cls, model_config, image_processor, tokenizer) -> "VisionProcessor":
        kind = getattr(model_config, "model_type", None)
        if kind not in SUPPORTED_VLMS:
            raise ValueError(f"rlvr reads vision-language models of the Qwen2-VL family ({', '.join(SUPPORTED_VLMS)}); "
                             f"{kind!r} is not supported yet")
        merge = getattr(image_processor, "merge_size", None) or model_config.vision_config.spatial_merge_size
        return cls(image_processor, tokenizer, model_config.image_token_id, model_config.vision_start_token_id,
                   model_config.vision_end_token_id, merge)

    def images_inputs(self, images: Sequence[Any]) -> VisionInputs:
        """The image processor's patches and grids for ``images`` (loaded first when they are paths)."""
        pil = [load_image(im) for im in images]
        out = self.image_processor(images=pil, return_tensors="pt")
        return VisionInputs(out["pixel_values"], out["image_grid_thw"].long())

    def render(self, prompt: str | list[dict], num_images: int, chat_template: bool) -> list[int]:
        """Token ids of ``prompt`` with one placeholder token per image (before expansion)."""
        if isinstance(prompt, list) or chat_template:
            msgs = prompt if isinstance(prompt, list) else [{"role": "user", "content": self._parts(prompt, num_images)}]
            ids = self.tokenizer.apply_chat_template(msgs, add_generation_prompt=True, tokenize=True)
            ids = list(ids["input_ids"] if hasattr(ids, "keys") else ids)
        else:
            marks = prompt.count(IMAGE_MARKER)
            if marks and marks != num_images:
                raise ImageError(f"the prompt has {marks} {IMAGE_MARKER} markers for {num_images} images")
            text = (prompt.replace(IMAGE_MARKER, self.placeholder) if marks
                    else self.placeholder * num_images + prompt)
            ids = list(self.tokenizer(text, add_special_tokens=True)["input_ids"])
        found = sum(1 for t in ids if t == self.image_token_id)
        if found != num_images:
            raise ImageError(f"the rendered prompt holds {found} image placeholders for {num_images} images"
                             + (" (does the chat template render {'type': 'image'} parts?)"
                                if isinstance(prompt, list) or chat_template else ""))
        return ids

    @staticmethod
    def _parts(text: str, num_images: int) -> list[dict]:
        pieces = text.split(IMAGE_MARKER)
        if len(pieces) == 1:
            return [{"type": "image"}] * num_images + [{"type": "text", "text": text}]
        parts: list[dict] = []
        for i, piece in enumerate(pieces):
            if i:
                parts.append({"type": "image"})
            if piece:
                parts.append({"type": "text", "text": piece})
        return parts

    def encode(self, prompt: str | list[dict], images: Sequence[Any],
               chat_template: bool = False) -> tuple[list[int], VisionInputs | None]:
        """``(token ids, images)`` of a prompt; each image's placeholder expanded to its merged patches."""
        if not images:
            return self.render(prompt, 0, chat_template), None
        vis = self.images_inputs(images)
        ids = self.render(prompt, vis.num_images, chat_template)
        per_image = (vis.image_grid_thw.prod(-1) // (self.merge_size ** 2)).tolist()
        out, k = [], 0
        for t in ids:
            if t == self.image_token_id:
                out.extend([t] * int(per_image[k]))
                k += 1
            else:
                out.append(t)
        return out, vis

    def prompt_length(self, prompt: str | list[dict], images: Sequence[Any], chat_template: bool = False) -> int:
        """The length of :meth:`encode`'s ids, from the images' sizes alone (no pixels are processed)."""
        rendered = len(self.render(prompt, len(images), chat_template))
        tokens = 0
        for im in images:
            w, h = _image_size(im)
            tokens += self.image_processor.get_number_of_image_patches(h, w, {}) // (self.merge_size ** 2)
        return rendered - len(images) + tokens

    def save(self, directory: str | Path) -> None:
        self.image_processor.save_pretrained(str(directory))


def image_token_id(model) -> int | None:
    """The image placeholder token of a vision-language ``model`` (None for a text-only model)."""
    cfg = getattr(model, "config", None)
    return getattr(cfg, "image_token_id", None) if getattr(cfg, "vision_config", None) is not None else None


def suppressed_tokens(model) -> list[int]:
    """Token ids the policy never samples: a VLM's image and video placeholders and their delimiters (a
    sampled placeholder would claim image features that do not exist). Empty for a text-only model."""
    cfg = getattr(model, "config", None)
    if getattr(cfg, "vision_config", None) is None:
        return []
    keys = ("image_token_id", "video_token_id", "vision_start_token_id", "vision_end_token_id")
    return sorted({int(getattr(cfg, k)) for k in keys if getattr(cfg, k, None) is not None})


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


def vision_forward_kwargs(model, input_ids: torch.Tensor, vision) -> dict:
    """The extra keyword arguments a VLM's trunk (or ``generate``) needs for ``vision`` (a
    :class:`~rlvr.core.vision.BatchVision` or :class:`VisionInputs`): patches, grids and the image-token
    types its multimodal rotary positions are computed from; empty without images."""
    if vision is None:
        return {}
    tok = image_token_id(model)
    if tok is None:
        raise ValueError("the batch has images but the model is text-only")
    return {"pixel_values": vision.pixel_values, "image_grid_thw": vision.image_grid_thw,
            "mm_token_type_ids": (input_ids == tok).int()}

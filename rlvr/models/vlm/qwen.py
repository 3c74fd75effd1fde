"""The Qwen2-VL family (``qwen2_vl``, ``qwen2_5_vl``, ``qwen3_vl``, ``qwen3_vl_moe``): image prompts as
``Qwen2VLProcessor`` and ``Qwen3VLProcessor`` write them (one image rule).

transformers' processors of the family will not build without ``torchvision`` (they insist on a video
processor), so rlvr reproduces them from the image processor (PIL backend) and the tokenizer:

1. the prompt is rendered with one ``<|vision_start|><|image_pad|><|vision_end|>`` per image: a text
   prompt's ``<image>`` markers (images without a marker open the prompt), or a chat prompt's
   ``{"type": "image"}`` parts through the tokenizer's chat template (tokenized by it);
2. the image processor turns the images into patches (``pixel_values [patches, patch_dim]``) and each
   image's grid ``(t, h, w)`` (``image_grid_thw``);
3. image ``k``'s single ``<|image_pad|>`` token becomes ``t * h * w / merge_size**2`` of them, one per
   merged patch the vision tower emits, as the processor writes them.

The model computes its multimodal rotary positions (M-RoPE) itself from the grids and the image-token types
(``mm_token_type_ids``), so a forward with images leaves the positions to it.

Qwen3-VL (and its mixture-of-experts variant) reads images through Qwen2-VL's image processor, usually with
16-pixel patches (``patch_size`` in ``preprocessor_config.json``) and the same ``t * h * w / merge**2`` rule;
its forward takes the same three arguments (its DeepStack features, vision-tower states added to the first
decoder layers at the image tokens, are computed inside the model) and requires ``mm_token_type_ids``.
"""

from __future__ import annotations

from typing import Any, Sequence

from rlvr.core.vision import VisionInputs
from rlvr.models.vlm.base import IMAGE_MARKER, ImageError, VisionProcessor, image_parts, image_size, load_image, \
    register_family

__all__ = ["QwenVLVision"]


@register_family("qwen2_vl", "qwen2_5_vl", "qwen3_vl", "qwen3_vl_moe")
class QwenVLVision(VisionProcessor):
    """Encodes a prompt with images into token ids and :class:`VisionInputs` for a Qwen2-VL-family model."""

    family = "qwen2_vl"
    own_positions = True

    def __init__(self, image_processor, tokenizer, config):
        self.image_processor, self.tokenizer, self.config = image_processor, tokenizer, config
        self.image_token_id = int(config.image_token_id)
        self.vision_start_id, self.vision_end_id = int(config.vision_start_token_id), int(config.vision_end_token_id)
        self.merge_size = int(getattr(image_processor, "merge_size", None) or config.vision_config.spatial_merge_size)
        self.feature_token = tokenizer.convert_ids_to_tokens(self.image_token_id)
        self.placeholder = "".join(tokenizer.convert_ids_to_tokens([self.vision_start_id, self.image_token_id,
                                                                     self.vision_end_id]))
        self.image_token = self.placeholder

    @staticmethod
    def forward_kwargs(config, input_ids, vision) -> dict:
        return {"pixel_values": vision.pixel_values, "image_grid_thw": vision.image_grid_thw,
                "mm_token_type_ids": (input_ids == config.image_token_id).int()}

    @staticmethod
    def config_suppressed(config) -> list[int]:
        keys = ("image_token_id", "video_token_id", "vision_start_token_id", "vision_end_token_id")
        return sorted({int(getattr(config, k)) for k in keys if getattr(config, k, None) is not None})

    def images_inputs(self, images: Sequence[Any]) -> VisionInputs:
        """The image processor's patches and grids for ``images`` (loaded first when they are paths)."""
        pil = [load_image(im) for im in images]
        out = self.image_processor(images=pil, return_tensors="pt")
        return VisionInputs(out["pixel_values"], out["image_grid_thw"].long())

    def render(self, prompt: str | list[dict], num_images: int, chat_template: bool) -> list[int]:
        """Token ids of ``prompt`` with one placeholder token per image (before expansion)."""
        if isinstance(prompt, list) or chat_template:
            msgs = (prompt if isinstance(prompt, list)
                    else [{"role": "user", "content": image_parts(prompt, num_images)}])
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
            w, h = image_size(im)
            tokens += self.image_processor.get_number_of_image_patches(h, w, {}) // (self.merge_size ** 2)
        return rendered - len(images) + tokens

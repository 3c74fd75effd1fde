"""InternVL, LLaVA-OneVision and PaliGemma: image prompts as each family's transformers processor writes them.

Each encoder follows :mod:`rlvr.models.vlm.base` (render one image token per image, process the images,
replace each image token by its expansion, tokenize) with the expansion rule of the family's processor
(``transformers/models/<family>/processing_<family>.py``) and the feature count its model consumes:

- **InternVL** (``internvl``; ``InternVLProcessor``, images through ``GotOcr2ImageProcessor``). The processor
  crops every image to tiles (``crop_to_patches``, which it turns on whatever ``preprocessor_config.json``
  says): the tile grid whose aspect ratio is closest to the image's, between ``min_patches`` and
  ``max_patches`` tiles, plus a thumbnail of the whole image when there is more than one tile.
  ``<IMG_CONTEXT>`` (what its chat template renders per image) becomes ``<img>`` + ``<IMG_CONTEXT>`` x
  ``seq * tiles`` + ``</img>``, ``seq = (image_size / patch_size)**2 * downsample_ratio**2``: the features
  the model keeps per tile (the class feature dropped, then pixel-shuffled). ``pixel_values [tiles, C, H, W]``.
- **LLaVA-OneVision** (``llava_onevision``; ``LlavaOnevisionProcessor``). A prompt with one image reads it
  anyres, like LLaVA-NeXT: base view, the grid resolution's patches unpadded to the image's aspect ratio,
  a newline feature per row, and when the unpadded grid holds more than 1.1 x ``anyres_max_N`` tiles' worth
  of features it is pooled down (bilinear) to ``int(h // r) x int(w // r)``, ``r = sqrt(h * w / (N * side**2))``
  (``vision_aspect_ratio`` of the model's config). A prompt with several images reads each as its base view
  alone (the image padded to a square) plus one newline feature. rlvr keeps only the real patches,
  ``pixel_values [patches, C, H, W]`` with ``image_sizes [images, 2]``, and every forward gets
  ``batch_num_images`` (the images of each row), which is how the model tells the two cases apart.
- **PaliGemma** (``paligemma``; ``PaliGemmaProcessor``). ``<image>`` becomes ``image_seq_length`` ``<image>``
  tokens (``(image_size / patch_size)**2``, what the vision tower emits); the BOS token follows the last
  image and the prompt ends with ``"\\n"``, tokenized without further special tokens. PaliGemma is a
  prefix LM: its prompt (images and text) is read bidirectionally and only what follows it causally. The
  completion is that suffix, so every forward and ``generate`` gets ``token_type_ids``, 0 on the prompt and 1
  on the completion (a continued prefix included), and positions counted from 1 as PaliGemma counts them.
  A prompt without images is ``<bos>`` + prompt + ``"\\n"`` (the processor takes none; the layout is kept).
"""

from __future__ import annotations

import math

from rlvr.core.vision import VisionInputs
from rlvr.lazy import torch
from rlvr.models.vlm.base import VisionProcessor, fixed_output_size, register_family, single_token_ids
from rlvr.models.vlm.llava_gemma_idefics import LlavaNextVision

__all__ = ["InternVLVision", "LlavaOnevisionVision", "PaliGemmaVision"]


def _pair(v) -> tuple[int, int]:
    return (int(v[0]), int(v[1])) if isinstance(v, (list, tuple)) else (int(v), int(v))


@register_family("internvl")
class InternVLVision(VisionProcessor):
    """InternVL: ``seq`` ``<IMG_CONTEXT>`` tokens per tile of the image, between ``<img>`` and ``</img>``."""

    family = "internvl"
    OPTIONS = {"crop_to_patches": True}  # InternVLProcessor's images_kwargs, over the image processor's own

    def __init__(self, image_processor, tokenizer, config):
        super().__init__(image_processor, tokenizer, config)
        vc = config.vision_config
        (h, w), (ph, pw) = _pair(vc.image_size), _pair(vc.patch_size)
        self.seq = int((h // ph) * (w // pw) * config.downsample_ratio ** 2)
        self.start = getattr(tokenizer, "start_image_token", None) or "<img>"
        self.end = getattr(tokenizer, "end_image_token", None) or "</img>"
        missing = [t for t in (self.start, self.end) if not single_token_ids(tokenizer, [t])]
        if missing:
            raise ValueError(f"the tokenizer has no {' or '.join(missing)} token (InternVL wraps every image in them)")

    def _expansion(self, tiles: int) -> str:
        return f"{self.start}{self.feature_token * (self.seq * tiles)}{self.end}"

    def process(self, images: list) -> tuple[VisionInputs, list[str]]:
        out = self.image_processor(images=images, return_tensors="pt", **self.OPTIONS)
        tiles = [int(n) for n in out["num_patches"]]
        return (VisionInputs(tensors={"pixel_values": out["pixel_values"]}, num_images=len(images)),
                [self._expansion(n) for n in tiles])

    def expansion_for_size(self, width: int, height: int) -> str | None:
        return self._expansion(self.image_processor.get_number_of_image_patches(height, width, dict(self.OPTIONS)))

    @staticmethod
    def forward_kwargs(config, input_ids, vision) -> dict:
        return {"pixel_values": vision.pixel_values}

    def suppressed_ids(self) -> list[int]:
        extra = single_token_ids(self.tokenizer, [self.start, self.end])
        return sorted(set(self.config_suppressed(self.config)) | set(extra))


@register_family("llava_onevision")
class LlavaOnevisionVision(LlavaNextVision):
    """LLaVA-OneVision: anyres (unpadded, pooled past ``anyres_max_N``) for a prompt's single image; the base
    view and a newline for each of several."""

    family = "llava_onevision"

    def __init__(self, image_processor, tokenizer, config):
        super().__init__(image_processor, tokenizer, config)
        self.max_patches = int(str(getattr(config, "vision_aspect_ratio", None) or "anyres_max_9").strip("anyres_max_"))

    def features(self, orig_height: int, orig_width: int, height: int, width: int) -> int:
        """``LlavaOnevisionProcessor._get_number_of_features`` (with the model's feature selection): the base
        view's features, then the grid's, unpadded and pooled, with one newline feature per row."""
        cur_h, cur_w, ph, pw = self.unpadded_grid(orig_height, orig_width, height, width)
        grid, rows = cur_h * cur_w, cur_h
        ratio = math.sqrt(cur_h * cur_w / (self.max_patches * ph ** 2))
        if ratio > 1.1:
            grid, rows = int(cur_h // ratio) * int(cur_w // ratio), int(cur_h // ratio)
        return grid + rows + ph * pw + self.extra

    def base_features(self, height: int, width: int) -> int:
        """One image of several: its base view's features and one newline feature."""
        return (height // self.patch) * (width // self.patch) + 1 + self.extra

    def process(self, images: list) -> tuple[VisionInputs, list[str]]:
        from transformers.models.llava_onevision.modeling_llava_onevision import image_size_to_num_patches

        out = self.image_processor(images=[images], return_tensors="pt", do_pad=True)  # one prompt's images
        sizes = out["image_sizes"].long()
        several = len(images) > 1
        counts = [1 if several else image_size_to_num_patches(s.tolist(), self.pinpoints, self.tile) for s in sizes]
        pv = torch.cat([out["pixel_values"][i, :c] for i, c in enumerate(counts)])
        h, w = int(pv.shape[-2]), int(pv.shape[-1])
        n = [self.base_features(h, w) if several else self.features(int(a), int(b), h, w) for a, b in sizes.tolist()]
        return (VisionInputs(tensors={"pixel_values": pv, "image_sizes": sizes}, num_images=len(images)),
                [self.feature_token * k for k in n])

    def expansions_for_sizes(self, sizes: list[tuple[int, int]]) -> list[str | None]:
        if len(sizes) == 1:
            return [self.expansion_for_size(*sizes[0])]
        size = fixed_output_size(self.image_processor)
        return [None if size is None else self.feature_token * self.base_features(*size)] * len(sizes)

    @staticmethod
    def forward_kwargs(config, input_ids, vision) -> dict:
        per_row = getattr(vision, "row_images", None)  # a batch's rows; a single prompt's VisionInputs is one row
        per_row = torch.tensor([vision.num_images]) if per_row is None else per_row
        return {"pixel_values": vision.pixel_values, "image_sizes": vision.tensors["image_sizes"],
                "batch_num_images": per_row}

    @staticmethod
    def config_suppressed(config) -> list[int]:
        keys = ("image_token_id", "video_token_id")
        return sorted({int(getattr(config, k)) for k in keys if getattr(config, k, None) is not None})


@register_family("paligemma")
class PaliGemmaVision(VisionProcessor):
    """PaliGemma: ``image_seq_length`` ``<image>`` tokens per image, then ``<bos>``, the prompt and ``"\\n"``,
    all of it the bidirectional prefix."""

    family = "paligemma"
    position_offset = 1
    prefix_lm = True

    def __init__(self, image_processor, tokenizer, config):
        super().__init__(image_processor, tokenizer, config)
        vc = config.vision_config
        self.seq = int((vc.image_size // vc.patch_size) ** 2)
        self.bos = tokenizer.bos_token
        if self.bos is None:
            raise ValueError("the tokenizer has no BOS token (a PaliGemma prompt holds it after its images)")

    def render_text(self, prompt, num_images: int, chat_template: bool) -> tuple[str, bool]:
        text, _ = super().render_text(prompt, num_images, chat_template)
        cut = text.rfind(self.image_token) + len(self.image_token) if num_images else 0
        return text[:cut] + self.bos + text[cut:] + "\n", False

    def process(self, images: list) -> tuple[VisionInputs, list[str]]:
        pv = self.image_processor(images=images, return_tensors="pt")["pixel_values"]
        return (VisionInputs(tensors={"pixel_values": pv}, num_images=len(images)),
                [self.feature_token * self.seq] * len(images))

    def expansion_for_size(self, width: int, height: int) -> str | None:
        return self.feature_token * self.seq  # every image is resized to the tower's size

    @staticmethod
    def forward_kwargs(config, input_ids, vision) -> dict:
        return {"pixel_values": vision.pixel_values}

    @staticmethod
    def prefix_kwargs(config, input_ids, completion_start) -> dict:
        n, width = input_ids.shape
        cols = torch.arange(width, device=input_ids.device)[None]
        start = torch.as_tensor(width if completion_start is None else completion_start, device=input_ids.device)
        return {"token_type_ids": (cols >= start.reshape(-1, 1)).long().expand(n, width).contiguous()}

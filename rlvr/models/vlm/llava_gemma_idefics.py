"""LLaVA, LLaVA-NeXT, Gemma 3 and Idefics3 / SmolVLM: image prompts as each family's transformers processor writes them.

Each encoder follows :mod:`rlvr.models.vlm.base` (render one image token per image, process the images,
replace each image token by its expansion, tokenize) with the expansion rule of the family's processor
(``transformers/models/<family>/processing_<family>.py``) and the feature count its model consumes:

- **LLaVA** (``llava``; ``LlavaProcessor.replace_image_token``). ``<image>`` becomes ``n`` ``<image>`` tokens,
  ``n = (H // patch) * (W // patch)`` over the processed image's height and width, plus one for a CLIP
  tower's CLS token, minus one when ``vision_feature_select_strategy`` is ``default`` (which drops the first
  feature): exactly the features ``get_image_features`` returns. ``pixel_values [images, C, H, W]``.
- **LLaVA-NeXT** (``llava_next``; ``LlavaNextProcessor._get_number_of_features``). Anyres: an image is a base
  view plus the patches of its best grid resolution (``image_grid_pinpoints``); ``<image>`` becomes one token
  per base-view feature, per grid feature left after unpadding to the image's aspect ratio, and per row of
  the grid (the newline feature). The image processor pads every image to the most patches; rlvr keeps the
  real ones, ``pixel_values [patches, C, H, W]`` with ``image_sizes [images, 2]``, which the model accepts
  flat and splits by the patch count of each image's size.
- **Gemma 3** (``gemma3``; ``Gemma3Processor.replace_image_token``). ``<start_of_image>`` (what its chat
  template renders per image) becomes ``"\\n\\n<start_of_image>" + "<image_soft_token>" * mm_tokens_per_image
  + "<end_of_image>\\n\\n"``. With pan-and-scan (``do_pan_and_scan`` in ``preprocessor_config.json``; the
  processor's own default is off) an image cut into ``k`` crops becomes ``"Here is the original image
  {image} and here are some crops to help you see better " + " ".join([image] * k)``, and its crops follow
  it in ``pixel_values [images + crops, C, H, W]``. Gemma 3 attends bidirectionally within each image's soft
  tokens only when given ``token_type_ids`` (1 on soft tokens; without them the image is read causally), so
  every forward and ``generate`` gets them.
- **Idefics3 / SmolVLM** (``idefics3``, ``smolvlm``; ``Idefics3Processor`` / ``SmolVLMProcessor``, the same
  rule). ``<image>`` becomes, for an image split into ``rows x cols`` tiles, per tile
  ``<fake_token_around_image><row_r_col_c>`` + ``<image>`` * ``seq`` (a newline after each row), then
  ``"\\n<fake_token_around_image><global-img>"`` + ``<image>`` * ``seq`` + ``<fake_token_around_image>``; an
  image not split (``do_image_splitting: false``, or small enough) is its global part alone, without the
  leading newline. ``seq = (image_size // patch_size)**2 / scale_factor**2`` as the model computes it. The
  tiles (``pixel_values [tiles, C, H, W]``, ``pixel_attention_mask [tiles, H, W]``) go to the model as one
  sample holding every tile of the batch, in row order, which is the order it fills the ``<image>`` tokens.
"""

from __future__ import annotations

import math

from rlvr.core.vision import VisionInputs
from rlvr.lazy import torch
from rlvr.models.vlm.base import VisionProcessor, fixed_output_size, register_family, single_token_ids, token_text

__all__ = ["LlavaVision", "LlavaNextVision", "Gemma3Vision", "Idefics3Vision"]


def _get(size, key):
    if size is None:
        return None
    return size.get(key) if isinstance(size, dict) else getattr(size, key, None)


# vision towers rlvr counts the features of: extra tokens in front of the patches (a CLIP tower's CLS)
_EXTRA_TOKENS = {"clip_vision_model": 1, "siglip_vision_model": 0}


@register_family("llava")
class LlavaVision(VisionProcessor):
    """LLaVA: one ``<image>`` token per feature of the image's (fixed-size) crop."""

    family = "llava"

    def __init__(self, image_processor, tokenizer, config):
        super().__init__(image_processor, tokenizer, config)
        tower = getattr(config.vision_config, "model_type", None)
        if tower not in _EXTRA_TOKENS:
            raise ValueError(f"rlvr reads LLaVA models whose vision tower is one of {', '.join(_EXTRA_TOKENS)}; "
                             f"this one is {tower!r}")
        self.patch = int(config.vision_config.patch_size)
        self.extra = _EXTRA_TOKENS[tower] - (1 if config.vision_feature_select_strategy == "default" else 0)

    def tokens(self, height: int, width: int) -> int:
        """Features the vision tower gives a processed image of ``height x width`` pixels."""
        return (height // self.patch) * (width // self.patch) + self.extra

    def process(self, images: list) -> tuple[VisionInputs, list[str]]:
        pv = self.image_processor(images=images, return_tensors="pt")["pixel_values"]
        expansion = self.feature_token * self.tokens(int(pv.shape[-2]), int(pv.shape[-1]))
        return VisionInputs(tensors={"pixel_values": pv}, num_images=len(images)), [expansion] * len(images)

    def expansion_for_size(self, width: int, height: int) -> str | None:
        size = fixed_output_size(self.image_processor)
        return None if size is None else self.feature_token * self.tokens(*size)

    @staticmethod
    def forward_kwargs(config, input_ids, vision) -> dict:
        return {"pixel_values": vision.pixel_values}


@register_family("llava_next")
class LlavaNextVision(LlavaVision):
    """LLaVA-NeXT (anyres): an image's base view and its grid of high-resolution patches, unpadded."""

    family = "llava_next"

    def __init__(self, image_processor, tokenizer, config):
        super().__init__(image_processor, tokenizer, config)
        self.pinpoints = [list(p) for p in config.image_grid_pinpoints]
        if [list(p) for p in getattr(image_processor, "image_grid_pinpoints", None) or []] != self.pinpoints:
            raise ValueError("the image processor's image_grid_pinpoints differ from the model config's")
        self.tile = int(config.vision_config.image_size)

    def unpadded_grid(self, orig_height: int, orig_width: int, height: int, width: int) -> tuple[int, int, int, int]:
        """``(rows, cols)`` of the feature grid of the best grid resolution for the image, unpadded to its aspect
        ratio, and ``(ph, pw)``, the features per side of one tile: as the processor counts them."""
        from transformers.image_processing_utils import select_best_resolution

        best_h, best_w = select_best_resolution([orig_height, orig_width], self.pinpoints)
        ph, pw = height // self.patch, width // self.patch
        cur_h, cur_w = ph * (best_h // height), pw * (best_w // width)
        if orig_width / orig_height > cur_w / cur_h:
            cur_h -= (cur_h - int(round(orig_height * (cur_w / orig_width), 7))) // 2 * 2
        else:
            cur_w -= (cur_w - int(round(orig_width * (cur_h / orig_height), 7))) // 2 * 2
        return cur_h, cur_w, ph, pw

    def features(self, orig_height: int, orig_width: int, height: int, width: int) -> int:
        """``LlavaNextProcessor._get_number_of_features`` (minus the dropped CLS): the base view's features,
        then the patch grid's, unpadded to the image's aspect ratio, with one newline feature per row."""
        cur_h, cur_w, ph, pw = self.unpadded_grid(orig_height, orig_width, height, width)
        return cur_h * cur_w + cur_h + ph * pw + self.extra

    def process(self, images: list) -> tuple[VisionInputs, list[str]]:
        from transformers.models.llava_next.modeling_llava_next import image_size_to_num_patches

        out = self.image_processor(images=images, return_tensors="pt", do_pad=True)
        sizes = out["image_sizes"].long()
        counts = [image_size_to_num_patches(s.tolist(), self.pinpoints, self.tile) for s in sizes]
        pv = torch.cat([out["pixel_values"][i, :c] for i, c in enumerate(counts)])
        h, w = int(pv.shape[-2]), int(pv.shape[-1])
        expansions = [self.feature_token * self.features(int(a), int(b), h, w) for a, b in sizes.tolist()]
        return VisionInputs(tensors={"pixel_values": pv, "image_sizes": sizes}, num_images=len(images)), expansions

    def expansion_for_size(self, width: int, height: int) -> str | None:
        size = fixed_output_size(self.image_processor)
        return None if size is None else self.feature_token * self.features(height, width, *size)

    @staticmethod
    def forward_kwargs(config, input_ids, vision) -> dict:
        return {"pixel_values": vision.pixel_values, "image_sizes": vision.tensors["image_sizes"]}


_PAN_AND_SCAN = {"pan_and_scan_min_crop_size": 256, "pan_and_scan_max_num_crops": 4,
                 "pan_and_scan_min_ratio_to_activate": 1.2}  # Gemma3Processor's defaults


@register_family("gemma3")
class Gemma3Vision(VisionProcessor):
    """Gemma 3: ``mm_tokens_per_image`` soft tokens between begin- and end-of-image tokens per image (and crop)."""

    family = "gemma3"

    def __init__(self, image_processor, tokenizer, config):
        super().__init__(image_processor, tokenizer, config)
        boi = token_text(tokenizer, config.boi_token_id, "begin-of-image")
        eoi = token_text(tokenizer, config.eoi_token_id, "end-of-image")
        self.image_token = boi
        self.full = f"\n\n{boi}{self.feature_token * int(config.mm_tokens_per_image)}{eoi}\n\n"
        self.options = {"do_pan_and_scan": bool(getattr(image_processor, "do_pan_and_scan", None))}
        if self.options["do_pan_and_scan"]:
            self.options.update({k: getattr(image_processor, k, None) or v for k, v in _PAN_AND_SCAN.items()})

    def _expansion(self, crops: int) -> str:
        if not crops:
            return self.full
        return (f"Here is the original image {self.full} and here are some crops to help you see better "
                + " ".join([self.full] * crops))

    def process(self, images: list) -> tuple[VisionInputs, list[str]]:
        out = self.image_processor(images=images, return_tensors="pt", **self.options)
        crops = [int(c) for c in out.get("num_crops", [0] * len(images))]
        return (VisionInputs(tensors={"pixel_values": out["pixel_values"]}, num_images=len(images)),
                [self._expansion(c) for c in crops])

    def expansion_for_size(self, width: int, height: int) -> str | None:
        if not self.options["do_pan_and_scan"]:
            return self.full
        import numpy as np

        shape_only = np.broadcast_to(np.zeros((1, 1, 1), dtype=np.uint8), (3, height, width))  # no pixels held
        crops = self.image_processor.pan_and_scan(shape_only, **{k: v for k, v in self.options.items()
                                                                 if k != "do_pan_and_scan"})
        return self._expansion(len(crops))

    @staticmethod
    def forward_kwargs(config, input_ids, vision) -> dict:
        return {"pixel_values": vision.pixel_values, "token_type_ids": (input_ids == config.image_token_id).long()}

    @staticmethod
    def config_suppressed(config) -> list[int]:
        return sorted({int(config.image_token_id), int(config.boi_token_id), int(config.eoi_token_id)})


@register_family("idefics3", "smolvlm")
class Idefics3Vision(VisionProcessor):
    """Idefics3 / SmolVLM: each tile's and the global view's ``<image>`` tokens between their delimiters."""

    family = "idefics3"
    ROW_COL = [f"<row_{r}_col_{c}>" for r in range(1, 7) for c in range(1, 7)]  # the processor's 6 x 6

    def __init__(self, image_processor, tokenizer, config):
        super().__init__(image_processor, tokenizer, config)
        vc = config.vision_config
        self.seq = int(((vc.image_size // vc.patch_size) ** 2) / (config.scale_factor ** 2))
        self.fake = getattr(tokenizer, "fake_image_token", None) or "<fake_token_around_image>"
        self.global_tag = getattr(tokenizer, "global_image_token", None) or "<global-img>"
        if not single_token_ids(tokenizer, [self.fake]):
            raise ValueError(f"the tokenizer has no {self.fake} token (Idefics3 and SmolVLM wrap every image in it)")

    def _expansion(self, rows: int, cols: int) -> str:
        image = self.feature_token * self.seq
        whole = f"{self.fake}{self.global_tag}{image}{self.fake}"
        if rows == 0 and cols == 0:
            return whole
        tiles = "".join("".join(f"{self.fake}<row_{r + 1}_col_{c + 1}>{image}" for c in range(cols)) + "\n"
                        for r in range(rows))
        return tiles + "\n" + whole

    def process(self, images: list) -> tuple[VisionInputs, list[str]]:
        out = self.image_processor(images=[images], return_tensors="pt", return_row_col_info=True)
        pv = out["pixel_values"][0]
        mask = out.get("pixel_attention_mask")
        mask = (mask[0] if mask is not None else pv.new_ones(pv.shape[0], *pv.shape[-2:])).bool()
        rows, cols = list(out["rows"][0]), list(out["cols"][0])
        return (VisionInputs(tensors={"pixel_values": pv, "pixel_attention_mask": mask}, num_images=len(images)),
                [self._expansion(int(r), int(c)) for r, c in zip(rows, cols)])

    def expansion_for_size(self, width: int, height: int) -> str | None:
        grid = self.grid(height, width)
        return None if grid is None else self._expansion(*grid)

    def grid(self, height: int, width: int) -> tuple[int, int] | None:
        """``(rows, cols)`` of tiles the image processor cuts an image of this size into (``(0, 0)``: not
        split), following its resize, ``resize_for_vision_encoder`` and ``split_images`` arithmetic."""
        ip = self.image_processor
        if not getattr(ip, "do_image_splitting", False):
            return 0, 0
        tile = _get(ip.max_image_size, "longest_edge")
        if not tile:
            return None
        if getattr(ip, "do_resize", False):
            size = ip.size
            if _get(size, "longest_edge"):
                try:
                    from transformers.models.idefics3.image_processing_pil_idefics3 import (
                        MAX_IMAGE_SIZE, _resize_output_size_rescale_to_max_len,
                        _resize_output_size_scale_below_upper_bound)
                except ImportError:  # transformers moved them: the pixels tell
                    return None
                height, width = _resize_output_size_rescale_to_max_len(height, width,
                                                                        max_len=_get(size, "longest_edge"))
                height, width = _resize_output_size_scale_below_upper_bound(height, width, max_len=MAX_IMAGE_SIZE)
            elif _get(size, "height") and _get(size, "width"):
                height, width = _get(size, "height"), _get(size, "width")
            else:
                return None
        aspect = width / height
        if width >= height:
            width = math.ceil(width / tile) * tile
            height = math.ceil(int(width / aspect) / tile) * tile
        else:
            height = math.ceil(height / tile) * tile
            width = math.ceil(int(height * aspect) / tile) * tile
        if height > tile or width > tile:
            return (height - tile) // tile + 1, (width - tile) // tile + 1
        return 0, 0

    @staticmethod
    def forward_kwargs(config, input_ids, vision) -> dict:
        return {"pixel_values": vision.pixel_values[None],
                "pixel_attention_mask": vision.tensors["pixel_attention_mask"][None]}

    def suppressed_ids(self) -> list[int]:
        extra = single_token_ids(self.tokenizer, [self.fake, self.global_tag, *self.ROW_COL])
        return sorted(set(self.config_suppressed(self.config)) | set(extra))

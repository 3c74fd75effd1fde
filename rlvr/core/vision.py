"""Image inputs of a vision-language prompt, per prompt and per batch.

A prompt with images is encoded (``rlvr.models.vision``) into token ids, in which each image stands as a
run of placeholder tokens, and :class:`VisionInputs`: the named tensors the model's vision tower reads.
Each tensor's first dimension runs over a unit of its own, which is what lets rows be concatenated and
selected without knowing the family:

- Qwen2-VL family: ``pixel_values [patches, patch_dim]`` (one row per patch) and ``image_grid_thw
  [images, 3]`` (each image's temporal, height and width patch grid);
- LLaVA and Gemma 3: ``pixel_values [images, C, H, W]`` (Gemma 3's pan-and-scan crops are images of their
  own, after the image they were cut from);
- Idefics3 / SmolVLM: ``pixel_values [tiles, C, H, W]`` and ``pixel_attention_mask [tiles, H, W]`` (an
  image's tiles, then its global view).

Every completion of a prompt shares its prompt's :class:`VisionInputs` object. A batch concatenates each
tensor along its first dimension in row order (:class:`BatchVision`) and keeps, per tensor, how many
entries each row holds, and how many images, so selecting rows (minibatches, micro-batches, ranks) gathers
exactly those rows' entries of every tensor. Rows without images (a mixed batch) hold zero of each.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Mapping, Sequence

from rlvr.lazy import torch

__all__ = ["VisionInputs", "BatchVision"]


class _NamedTensors:
    """``pixel_values`` and ``image_grid_thw`` of a ``tensors`` dict as attributes (the Qwen2-VL names the
    Qwen2-VL and vLLM code reads)."""

    __slots__ = ()

    @property
    def pixel_values(self) -> torch.Tensor:
        return self.tensors["pixel_values"]

    @property
    def image_grid_thw(self) -> torch.Tensor | None:
        return self.tensors.get("image_grid_thw")


class VisionInputs(_NamedTensors):
    """One prompt's images as the model's vision tower reads them: named tensors and the image count.

    ``VisionInputs(pixel_values, image_grid_thw)`` is the Qwen2-VL layout; any other family passes
    ``tensors=`` and ``num_images=``."""

    __slots__ = ("tensors", "num_images")

    def __init__(self, pixel_values=None, image_grid_thw=None, *, tensors: Mapping | None = None,
                 num_images: int | None = None):
        if tensors is None:
            if pixel_values is None or image_grid_thw is None:
                raise ValueError("VisionInputs needs pixel_values and image_grid_thw, or tensors= and num_images=")
            tensors = {"pixel_values": pixel_values, "image_grid_thw": image_grid_thw}
        tensors = dict(tensors)
        if "pixel_values" not in tensors:
            raise ValueError("VisionInputs needs a pixel_values tensor")
        grid = tensors.get("image_grid_thw")
        if grid is not None:
            if grid.dim() != 2 or grid.shape[1] != 3:
                raise ValueError(f"image_grid_thw must be [images, 3], got {tuple(grid.shape)}")
            patches = int(grid.prod(-1).sum())
            if patches != tensors["pixel_values"].shape[0]:
                raise ValueError(f"image grids hold {patches} patches but pixel_values has "
                                 f"{tensors['pixel_values'].shape[0]}")
            if num_images is not None and num_images != grid.shape[0]:
                raise ValueError(f"{num_images} images but {grid.shape[0]} image grids")
            num_images = int(grid.shape[0])
        if num_images is None or num_images < 1:
            raise ValueError("VisionInputs holds at least one image (num_images)")
        self.tensors, self.num_images = tensors, int(num_images)

    @property
    def num_patches(self) -> int:
        """Entries of ``pixel_values``: patches (Qwen2-VL), images (LLaVA, Gemma 3) or tiles (Idefics3)."""
        return int(self.pixel_values.shape[0])

    def __repr__(self) -> str:
        shapes = ", ".join(f"{k}={tuple(v.shape)}" for k, v in self.tensors.items())
        return f"VisionInputs({shapes}, num_images={self.num_images})"


def _ranges(starts: torch.Tensor, counts: torch.Tensor, idx: list[int]) -> torch.Tensor:
    """The concatenated index ranges ``[starts[i], starts[i] + counts[i])`` for ``i`` in ``idx``."""
    parts = [torch.arange(int(starts[i]), int(starts[i] + counts[i])) for i in idx]
    return torch.cat(parts) if parts else torch.zeros(0, dtype=torch.long)


@dataclass(frozen=True, eq=False)
class BatchVision(_NamedTensors):
    """The images of a batch's rows: each named tensor concatenated along dim 0 in row order."""

    tensors: dict  # name -> [sum of rows' entries, ...]
    row_counts: dict  # name -> [N] long: entries of that tensor per row
    row_images: torch.Tensor  # [N] long: images per row

    @staticmethod
    def from_rows(rows: Sequence[VisionInputs | None]) -> "BatchVision | None":
        """The batch's images (``None`` where no row has any)."""
        present = [v for v in rows if v is not None]
        if not present:
            return None
        keys = list(present[0].tensors)
        if any(set(v.tensors) != set(keys) for v in present):
            raise ValueError("rows' images were processed by different image processors "
                             f"({sorted({tuple(sorted(v.tensors)) for v in present})})")
        tensors, counts = {}, {}
        for k in keys:
            first = present[0].tensors[k]
            if any(v.tensors[k].shape[1:] != first.shape[1:] for v in present):
                raise ValueError(f"rows' images were processed to different {k} shapes "
                                 f"({sorted({tuple(v.tensors[k].shape[1:]) for v in present})})")
            tensors[k] = torch.cat([v.tensors[k].to(first.dtype) for v in present])
            counts[k] = torch.tensor([0 if v is None else int(v.tensors[k].shape[0]) for v in rows], dtype=torch.long)
        images = torch.tensor([0 if v is None else v.num_images for v in rows], dtype=torch.long)
        return BatchVision(tensors, counts, images)

    @property
    def num_rows(self) -> int:
        return int(self.row_images.shape[0])

    @property
    def row_patches(self) -> torch.Tensor:
        """``[N]``: entries of ``pixel_values`` per row."""
        return self.row_counts["pixel_values"]

    def select(self, idx: torch.Tensor) -> "BatchVision | None":
        """Rows ``idx`` (in that order, repeats allowed); ``None`` when none of them has an image."""
        idx = torch.as_tensor(idx, dtype=torch.long).flatten().cpu()
        if not idx.numel() or int(self.row_images[idx].sum()) == 0:
            return None
        rows = idx.tolist()
        tensors, counts = {}, {}
        for k, t in self.tensors.items():
            c = self.row_counts[k]
            gather = _ranges(torch.cumsum(c, 0) - c, c, rows).to(t.device)
            tensors[k], counts[k] = t[gather], c[idx]
        return BatchVision(tensors, counts, self.row_images[idx])

    def to(self, device) -> "BatchVision":
        return BatchVision({k: v.to(device) for k, v in self.tensors.items()}, self.row_counts, self.row_images)

    def row(self, i: int) -> VisionInputs | None:
        """Row ``i``'s images as a prompt's :class:`VisionInputs`."""
        sel = self.select(torch.tensor([i]))
        return None if sel is None else VisionInputs(tensors=sel.tensors, num_images=int(sel.row_images[0]))

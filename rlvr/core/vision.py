"""Image inputs of a vision-language prompt, per prompt and per batch.

A prompt with images is encoded (``rlvr.models.vision``) into token ids, in which each image stands as a
run of placeholder tokens, and :class:`VisionInputs`: the image processor's patches (``pixel_values``,
one row per patch) and each image's patch grid (``image_grid_thw``, ``[images, 3]``: temporal, height,
width). Every completion of a prompt shares its prompt's :class:`VisionInputs` object.

A batch concatenates its rows' patches in row order (:class:`BatchVision`) and keeps how many images and
patches each row has, so selecting rows (minibatches, micro-batches, ranks) gathers exactly those rows'
patches. Rows without images (a mixed batch) hold zero of each.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Sequence

from rlvr.lazy import torch

__all__ = ["VisionInputs", "BatchVision"]


@dataclass(frozen=True, eq=False)
class VisionInputs:
    """One prompt's images as the model's vision tower reads them."""

    pixel_values: torch.Tensor  # [patches, patch_dim]
    image_grid_thw: torch.Tensor  # [images, 3] long; patches == sum over images of t * h * w

    def __post_init__(self):
        if self.image_grid_thw.dim() != 2 or self.image_grid_thw.shape[1] != 3:
            raise ValueError(f"image_grid_thw must be [images, 3], got {tuple(self.image_grid_thw.shape)}")
        patches = int(self.image_grid_thw.prod(-1).sum())
        if patches != self.pixel_values.shape[0]:
            raise ValueError(f"image grids hold {patches} patches but pixel_values has {self.pixel_values.shape[0]}")

    @property
    def num_images(self) -> int:
        return int(self.image_grid_thw.shape[0])

    @property
    def num_patches(self) -> int:
        return int(self.pixel_values.shape[0])


@dataclass(frozen=True, eq=False)
class BatchVision:
    """The images of a batch's rows: patches and grids concatenated in row order."""

    pixel_values: torch.Tensor  # [sum of rows' patches, patch_dim]
    image_grid_thw: torch.Tensor  # [sum of rows' images, 3]
    row_images: torch.Tensor  # [N] long: images per row
    row_patches: torch.Tensor  # [N] long: patches per row

    @staticmethod
    def from_rows(rows: Sequence[VisionInputs | None]) -> "BatchVision | None":
        """The batch's images (``None`` where no row has any)."""
        present = [v for v in rows if v is not None]
        if not present:
            return None
        dim, dtype = present[0].pixel_values.shape[1], present[0].pixel_values.dtype
        if any(v.pixel_values.shape[1] != dim for v in present):
            raise ValueError("rows' images were processed to different patch sizes")
        pixels = torch.cat([v.pixel_values.to(dtype) for v in present])
        grids = torch.cat([v.image_grid_thw.long() for v in present])
        return BatchVision(pixels, grids,
                           torch.tensor([0 if v is None else v.num_images for v in rows], dtype=torch.long),
                           torch.tensor([0 if v is None else v.num_patches for v in rows], dtype=torch.long))

    @property
    def num_rows(self) -> int:
        return int(self.row_images.shape[0])

    def select(self, idx: torch.Tensor) -> "BatchVision | None":
        """Rows ``idx`` (in that order, repeats allowed); ``None`` when none of them has an image."""
        idx = torch.as_tensor(idx, dtype=torch.long).flatten().cpu()
        img_start = torch.cumsum(self.row_images, 0) - self.row_images
        patch_start = torch.cumsum(self.row_patches, 0) - self.row_patches
        imgs = [torch.arange(int(img_start[i]), int(img_start[i] + self.row_images[i])) for i in idx.tolist()]
        patches = [torch.arange(int(patch_start[i]), int(patch_start[i] + self.row_patches[i])) for i in idx.tolist()]
        if not idx.numel() or int(self.row_images[idx].sum()) == 0:
            return None
        img_idx = torch.cat(imgs).to(self.image_grid_thw.device)
        patch_idx = torch.cat(patches).to(self.pixel_values.device)
        return BatchVision(self.pixel_values[patch_idx], self.image_grid_thw[img_idx],
                           self.row_images[idx], self.row_patches[idx])

    def to(self, device) -> "BatchVision":
        return BatchVision(self.pixel_values.to(device), self.image_grid_thw.to(device), self.row_images,
                           self.row_patches)

    def row(self, i: int) -> VisionInputs | None:
        """Row ``i``'s images as a prompt's :class:`VisionInputs`."""
        sel = self.select(torch.tensor([i]))
        return None if sel is None else VisionInputs(sel.pixel_values, sel.image_grid_thw)

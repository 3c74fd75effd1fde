"""Odd quintic Newton-Schulz iterations: Muon's orthogonaliser and Pion's spectral high-pass filter.

For ``X = U diag(s) V^T`` one step ``X <- a X + b (X X^T) X + c (X X^T)^2 X`` keeps ``U`` and ``V`` and maps
every singular value through the scalar polynomial ``s -> a s + b s^3 + c s^5``. After Frobenius
normalisation (``X = G / (||G||_F + eps)``, so all ``s <= 1``) a schedule of such steps shapes the spectrum:

    Muon (Jordan et al. 2024):   (a, b, c) = (3.4445, -4.7750, 2.0315), 5 steps. Not convergent on purpose:
                                 every s in (0, 1] lands roughly in [0.7, 1.2] (diag(3, 1) -> [0.753, 1.134]).
    Pion promotion  (k_p steps): (1.875, -1.25, 0.375); slope 1.875 at 0 lifts small singular values.
    Pion suppression (k_s steps): (0, 2.5, -1.5); fixed points 0 and 1 (attracting) and sqrt(2/3) = 0.8165
                                 (repelling): values above sqrt(2/3) go to 1, values below go to 0.

Pion (Fan et al., "Rethinking Muon Beyond Pretraining: Spectral Failures and High-Pass Remedies for VLA and
RLVR", arXiv:2605.19282; code OPTML-Group/Pion ``high_pass_ns``) runs ``k_p`` promotion then
``ns_steps - k_p`` suppression steps; ``k_p = 0`` (pure filter) is the paper's RLVR setting.

The smaller Gram matrix is used (transpose when rows > cols). ``[..., rows, cols]`` inputs are normalised
and iterated per matrix, which is how the per-head variants filter each attention head on its own.
The reference code iterates in bfloat16; ``dtype`` chooses (float64 for exact tests).
"""

from __future__ import annotations

from typing import Sequence

from rlvr.lazy import torch

__all__ = ["MUON_COEFFS", "PROMOTION_COEFFS", "SUPPRESSION_COEFFS", "muon_schedule", "pion_schedule",
           "singular_value_map", "polynomial_iteration", "head_blocks", "merge_head_blocks"]

Coeffs = tuple[float, float, float]
MUON_COEFFS: Coeffs = (3.4445, -4.7750, 2.0315)
PROMOTION_COEFFS: Coeffs = (1.875, -1.25, 0.375)
SUPPRESSION_COEFFS: Coeffs = (0.0, 2.5, -1.5)


def muon_schedule(ns_steps: int = 5) -> tuple[Coeffs, ...]:
    """Muon's ``ns_steps`` quintic steps."""
    return (MUON_COEFFS,) * ns_steps


def pion_schedule(ns_steps: int = 5, promotion_steps: int = 0) -> tuple[Coeffs, ...]:
    """Pion's ``promotion_steps`` promotion steps followed by ``ns_steps - promotion_steps`` suppression steps."""
    if not 0 <= promotion_steps <= ns_steps:
        raise ValueError(f"promotion_steps ({promotion_steps}) must be in [0, ns_steps={ns_steps}]")
    return (PROMOTION_COEFFS,) * promotion_steps + (SUPPRESSION_COEFFS,) * (ns_steps - promotion_steps)


def singular_value_map(s: torch.Tensor, schedule: Sequence[Coeffs]) -> torch.Tensor:
    """What ``polynomial_iteration`` does to (already normalised) singular values ``s``, elementwise."""
    for a, b, c in schedule:
        s = a * s + b * s**3 + c * s**5
    return s


def polynomial_iteration(g: torch.Tensor, schedule: Sequence[Coeffs], eps: float = 1e-7,
                         dtype: torch.dtype | None = None) -> torch.Tensor:
    """Frobenius-normalise each ``[rows, cols]`` matrix of ``g`` and apply ``schedule``; result in ``dtype``
    (bfloat16 when None)."""
    dtype = torch.bfloat16 if dtype is None else dtype
    if g.ndim < 2:
        raise ValueError(f"polynomial_iteration needs a matrix (or a batch of them), got shape {tuple(g.shape)}")
    x = g.to(dtype)
    x = x / (x.norm(dim=(-2, -1), keepdim=True) + eps)
    transposed = x.shape[-2] > x.shape[-1]
    if transposed:
        x = x.mT
    for a, b, c in schedule:
        gram = x @ x.mT
        poly = b * gram + c * (gram @ gram)
        x = poly @ x if a == 0.0 else a * x + poly @ x
    return x.mT if transposed else x


def head_blocks(g: torch.Tensor, heads: int, split_dim: int) -> torch.Tensor | None:
    """``[out, in]`` -> ``[heads, out/heads, in]`` (``split_dim`` 0: Q/K/V, heads on the output rows) or
    ``[heads, out, in/heads]`` (1: O projection, heads on the input columns); None when ``heads`` does not
    divide that side (the caller falls back to the whole matrix, as the reference code does)."""
    out_dim, in_dim = g.shape
    if split_dim == 0:
        return g.reshape(heads, out_dim // heads, in_dim) if out_dim % heads == 0 else None
    if in_dim % heads:
        return None
    return g.reshape(out_dim, heads, in_dim // heads).permute(1, 0, 2)


def merge_head_blocks(x: torch.Tensor, split_dim: int) -> torch.Tensor:
    """Inverse of :func:`head_blocks`."""
    h, r, c = x.shape
    if split_dim == 0:
        return x.reshape(h * r, c)
    return x.permute(1, 0, 2).reshape(r, h * c)

"""Pion: Muon's skeleton with a spectral high-pass filter in place of orthogonalisation (optimizer ``pion``).

Fan et al., "Rethinking Muon Beyond Pretraining: Spectral Failures and High-Pass Remedies for VLA and RLVR",
arXiv:2605.19282; code OPTML-Group/Pion (``pion.py::high_pass_ns``, RLVR: ``RL/verl/verl/utils/muon.py::
DefaultPionAdamW`` / ``PerHeadPionAdamW``). Per 2-D hidden matrix W with gradient g (as Muon, see muon.py):

    m <- mu m + (1 - mu) g ;   u = (1 - mu) g + mu m  if nesterov else m
    X  = u / (||u||_F + 1e-7)
    k_p promotion steps:   X <- 1.875 X + (-1.25 A + 0.375 A^2) X,   A = X X^T   (s -> 1.875 s - 1.25 s^3 + 0.375 s^5)
    k_s suppression steps: X <- (2.5 A - 1.5 A^2) X                             (s -> 2.5 s^3 - 1.5 s^5)
    W <- W (1 - lr wd) - lr * scale_factor * sqrt(max(rows, cols)) * X,          k_s = ns_steps - k_p

Suppression sends normalised singular values above sqrt(2/3) to 1 and those below to 0, so the update keeps
only the dominant directions of the momentum instead of whitening all of them (Muon). Embeddings, LM head,
``exclude_names`` and 1-D parameters take AdamW steps with the same lr.

Defaults are the paper's RLVR setting (GRPO runs, ``DefaultPionAdamW``): ``promotion_steps = 0`` (pure filter,
recommended for RLVR; 1 = 1 promotion + 4 suppression), ns_steps 5, momentum 0.95, no Nesterov, scale
factor 5.0, embed/lm_head excluded. ``per_head: true`` is PerHeadPion: each attention head of q/k/v_proj
(heads on rows) and o_proj (heads on columns) is normalised and filtered on its own.
"""

from __future__ import annotations

from pydantic import Field, model_validator

from rlvr.lazy import torch
from rlvr.optim.muon import MuonParams, build
from rlvr.optim.newton_schulz import pion_schedule
from rlvr.optim.registry import OPTIMIZERS

__all__ = ["PionParams", "pion"]


class PionParams(MuonParams):
    promotion_steps: int = Field(0, ge=0, description="promotion steps k_p before ns_steps - k_p suppression steps "
                                                      "(0: pure high-pass filter, the RLVR setting)")

    @model_validator(mode="after")
    def _steps(self):
        if self.promotion_steps > self.ns_steps:
            raise ValueError(f"promotion_steps ({self.promotion_steps}) must be <= ns_steps ({self.ns_steps})")
        return self


@OPTIMIZERS.register("pion", PionParams)
def pion(model: torch.nn.Module, o, p: PionParams) -> torch.optim.Optimizer:
    """Pion (high-pass Newton-Schulz on momentum) on hidden matrices, AdamW on the rest."""
    return build(model, o, p, pion_schedule(p.ns_steps, p.promotion_steps))

"""HA-DW, history-aware adaptive difficulty weighting (Yang et al. 2026, "Your Group-Relative Advantage Is
Biased", arXiv:2601.08521; hyperparameter names from TRL PR #4872, ``hadw_eta``, ``hadw_lambda_scale``,
``hadw_history_window``). RECONSTRUCTED: the anchor update is confirmed, the reweighting is the PR's
description (Phi = lambda_scale exp(D M), D = -sgn(A) sgn(p_q - C^-), M = |p_q - C^-|), not code we read.

Group-relative advantages under-estimate hard prompts and over-estimate easy ones. A capability anchor C
tracks the batch accuracy across steps; each prompt is reweighted by how far its accuracy is from it:

    y_t      = batch accuracy (mean correctness over the step's completions)
    sigma_t  = population std of y over the last W steps (this one included)
    C_t      = (1 - eta sigma_t) C_{t-1} + eta sigma_t y_t          (C_0 = anchor_init, else y_1)
    d_q      = p_q - C_{t-1}            (p_q the group's success rate; C_t with use_updated_anchor)
    Phi_i    = lambda_scale exp(-sharpness sgn(A_i) d_q)
    A_i     <- Phi_i A_i                                                [N, T] (sgn per token)

Direction: on a hard prompt (p_q < C) positive advantages grow and negative ones shrink; on an easy prompt
the reverse; p_q = C leaves them unchanged (times lambda_scale). ``sharpness`` (1 in the PR's form) is the
knob to correct if the paper's exponent differs. State: C and the window of batch accuracies, saved in
checkpoints.
"""

from __future__ import annotations

import math

from pydantic import Field

from rlvr.algorithms.registry import ADVANTAGE_TRANSFORMS, TransformInputs, TransformOutput
from rlvr.algorithms.transforms.difficulty import success, success_rate
from rlvr.core.state import DictState
from rlvr.lazy import torch
from rlvr.registry import Params

__all__ = ["HADWParams", "ha_dw_transform", "update_anchor", "new_state"]


class HADWParams(Params):
    eta: float = Field(0.1, ge=0.0, le=1.0, description="anchor step size, scaled by the accuracy volatility")
    lambda_scale: float = Field(1.0, gt=0.0, description="overall scale of the reweighting factor")
    window: int = Field(5, ge=1, description="W, recent batch accuracies whose std sets the anchor's step")
    sharpness: float = Field(1.0, ge=0.0, description="multiplies the difficulty gap inside the exponent")
    anchor_init: float | None = Field(None, ge=0.0, le=1.0, description="C_0 (default: the first batch's accuracy)")
    use_updated_anchor: bool = Field(False, description="measure d_q from C_t instead of C_{t-1}")


def new_state(p: HADWParams):
    """A fresh ``DictState``: no anchor yet, an empty window."""
    return DictState(anchor=None, window=[])


def update_anchor(state: dict, y: float, p: HADWParams) -> tuple[float, float, float]:
    """Record batch accuracy ``y``; returns ``(C_{t-1}, C_t, eta_t)`` and stores C_t and the window."""
    prev = state.get("anchor")
    if prev is None:
        prev = p.anchor_init if p.anchor_init is not None else y
    window = (list(state.get("window", [])) + [y])[-p.window:]
    mean = sum(window) / len(window)
    sigma = math.sqrt(sum((v - mean) ** 2 for v in window) / len(window))
    eta_t = p.eta * sigma
    new = (1.0 - eta_t) * prev + eta_t * y
    state["anchor"], state["window"] = new, window
    return prev, new, eta_t


@ADVANTAGE_TRANSFORMS.register("ha_dw", HADWParams, state=new_state)
def ha_dw_transform(inp: TransformInputs, p: HADWParams, state: dict) -> TransformOutput:
    """HA-DW: reweight advantages by exp(-sgn(A) (p_q - C)) against a history anchor C of batch accuracy."""
    y = float(success(inp.rewards, inp.components).mean())
    prev, new, eta_t = update_anchor(state, y, p)
    gap = success_rate(inp.rewards, inp.components, inp.group_index) - (new if p.use_updated_anchor else prev)
    adv = inp.advantages.to(torch.float64)
    phi = p.lambda_scale * torch.exp(-p.sharpness * torch.sign(adv) * gap[:, None])
    live = inp.mask.bool() & (adv != 0)
    metrics = {"anchor": new, "eta_t": eta_t, "batch_accuracy": y,
               "weight_mean": float(phi[live].mean()) if bool(live.any()) else p.lambda_scale}
    return (phi * adv).to(inp.advantages.dtype), metrics

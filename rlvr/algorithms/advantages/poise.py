"""POISE: a cross-rollout baseline from a small probe on the policy's internal states (RECONSTRUCTED).

POISE (Policy Optimization with Internal State Value Estimation), "Your Language Model is Its Own Critic:
Reinforcement Learning with Value Estimation from Actor's Internal States", arXiv:2605.07579 (docs/methods.md,
`poise`). A lightweight probe predicts the expected verifiable reward from hidden states and token-entropy
statistics the policy already computed, is trained online, and each rollout's baseline is predicted from an
*independent* rollout of the same prompt, so the baseline never depends on the rollout it is subtracted from and
the policy gradient stays unbiased.

    phi_i    = [ h_i / rms(h_i),  mean_t H_{i,t},  std_t H_{i,t},  max_t H_{i,t} ]        [N, H + 3]
               (h_i: last hidden state mean-pooled over the completion (``hidden``); H: token entropy)
    f(phi)   = low + (high - low) * sigmoid(w . phi + c)                                 (the probe)
    b_i      = f(phi_j),  j = partner(i) in the same group       ("pair": (1,2),(2,1),(3,4),(4,3), ...;
               an odd group's last row takes the row before it)   ("leave_one_out": mean_{j != i} f(phi_j))
    A_i      = r_i - b_i                                                                [N] -> broadcast
    probe    : ``sgd_steps`` full-batch gradient steps on  BCE(f(phi_j), y_j) + l2/2 |w|^2,
               y_j = clamp((r_j - low) / (high - low), 0, 1), AFTER the baselines are computed

RECONSTRUCTED choices: the exact features (pooled last hidden state, RMS-normalised per row so the probe's
scale does not depend on the model's; mean/std/max entropy), the pairing, the plain SGD optimiser and its
defaults, and the probe starting at zero weights (f = (low + high) / 2). The probe is updated only after
this batch's baselines are predicted: a probe trained on (phi_i, r_i) first would make b_i depend on o_i.
A group of one has no independent rollout; ``singleton: own`` uses the probe's prediction on the row's
own features (a biased baseline: E[grad log pi(o) f(phi(o))] != 0 in general, the price of one-rollout
groups), ``singleton: none`` uses no baseline (A = r, unbiased, higher variance).

State (saved in checkpoints): ``w`` (list of floats, created at the first batch with the feature size),
``c``, ``updates`` (batches trained on) and ``heldout_bce`` (the probe's BCE on the last batch measured
before training on it). Computation is float64 on the CPU; no extra model pass (``hidden`` and
``entropy`` share one forward pass of the policy).
"""

from __future__ import annotations

import math
from typing import Literal

from pydantic import Field, model_validator

from rlvr.algorithms.registry import ADVANTAGES, AdvantageInputs
from rlvr.core.state import DictState
from rlvr.lazy import torch
from rlvr.registry import Params

__all__ = ["POISEParams", "poise_advantage", "probe_features", "cross_baseline", "new_probe"]


class POISEParams(Params):
    partner: Literal["pair", "leave_one_out"] = Field(
        "pair", description="pair: b_i from one other rollout ((1,2),(2,1),...); leave_one_out: mean prediction "
                            "over the group's other rollouts")
    singleton: Literal["own", "none"] = Field(
        "own", description="a group of one: the probe's prediction on its own features (biased) or no baseline")
    lr: float = Field(0.5, gt=0.0, description="probe SGD learning rate")
    sgd_steps: int = Field(4, ge=0, description="full-batch probe SGD steps per training step")
    l2: float = Field(1e-3, ge=0.0, description="L2 penalty on the probe weights")
    low: float = Field(0.0, description="reward mapped to probability 0")
    high: float = Field(1.0, description="reward mapped to probability 1")

    @model_validator(mode="after")
    def _range(self) -> "POISEParams":
        if self.high <= self.low:
            raise ValueError(f"high ({self.high}) must exceed low ({self.low})")
        return self


def new_probe(p: POISEParams):
    """A fresh probe state."""
    return DictState(w=None, c=0.0, updates=0, heldout_bce=None)


def probe_features(hidden: torch.Tensor, entropy: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
    """[N, H + 3] float64: RMS-normalised pooled hidden state, and mean / std / max entropy per row."""
    h = hidden.to(torch.float64)
    h = h / h.pow(2).mean(-1, keepdim=True).sqrt().clamp(min=1e-12)
    m = (mask > 0)
    e = torch.where(m, entropy.to(torch.float64), torch.zeros_like(entropy, dtype=torch.float64))
    n = m.sum(-1).clamp(min=1).to(torch.float64)
    mean = e.sum(-1) / n
    std = (torch.where(m, (e - mean[:, None]) ** 2, torch.zeros_like(e)).sum(-1) / n).sqrt()
    mx = torch.where(m, e, torch.full_like(e, -math.inf)).amax(-1) if e.shape[1] else torch.zeros_like(mean)
    mx = torch.where(m.any(-1), mx, torch.zeros_like(mx))
    return torch.cat([h, mean[:, None], std[:, None], mx[:, None]], dim=-1)


def cross_baseline(pred: torch.Tensor, group_index: torch.Tensor, partner: str, singleton: str) -> torch.Tensor:
    """[N] baseline of each row from other rows' predictions ``pred`` [N] of its group (rows in batch order)."""
    out = torch.zeros_like(pred)
    for g in torch.unique(group_index):
        rows = torch.nonzero(group_index == g).flatten().tolist()
        if len(rows) == 1:
            out[rows[0]] = pred[rows[0]] if singleton == "own" else 0.0
            continue
        if partner == "leave_one_out":
            total = pred[rows].sum()
            for r in rows:
                out[r] = (total - pred[r]) / (len(rows) - 1)
            continue
        for k, r in enumerate(rows):
            j = k + 1 if k % 2 == 0 else k - 1
            out[r] = pred[rows[j if j < len(rows) else k - 1]]
    return out


def _train(state, phi: torch.Tensor, y: torch.Tensor, p: POISEParams) -> None:
    w = torch.tensor(state["w"], dtype=torch.float64)
    c = torch.tensor(float(state["c"]), dtype=torch.float64)
    for _ in range(p.sgd_steps):
        err = torch.sigmoid(phi @ w + c) - y  # d BCE / d logit
        w = w - p.lr * (phi.T @ err / len(y) + p.l2 * w)
        c = c - p.lr * err.mean()
    state["w"], state["c"] = w.tolist(), float(c)
    state["updates"] = int(state["updates"]) + 1


@ADVANTAGES.register("poise", POISEParams, state=new_probe, needs=("hidden", "entropy"))
def poise_advantage(inp: AdvantageInputs, p: POISEParams, state) -> torch.Tensor:
    """POISE: r_i minus a probe's reward prediction from an independent rollout of the same prompt."""
    if inp.mask is None or "hidden" not in inp.extras or "entropy" not in inp.extras:
        raise ValueError("advantage 'poise' needs the completion mask and the hidden / entropy extras")
    phi = probe_features(inp.extras["hidden"], inp.extras["entropy"], inp.mask)
    if state["w"] is None:
        state["w"] = [0.0] * phi.shape[1]
    if len(state["w"]) != phi.shape[1]:
        raise ValueError(f"the POISE probe has {len(state['w'])} weights but the features have {phi.shape[1]} "
                         f"(the model changed since the probe was made)")
    w = torch.tensor(state["w"], dtype=torch.float64)
    prob = torch.sigmoid(phi @ w + float(state["c"]))
    scale = p.high - p.low
    base = cross_baseline(p.low + scale * prob, inp.group_index, p.partner, p.singleton)
    r = inp.rewards.to(torch.float64)
    y = ((r - p.low) / scale).clamp(0.0, 1.0)
    bce = -(y * prob.clamp(min=1e-12).log() + (1 - y) * (1 - prob).clamp(min=1e-12).log()).mean()
    state["heldout_bce"] = float(bce)
    _train(state, phi, y, p)  # after the baselines: b_i never saw (phi_i, r_i)
    return (r - base).to(torch.float32)

"""PRISM's alignment advantage: group-normalised discriminator scores of a response's perception and reasoning.

Wang et al. 2026, "Beyond SFT-to-RL: Pre-alignment via Black-Box On-Policy Distillation for Multimodal RL"
(PRISM), arXiv:2604.28123; code ``XIAO4579/PRISM``, ``verl/trainer/ppo/core_algos.py::
compute_grpo_multi_reward_advantage``. PRISM inserts an alignment stage between SFT and RLVR in which the
policy plays a response-level adversarial game against a discriminator (:mod:`rlvr.learners.discriminator`)
with a perception expert and a reasoning expert. Per completion i of group g, with the discriminator's
scores ``c_i`` (perception: the response's ``<caption>`` span) and ``r_i`` (reasoning: the rest), and
``F_i = 1`` when the response breaks the format (its scores are then 0):

    c'_i = min{c_j : j in g, F_j = 0} - 1   if F_i = 1   (below every valid sibling; -1 without one), else c_i
    GN(x)_i = (x_i - mean_g x) / (std_g x + eps)          (unbiased std; a group of one: mean 0, std 1)
    A_align = w_c GN(c') + w_r GN(r')

``mode``:

- ``replace`` (the published alignment stage, ``qwen3_vl_prism.sh``: the reference's mode 1):
  ``A = A_align - format_penalty * F``; the verifiable reward is not used;
- ``gated`` (the reference's mode 4, the GDPO-style joint signal): ``A = A_v + align_coef * A_align * (1 - F)
  (1 - W)``, with A_v the configured advantage of the verifiable reward and W = 1 for a well-formed wrong
  answer (score component ``correct`` is 0).

Discriminator warm-up (``warmup``): for the first ``warmup`` steps the discriminator trains on the policy's
responses while the policy does not move (``replace``: A = 0; ``gated``: A = A_v). The reference warms its
discriminator up on teacher/student pairs before alignment (``moe/train_moe_vl_warmup.py``); without it the
first steps' scores are an untrained head's near-constant noise, which the group normalisation scales up to
unit advantages: on the CPU demo that noise alone moved the post-SFT policy away from its demonstrations
(exact matches 63% -> 8% of responses in 6 steps, greedy accuracy 0.97 -> 0.33 in 60). The warm-up on the
policy's own samples is RECONSTRUCTED (the reference's warm-up data are offline pairs of the same kind).

The transform is active for the first ``steps`` RL steps (the alignment stage; null: the whole run) and then
lets the configured advantage through unchanged, so one run does PRISM's stages 2 and 3 after the SFT
warm-up (stage 1). The discriminator scores and trains only while the transform is active (its extras are
requested only then). Defaults are the official alignment script's: ``w_c = w_r = 0.5``, format penalty 1.5.
EXACT (code).
"""

from __future__ import annotations

from typing import Literal

from pydantic import Field, model_validator

from rlvr.algorithms.grouping import group_constant, group_mean, group_sizes, group_std
from rlvr.algorithms.registry import ADVANTAGE_TRANSFORMS, TransformInputs, TransformOutput
from rlvr.lazy import torch
from rlvr.registry import Params

__all__ = ["PRISMParams", "prism_align", "alignment_advantage", "group_normalize"]


class PRISMParams(Params):
    steps: int | None = Field(None, gt=0, description="RL steps of the alignment stage (then the configured "
                                                      "advantage passes unchanged: RLVR); null: every step")
    warmup: int = Field(0, ge=0, description="first steps of the stage in which only the discriminator trains "
                                             "(replace: A = 0; gated: A = A_v)")
    mode: Literal["replace", "gated"] = Field("replace", description="replace: A = A_align - format_penalty F "
                                                                     "(the paper's stage); gated: A_v + "
                                                                     "align_coef A_align (1-F)(1-W)")
    perception_weight: float = Field(0.5, ge=0.0, description="w_c, the perception expert's weight")
    reasoning_weight: float = Field(0.5, ge=0.0, description="w_r, the reasoning expert's weight")
    format_penalty: float = Field(1.5, ge=0.0, description="subtracted from a malformed response's advantage "
                                                           "(replace mode)")
    align_coef: float = Field(1.0, ge=0.0, description="weight of A_align on the verifiable advantage (gated)")
    eps: float = Field(1e-6, gt=0.0, description="added to the group std")

    @model_validator(mode="after")
    def _check(self) -> "PRISMParams":
        if self.steps is not None and self.warmup >= self.steps:
            raise ValueError(f"warmup ({self.warmup}) must be shorter than the alignment stage (steps {self.steps})")
        return self


def group_normalize(x: torch.Tensor, group: torch.Tensor, eps: float) -> torch.Tensor:
    """``(x - mean_g) / (std_g + eps)`` per group (unbiased std, float64); a group of one keeps its value (mean 0,
    std 1, as the reference has it); a constant group is exactly 0."""
    x = x.to(torch.float64)
    single = group_sizes(group) == 1
    dev = torch.where(group_constant(x, group), torch.zeros_like(x), x - group_mean(x, group))
    return torch.where(single, x, dev) / (torch.where(single, torch.ones_like(x), group_std(x, group)) + eps)


def _below_valid(x: torch.Tensor, invalid: torch.Tensor, group: torch.Tensor) -> torch.Tensor:
    """Malformed rows' scores set to their group's lowest well-formed score minus 1 (-1 without one)."""
    out = x.clone()
    for g in torch.unique(group):
        rows = group == g
        valid = rows & ~invalid
        low = float(x[valid].min()) if valid.any() else 0.0
        out[rows & invalid] = low - 1.0
    return out


def alignment_advantage(perception: torch.Tensor, reasoning: torch.Tensor, invalid: torch.Tensor,
                        group: torch.Tensor, w_c: float, w_r: float, eps: float) -> torch.Tensor:
    """``[N]`` A_align = w_c GN(c') + w_r GN(r') (float64)."""
    inv = invalid.bool()
    c = _below_valid(perception.to(torch.float64), inv, group)
    r = _below_valid(reasoning.to(torch.float64), inv, group)
    return w_c * group_normalize(c, group, eps) + w_r * group_normalize(r, group, eps)


def _active(p: PRISMParams, step: int) -> bool:
    return p.steps is None or step < p.steps


@ADVANTAGE_TRANSFORMS.register("prism", PRISMParams, needs=("disc_perception", "disc_reasoning", "disc_format"),
                               active=_active)
def prism_align(inp: TransformInputs, p: PRISMParams) -> TransformOutput:
    """PRISM: the alignment stage's advantage from the perception and reasoning experts' scores."""
    ex = inp.extras
    invalid = ex["disc_format"].to(inp.rewards.device) <= 0
    group = inp.group_index.to(inp.rewards.device)
    a_align = alignment_advantage(ex["disc_perception"].to(inp.rewards.device),
                                  ex["disc_reasoning"].to(inp.rewards.device), invalid, group,
                                  p.perception_weight, p.reasoning_weight, p.eps)
    f = invalid.to(torch.float64)
    if inp.step < p.warmup:  # the discriminator learns; the policy waits
        a_align = torch.zeros_like(a_align)
        f = torch.zeros_like(f)
    if p.mode == "replace":
        row = a_align - p.format_penalty * f
        adv = row[:, None] * inp.mask.to(torch.float64)
    else:
        wrong = (inp.components.get("correct", torch.zeros_like(f)).to(f.device).to(torch.float64) <= 0).double()
        wrong = wrong * (1.0 - f)
        gate = (1.0 - f) * (1.0 - wrong)
        adv = (inp.advantages.to(torch.float64) + (p.align_coef * a_align * gate)[:, None]) * inp.mask
    correct = inp.components.get("correct")
    gap = 0.0  # does the discriminator reward correctness? mean A_align of correct rows minus that of wrong ones
    if correct is not None:
        right = correct.to(a_align.device) > 0
        if right.any() and (~right).any():
            gap = float(a_align[right].mean() - a_align[~right].mean())
    return adv.to(inp.advantages.dtype), {"format_valid": float(1.0 - invalid.double().mean()),
                                          "align_abs_mean": float(a_align.abs().mean()), "correct_gap": gap,
                                          "warmup": float(inp.step < p.warmup)}

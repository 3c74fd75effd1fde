"""WAPO: train only on winners (above-average completions) with an upper-clipped ratio and a constant
per-group normaliser.

WAPO, arXiv:2606.16154; code layer6ai-labs/wapo, ``verifiers/rl/trainer/trainer.py`` (``loss_type ==
"wapo"``) and ``orchestrator.py`` (weights and normaliser). EXACT (code). Meant with the Dr. GRPO advantage
A_i = r_i - mean_g r. With Ā_i the masked mean of the row's advantages:

    keep_i   = Ā_i > 0                                   (A = 0 is dropped too)
    rho      = exp(clamp(logp - old_logp, +-20))
    l_{i,t}  = -min(rho A, min(rho, 1 + clip_eps) A)     (importance_sampling off: l = -A logp)
    loss     = sum_{i kept, t} l_{i,t} / (G_i L_max)  /  #{groups of the minibatch with a kept row}

G_i is the size of the row's group, L_max a constant (``max_len``, default ``rollout.max_new_tokens``; the
code uses its max sequence length). The normaliser counts groups over the whole minibatch (the code counts
over its rollout batch: the same with ``algorithm.minibatches: 1``), so micro-batching never changes the
gradient. Returns the micro-batch's 0-dim share of the minibatch loss.
Metrics: ``kept`` (tokens of winners), ``clip_frac`` (kept tokens above the cap), ``ratio``.
"""

from __future__ import annotations

from pydantic import Field

from rlvr.algorithms.grouping import group_sizes
from rlvr.algorithms.objectives.common import masked_seq_mean, masked_seq_sum, require, whole_minibatch
from rlvr.algorithms.registry import OBJECTIVES, ObjectiveInputs, ObjectiveOutput
from rlvr.lazy import torch
from rlvr.registry import Params

__all__ = ["WAPOParams", "wapo"]


class WAPOParams(Params):
    clip_eps: float = Field(9.0, ge=0.0, description="ratio capped above at 1 + clip_eps (README: 9, a cap of 10)")
    importance_sampling: bool = Field(True, description="use the capped ratio; off: l = -A logp")
    max_len: int | None = Field(None, gt=0, description="L_max of the constant normaliser G L_max "
                                                         "(default: rollout.max_new_tokens)")
    log_ratio_clamp: float = Field(20.0, gt=0.0, description="clamp on logp - old_logp before exp")


@OBJECTIVES.register("wapo", WAPOParams, traits=("whole_groups", "reduced_loss"))
def wapo(inp: ObjectiveInputs, p: WAPOParams) -> ObjectiveOutput:
    """WAPO: positive-advantage rows only, upper-clipped ratio, G L_max per group over groups with a winner."""
    gi = require(inp.group_index, "group ids (ObjectiveInputs.group_index)", "wapo")
    whole = whole_minibatch(inp)
    l_max = whole.constant_len(p.max_len)
    won = masked_seq_mean(whole.advantages.to(torch.float64), whole.mask) > 0
    n_won = max(int(torch.unique(whole.group_index[won]).numel()), 1)
    adv = inp.advantages
    keep = masked_seq_mean(adv.to(torch.float64), inp.mask) > 0  # [N]
    rho = torch.exp((inp.logp - inp.old_logp).clamp(-p.log_ratio_clamp, p.log_ratio_clamp))
    if p.importance_sampling:
        term = -torch.minimum(rho * adv, torch.clamp(rho, max=1.0 + p.clip_eps) * adv)
    else:
        term = -adv * inp.logp
    weight = keep.to(term.dtype) / (group_sizes(gi).to(term.dtype) * l_max * n_won)  # [N]
    loss = (masked_seq_sum(term, inp.mask) * weight).sum()
    kept = keep[:, None].expand_as(rho).float()
    return loss, {"kept": kept, "clip_frac": kept * (rho > 1.0 + p.clip_eps).float(), "ratio": rho.detach()}

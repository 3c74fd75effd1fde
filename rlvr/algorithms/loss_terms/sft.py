"""An SFT term on selected trajectories: the negative log-likelihood of the completions a rule selects.

    L_t = -sel_i * log pi_theta(y_{i,t} | x_i, y_{i,<t})         [N, T], added as weight * L to the loss

with ``sel_i`` in {0, 1} from the row's training reward ``r_i`` and its group:

- ``correct``: r_i >= threshold (rejection-sampling fine-tuning, RAFT / ReST on the model's own successes;
  the SFT part of methods that interleave supervised steps on successful trajectories, PROPA, MEML-GRPO);
- ``positive_advantage``: A_i > 0 (the row beat its group's baseline);
- ``all``: every row (reward-free online SFT on the model's own samples, OSFT's loss as a term).

The run's aggregation weighs the tokens as it weighs the objective's (``token_mean``: the selected tokens'
NLL summed over the minibatch's tokens, selected or not), so the term's scale follows the share of rows it
selects. Rewards are those the advantage saw (after reward transforms). Metric: ``selected`` (the share of
tokens on selected rows).
"""

from __future__ import annotations

from typing import Literal

from pydantic import Field

from rlvr.algorithms.loss_terms.base import LossTermParams, term_active
from rlvr.algorithms.registry import LOSS_TERMS, ObjectiveInputs, ObjectiveOutput
from rlvr.lazy import torch

__all__ = ["SFTTermParams", "sft", "selected_rows"]


class SFTTermParams(LossTermParams):
    select: Literal["correct", "positive_advantage", "all"] = Field(
        "correct", description="which completions the term trains on")
    threshold: float = Field(0.5, description="reward at or above which a completion counts as correct")


def selected_rows(x: ObjectiveInputs, p: SFTTermParams) -> torch.Tensor:
    """``[N]`` float 0/1: the rows the term trains on."""
    n = x.logp.shape[0]
    if p.select == "all":
        return torch.ones(n, dtype=x.logp.dtype, device=x.logp.device)
    if p.select == "positive_advantage":
        return ((x.advantages * x.mask).sum(-1) > 0).to(x.logp.dtype)
    if x.rewards is None:
        raise ValueError(f"loss term 'sft' with select={p.select!r} needs the batch's rewards")
    return (x.rewards.to(torch.float64) >= p.threshold).to(x.logp.dtype)


@LOSS_TERMS.register("sft", SFTTermParams, active=term_active)
def sft(x: ObjectiveInputs, p: SFTTermParams) -> ObjectiveOutput:
    """Negative log-likelihood of selected completions (correct, above their group's baseline, or all)."""
    sel = selected_rows(x, p)[:, None] * x.mask
    return -x.logp * sel, {"selected": sel.detach()}

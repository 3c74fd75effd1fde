"""DPO, IPO or SimPO on a file of preference pairs beside the RL loss (loss term ``dpo_pairs``): offline
preference optimisation, alone (with the RL objective's weight at 0) or mixed with RLVR.

The pairs come as ``f_preference``'s do (:mod:`rlvr.passes.pairs`: ``{prompt, chosen, rejected}`` lines,
``pairs_per_step`` drawn each RL step with the step's seed, their reference log-probs computed once). The
per-pair losses are :func:`rlvr.algorithms.objectives.dpo.pair_losses` (the formulas are in that module),
averaged over the step's pairs. Metrics per minibatch: ``pair_accuracy``, ``margin``.
"""

from __future__ import annotations

from typing import Literal

from pydantic import Field

from rlvr.algorithms.loss_terms.base import LossTermParams, PairSourceParams, term_active
from rlvr.algorithms.objectives.common import masked_seq_sum
from rlvr.algorithms.objectives.dpo import pair_losses
from rlvr.algorithms.registry import LOSS_TERMS, ObjectiveInputs, ObjectiveOutput

__all__ = ["DPOPairsParams", "dpo_pairs"]


class DPOPairsParams(LossTermParams, PairSourceParams):
    loss: Literal["dpo", "ipo", "simpo"] = Field("dpo", description="the pair loss")
    beta: float = Field(0.1, gt=0.0, description="beta (IPO: tau; SimPO's beta, typically 2)")
    label_smoothing: float = Field(0.0, ge=0.0, lt=0.5, description="cDPO's eps (dpo only)")
    gamma: float = Field(0.5, ge=0.0, description="SimPO's target margin")


@LOSS_TERMS.register("dpo_pairs", DPOPairsParams, needs=("ref_logp",), traits=("pair_batch",), active=term_active)
def dpo_pairs(x: ObjectiveInputs, p: DPOPairsParams) -> ObjectiveOutput:
    """DPO / IPO / SimPO on off-policy preference pairs from a file."""
    e = x.extras
    mc, mr = e["pair_chosen_mask"], e["pair_rejected_mask"]
    s_w, s_l = masked_seq_sum(e["pair_chosen_logp"], mc), masked_seq_sum(e["pair_rejected_logp"], mr)
    r_w = masked_seq_sum(e["pair_chosen_ref_logp"], mc)
    r_l = masked_seq_sum(e["pair_rejected_ref_logp"], mr)
    n_w, n_l = mc.sum(-1).clamp(min=1).to(s_w.dtype), mr.sum(-1).clamp(min=1).to(s_l.dtype)
    losses, h = pair_losses(p.loss, s_w, s_l, n_w, n_l, r_w, r_l, p.beta, p.label_smoothing, p.gamma)
    return losses.mean(), {"pair_accuracy": (h.detach() > 0).float().mean(), "margin": h.detach().mean()}

"""LamPO's pairwise decomposed advantage (LamPO, Lambda-Style Policy Optimization, arXiv:2605.21235; the
arXiv record shows the paper as withdrawn). RECONSTRUCTED: confirmed are an advantage that aggregates the
pairwise reward gaps within a group, each modulated by a confidence-aware weight from sequence log-probability
differences (LambdaRank-style), and the PPO clip; the weight function is our best guess.

With s_i the completion's mean token log-prob under the sampling policy (detached, from old_logp [N, T]):

    w_ij = 2 sigmoid( kappa (s_j - s_i) sgn(r_i - r_j) )     (> 1 when the policy prefers the worse one)
    A_i  = 1/(n_g - 1) sum_{j in g, j != i} w_ij (r_i - r_j)            [N], broadcast to [N, T]

w_ij = w_ji, so the advantages of a group sum to 0; kappa = 0 gives RLOO exactly. A group of one gets 0.
The paper's optional ROUGE-L auxiliary reward against a reference solution is a reward term, not part of
the advantage: the reward transform ``rouge_l_bonus`` (recipe ``lampo_rouge``). Cost: one n_g x n_g matrix per group.
"""

from __future__ import annotations

from pydantic import Field

from rlvr.algorithms.advantages.rloo import rloo_check
from rlvr.algorithms.registry import ADVANTAGES, AdvantageInputs
from rlvr.algorithms.transforms.difficulty import seq_mean_logp
from rlvr.lazy import torch
from rlvr.registry import Params

__all__ = ["LamPOParams", "lampo_advantage"]


class LamPOParams(Params):
    kappa: float = Field(1.0, ge=0.0, description="sharpness of the confidence weight (0: RLOO)")


@ADVANTAGES.register("lampo", LamPOParams, check=rloo_check, needs=("old_logp",))
def lampo_advantage(inp: AdvantageInputs, p: LamPOParams) -> torch.Tensor:
    """LamPO: mean over the group of pairwise reward gaps weighted by the policy's mis-ordering."""
    if inp.mask is None or "old_logp" not in inp.extras:
        raise ValueError("lampo needs the completion mask and old_logp (requested with needs=('old_logp',))")
    r = inp.rewards.to(torch.float64)
    s = seq_mean_logp(inp.extras["old_logp"], inp.mask)
    adv = torch.zeros_like(r)
    for g in torch.unique(inp.group_index):
        idx = (inp.group_index == g).nonzero().squeeze(1)
        if idx.numel() < 2:
            continue  # no pair to compare
        rg, sg = r[idx], s[idx]
        gap = rg[:, None] - rg[None, :]  # [n, n] r_i - r_j
        w = 2.0 * torch.sigmoid(p.kappa * (sg[None, :] - sg[:, None]) * torch.sign(gap))
        adv[idx] = (w * gap).sum(1) / (idx.numel() - 1)  # the diagonal's gap is 0
    return adv.to(torch.float32)

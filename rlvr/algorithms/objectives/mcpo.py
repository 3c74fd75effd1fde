"""MCPO, hinge-KL part: PPO's clipped surrogate plus a hinge on the per-token drift from the old policy,
only on mastered groups (every completion correct), whose GRPO advantages are all 0.

Liao et al., "Mastery-Consolidated Policy Optimization", arXiv:2604.16972. RECONSTRUCTED from the abstract
(docs/methods.md, `mcpo`): the KL estimator, the hinge form and the defaults are our reading. The other half of
MCPO, the up-weighting of majority-correct groups, is the advantage transform ``mcpo_weight``. Per token:

    loss_{i,t} = ppo_clip_{i,t} + hinge_coef * max(0, KL_{i,t} - hinge_delta) * [group of i mastered]
    KL_{i,t}   = rho - 1 - log rho,   rho = exp(clamp(logp - old_logp, +-20))
               (k3 estimate of KL(pi_old || pi_theta) on tokens sampled from pi_old)
    mastered   = min_{j in g} r_j >= mastery

pi_old is the policy before this batch's updates (the paper's "previous gradient step" for the first
minibatch); the hinge is 0 at theta = theta_old, so it acts only with ``epochs x minibatches > 1``.
Aggregated by ``algorithm.aggregation`` like ``ppo_clip``; all PPO parameters and the clip rule apply.
Metrics: those of ``ppo_clip``, ``hinge_frac`` (tokens over the hinge), ``mastered``.
"""

from __future__ import annotations

from pydantic import Field

from rlvr.algorithms.objectives.common import require
from rlvr.algorithms.objectives.ppo_clip import PPOClipParams, ppo_clip
from rlvr.algorithms.registry import OBJECTIVES, ObjectiveInputs, ObjectiveOutput
from rlvr.lazy import torch

__all__ = ["MCPOParams", "mcpo", "mastered_rows"]


class MCPOParams(PPOClipParams):
    hinge_coef: float = Field(1.0, ge=0.0, description="weight of the hinge-KL term (reconstructed)")
    hinge_delta: float = Field(0.02, ge=0.0, description="free drift per token before the hinge acts")
    mastery: float = Field(1.0, description="a group is mastered when every reward is >= this")


def mastered_rows(rewards: torch.Tensor, group_index: torch.Tensor, mastery: float) -> torch.Tensor:
    """[N] bool: every reward of the row's group is >= ``mastery``."""
    _, inv = torch.unique(group_index, return_inverse=True)
    low = torch.full((int(inv.max()) + 1,), torch.inf, dtype=torch.float64, device=rewards.device)
    low = low.scatter_reduce(0, inv, rewards.to(torch.float64), "amin")
    return low[inv] >= mastery


@OBJECTIVES.register("mcpo", MCPOParams, traits=("whole_groups", "clip_rule"))
def mcpo(inp: ObjectiveInputs, p: MCPOParams) -> ObjectiveOutput:
    """MCPO (reconstructed): PPO clip + hinge on KL(pi_old || pi_theta) for mastered groups."""
    gi = require(inp.group_index, "group ids (ObjectiveInputs.group_index)", "mcpo")
    rewards = require(inp.rewards, "the rewards (ObjectiveInputs.rewards)", "mcpo")
    loss, metrics = ppo_clip(inp, p)
    log_rho = (inp.logp - inp.old_logp).clamp(-p.log_ratio_clamp, p.log_ratio_clamp)
    kl = torch.exp(log_rho) - 1.0 - log_rho
    mastered = mastered_rows(rewards, gi, p.mastery).to(loss.dtype)[:, None]
    over = torch.relu(kl - p.hinge_delta) * mastered
    loss = loss + p.hinge_coef * over
    metrics = {**metrics, "hinge_frac": (over > 0).float().detach(), "mastered": mastered.expand_as(loss)}
    return loss, metrics

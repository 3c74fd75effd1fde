"""VIMPO's critic-free actor advantage from policy-implied values (RECONSTRUCTED).

Kang, Feng, Levine, Song, Zhao 2026, "VIMPO: Value-Implicit Policy Optimization", arXiv:2606.20008
(docs/methods.md, `vimpo`). Under KL-regularised optimality with deterministic token transitions and the outcome
reward r only at the end, ``beta log(pi/pi_ref)(o_t) = V(s_{t+1}) - V(s_t)`` (+ r at the last step) with
``V(s_{T+1}) = 0``, so the policy implies a value for every prefix of a completion:

    lr_{i,t}  = M_{i,t} (old_logp - ref_logp)_{i,t}                          [N, T]  (pi_old = pi_theta here)
    V_{i,t}   = r_i - beta * sum_{k >= t} lr_{i,k}                            [N, T]  (the soft return-to-go)
    V0hat_g   = mean_{j in g} V_{j,0}                                         [N]     (shared start state)
    baseline "group_start" (default):  A_{i,t} = V_{i,t} - V0hat_{g(i)}                  (varies per token)
    baseline "implied_state":          A_{i,t} = V_{i,t} - (V0hat + beta sum_{k<t} lr_{i,k})
                                               = V_{i,0} - V0hat_{g(i)}              (constant per row)

RECONSTRUCTED: the paper's abstract states a critic-free actor advantage derived from the same recurrence;
its literal per-step difference ``V_{t+1} - V_t = beta lr_t`` ignores the reward, so it cannot be the whole
actor signal. We use the detached policy-implied values as Monte-Carlo targets and a group baseline:
``group_start`` subtracts the group's mean start value from every prefix's value (the reward-to-go form
of the KL-regularised policy gradient: each token is credited with the reward and the KL of what follows
it); ``implied_state`` subtracts the value the policy implies for the prefix itself, which cancels the
past and leaves the row's value-loss residual. Both baselines are unbiased (neither depends on the token
being credited). With pi_theta = pi_ref every V_t = r and both equal Dr. GRPO's ``r - mean_g r``.

All values are detached (computed from log-probs the trainer recomputed without gradients) and float64.
A group of one gets V0hat = 0 (the verl/TRL convention ``grpo`` and ``dr_grpo`` use), a constant group
(equal start values) gets V0hat equal to that value exactly. ``beta`` must equal the ``vimpo``
objective's (checked at load). The value loss lives in the ``vimpo`` objective.
"""

from __future__ import annotations

from typing import Literal

from pydantic import Field

from rlvr.algorithms.grouping import group_constant, group_mean, group_sizes
from rlvr.algorithms.registry import ADVANTAGES, AdvantageInputs
from rlvr.lazy import torch
from rlvr.registry import Params

__all__ = ["VIMPOAdvantageParams", "vimpo_advantage", "implied_values", "group_start_value"]


class VIMPOAdvantageParams(Params):
    beta: float = Field(0.1, gt=0.0, description="KL-regularisation coefficient of the implied values "
                                                 "(must equal the vimpo objective's beta)")
    baseline: Literal["group_start", "implied_state"] = Field(
        "group_start", description="group_start: A_t = V_t - mean_g V_0 (reward-to-go); implied_state: "
                                   "A_t = V_0 - mean_g V_0 for every token (RECONSTRUCTED choices)")


def implied_values(rewards: torch.Tensor, log_ratio: torch.Tensor, mask: torch.Tensor,
                   beta: float) -> torch.Tensor:
    """[N, T] float64 ``V_t = r - beta * sum_{k >= t} M lr_k`` (0 on padding)."""
    lr = torch.where(mask > 0, log_ratio.to(torch.float64), torch.zeros_like(log_ratio, dtype=torch.float64))
    to_go = lr.flip(-1).cumsum(-1).flip(-1)  # sum_{k >= t}
    v = rewards.to(torch.float64)[:, None] - beta * to_go
    return torch.where(mask > 0, v, torch.zeros_like(v))


def group_start_value(v0: torch.Tensor, group_index: torch.Tensor) -> torch.Tensor:
    """[N] ``mean_g V_0``: 0 for a group of one, the common value exactly for a constant group."""
    mean = group_mean(v0, group_index)
    mean = torch.where(group_constant(v0, group_index), v0.to(torch.float64), mean)
    return torch.where(group_sizes(group_index) == 1, torch.zeros_like(mean), mean)


@ADVANTAGES.register("vimpo", VIMPOAdvantageParams, needs=("old_logp", "ref_logp"), traits=("token_level",))
def vimpo_advantage(inp: AdvantageInputs, p: VIMPOAdvantageParams) -> torch.Tensor:
    """VIMPO: per-token advantage from policy-implied values V_t and the group's mean start value."""
    if inp.mask is None or "old_logp" not in inp.extras or "ref_logp" not in inp.extras:
        raise ValueError("advantage 'vimpo' needs the completion mask and the old_logp / ref_logp extras")
    mask = inp.mask
    v = implied_values(inp.rewards, inp.extras["old_logp"] - inp.extras["ref_logp"], mask, p.beta)
    v0 = v[:, 0] if v.shape[1] else torch.zeros(v.shape[0], dtype=torch.float64)
    lengths = mask.sum(-1)
    v0 = torch.where(lengths > 0, v0, inp.rewards.to(torch.float64))  # an empty completion: V_0 = r
    base = group_start_value(v0, inp.group_index)[:, None]
    if p.baseline == "implied_state":
        adv = (v0[:, None] - base).expand_as(v)
    else:
        adv = v - base
    return (adv * mask).to(torch.float32)

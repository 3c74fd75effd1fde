"""Generalised advantage estimation from a learned critic (advantage estimator ``gae``): PPO's advantage.

Schulman, Moritz, Levine, Jordan, Abbeel 2016, "High-Dimensional Continuous Control Using Generalized
Advantage Estimation", arXiv:1506.02438; as verl's ``compute_gae_advantage_return`` and TRL's PPO apply it to
completions: the reward arrives on the last token, the value after the last token is 0. For a completion of
length L with final reward R and critic values V_t = V(prompt, y_<t) (extra ``values``, the mean over the
critic's heads, ``algorithm.critic``):

    r_t     = R 1[t = L - 1] + alpha min(sigma_t, kappa)       (sigma_t: the spread of the critic's heads,
                                                               extra ``values_std``: CDE's critic bonus,
                                                               Dai et al. 2025, arXiv:2509.09675, off at 0)
    delta_t = r_t + gamma V_{t+1} - V_t,   V_L = 0
    A_t     = delta_t + gamma lambda A_{t+1},   A_L = 0       returns G_t = A_t + V_t (the critic's targets)
    whiten: A <- (A - mean(A)) / sqrt(var(A) + 1e-8) over every completion token of the batch (verl's
            masked_whiten; the mean is subtracted)

With gamma = lambda = 1 (verl's defaults) A_t = R - V_t. Groups play no part: the critic is the baseline. The
critic itself trains on G (:mod:`rlvr.learners.critic`, from the same :func:`gae` of its own heads' values).
"""

from __future__ import annotations

from pydantic import Field

from rlvr.algorithms.registry import ADVANTAGES, AdvantageInputs
from rlvr.lazy import torch
from rlvr.registry import Params

__all__ = ["GAEParams", "gae", "token_rewards", "gae_advantage"]


class GAEParams(Params):
    gamma: float = Field(1.0, ge=0.0, le=1.0, description="discount (verl: 1)")
    lam: float = Field(1.0, ge=0.0, le=1.0, description="GAE lambda (verl: 1)")
    whiten: bool = Field(True, description="standardise the advantages over the batch's completion tokens")
    std_bonus: float = Field(0.0, ge=0.0, description="alpha: CDE's critic bonus per token, alpha x the spread "
                                                      "of the critic's heads (needs algorithm.critic.heads > 1)")
    std_bonus_clip: float | None = Field(None, gt=0.0, description="kappa: the spread is clipped at this first")


def token_rewards(rewards: torch.Tensor, lengths: torch.Tensor, shape: tuple[int, int]) -> torch.Tensor:
    """``[N, T]``: each completion's reward on its last token, 0 elsewhere (an empty completion gets none)."""
    out = torch.zeros(shape, dtype=torch.float64, device=rewards.device)
    rows = (lengths > 0).nonzero().flatten()
    out[rows, (lengths[rows] - 1).long()] = rewards[rows].to(torch.float64)
    return out


def gae(rewards_t: torch.Tensor, values: torch.Tensor, mask: torch.Tensor, gamma: float,
        lam: float) -> tuple[torch.Tensor, torch.Tensor]:
    """``(advantages, returns)`` ``[N, T]`` from token rewards, values and ``mask``, 1 on the positions inside
    each completion (right-padded; past its end the value is 0). Tokens masked out of the loss inside a
    completion (inserted observations) still take part in the recursion: pass the positions, not the loss
    mask."""
    r, v, m = rewards_t.to(torch.float64), values.to(torch.float64) * mask, mask.to(torch.float64)
    adv = torch.zeros_like(r)
    running = torch.zeros(r.shape[0], dtype=torch.float64, device=r.device)
    for t in range(r.shape[1] - 1, -1, -1):
        nxt = v[:, t + 1] if t + 1 < r.shape[1] else torch.zeros_like(running)
        delta = r[:, t] + gamma * nxt - v[:, t]
        running = (delta + gamma * lam * running) * m[:, t]
        adv[:, t] = running
    return adv, (adv + v) * m


def _check(cfg, p: GAEParams) -> list[str]:
    heads = cfg.algorithm.critic.heads
    if heads == 0:
        return ["needs a critic: set algorithm.critic.heads (1 for PPO)"]
    if p.std_bonus > 0 and heads < 2:
        return ["std_bonus (CDE's critic bonus) reads the spread of several value heads: algorithm.critic.heads >= 2"]
    return []


@ADVANTAGES.register("gae", GAEParams, needs=("values", "values_std"), traits=("token_level",), check=_check)
def gae_advantage(inp: AdvantageInputs, p: GAEParams) -> torch.Tensor:
    """PPO's GAE from the critic's values, the reward on the last token (optionally CDE's per-token bonus)."""
    if inp.mask is None:
        raise ValueError("the gae advantage is per token and needs AdvantageInputs.mask")
    mask = inp.mask.to(torch.float64)
    lengths = (inp.lengths if inp.lengths is not None else inp.mask.sum(-1)).to(mask.device)
    inside = (torch.arange(mask.shape[1], device=mask.device)[None, :] < lengths[:, None]).to(torch.float64)
    r = token_rewards(inp.rewards.to(mask.device), lengths, tuple(mask.shape))
    if p.std_bonus > 0:
        sigma = inp.extras["values_std"].to(torch.float64)
        r = r + p.std_bonus * (sigma.clamp(max=p.std_bonus_clip) if p.std_bonus_clip else sigma) * mask
    adv, _ = gae(r, inp.extras["values"], inside, p.gamma, p.lam)
    adv = adv * mask
    if p.whiten and bool(mask.any()):
        sel = mask.bool()
        mean, var = adv[sel].mean(), adv[sel].var(unbiased=True) if int(sel.sum()) > 1 else torch.tensor(0.0)
        adv = (adv - mean) * torch.rsqrt(var + 1e-8) * mask
    return adv.to(torch.float32)

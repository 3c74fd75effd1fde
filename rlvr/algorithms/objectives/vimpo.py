"""VIMPO's objective: a PPO-clipped actor term plus the policy-implied value loss (RECONSTRUCTED).

Kang, Feng, Levine, Song, Zhao 2026, "VIMPO: Value-Implicit Policy Optimization", arXiv:2606.20008
(docs/methods.md, `vimpo`). The policy's log-ratios against the frozen reference imply the value of the shared
start state; every completion of a prompt must imply the same one, which the squared error below enforces, bringing
in the outcome reward without a critic:

    u_i      = r_i - beta * sum_t M_{i,t} (logp - ref_logp)_{i,t}        [N]  (V(s_0) implied by row i, with grad)
    V0hat_g  = mean_{j in g} sg[u_j]                                     [N]  (detached group mean)
    L_V,i    = (u_i - V0hat_{g(i)})^2                                    [N]
    l_{i,t}  = ppo_clip(rho_{i,t}, A_{i,t}) + value_coef * L_V,i          [N, T]

The actor term is ``ppo_clip`` (same bounds, the run's clip rule, optional dual clip) on the run's
advantages, meant to be the ``vimpo`` advantage estimator's (policy-implied values, detached).

RECONSTRUCTED: the value loss's form is the one we read from the abstract (docs/methods.md, `vimpo`); how it is
weighed against the actor term is not known. Here ``L_V,i`` is put on every valid token of row i and aggregated
with the policy loss, so under ``seq_mean_token_mean`` the value part is exactly ``value_coef * mean_i L_V,i``
(``token_mean`` weighs rows by length). V0hat uses the current policy (detached), so groups are kept whole
in micro-batches; a group of one has V0hat = u and contributes no value loss (one completion cannot
disagree with itself). Needs the reference log-probs (the trainer loads a reference model for it).
Metrics: ``value_loss`` (L_V of the row), ``implied_v0`` (u), ``clip_frac``, ``ratio``.
"""

from __future__ import annotations

from pydantic import Field

from rlvr.algorithms.objectives.common import group_total, masked_seq_sum
from rlvr.algorithms.objectives.ppo_clip import PPOClipParams, ppo_clip
from rlvr.algorithms.registry import OBJECTIVES, ObjectiveInputs, ObjectiveOutput
from rlvr.lazy import torch
from rlvr.registry import Params

__all__ = ["VIMPOObjectiveParams", "vimpo_objective", "value_residual"]


class VIMPOObjectiveParams(Params):
    beta: float = Field(0.1, gt=0.0, description="KL-regularisation coefficient of the implied values "
                                                 "(must equal the vimpo advantage's beta)")
    value_coef: float = Field(1.0, ge=0.0, description="weight of the value loss (0: PPO clip alone)")
    clip_low: float = Field(0.2, ge=0.0, lt=1.0, description="actor ratio clipped at 1 - clip_low")
    clip_high: float = Field(0.2, ge=0.0, description="actor ratio clipped at 1 + clip_high")
    dual_clip: float | None = Field(None, description="dual-clip constant c > 1 for negative advantages")
    log_ratio_clamp: float = Field(20.0, gt=0.0, description="clamp on logp - old_logp before exp")


def value_residual(logp: torch.Tensor, ref_logp: torch.Tensor, rewards: torch.Tensor, mask: torch.Tensor,
                   group_index: torch.Tensor, beta: float) -> tuple[torch.Tensor, torch.Tensor]:
    """``(u [N] with grad, u - sg[group mean of u] [N])`` in ``logp``'s dtype."""
    u = rewards.to(logp.dtype) - beta * masked_seq_sum(logp - ref_logp, mask)
    d = u.detach()
    base = group_total(d, group_index) / group_total(torch.ones_like(d), group_index)
    return u, u - base


def _check(cfg, p: VIMPOObjectiveParams) -> list[str]:
    adv = cfg.algorithm.advantage
    if adv.name == "vimpo" and adv.params.beta != p.beta:
        return [f"beta={p.beta} differs from the vimpo advantage's beta={adv.params.beta}; the value loss and "
                f"the advantage must read the same implied values"]
    return []


@OBJECTIVES.register("vimpo", VIMPOObjectiveParams, check=_check,
                     needs=("ref_logp",), traits=("whole_groups", "clip_rule"))
def vimpo_objective(inp: ObjectiveInputs, p: VIMPOObjectiveParams) -> ObjectiveOutput:
    """VIMPO: PPO clip on the advantages + value_coef x (implied start value - its group mean)^2."""
    if inp.ref_logp is None or inp.rewards is None or inp.group_index is None:
        raise ValueError("objective 'vimpo' needs reference log-probs, rewards and group ids")
    pp = PPOClipParams(clip_low=p.clip_low, clip_high=p.clip_high, dual_clip=p.dual_clip,
                       log_ratio_clamp=p.log_ratio_clamp)
    actor, metrics = ppo_clip(inp, pp)
    u, resid = value_residual(inp.logp, inp.ref_logp, inp.rewards, inp.mask, inp.group_index, p.beta)
    value = resid.pow(2)
    loss = actor + p.value_coef * value[:, None]
    metrics = {**metrics, "value_loss": value.detach()[:, None].expand_as(actor),
               "implied_v0": u.detach()[:, None].expand_as(actor)}
    return loss, metrics

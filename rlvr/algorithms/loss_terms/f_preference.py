"""f-HAL's preference part: the variational f-divergence loss on off-policy preference pairs, the chosen
response the aligned side and the rejected one the unaligned side (loss term ``f_preference``).

Haldar et al., "f-GRPO and Beyond: Divergence-Based RL Algorithms for General LLM Alignment", arXiv:2602.05946
(docs/methods.md, `f_preference`). RECONSTRUCTED from the abstract, as ``f_grpo`` is: the critic link (identity),
the sequence log-ratio, beta, and the pair loss as f-GRPO's estimator with the chosen rows as P and the rejected
rows as Q, each pair weighted 1. For the step's K pairs (prompt x, chosen y+, rejected y-), drawn from ``path``
(:mod:`rlvr.passes.pairs`):

    T(y)   = beta sum_t M (log pi_theta(y_t | x, y_<t) - log pi_ref(y_t | x, y_<t))   (f_grpo.sequence_critic)
    L_pref = -[ (1/K) sum_j T(y+_j)  -  (1/K) sum_j f*(T(y-_j)) ]
    f*(t)  = exp(t - 1)  (divergence "kl")   |   t + t^2 / 4  (divergence "pearson"; f_grpo.CONJUGATES)

    f-HAL  = alpha L_fGRPO + (1 - alpha) L_pref     (objective f_grpo with alpha, this term with weight 1 - alpha)

The gradient flows through the policy on both sides (dL/dT+ = -1/K, dL/dT- = f*'(T-)/K); the reference is
frozen. Trait ``pair_batch``: the trainer draws and tokenises the pairs once per RL step, computes their
reference log-probs, and in the update runs the policy over them (with gradient) once per minibatch, in its
first micro-batch; the term returns that minibatch's 0-dim loss, which the update adds (times the weight) to
the aggregated loss. ``needs=ref_logp`` loads the reference model. Metrics (per minibatch): ``critic_chosen``,
``critic_rejected`` (mean T), ``accuracy`` (share of pairs with T+ > T-).
"""

from __future__ import annotations

from pydantic import Field

from rlvr.algorithms.loss_terms.base import LossTermParams, PairSourceParams, term_active
from rlvr.algorithms.objectives.f_grpo import CONJUGATES, Divergence, sequence_critic
from rlvr.algorithms.registry import LOSS_TERMS, ObjectiveInputs, ObjectiveOutput

__all__ = ["FPreferenceParams", "f_preference", "pair_loss"]


class FPreferenceParams(LossTermParams, PairSourceParams):
    weight: float = Field(0.5, ge=0.0, description="1 - alpha (f-HAL's weight of the preference part)")
    divergence: Divergence = Field("kl", description="f-divergence: its convex conjugate f* is used on the "
                                                     "rejected side (as f_grpo's)")
    beta: float = Field(0.1, gt=0.0, description="scale of the critic T = beta x sequence log-ratio to the reference")


def pair_loss(chosen_t, rejected_t, divergence: str = "kl"):
    """``-[mean T(chosen) - mean f*(T(rejected))]`` over the pairs' critics ``[K]`` (0-dim)."""
    return -(chosen_t.mean() - CONJUGATES[divergence](rejected_t).mean())


@LOSS_TERMS.register("f_preference", FPreferenceParams, needs=("ref_logp",), traits=("pair_batch",),
                     active=term_active)
def f_preference(x: ObjectiveInputs, p: FPreferenceParams) -> ObjectiveOutput:
    """f-HAL's preference loss: -[mean T(chosen) - mean f*(T(rejected))] on off-policy pairs (reconstructed)."""
    e = x.extras
    t_c = sequence_critic(e["pair_chosen_logp"], e["pair_chosen_ref_logp"], e["pair_chosen_mask"], p.beta)
    t_r = sequence_critic(e["pair_rejected_logp"], e["pair_rejected_ref_logp"], e["pair_rejected_mask"], p.beta)
    loss = pair_loss(t_c, t_r, p.divergence)
    return loss, {"critic_chosen": t_c.detach().mean(), "critic_rejected": t_r.detach().mean(),
                  "accuracy": (t_c.detach() > t_r.detach()).float().mean()}

"""``kl_penalty``: the KL penalty in the reward (PPO/RLHF style; ``algorithm.kl.placement: reward``).

Before the advantage estimator, with the step's coefficient beta (the KL controller's, schedules included)
and a registered KL estimator k over the completion tokens (``[N, T]`` old and reference log-probs)::

    r_i <- r_i - beta * sum_t M_i,t k(logp_old_i,t, logp_ref_i,t)

The step metric ``kl`` is the token mean of k over the batch. ``algorithm.kl.placement: reward`` turns it on
first among the reward transforms; the loss then carries no KL term.
"""

from __future__ import annotations

from pydantic import Field

from rlvr.algorithms.registry import KL_ESTIMATORS, REWARD_TRANSFORMS, TransformInputs, TransformOutput
from rlvr.registry import Params

__all__ = ["KLPenaltyParams", "kl_penalty"]


class KLPenaltyParams(Params):
    estimator: str = Field("k3", description="a registered KL estimator")


@REWARD_TRANSFORMS.register("kl_penalty", KLPenaltyParams, needs=("old_logp", "ref_logp"))
def kl_penalty(inp: TransformInputs, p: KLPenaltyParams) -> TransformOutput:
    """Subtract the step's KL coefficient times each completion's summed KL to the reference."""
    kl = KL_ESTIMATORS.get(p.estimator).fn(inp.extras["old_logp"], inp.extras["ref_logp"]) * inp.mask
    rewards = inp.rewards - inp.kl_coef * kl.sum(-1).double()
    return rewards, {"kl": float(kl.sum() / inp.mask.sum().clamp(min=1))}

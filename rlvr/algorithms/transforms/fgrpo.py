"""FGRPO's Lagrangian constraint terms with dual ascent (Kancheti et al. 2026, "Faithful GRPO: Improving Visual
Spatial Reasoning in Multimodal Language Models via Constrained Policy Optimization", arXiv:2604.08476).
RECONSTRUCTED: confirmed are batch-level constraints (logical consistency, visual grounding) enforced by
Lagrangian dual ascent and folded into the group advantage, with weights that adapt during training.

Each constraint k names a score component c_k [N] (e.g. a judge's consistency score in [0, 1]) and a required
batch-level rate tau_k. With the current multipliers lambda_k >= 0:

    L_i      = r_i + sum_k lambda_k c_{k,i}          (the reward the advantage estimator sees)   [N]
    lambda_k <- max(0, lambda_k + eta (tau_k - mean_batch c_k))     (after the step's rewards are formed)

so a constraint met on the batch loses weight and a violated one gains it. The multipliers are the
transform's state, saved in checkpoints. A configured component missing from the task's scores is an error.
Without a judge, rule-based ``consistency`` and ``grounding`` components come from
:mod:`rlvr.verifiers.faithfulness` (a task's ``faithfulness: true``; the ``fgrpo_vlm`` recipe).
"""

from __future__ import annotations

from pydantic import Field

from rlvr.algorithms.registry import REWARD_TRANSFORMS, TransformInputs, TransformOutput
from rlvr.core.state import DictState
from rlvr.lazy import torch
from rlvr.registry import Params

__all__ = ["FGRPOParams", "fgrpo_transform", "dual_ascent"]


class FGRPOParams(Params):
    constraints: dict[str, float] = Field(..., min_length=1, description="score component -> required batch "
                                                                           "mean (tau), e.g. {format: 0.9}")
    eta: float = Field(0.5, gt=0.0, description="dual ascent step size (placeholder: the paper's was not read)")
    lambda_init: float = Field(0.0, ge=0.0, description="initial multiplier of every constraint")


def new_state(p: FGRPOParams):
    """Multipliers at ``lambda_init``."""
    return DictState(lambdas={k: p.lambda_init for k in sorted(p.constraints)})


def dual_ascent(lam: float, tau: float, rate: float, eta: float) -> float:
    """One projected dual ascent step: max(0, lambda + eta (tau - rate))."""
    return max(0.0, lam + eta * (tau - rate))


@REWARD_TRANSFORMS.register("fgrpo", FGRPOParams, state=new_state)
def fgrpo_transform(inp: TransformInputs, p: FGRPOParams, state: dict) -> TransformOutput:
    """FGRPO: reward plus lambda-weighted constraint scores; lambda moves by dual ascent on batch rates."""
    missing = sorted(set(p.constraints) - set(inp.components))
    if missing:
        raise ValueError(f"fgrpo constraints {missing} are not score components of this task; it reports "
                         f"{sorted(inp.components)}")
    lambdas = dict(state["lambdas"])
    r = inp.rewards.to(torch.float64).clone()
    metrics = {}
    for k, tau in sorted(p.constraints.items()):
        c = inp.components[k].to(torch.float64)
        r = r + lambdas[k] * c
        rate = float(c.mean())
        lambdas[k] = dual_ascent(lambdas[k], tau, rate, p.eta)
        metrics.update({f"lambda/{k}": lambdas[k], f"rate/{k}": rate})
    state["lambdas"] = lambdas
    return r, metrics

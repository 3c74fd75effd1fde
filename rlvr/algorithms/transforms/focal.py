"""F-GRPO's focal advantage scaling (Plyusov et al. 2026, "F-GRPO: Don't Let Your Policy Learn the Obvious and
Forget the Rare", arXiv:2602.06717). EXACT form (paper: g(x) = (1 - mu_pos(x))^gamma); the paper's gamma was
not found, so it is a parameter (1 here, try 1-2).

    mu_hat_q = fraction of correct completions in group q (the ``correct`` score component, else binary rewards)
    g_q      = (1 - mu_hat_q)^gamma
    A_i     <- g_{q(i)} A_i                                             [N, T]

Down-weights prompts the policy already solves often, like the focal loss. gamma = 0 is the identity;
mu_hat = 1 gives g = 0 (the group-relative advantage is 0 there anyway). A drop-in for any group-relative
estimator (GRPO, DAPO, CISPO, Dr. GRPO).
"""

from __future__ import annotations

from pydantic import Field

from rlvr.algorithms.registry import ADVANTAGE_TRANSFORMS, TransformInputs, TransformOutput
from rlvr.algorithms.transforms.difficulty import success_rate
from rlvr.registry import Params

__all__ = ["FocalParams", "focal_transform"]


class FocalParams(Params):
    gamma: float = Field(1.0, ge=0.0, description="focal exponent (0: identity); the paper's value was not found")


@ADVANTAGE_TRANSFORMS.register("focal", FocalParams)
def focal_transform(inp: TransformInputs, p: FocalParams) -> TransformOutput:
    """F-GRPO: scale advantages by (1 - group success rate)^gamma."""
    if p.gamma == 0:
        return inp.advantages, {"weight_mean": 1.0}
    g = (1.0 - success_rate(inp.rewards, inp.components, inp.group_index)) ** p.gamma
    return inp.advantages * g[:, None].to(inp.advantages.dtype), {"weight_mean": float(g.mean())}

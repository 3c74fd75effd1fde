"""The standard ratio clip: ``[1 - clip_low, 1 + clip_high]`` from the objective's own parameters.

PPO (Schulman et al. 2017, arXiv:1707.06347) with DAPO's asymmetric bounds (arXiv:2503.14476).
"""

from __future__ import annotations

from rlvr.algorithms.registry import CLIP_RULES, ClipBounds, ClipInputs
from rlvr.registry import Params

__all__ = ["ratio_clip", "requires_clipping_objective"]


def requires_clipping_objective(cfg, params) -> list[str]:
    """A non-default clip rule only means something for an objective that clips a ratio."""
    from rlvr.algorithms.registry import OBJECTIVES

    name = cfg.algorithm.objective.name
    if "clip_rule" in OBJECTIVES.get(name).traits:
        return []
    users = [n for n in OBJECTIVES.names() if "clip_rule" in OBJECTIVES.get(n).traits]
    return [f"objective {name!r} does not clip a ratio; clip rules apply to: {', '.join(users)}"]


@CLIP_RULES.register("ratio", Params)
def ratio_clip(inp: ClipInputs, p: Params) -> ClipBounds:
    """The objective's own bounds [1 - clip_low, 1 + clip_high]."""
    return ClipBounds(1.0 - inp.eps_low, 1.0 + inp.eps_high)

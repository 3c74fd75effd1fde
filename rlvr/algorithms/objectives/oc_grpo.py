"""OC-GRPO: the PPO-clipped loss with an off-context ratio for guided rollouts (RECONSTRUCTED).

"Off-Context GRPO" (arXiv id not known; docs/methods.md, `oc_grpo`); closest public relative: Guide, Nath et al.
2025, arXiv:2506.13923. Some rollouts of a group are generated from the prompt plus privileged guidance h
(``rollout.guidance``: the gold answer or a solution prefix appended to the prompt), while the target is the
hint-free policy. The batch keeps the unguided prompt x for every row, so the trainer's log-probs are
pi_theta(o | x); the engine's behaviour log-probs of a guided row were taken under (x, h) and are its ratio's
denominator:

    rho~_{i,t} = exp( logp_{i,t} - d_{i,t} ),   d = behaviour_logp  (guided row: pi_old(o_t | x, h, o_<t))
                                                d = old_logp        (unguided row: the usual PPO ratio)
    l_{i,t}    = max( -A rho~, -A clip(rho~, 1 - eps_low, 1 + eps_high) )        (optional dual clip)

Advantages come from the run's estimator over the mixed group (guided and unguided rows of one prompt
together). With no guided row (an empty hint, or ``guidance.fraction`` 0) this is ``ppo_clip`` exactly.
RECONSTRUCTED: the abstract gives the idea (an importance-corrected objective steering guided rollouts
back to the unguided objective); the ratio above is the most faithful reading. Since guided ratios are
usually far from 1, many guided tokens are clipped (zero gradient) where A rho~ leaves the trust region.
The rows' ``guided`` flags come from the engine wrapper of :mod:`rlvr.rollout.guidance`. An engine-vs-
trainer correction (``algorithm.correction``) would weigh guided rows by the off-context gap, so it must
be ``none``. Metrics: ``guided_frac`` (tokens of guided rows), ``clip_frac``, ``ratio`` (rho~).
"""

from __future__ import annotations

from dataclasses import replace

from pydantic import Field

from rlvr.algorithms.objectives.ppo_clip import PPOClipParams, ppo_clip
from rlvr.algorithms.registry import OBJECTIVES, ObjectiveInputs, ObjectiveOutput
from rlvr.lazy import torch
from rlvr.registry import Params

__all__ = ["OCGRPOParams", "oc_grpo", "off_context_denominator"]


class OCGRPOParams(Params):
    clip_low: float = Field(0.2, ge=0.0, lt=1.0, description="ratio clipped at 1 - clip_low")
    clip_high: float = Field(0.2, ge=0.0, description="ratio clipped at 1 + clip_high")
    dual_clip: float | None = Field(None, description="dual-clip constant c > 1 for negative advantages")
    log_ratio_clamp: float = Field(20.0, gt=0.0, description="clamp on logp - denominator before exp")


def off_context_denominator(old_logp: torch.Tensor, behaviour_logp: torch.Tensor | None,
                            guided: torch.Tensor) -> torch.Tensor:
    """[N, T] the ratio's denominator: behaviour log-probs on guided rows, old log-probs elsewhere."""
    g = guided > 0
    if not bool(g.any()):
        return old_logp
    if behaviour_logp is None:
        raise ValueError("objective 'oc_grpo' has guided rows but no behaviour log-probs from the engine")
    return torch.where(g, behaviour_logp.to(old_logp.dtype), old_logp)


def _check(cfg, p: OCGRPOParams) -> list[str]:
    if cfg.algorithm.correction.name != "none":
        return [f"algorithm.correction {cfg.algorithm.correction.name!r} would weigh guided rows by their "
                f"off-context gap; use correction none with oc_grpo"]
    return []


@OBJECTIVES.register("oc_grpo", OCGRPOParams, check=_check, needs=("guided",), traits=("clip_rule",))
def oc_grpo(inp: ObjectiveInputs, p: OCGRPOParams) -> ObjectiveOutput:
    """OC-GRPO: PPO clip whose guided rows divide by the guided-context behaviour log-probs."""
    guided = inp.extras.get("guided")
    if guided is None:
        guided = torch.zeros_like(inp.mask)
    denom = off_context_denominator(inp.old_logp, inp.behaviour_logp, guided)
    pp = PPOClipParams(clip_low=p.clip_low, clip_high=p.clip_high, dual_clip=p.dual_clip,
                       log_ratio_clamp=p.log_ratio_clamp)
    loss, metrics = ppo_clip(replace(inp, old_logp=denom), pp)
    return loss, {**metrics, "guided_frac": (guided > 0).to(loss.dtype).expand_as(loss)}

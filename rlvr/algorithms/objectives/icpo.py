"""ICPO's mixed-policy objective: PPO on on-policy rows, a shaped likelihood on guided rows (objective ``icpo``).

Huang, Tang, Liu, Bai, Yang, Wu 2025, "Think Outside the Policy: In-Context Steered Policy Optimization",
arXiv:2510.26519; code ``Celine-hxy/ICPO`` (``utils/core_algos.py::compute_icpo_policy_loss``, after LUFFY's policy
shaping; docs/methods.md, `icpo`). EXACT from code. The guided rows (extra ``guided``) were sampled under
in-context demonstrations and are trained under the plain prompt (``rollout.guidance`` keeps its ids), so ``logp``
is log pi_theta(y_t | q) for every row. Per token:

    on-policy row:  rho = exp(clamp(logp - old_logp, -20, 20))
                    l = max(-A rho, -A clip(rho, 1 - eps_low, 1 + eps_high)),  and for A < 0: min(l, -A c)
    guided row:     l = -A f(pi_theta(y_t | q)),   f(x) = x / (x + gamma)   (no ratio, no clip: the
                    demonstration-steered policy is treated as an expert whose probability is 1)

with the dual clip c = 3 (verl's ``clip_ratio_c`` default, which the official loss applies) and gamma = 0.1.
f's gradient, gamma / (x + gamma)^2 x d log x, weighs the tokens the plain policy finds unlikely more than
plain likelihood training would. Metrics: ``guided_frac``, ``clip_frac`` (on-policy tokens), ``ratio``
(on-policy), ``shaped_prob`` (f on guided tokens).
"""

from __future__ import annotations

from pydantic import Field

from rlvr.algorithms.objectives.ppo_clip import PPOClipParams, ppo_clip
from rlvr.algorithms.registry import OBJECTIVES, ObjectiveInputs, ObjectiveOutput
from rlvr.lazy import torch
from rlvr.registry import Params

__all__ = ["ICPOParams", "icpo"]


class ICPOParams(Params):
    clip_low: float = Field(0.2, ge=0.0, lt=1.0, description="on-policy rows: ratio clipped at 1 - clip_low")
    clip_high: float = Field(0.2, ge=0.0, description="on-policy rows: ratio clipped at 1 + clip_high")
    dual_clip: float | None = Field(3.0, gt=1.0, description="on-policy rows: dual-clip constant c (None: off)")
    gamma: float = Field(0.1, gt=0.0, description="shaping f(x) = x / (x + gamma) of guided rows' probability")
    log_ratio_clamp: float = Field(20.0, gt=0.0, description="clamp on logp - old_logp before exp")


def _check(cfg, p: ICPOParams) -> list[str]:
    if cfg.algorithm.correction.name != "none":  # (without guided rows icpo is ppo_clip with the dual clip)
        return [f"algorithm.correction {cfg.algorithm.correction.name!r} would weigh guided rows by the gap "
                f"between the demonstration and plain prompts; use correction none with icpo"]
    return []


@OBJECTIVES.register("icpo", ICPOParams, needs=("guided",), traits=("clip_rule",), check=_check)
def icpo(inp: ObjectiveInputs, p: ICPOParams) -> ObjectiveOutput:
    """ICPO: PPO clip on on-policy rows, -A x / (x + gamma) of the token probability on guided rows."""
    guided = inp.extras.get("guided")
    g = torch.zeros_like(inp.mask) if guided is None else (guided > 0).to(inp.mask.dtype).expand_as(inp.mask)
    pp = PPOClipParams(clip_low=p.clip_low, clip_high=p.clip_high, dual_clip=p.dual_clip,
                       log_ratio_clamp=p.log_ratio_clamp)
    on_loss, m = ppo_clip(inp, pp)
    prob = torch.exp(inp.logp.clamp(max=p.log_ratio_clamp))
    shaped = prob / (prob + p.gamma)
    loss = on_loss * (1 - g) + (-inp.advantages * shaped) * g
    return loss, {"guided_frac": g.detach(), "clip_frac": m["clip_frac"] * (1 - g), "ratio": m["ratio"],
                  "shaped_prob": (shaped * g).detach()}

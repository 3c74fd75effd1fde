"""Preference optimisation from any verifier: DPO, IPO and SimPO on pairs of the step's own completions ranked
by the task's verifier (objectives ``dpo`` and ``simpo``), or on a file of pairs (loss term ``dpo_pairs``).

For a pair (chosen w, rejected l) of completions of one prompt, with sequence log-probs s(y) = sum_t log pi(y_t)
under the policy and r(y) under the frozen reference, and mean log-probs m(y) = s(y) / |y|:

    DPO   (Rafailov et al. 2023, arXiv:2305.18290)   h = beta [ (s_w - r_w) - (s_l - r_l) ]
                                                     l = -(1 - eps) log sigma(h) - eps log sigma(-h)   (eps: label
                                                         smoothing, the conservative cDPO; 0 is DPO)
    IPO   (Azar et al. 2023, arXiv:2310.12036)       l = ( (m_w - rm_w) - (m_l - rm_l) - 1 / (2 beta) )^2
                                                         (tau = beta; per-token means, as TRL's IPO takes them)
    SimPO (Meng et al. 2024, arXiv:2405.14734)       l = -log sigma( beta m_w - beta m_l - gamma )   (no reference)

**Pairs from the verifier** (on-policy: the pairs are refreshed every step from the completions just sampled).
In each group the completions are ranked by their training reward (any rlvr verifier, or a reward list);
``pairs: best_worst`` takes the highest against the lowest (the first of equals), ``all`` every pair with a
strictly higher reward, each group's pairs averaged so every group weighs the same. A group whose rewards are
all equal makes no pair. The loss is the sum over groups / the groups of the minibatch (f_grpo's convention);
the advantage estimator is not used. With DeFAb's exact verifier this is the paper's "exact reward for
preference optimization" (recipe ``dpo_defab``). Metrics: ``pair_accuracy`` (share of pairs the policy already
orders right, h > 0 / the SimPO margin > 0), ``margin`` (mean h), ``pairs`` (both 0 when no group has a pair).
"""

from __future__ import annotations

from typing import Literal

from pydantic import Field

from rlvr.algorithms.objectives.common import group_count, groups, masked_seq_sum, require
from rlvr.algorithms.registry import OBJECTIVES, ObjectiveInputs, ObjectiveOutput
from rlvr.lazy import torch
from rlvr.registry import Params

__all__ = ["DPOParams", "SimPOParams", "dpo", "simpo", "preference_pairs", "pair_losses"]


class DPOParams(Params):
    loss: Literal["dpo", "ipo"] = Field("dpo", description="dpo: -log sigma(beta x log-ratio margin); ipo: the "
                                                           "squared distance of the mean log-ratio margin to 1/(2 beta)")
    beta: float = Field(0.1, gt=0.0, description="beta (IPO: tau)")
    label_smoothing: float = Field(0.0, ge=0.0, lt=0.5, description="cDPO's eps: the share of pairs assumed flipped")
    pairs: Literal["best_worst", "all"] = Field("best_worst", description="per group: the best against the worst "
                                                "completion, or every pair with a strictly higher reward")


class SimPOParams(Params):
    beta: float = Field(2.0, gt=0.0, description="beta of the length-normalised reward")
    gamma: float = Field(0.5, ge=0.0, description="target reward margin gamma")
    pairs: Literal["best_worst", "all"] = Field("best_worst", description="as dpo's")


def preference_pairs(rewards: torch.Tensor, group_index: torch.Tensor, mode: str) -> list[list[tuple[int, int]]]:
    """Per group with a spread of rewards, its ``(chosen, rejected)`` row pairs."""
    out = []
    for rows in groups(group_index):
        r = rewards[rows]
        if bool((r == r[0]).all()):
            continue
        idx = rows.tolist()
        if mode == "best_worst":
            out.append([(idx[int(torch.argmax(r))], idx[int(torch.argmin(r))])])
        else:
            out.append([(i, j) for a, i in enumerate(idx) for b, j in enumerate(idx) if float(r[a]) > float(r[b])])
    return out


def pair_losses(kind: str, s_w, s_l, n_w, n_l, r_w=None, r_l=None, beta: float = 0.1, eps: float = 0.0,
                gamma: float = 0.5) -> tuple[torch.Tensor, torch.Tensor]:
    """Per-pair losses ``[P]`` and margins ``[P]`` of ``kind`` (dpo, ipo, simpo) from sequence log-prob sums
    ``s`` (policy), ``r`` (reference) and lengths ``n``."""
    logsig = torch.nn.functional.logsigmoid
    if kind == "dpo":
        h = beta * ((s_w - r_w) - (s_l - r_l))
        return -(1 - eps) * logsig(h) - eps * logsig(-h), h
    if kind == "ipo":
        h = (s_w - r_w) / n_w - (s_l - r_l) / n_l
        return (h - 1.0 / (2.0 * beta)) ** 2, h
    h = beta * s_w / n_w - beta * s_l / n_l - gamma
    return -logsig(h), h


def _objective(inp: ObjectiveInputs, kind: str, mode: str, name: str, **kw) -> ObjectiveOutput:
    gi = require(inp.group_index, "group ids (ObjectiveInputs.group_index)", name)
    rewards = require(inp.rewards, "the training rewards (ObjectiveInputs.rewards)", name)
    s = masked_seq_sum(inp.logp, inp.mask)
    n = inp.mask.sum(-1).clamp(min=1).to(s.dtype)
    ref = None if kind == "simpo" else masked_seq_sum(require(inp.ref_logp, "reference log-probs", name), inp.mask)
    total, margins = s.sum() * 0.0, []
    for pairs in preference_pairs(rewards, gi, mode):
        w = torch.tensor([p[0] for p in pairs], device=s.device)
        lo = torch.tensor([p[1] for p in pairs], device=s.device)
        losses, h = pair_losses(kind, s[w], s[lo], n[w], n[lo], None if ref is None else ref[w],
                                None if ref is None else ref[lo], **kw)
        total = total + losses.mean()
        margins.append(h.detach())
    h = torch.cat(margins) if margins else torch.zeros(0)
    zeros = torch.zeros_like(inp.logp).detach()
    metrics = {"pair_accuracy": (h > 0).float().mean() if len(h) else torch.tensor(0.0),  # (no pair: 0)
               "margin": h.mean() if len(h) else torch.tensor(0.0),
               "pairs": torch.tensor(float(len(h)))}
    return total / group_count(inp), {k: zeros + v for k, v in metrics.items()}


@OBJECTIVES.register("dpo", DPOParams, needs=("ref_logp",), traits=("whole_groups", "reduced_loss"))
def dpo(inp: ObjectiveInputs, p: DPOParams) -> ObjectiveOutput:
    """DPO / IPO on pairs of each group's completions ranked by the verifier (on-policy preference pairs)."""
    return _objective(inp, p.loss, p.pairs, "dpo", beta=p.beta, eps=p.label_smoothing)


@OBJECTIVES.register("simpo", SimPOParams, traits=("whole_groups", "reduced_loss"))
def simpo(inp: ObjectiveInputs, p: SimPOParams) -> ObjectiveOutput:
    """SimPO (no reference) on pairs of each group's completions ranked by the verifier."""
    return _objective(inp, "simpo", p.pairs, "simpo", beta=p.beta, gamma=p.gamma)

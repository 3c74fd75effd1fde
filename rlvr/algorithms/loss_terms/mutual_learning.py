"""MEML-GRPO's inter-expert mutual learning (loss term ``mutual_learning``).

Jia, Lu et al. 2025, "MEML-GRPO: Heterogeneous Multi-Expert Mutual Learning for RLVR Advancement", arXiv:2508.09670
(no code; docs/methods.md, `mutual_learning`). RECONSTRUCTED. Each question's group is split over K expert system
prompts s_e (``rollout.contexts`` with ``p_dropout`` 0 and ``peers``: every completion also carries a peer expert's
prompt) and GRPO's advantage is taken over the whole group. For each group, e* is the expert with the highest
accuracy (fraction of its rows with training reward >= ``correct_at``; the first on ties; none when that accuracy
is 0). Each correct completion y of e* is read under its peer expert e's prompt (extra ``context_logp``, one more
forward with gradient), and the peer is pulled toward e*:

    L_y = KL( pi(. | s_e*, q, y_<t) || pi(. | s_e, q, y_<t) )  estimated on y's own tokens (sampled from e*):
        = mean_t [ log pi(y_t | s_e*, q, y_<t) - log pi(y_t | s_e, q, y_<t) ],   the e* side detached

so its gradient is that of the peer's log-likelihood of y (the other experts learn e*'s solution), and rows
that are not e*'s correct ones contribute 0. RECONSTRUCTED: the sampled-token estimator (the paper names a
KL without its form), the peer assignment (the contexts wrapper spreads e*'s completions over the other
experts) and the correctness threshold. The paper's hard-example SFT buffer and its first stage (SFT on
each expert prompt) are not part of this term. Metrics: ``peer_logp`` (log pi(y_t | s_e) on the pulled
rows' tokens), ``pulled_frac`` (rows pulled / rows).
"""

from __future__ import annotations

from pydantic import Field

from rlvr.algorithms.loss_terms.base import LossTermParams, term_active
from rlvr.algorithms.registry import LOSS_TERMS, ObjectiveInputs, ObjectiveOutput
from rlvr.lazy import torch

__all__ = ["MutualLearningParams", "mutual_learning", "best_expert_rows"]


class MutualLearningParams(LossTermParams):
    weight: float = Field(0.1, ge=0.0, description="beta_ml (not reported; a guess)")
    correct_at: float = Field(1.0, description="a training reward at least this is a correct completion")


def best_expert_rows(rewards: torch.Tensor, group_index: torch.Tensor, context: torch.Tensor,
                     correct_at: float = 1.0) -> torch.Tensor:
    """``[N]`` bool: the correct rows of each group's most accurate expert (context >= 1)."""
    correct = rewards >= correct_at
    out = torch.zeros_like(correct)
    for g in torch.unique(group_index).tolist():
        rows = group_index == g
        best, acc = None, 0.0
        for c in sorted(torch.unique(context[rows]).tolist()):
            if c < 1:
                continue
            sel = rows & (context == c)
            a = float(correct[sel].double().mean())
            if a > acc:
                best, acc = c, a
        if best is not None:
            out |= rows & (context == best) & correct
    return out


def _check(cfg, p: MutualLearningParams) -> list[str]:
    c = cfg.rollout.contexts
    if c.num_contexts < 2 or not c.peers:
        return ["needs experts to learn from each other: rollout.contexts.num_contexts >= 2 and "
                "rollout.contexts.peers true"]
    return []


@LOSS_TERMS.register("mutual_learning", MutualLearningParams, needs=("context_index",),
                     traits=("context_logp", "whole_groups"), active=term_active, check=_check)
def mutual_learning(x: ObjectiveInputs, p: MutualLearningParams) -> ObjectiveOutput:
    """mean_t (log pi(y | s_e*) - log pi(y | s_peer)) on the correct rows of each group's best expert."""
    peer = x.extras["context_logp"]
    ctx = (x.extras["context_index"] * x.mask).amax(-1).round()
    if x.rewards is None or x.group_index is None:
        raise ValueError("loss term 'mutual_learning' needs the rows' rewards and groups")
    pulled = best_expert_rows(x.rewards.to(ctx.device), x.group_index.to(ctx.device), ctx, p.correct_at)
    sel = pulled.to(peer.dtype)[:, None] * x.mask
    length = x.mask.sum(-1, keepdim=True).clamp(min=1.0)
    loss = (x.logp.detach() - peer) * sel / length
    return loss, {"peer_logp": peer.detach() * sel, "pulled_frac": pulled.to(peer.dtype)[:, None].expand_as(peer)}

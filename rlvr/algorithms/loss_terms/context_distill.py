"""NudgeRL's distillation term: raise the log-probability of the context-sampled completions under the plain
prompt, weighted by their advantage (loss term ``context_distill``).

Kim et al. 2026, NudgeRL, arXiv:2605.15726; code ``tally0818/NudgeRL``, ``NudgeRLTrainer._compute_loss`` (EXACT
from code; docs/methods.md, `context_distill`). A completion ``y`` sampled under a strategy context
(``rollout.contexts``, its prompt x1) trains under x1 through the objective; this term also trains it under the
problem alone (x0), so what the context taught is kept without it:

    L_i = -A_i * mean_t log pi_theta(y_t | x0, y_<t)        for rows sampled under a context
        = 0                                                 for plain rows (x1 = x0: the objective covers them)

``log pi_theta(. | x0)`` comes from one more forward over :attr:`RolloutBatch.context` with gradient
(trait ``context_logp``); the per-row mean over tokens is the code's length normalisation and there is no
importance weight. As a per-token loss the update aggregates: ``-A_i log pi(y_t | x0) / |y_i|`` per token,
so with ``seq_mean_token_sum`` over the rows it is the code's mean over completions (the recipe's choice);
the paper's coefficient 0.1 is the term's ``weight``. Metric: ``plain_logp`` (log pi(y_t | x0) of the
context rows' tokens).
"""

from __future__ import annotations

from rlvr.algorithms.loss_terms.base import LossTermParams, term_active
from rlvr.algorithms.registry import LOSS_TERMS, ObjectiveInputs, ObjectiveOutput

__all__ = ["context_distill"]


def _check(cfg, p: LossTermParams) -> list[str]:
    if cfg.rollout.contexts.peers:
        return ["trains the context completions under the plain prompt, which rollout.contexts.peers replaces "
                "with a peer context's prompt; set peers false"]
    return []


@LOSS_TERMS.register("context_distill", LossTermParams, needs=("context_index",), traits=("context_logp",),
                     active=term_active, check=_check)
def context_distill(x: ObjectiveInputs, p: LossTermParams) -> ObjectiveOutput:
    """-A * mean_t log pi(y_t | plain prompt) on the completions sampled under a strategy context."""
    plain = x.extras["context_logp"]
    ctx = x.extras["context_index"]
    under = ((ctx * x.mask).amax(-1) > 0).to(plain.dtype)[:, None] * x.mask
    length = x.mask.sum(-1, keepdim=True).clamp(min=1.0)
    adv = x.advantages.detach()
    return -adv * plain * under / length, {"plain_logp": plain.detach() * under}

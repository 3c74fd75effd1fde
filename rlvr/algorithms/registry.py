"""The registries of algorithm components and the small input records passed to them.

Components are pure functions over tensors. Each kind receives one input record, so a new method that
needs another tensor (lengths, entropies, hidden states) extends the record instead of every signature.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Callable, Mapping

from rlvr.lazy import torch
from rlvr.registry import Registry

__all__ = [
    "ADVANTAGES", "OBJECTIVES", "AGGREGATIONS", "KL_ESTIMATORS", "CORRECTIONS", "CorrectionInputs",
    "AdvantageInputs", "ObjectiveInputs", "AggregationInputs", "ObjectiveOutput", "aggregate",
    "REWARD_TRANSFORMS", "ADVANTAGE_TRANSFORMS", "CLIP_RULES", "TransformInputs", "TransformOutput",
    "ClipInputs", "ClipBounds", "EXTRAS", "ROW_EXTRAS", "TRAITS", "SIDE_ROW_TRAITS", "FLAGS", "call",
    "token_advantages",
    "row_coefficients", "objective_loss_shape", "ShapingInputs", "MaskInputs",
    "GroupFilterInputs", "REWARD_SHAPERS", "MASK_TRANSFORMS", "GROUP_FILTERS",
]

# Extra per-batch tensors a component may request with ``needs=`` at registration. The trainer computes
# only those some configured component asks for, each with its registered producer
# (rlvr.algorithms.extra_producers); all are detached.
EXTRAS = {
    "old_logp": "[N, T] log-probs of the sampling policy, recomputed by the trainer before the update",
    "ref_logp": "[N, T] log-probs under the frozen reference model (loads one even when kl.coef is 0)",
    "entropy": "[N, T] per-token entropy of the sampling policy (at the training temperature: "
               "algorithm.train_temperature, default the rollout temperature)",
    "self_certainty": "[N, T] logsumexp(z/T) - mean_v(z/T) over the vocabulary (UCAS)",
    "chosen_logit": "[N, T] raw logit of the sampled token, before temperature (UCAS)",
    "teacher_model_logp": "[N, T] log-probs of the sampled tokens under the distill transform's teacher model "
                          "(a separate local directory; rlvr.passes.teacher_model)",
    "teacher_logp": "[N, T] log-probs under the current policy given prompt + the gold answer "
                    "(algorithm.teacher_hint) before the completion",
    "neg_teacher_logp": "[N, T] the same given prompt + the answer of the worst rejected completion of the "
                        "group (its last \\boxed{} content, else its first 50 characters; teacher_logp when the "
                        "group has none)",
    "hidden": "[N, H] last hidden state mean-pooled over the completion tokens",
    "segment_end": "[N, T] 1 where the completion token's text ends a sub-sentence (ends in , . ; : ! ? or "
                   "their full-width forms, or holds a newline), else 0",
    "guided": "[N, T] 1 on the tokens of rows generated from the prompt plus a guidance hint "
              "(rollout.guidance), else 0",
    "turn_index": "[N, T] the policy turn (1, 2, ...) each token belongs to in a multi-turn episode, 0 on "
                  "inserted observation tokens; 1 everywhere for single-turn completions",
    "turn_reward": "[N, T] the environment's reward for the turn each token belongs to (0 on observations "
                   "and for single-turn completions)",
    "teacher_kl": "[N, T] KL(P_S || P_T) of the policy's next-token distributions without and with the gold "
                  "answer in the context (algorithm.teacher_hint): the decision points of RLRT",
    "reference_rouge_l": "[N] ROUGE-L F of the completion's text against its example's reference solution "
                         "(Example.target); -1 where the example has none (no model pass)",
    "scaffold_credit": "[N] the fraction of its scaffold's sub-answers a completion of a scaffolded prompt states "
                       "(rollout.scaffold; SCOPE-RL), -1 for other rows (no model pass)",
    "step_useful_frac": "[N] the fraction of the completion's steps (lines, split at sentence ends) that are "
                        "neither repeats nor without new numbers or words (SCOPE-RL; no model pass)",
    "context_index": "[N, T] the strategy context each row was sampled under (rollout.contexts: 1, 2, ...; 0 "
                     "plain) on its tokens (no model pass)",
    "tree_node": "[N, T] the row's node in its group's rollout tree (rollout.strategy rose: 1, 2, ... in creation "
                 "order; 0 not a tree row), constant along the row (no model pass)",
    "tree_parent": "[N, T] the node of the row's parent in the tree (0: a root), constant along the row",
    "tree_branch": "[N, T] the completion position the row branched from its parent at (its reused prefix "
                   "length; 0 for a root), constant along the row",
    "values": "[N, T] the critic's value of the state before each completion token, mean over its heads "
              "(algorithm.critic)",
    "values_std": "[N, T] the spread (population std) of the critic's heads at each token (0 with one head)",
    "belief_progress": "[N, T] the gain in the policy's mean log-prob of the gold answer (after "
                       "algorithm.belief.suffix) over the token's segment: b_k - b_{k-1} (GRPO-VPS)",
    "process_value": "[N] the label of a PROPA tree row: its MCTS Q value, log-boosted, ln(1 + 10 Q) / ln 11 "
                     "(rollout.strategy propa), or of a MURPHY tree row: its retrospective credit (rollout.strategy "
                     "murphy); -1 for other rows (no model pass)",
    "vision_similarity": "[N, T] PEPO's perception score: each completion token's hidden state's cosine with the "
                         "prompt's image tokens, averaged over image tokens and layers (0 on rows without images)",
    "belief_segment": "[N, T] the segment (1, 2, ...) each completion token belongs to in the belief probe; 0 on "
                      "padding",
    "disc_perception": "[N] the discriminator's perception expert's score of the response's perception span "
                       "(prompt + span; algorithm.discriminator; PRISM), 0 for a malformed response",
    "disc_reasoning": "[N] the reasoning expert's score of the rest of the response (prompt + span), 0 for a "
                      "malformed response",
    "disc_format": "[N] 1 where the response matches algorithm.discriminator.format (so it has both spans), else 0",
    "prompt_key": "[N] int64 key of each row's example id (rlvr.core.prompt_keys.prompt_key; for per-prompt "
                  "state such as tb's learned log Z table; no model pass)",
}
# Behaviour a component asks of the trainer, declared with ``traits=`` at registration (not tensors: those
# are ``needs``). rlvr.config.run.algorithm_traits resolves them for config checks and the update alike.
TRAITS = {
    "whole_groups": "minibatches and micro-batches keep each group whole",
    "clip_rule": "the objective clips a ratio through ObjectiveInputs.ratio_bounds (so clip rules apply)",
    "reduced_loss": "the objective returns its own reduced (0-dim) loss, so per-token importance-sampling "
                    "corrections cannot apply",
    "token_level": "the advantage estimator returns per-token advantages [N, T] (the others return one per "
                   "completion, [N])",
    "context_logp": "a loss term reads the policy's log-probs of each completion after its plain prompt, with "
                    "gradient, as extras['context_logp'] (side rows 'context', built by rlvr.rollout.contexts; one "
                    "more forward)",
    "pair_batch": "a loss term on off-policy preference pairs (params: loss_terms.base.PairSourceParams): each RL step "
                  "the trainer draws pairs_per_step pairs of its file (rlvr.passes.pairs) with their reference "
                  "log-probs; once per minibatch the update runs the policy over them, with gradient, and passes "
                  "extras pair_{chosen,rejected}_{logp,ref_logp,mask} [K, T]; the term returns a 0-dim loss",
}
# The traits whose loss terms read side rows (rlvr.core.batch.SideRows), and what a batch without them lacks
# (the update's error names the term and this).
SIDE_ROW_TRAITS = {
    "context_logp": "needs completions sampled under a context (rollout.contexts), and this batch has none",
    "pair_batch": "trains on preference pairs, and this batch carries none (rlvr.passes.pairs.with_pairs attaches "
                  "them)",
}
FLAGS = frozenset(TRAITS)  # the trait names (kept for code that subtracted them from needs)
ROW_EXTRAS = frozenset({"hidden"})  # extras with one vector per row rather than one value per token


def call(entry: Any, inputs: Any, params: Any, state: Any = None) -> Any:
    """Call a registered component; a stateful one (registered with ``state=``) also gets its state."""
    return entry.fn(inputs, params, state) if entry.state is not None else entry.fn(inputs, params)


# Output shapes. Each component has one, declared by its registration: an advantage estimator returns [N]
# (one advantage per completion) unless it has the ``token_level`` trait ([N, T]); an aggregation returns
# per-completion coefficients [N]; an objective returns a per-token loss [N, T] unless it has the
# ``reduced_loss`` trait (a 0-dim loss). The trainer reads the declaration, never the tensor's shape, and
# these checks turn a component that returns another shape into an error that names it. A loss term returns
# a per-token loss [N, T].

def _shape_error(entry: Any, kind: str, want: tuple, got: torch.Tensor) -> ValueError:
    return ValueError(f"{kind} {entry.name!r} returned shape {tuple(got.shape)}, but its registration declares "
                      f"{want} (see rlvr.algorithms.registry: output shapes)")


def token_advantages(entry: Any, adv: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
    """An estimator's output as the ``[N, T]`` advantages the rest of the step reads (0 on padding)."""
    if "token_level" in entry.traits:
        if adv.shape != mask.shape:
            raise _shape_error(entry, "advantage estimator", tuple(mask.shape), adv)
        return adv * mask
    if adv.shape != mask.shape[:1]:
        raise _shape_error(entry, "advantage estimator", tuple(mask.shape[:1]), adv)
    return adv[:, None] * mask


def row_coefficients(entry: Any, coef: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
    """An aggregation's per-completion coefficients ``[N]``, checked, as ``[N, T]`` for the loss."""
    if coef.shape != mask.shape[:1]:
        raise _shape_error(entry, "loss aggregation", tuple(mask.shape[:1]), coef)
    return coef[:, None].expand_as(mask)


def loss_term_shape(entry: Any, loss: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
    """A loss term's per-token loss ``[N, T]``, checked."""
    if loss.shape != mask.shape:
        raise _shape_error(entry, "loss term", tuple(mask.shape), loss)
    return loss


def objective_loss_shape(entry: Any, loss: torch.Tensor, mask: torch.Tensor) -> bool:
    """True when the objective reduced its own loss (its ``reduced_loss`` trait); checks the shape."""
    reduced = "reduced_loss" in entry.traits
    want = () if reduced else tuple(mask.shape)
    if tuple(loss.shape) != want:
        raise _shape_error(entry, "policy objective", want, loss)
    return reduced


@dataclass(frozen=True)
class AdvantageInputs:
    rewards: torch.Tensor  # [N] float64
    group_index: torch.Tensor  # [N] long; groups may differ in size
    lengths: torch.Tensor | None = None  # [N] completion lengths
    mask: torch.Tensor | None = None  # [N, T] completion mask
    components: Mapping[str, torch.Tensor] = field(default_factory=dict)  # [N] score components (correct, ...)
    extras: Mapping[str, torch.Tensor] = field(default_factory=dict)  # requested extra tensors (EXTRAS)
    step: int = 0  # the RL step being computed
    total_steps: int = 1  # train.steps


@dataclass(frozen=True)
class ObjectiveInputs:
    logp: torch.Tensor  # [N, T] current policy log-probs (carries the gradient)
    old_logp: torch.Tensor  # [N, T] log-probs of the policy before this batch's updates (detached)
    advantages: torch.Tensor  # [N, T]
    mask: torch.Tensor  # [N, T]
    behaviour_logp: torch.Tensor | None = None  # [N, T] the rollout engine's log-probs, when it gives them
    entropy: torch.Tensor | None = None  # [N, T] per-token entropy (detached)
    rewards: torch.Tensor | None = None  # [N] training rewards (after reward transforms)
    group_index: torch.Tensor | None = None  # [N] group ids (whole groups only if the objective needs them)
    ref_logp: torch.Tensor | None = None  # [N, T] reference log-probs, when a reference model is loaded
    extras: Mapping[str, torch.Tensor] = field(default_factory=dict)  # requested extra tensors (EXTRAS)
    clip: Callable[["ClipInputs"], "ClipBounds"] | None = None  # the run's clip rule (algorithm.clip)
    n_rows: int = 0  # completions in the whole minibatch (micro-batches are parts of it)
    n_groups: int = 0  # groups in the whole minibatch
    minibatch: "AggregationInputs | None" = None  # the whole minibatch's mask, groups and advantages
    step: int = 0
    total_steps: int = 1

    def ratio_bounds(self, eps_low: float, eps_high: float, ratio: torch.Tensor) -> "ClipBounds":
        """The trust region for ``ratio`` from the run's clip rule; by default ``[1 - eps_low, 1 + eps_high]``.

        Objectives that clip a ratio call this (and register with ``needs=("clip_rule",)``) so a clip rule
        such as KL3 composes with them.
        """
        if self.clip is None:
            return ClipBounds(1.0 - eps_low, 1.0 + eps_high)
        b = self.clip(ClipInputs(ratio.detach(), self.advantages, self.mask, self.old_logp, self.entropy,
                                 eps_low, eps_high))
        if isinstance(b.low, torch.Tensor) != isinstance(b.high, torch.Tensor):  # clamp wants both alike
            low, high = (x if isinstance(x, torch.Tensor) else torch.full_like(ratio, x) for x in (b.low, b.high))
            b = ClipBounds(low.to(ratio.dtype), high.to(ratio.dtype), b.keep)
        return b


@dataclass(frozen=True)
class ClipInputs:
    ratio: torch.Tensor  # [N, T] (detached) the ratio the objective clips (token or sequence ratio)
    advantages: torch.Tensor  # [N, T]
    mask: torch.Tensor  # [N, T]
    old_logp: torch.Tensor  # [N, T]
    entropy: torch.Tensor | None  # [N, T]
    eps_low: float  # the objective's own clip_low
    eps_high: float  # the objective's own clip_high


@dataclass(frozen=True)
class ClipBounds:
    """Ratio bounds (floats or [N, T] tensors) and, optionally, a mask of tokens still trained."""

    low: float | torch.Tensor
    high: float | torch.Tensor
    keep: torch.Tensor | None = None


@dataclass(frozen=True)
class TransformInputs:
    """One step's batch as a reward or advantage transform sees it."""

    rewards: torch.Tensor  # [N] float64 training rewards (after earlier reward transforms)
    group_index: torch.Tensor  # [N]
    mask: torch.Tensor  # [N, T]
    advantages: torch.Tensor | None = None  # [N, T] (advantage transforms only)
    components: Mapping[str, torch.Tensor] = field(default_factory=dict)  # [N] score components
    extras: Mapping[str, torch.Tensor] = field(default_factory=dict)
    step: int = 0
    total_steps: int = 1
    kl_coef: float = 0.0  # this step's KL coefficient (the KL controller's, schedules included)

    @property
    def lengths(self) -> torch.Tensor:
        return self.mask.sum(-1)

    @property
    def correct(self) -> torch.Tensor:
        """``[N]`` bool: the score component ``correct`` when the task reports one, else reward >= 1."""
        c = self.components.get("correct")
        return (c if c is not None else self.rewards).to(self.rewards.device) >= 1.0


TransformOutput = tuple["torch.Tensor", dict[str, float]]  # new rewards [N] or advantages [N, T]; step metrics


# (per-token loss [N, T], per-token metrics). An objective whose loss couples rows (a softmax over a group)
# may instead return a 0-dim loss: its micro-batch's share of the minibatch loss, normalised by the objective
# itself with ObjectiveInputs.n_rows / n_groups; the aggregation then only weighs the KL term.
ObjectiveOutput = tuple["torch.Tensor", dict[str, "torch.Tensor"]]


@dataclass(frozen=True)
class AggregationInputs:
    """The whole minibatch's shape information, from which an aggregation derives its coefficients."""

    mask: torch.Tensor  # [N, T] completion mask
    group_index: torch.Tensor  # [N]
    advantages: torch.Tensor | None = None  # [N, T]
    max_new_tokens: int | None = None  # the run's completion limit, the default constant normaliser

    @property
    def lengths(self) -> torch.Tensor:
        return self.mask.sum(-1)

    def constant_len(self, configured: int | None) -> int:
        """A configured constant normaliser, else the run's ``rollout.max_new_tokens``."""
        value = configured if configured is not None else self.max_new_tokens
        if value is None:
            raise ValueError("this aggregation needs max_len (or the run's rollout.max_new_tokens)")
        return value


def aggregate(coef: torch.Tensor, loss: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
    """``sum_{i,t} c M l`` for coefficients ``c`` of shape [N] or [N, T]."""
    if coef.dim() == 1:
        coef = coef[:, None]
    return (coef.to(loss.dtype) * mask * loss).sum()


@dataclass(frozen=True)
class CorrectionInputs:
    """Log-probs for an importance-sampling correction between the rollout engine and the trainer."""

    old_logp: torch.Tensor  # [N, T] trainer's log-probs of the sampling policy (detached)
    behaviour_logp: torch.Tensor  # [N, T] the rollout engine's log-probs of the same tokens
    mask: torch.Tensor  # [N, T]


CorrectionOutput = tuple["torch.Tensor", dict[str, "torch.Tensor"]]  # weights [N, T] (detached), per-token metrics

ADVANTAGES: Registry[Callable[..., torch.Tensor]] = Registry("advantage estimator")
OBJECTIVES: Registry[Callable[..., ObjectiveOutput]] = Registry("policy objective")
AGGREGATIONS: Registry[Callable[..., torch.Tensor]] = Registry("loss aggregation")
KL_ESTIMATORS: Registry[Callable[..., torch.Tensor]] = Registry("KL estimator")
CORRECTIONS: Registry[Callable[..., CorrectionOutput]] = Registry("importance-sampling correction")
REWARD_TRANSFORMS: Registry[Callable[..., TransformOutput]] = Registry("reward transform")
ADVANTAGE_TRANSFORMS: Registry[Callable[..., TransformOutput]] = Registry("advantage transform")
CLIP_RULES: Registry[Callable[..., ClipBounds]] = Registry("clip rule")
# training signals beside the policy gradient (rlvr.algorithms.loss_terms): ObjectiveInputs -> per-token loss
LOSS_TERMS: Registry[Callable[..., ObjectiveOutput]] = Registry("loss term")


@dataclass(frozen=True)
class ShapingInputs:
    """One generation call's completions, for a reward shaper (added to the verifier's reward at scoring)."""

    lengths: torch.Tensor  # [N] completion lengths
    max_new_tokens: int  # the run's completion limit


@dataclass(frozen=True)
class MaskInputs:
    """The batch's loss mask, for a mask transform (which tokens enter the loss and its token counts)."""

    mask: torch.Tensor  # [N, T]
    truncated: torch.Tensor  # [N] bool: the completion hit the length limit


@dataclass(frozen=True)
class GroupFilterInputs:
    """One generation round's completions by group, for a group filter (which groups a step keeps)."""

    rewards: torch.Tensor  # [N] float64 training rewards
    correct: torch.Tensor  # [N] float64 the verifier's correctness
    group_index: torch.Tensor  # [N] long, groups 0 .. n_groups - 1 (a group may have no completion)
    n_groups: int


# Step features the config's flags turn on (rlvr.train.config_flags), called through the same seams as the rest:
REWARD_SHAPERS: Registry[Callable[..., torch.Tensor]] = Registry("reward shaper")  # -> [N] added to rewards
MASK_TRANSFORMS: Registry[Callable[..., torch.Tensor]] = Registry("mask transform")  # -> [N, T] new mask
GROUP_FILTERS: Registry[Callable[..., list[int]]] = Registry("group filter")  # -> indices of kept groups

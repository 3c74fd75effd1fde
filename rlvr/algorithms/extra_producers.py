"""Who produces each extra tensor a component reads (``needs=``), and the rows some loss terms score beside
the batch: two registries the step asks, so it never names a method.

**Extra tensors.** Every name in :data:`~rlvr.algorithms.registry.EXTRAS` has one producer in
:data:`EXTRA_PRODUCERS`, registered (:func:`produces`) beside the method or feature it belongs to: the
policy's no-grad passes in :mod:`rlvr.passes`, the critic's values beside the critic
(:mod:`rlvr.learners.critic`), a rollout tree's node ids beside the strategy that grows trees
(:mod:`rlvr.rollout.strategies.rose`), a turn's reward beside the multi-turn driver. A producer is

    fn(ctx: ExtraContext, keys: frozenset[str]) -> {key: tensor [N, ...]}

and one pass may yield several keys (``provides``): the token-statistics pass yields entropies and, when they
are needed as well, the old log-probs, so both cost one forward. :func:`produce_extras` is the loop the step
runs:

    out = {}
    for key in the needed keys (a pass that also yields another needed key first):
        out |= EXTRA_PRODUCERS.get(key).fn(ctx, the needed keys its pass yields, not yet produced)

**Side rows.** A loss term may score rows other than the batch's with the policy, with gradient, inside the
micro-batch's own forward call (what DDP and FSDP need): the batch's completions under their plain prompts
(trait ``context_logp``), or off-policy preference pairs (trait ``pair_batch``). Each such trait has a builder
in :data:`SIDE_ROWS`, ``fn(ctx: SideContext, batch) -> batch with its side rows``
(:class:`~rlvr.core.batch.SideRows`), run once per step for the traits of the loss terms active at the step.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Callable, Sequence

from rlvr.algorithms.registry import EXTRAS
from rlvr.registry import Registry

__all__ = ["EXTRA_PRODUCERS", "SIDE_ROWS", "ExtraContext", "SideContext", "produces", "produce_extras",
           "reference_extras"]

EXTRA_PRODUCERS: Registry = Registry("extra producer")
SIDE_ROWS: Registry = Registry("side rows")  # keyed by the loss-term trait that asks for them


@dataclass(frozen=True)
class ExtraContext:
    """What a producer may read: the models, the rows (on the device), their completions and examples, the
    run's settings and the models trained beside the policy."""

    model: Any  # the policy
    tokenizer: Any
    device: Any
    batch: Any  # RolloutBatch: the rows to produce for
    completions: Sequence[Any]  # the rows' completions, in the batch's order
    examples: Sequence[Any]  # each row's example
    settings: Any  # the run's settings (rlvr.train.settings.RunSettings): temperature, micro-batches, chunks
    algorithm: Any = None  # the run's algorithm config (teacher_hint, belief, ...)
    ref_model: Any = None  # the frozen reference, when one is loaded
    learners: Sequence[Any] = ()  # models trained beside the policy (rlvr.learners)

    def learner(self, cls: type, missing: str) -> Any:
        """The learner of type ``cls`` among :attr:`learners`; ``missing`` is the error when there is none."""
        for learner in self.learners:
            if isinstance(learner, cls):
                return learner
        raise ValueError(missing)


@dataclass(frozen=True)
class SideContext:
    """What a side-row builder may read: the step, its seed, the models and the run's settings."""

    step: int
    seed: int  # the step's seed for what the builder draws
    tokenizer: Any
    device: Any
    settings: Any
    algorithm: Any  # the run's algorithm config (the loss terms and their params)
    completions: Sequence[Any] = ()  # the batch's completions, in its order
    ref_model: Any = None
    chat_template: bool = False
    memo: dict = field(default_factory=dict)  # what a builder keeps for the run (a file read once)


def produces(*keys: str, also: Sequence[str] = (), reference: bool = False) -> Callable:
    """Register the decorated function as the producer of ``keys`` (one pass yields them all); ``also``:
    keys its pass can yield besides, when they are needed too (their own producer then does not run);
    ``reference``: its pass runs the reference model (``ctx.ref_model``) and no policy forward, so under FSDP
    it runs in a block of its own, on the reference's shards (:func:`reference_extras`)."""
    import sys

    unknown = [k for k in (*keys, *also) if k not in EXTRAS]
    if unknown:
        raise ValueError(f"unknown extras {unknown}: describe each in rlvr.algorithms.registry.EXTRAS")
    module = sys._getframe(1).f_globals.get("__name__", "")

    def deco(fn: Callable) -> Callable:
        for key in keys:
            EXTRA_PRODUCERS.register(key, provides=(*keys, *also), module=module,
                                     traits=("reference",) if reference else ())(fn)
        return fn

    return deco


def reference_extras(needs: frozenset[str]) -> frozenset[str]:
    """The keys of ``needs`` whose producers run the reference model (``produces(..., reference=True)``)."""
    return frozenset(k for k in needs if k in EXTRAS and "reference" in EXTRA_PRODUCERS.get(k).traits)


def produce_extras(needs: frozenset[str], ctx: ExtraContext) -> dict[str, Any]:
    """Every extra in ``needs`` for ``ctx.batch``'s rows, each producer called once, on the batch's device."""
    unknown = needs - set(EXTRAS)
    if unknown:
        raise ValueError(f"unknown extras requested: {sorted(unknown)}; known: {sorted(EXTRAS)}")
    entries = {key: EXTRA_PRODUCERS.get(key) for key in needs}

    def shares(key: str) -> bool:  # its pass yields a needed key it is not registered for (one forward for both)
        own = {k for k, e in entries.items() if e.fn is entries[key].fn}
        return bool((entries[key].provides - own) & needs)

    order = sorted(needs, key=lambda k: (not shares(k), list(EXTRAS).index(k)))
    out: dict[str, Any] = {}
    for key in order:
        if key in out:
            continue
        entry = entries[key]
        keys = frozenset(entry.provides & needs) - out.keys()
        made = entry.fn(ctx, keys)
        missing = keys - made.keys()
        if missing:
            raise ValueError(f"the producer of {sorted(keys)} ({entry.module}) did not produce {sorted(missing)}")
        out.update({k: made[k] for k in keys})
    return {k: v.to(ctx.device) for k, v in out.items()}


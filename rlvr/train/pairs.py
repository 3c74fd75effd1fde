"""The step's preference-pair rows for loss terms with the ``pair_batch`` trait (f-HAL's ``f_preference``).

For each such term active at the step, :func:`with_pairs` reads the term's ``path`` once per run (kept in
``Components.pair_sources``), draws ``pairs_per_step`` pairs with the step's seed, tokenises them
(:mod:`rlvr.tasks.preference_pairs`) and computes their log-probs under the frozen reference model; the rows
ride on :attr:`RolloutBatch.pairs` (by term index) into the update, which runs the policy over them once per
minibatch. The loop calls it by trait, never by a method's name. Cost per step: one reference forward over
2 x pairs_per_step rows; in the update, one policy forward and backward over them per minibatch.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from rlvr.algorithms.loss_terms.base import PairSourceParams
from rlvr.algorithms.registry import LOSS_TERMS
from rlvr.core.batch import RolloutBatch
from rlvr.tasks.preference_pairs import PairRows, pair_rows, read_pairs, sample_pairs
from rlvr.models.logprobs import batch_logprobs, pass_args

__all__ = ["with_pairs", "step_pair_rows"]


def _active_pair_terms(cfg, step: int) -> list[tuple[int, Any]]:
    out = []
    for i, comp in enumerate(cfg.algorithm.loss_terms):
        entry = LOSS_TERMS.get(comp.name)
        if "pair_batch" in entry.traits and (entry.active is None or entry.active(comp.params, step)):
            if not isinstance(comp.params, PairSourceParams):
                raise TypeError(f"loss term {comp.name!r} has the pair_batch trait, so its params must derive from "
                                "rlvr.algorithms.loss_terms.base.PairSourceParams (path, pairs_per_step)")
            out.append((i, comp))
    return out


def step_pair_rows(tokenizer, pairs, p: PairSourceParams, seed: int, chat_template: bool = False) -> PairRows:
    """The ``p.pairs_per_step`` pairs of ``pairs`` that ``seed`` draws, as rows (no reference log-probs yet)."""
    idx = sample_pairs(len(pairs), p.pairs_per_step, seed)
    return pair_rows(tokenizer, [pairs[j] for j in idx], chat_template)


def with_pairs(cfg, c, batch: RolloutBatch, s, step: int, seed: int) -> RolloutBatch:
    """``batch`` with :attr:`RolloutBatch.pairs` set for the pair terms active at ``step`` (term ``i`` draws
    with ``seed + 7919 i``); the pair rows carry their reference log-probs."""
    terms = _active_pair_terms(cfg, step)
    if not terms:
        return batch
    if c.ref_model is None:
        raise ValueError("a loss term on preference pairs needs the reference model's log-probs, and none is loaded")
    rows = {}
    for i, comp in terms:
        p = comp.params
        key = (i, p.path, p.skip_malformed)
        if key not in c.pair_sources:  # read once per run
            c.pair_sources[key] = read_pairs(p.path, p.skip_malformed)
        r = step_pair_rows(c.tokenizer, c.pair_sources[key], p, seed + 7919 * i, cfg.model.chat_template).to(c.device)
        rows[i] = r.with_ref(batch_logprobs(c.ref_model, r.chosen, **pass_args(s)),
                             batch_logprobs(c.ref_model, r.rejected, **pass_args(s)))
    return replace(batch, pairs=rows)

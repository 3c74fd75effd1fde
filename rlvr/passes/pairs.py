"""Off-policy preference pairs beside the rollouts: read a JSONL file once, draw a seeded sample per RL step,
tokenise it into two small row sets (the chosen and the rejected responses).

The data source of loss terms with the ``pair_batch`` trait (``f_preference``, f-HAL's preference part;
Haldar et al., arXiv:2602.05946). A line is ``{"prompt": ..., "chosen": ..., "rejected": ...}``: the prompt a
non-empty string or a non-empty list of chat messages (``{"role": str, "content": str}``, text only), as the
dataset task's prompts; the responses non-empty strings; other fields are ignored. A malformed line (not
JSON, not an object, a field missing or of the wrong type) stops the read with its ``file:line``, or with
``skip_malformed`` is left out and counted in one warning on stderr.

Sampling: :func:`sample_pairs` draws ``k`` distinct lines with ``random.Random(seed)`` (every line once per
pass when ``k`` is more than the file holds), so the rows of a step depend only on its seed (the trainer
passes one from the run's seed and the step: a resumed run draws what an uninterrupted one did).

Rows: each pair is ``prompt + response + eos`` twice, the prompt encoded as the rollouts encode it
(:func:`rlvr.models.prompts.encode_prompt`, chat messages through the tokenizer's template) and the response
without special tokens; the completion mask covers the response and its eos only. Row ``j`` of ``chosen`` and
of ``rejected`` is pair ``j`` (``group_index`` j; ``rewards`` 1 and 0).

**The step's rows.** For each such term active at the step, :func:`with_pairs` (the trait's side-row builder,
:data:`rlvr.algorithms.extra_producers.SIDE_ROWS`) reads the term's ``path`` once per run (kept in the run's memo),
draws ``pairs_per_step`` pairs with the step's seed, tokenises them and computes their log-probs under the frozen
reference model; the chosen and the rejected rows ride on the batch as two :class:`~rlvr.core.batch.SideRows` of
the term (``pair_chosen`` and ``pair_rejected``, the step's own rows, not aligned with the batch's) into the
update, which runs the policy over them once per minibatch and hands the term
``pair_{chosen,rejected}_{logp,ref_logp,mask}``. Cost per step: one reference forward over 2 x pairs_per_step rows;
in the update, one policy forward and backward over them per minibatch.
"""

from __future__ import annotations

import random
import sys
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any, Sequence

from rlvr.algorithms.extra_producers import SIDE_ROWS, SideContext
from rlvr.algorithms.loss_terms.base import PairSourceParams
from rlvr.algorithms.registry import LOSS_TERMS
from rlvr.core.batch import RolloutBatch, SideRows, build_batch
from rlvr.core.jsonl import iter_jsonl
from rlvr.core.types import Completion
from rlvr.models.logprobs import batch_logprobs, pass_args
from rlvr.models.prompts import encode_prompt

__all__ = ["PreferencePair", "PairRows", "PairDataError", "parse_pair", "read_pairs", "sample_pairs",
           "pair_completions", "pair_rows", "with_pairs", "step_pair_rows", "attach_pairs", "pairs_of"]


class PairDataError(ValueError):
    """A missing or malformed pairs file; the message names the file and line."""


@dataclass(frozen=True)
class PreferencePair:
    prompt: str | list[dict[str, str]]
    chosen: str
    rejected: str
    where: str = ""  # "file:line", for messages


@dataclass(frozen=True)
class PairRows:
    """One step's pairs as rows: ``chosen`` and ``rejected`` hold pair ``j`` in row ``j``; their ``ref_logp``
    is set by the trainer (the frozen reference model's log-probs)."""

    chosen: RolloutBatch
    rejected: RolloutBatch

    @property
    def size(self) -> int:
        return self.chosen.size

    def to(self, device: Any) -> "PairRows":
        return PairRows(self.chosen.to(device), self.rejected.to(device))

    def with_ref(self, chosen_ref, rejected_ref) -> "PairRows":
        return PairRows(replace(self.chosen, ref_logp=chosen_ref), replace(self.rejected, ref_logp=rejected_ref))


def _bad_prompt(prompt: Any) -> str | None:
    if isinstance(prompt, str):
        return None if prompt else "'prompt' is an empty string"
    if not isinstance(prompt, list) or not prompt:
        return "'prompt' must be a non-empty string or list of chat messages"
    for k, m in enumerate(prompt):
        if not (isinstance(m, dict) and isinstance(m.get("role"), str) and isinstance(m.get("content"), str)):
            return f"'prompt' message {k} must be an object with string 'role' and 'content'"
    return None


def parse_pair(where: str, rec: Any) -> PreferencePair:
    """One line's record as a pair, or a :class:`PairDataError` naming ``where`` and the fault."""
    if not isinstance(rec, dict):
        raise PairDataError(f"{where}: expected a JSON object, got {type(rec).__name__}")
    missing = [k for k in ("prompt", "chosen", "rejected") if k not in rec]
    if missing:
        raise PairDataError(f"{where}: missing field(s) {missing} (fields: {sorted(rec)})")
    bad = _bad_prompt(rec["prompt"])
    if bad:
        raise PairDataError(f"{where}: {bad}")
    for k in ("chosen", "rejected"):
        if not isinstance(rec[k], str) or not rec[k]:
            raise PairDataError(f"{where}: {k!r} must be a non-empty string")
    return PreferencePair(rec["prompt"], rec["chosen"], rec["rejected"], where)


def read_pairs(path: str | Path, skip_malformed: bool = False) -> list[PreferencePair]:
    """Every pair of a JSONL file, in file order (blank lines ignored)."""
    path = Path(path).expanduser()
    if not path.is_file():
        raise PairDataError(f"{path}: no such file (the preference pairs a loss term reads from its 'path')")
    out, skipped = [], []
    for lineno, rec, err in iter_jsonl(path):
        where = f"{path}:{lineno}"
        try:
            if err is not None:
                raise PairDataError(f"{where}: {err}")
            out.append(parse_pair(where, rec))
        except PairDataError as e:
            if not skip_malformed:
                raise PairDataError(f"{e} (skip_malformed: true leaves such lines out)") from None
            skipped.append(str(e))
    if skipped:
        print(f"{path}: skipped {len(skipped)} malformed lines; the first: {skipped[0]}", file=sys.stderr)
    if not out:
        raise PairDataError(f"{path}: no preference pairs")
    return out


def sample_pairs(n: int, k: int, seed: int) -> list[int]:
    """``k`` indices into ``n`` pairs: distinct while ``k <= n``, else whole shuffled passes then a part."""
    if n <= 0 or k <= 0:
        raise ValueError(f"cannot draw {k} of {n} pairs")
    rng = random.Random(seed)
    out: list[int] = []
    while len(out) < k:
        out += rng.sample(range(n), min(n, k - len(out)))
    return out


def _response(tokenizer, text: str) -> list[int]:
    ids = list(tokenizer(text, add_special_tokens=False)["input_ids"])
    eos = tokenizer.eos_token_id
    return ids + ([eos] if eos is not None else [])


def pair_completions(tokenizer, pairs: Sequence[PreferencePair],
                     chat_template: bool = False) -> tuple[list[Completion], list[Completion]]:
    """``(chosen, rejected)`` completions: the pair's prompt, then the response and eos (group = pair index)."""
    chosen, rejected = [], []
    for j, pair in enumerate(pairs):
        prompt = encode_prompt(tokenizer, pair.prompt, chat_template)
        for out, text in ((chosen, pair.chosen), (rejected, pair.rejected)):
            out.append(Completion(pair.where or f"pair-{j}", prompt, _response(tokenizer, text), None, "stop", text,
                                  group=j))
    return chosen, rejected


def pair_rows(tokenizer, pairs: Sequence[PreferencePair], chat_template: bool = False) -> PairRows:
    """The pairs as two padded row sets (rewards 1 for chosen, 0 for rejected), on the CPU."""
    if not pairs:
        raise ValueError("no preference pairs to tokenise")
    chosen, rejected = pair_completions(tokenizer, pairs, chat_template)
    pad = tokenizer.pad_token_id if tokenizer.pad_token_id is not None else tokenizer.eos_token_id
    return PairRows(build_batch(chosen, [1.0] * len(chosen), pad), build_batch(rejected, [0.0] * len(rejected), pad))


# ---- the step's rows ----------------------------------------------------------------------------------------

def _active_pair_terms(algorithm, step: int) -> list[tuple[int, Any]]:
    out = []
    for i, comp in enumerate(algorithm.loss_terms):
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


def attach_pairs(batch: RolloutBatch, rows: dict[int, PairRows]) -> RolloutBatch:
    """``batch`` with each term's pair rows (term index -> rows with their reference log-probs) as side rows."""
    side = []
    for i, r in rows.items():
        for name, rb in (("pair_chosen", r.chosen), ("pair_rejected", r.rejected)):
            side.append(SideRows(name, "pair_batch", rb, aligned=False, term=i,
                                 fixed={"ref_logp": rb.ref_logp, "mask": rb.completion_mask}))
    return replace(batch, side=(*batch.side, *side))


def pairs_of(batch: RolloutBatch, term: int) -> PairRows | None:
    """Term ``term``'s pair rows on ``batch`` (None when it carries none)."""
    got = {sd.name: sd.rows for sd in batch.side if sd.trait == "pair_batch" and sd.term == term}
    return PairRows(got["pair_chosen"], got["pair_rejected"]) if got else None


@SIDE_ROWS.register("pair_batch")
def with_pairs(ctx: SideContext, batch: RolloutBatch) -> RolloutBatch:
    """``batch`` with the pair rows of the loss terms active at ``ctx.step`` (term ``i`` draws with
    ``ctx.seed + 7919 i``); the rows carry their reference log-probs."""
    terms = _active_pair_terms(ctx.algorithm, ctx.step)
    if not terms:
        return batch
    if ctx.ref_model is None:
        raise ValueError("a loss term on preference pairs needs the reference model's log-probs, and none is loaded")
    rows = {}
    for i, comp in terms:
        p = comp.params
        key = ("preference_pairs", i, p.path, p.skip_malformed)
        if key not in ctx.memo:  # read once per run
            ctx.memo[key] = read_pairs(p.path, p.skip_malformed)
        r = step_pair_rows(ctx.tokenizer, ctx.memo[key], p, ctx.seed + 7919 * i, ctx.chat_template).to(ctx.device)
        args = pass_args(ctx.settings)
        rows[i] = r.with_ref(batch_logprobs(ctx.ref_model, r.chosen, **args),
                             batch_logprobs(ctx.ref_model, r.rejected, **args))
    return attach_pairs(batch, rows)

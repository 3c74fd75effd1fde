"""GRPO-VPS's belief probe: how much each segment of a completion raises the policy's belief in the gold
answer (extras ``belief_progress`` and ``belief_segment``; the ``vps`` advantage transform reads them).

Segments end at the tokens ``segment_end`` marks (sub-sentence ends and newlines) and at the completion's
last token; with more than ``max_segments`` segments, every k-th boundary is kept (k = ceil(K / max)) and
the last, merging the rest. For boundaries ``t_0 = 0 < t_1 < ... < t_K = |y|``:

    b_k = (1 / |a*|) sum_j log pi( a*_j | x, y_{<=t_k}, suffix, a*_{<j} )      (teacher-forced, temperature 1)
    belief_progress[i, t] = b_k - b_{k-1}      for the tokens t of segment k (t_{k-1} < t <= t_k)
    belief_segment[i, t]  = k                  (1 .. K; 0 on padding)

One no-grad forward per boundary, K + 1 per completion, batched like every other extra pass. ``a*`` is the
example's gold answer, tokenised after the suffix (``algorithm.belief.suffix``). RECONSTRUCTED (Zhu et al. 2026,
GRPO-VPS, arXiv:2604.20659, no code; docs/methods.md, `vps`): the answer-eliciting suffix and the segmentation.
"""

from __future__ import annotations

import math
from typing import Any, Sequence

import torch

from rlvr.algorithms.extra_producers import ExtraContext, produces
from rlvr.core.batch import RolloutBatch, build_batch
from rlvr.core.types import Completion, Example
from rlvr.passes.segments import segment_ends

__all__ = ["boundaries", "belief_extras"]


def boundaries(ends: Sequence[float], length: int, max_segments: int) -> list[int]:
    """Prefix lengths ``t_1 < ... < t_K = length`` at which segments end (see the module docstring)."""
    cuts = [j + 1 for j in range(length) if ends[j] > 0]
    if not cuts or cuts[-1] != length:
        cuts.append(length)
    if len(cuts) > max_segments:
        k = math.ceil(len(cuts) / max_segments)
        cuts = sorted(set(cuts[k - 1::k]) | {length})
    return cuts


def belief_extras(model, batch: RolloutBatch, ends: torch.Tensor, completions: Sequence[Completion],
                  examples: Sequence[Example], tokenizer, s: Any, suffix: str,
                  max_segments: int) -> dict[str, torch.Tensor]:
    """``belief_progress`` and ``belief_segment`` ``[N, T]`` for ``batch`` (rows as ``completions``)."""
    from rlvr.models.logprobs import batch_logprobs, pass_args

    mask = batch.completion_mask.cpu()
    suffix_ids = tokenizer.encode(suffix, add_special_tokens=False)
    probes, spans = [], []
    for i, (comp, ex) in enumerate(zip(completions, examples)):
        ids = list(comp.completion_ids)
        length = min(len(ids), mask.shape[1])
        answer = tokenizer.encode(str(ex.answer), add_special_tokens=False) or [tokenizer.eos_token_id]
        cuts = [0] + (boundaries(ends[i].tolist(), length, max_segments) if length else [])
        spans.append(cuts)
        probes += [Completion(comp.example_id, list(comp.prompt_ids) + ids[:t] + suffix_ids, answer, None, "stop", "",
                              vision=comp.vision) for t in cuts]
    pb = build_batch(probes, [0.0] * len(probes), tokenizer.pad_token_id).to(batch.input_ids.device)
    lp = batch_logprobs(model, pb, **{**pass_args(s), "temperature": 1.0}).cpu().double()
    pm = pb.completion_mask.cpu().double()
    belief = (lp * pm).sum(-1) / pm.sum(-1).clamp(min=1.0)
    progress = torch.zeros(mask.shape, dtype=torch.float64)
    segment = torch.zeros(mask.shape, dtype=torch.float64)
    at = 0
    for i, cuts in enumerate(spans):
        b = belief[at: at + len(cuts)]
        at += len(cuts)
        for k in range(1, len(cuts)):
            progress[i, cuts[k - 1]: cuts[k]] = float(b[k] - b[k - 1])
            segment[i, cuts[k - 1]: cuts[k]] = float(k)
    return {"belief_progress": progress.float() * mask, "belief_segment": segment.float() * mask}


@produces("belief_progress", "belief_segment")
def _beliefs(ctx: ExtraContext, keys: frozenset[str]) -> dict[str, torch.Tensor]:
    """The belief probe: K + 1 no-grad forwards per completion of K segments."""
    b = ctx.algorithm.belief
    ends = segment_ends(ctx.batch, ctx.tokenizer)
    return belief_extras(ctx.model, ctx.batch, ends, ctx.completions, ctx.examples, ctx.tokenizer, ctx.settings,
                         b.suffix, b.max_segments)

"""Teacher passes: the same policy given a hint before the completion (the gold answer, a rejected
completion's answer, or CEPO's chain-of-thought contexts), and how far that hint moves its next-token
distributions.

Costs: ``teacher_logp`` and ``neg_teacher_logp`` one policy forward each over prompt + hint + completion;
``teacher_kl`` a policy forward over each of prompt + completion and prompt + hint + completion, keeping
full-vocabulary logits per chunk. The negative teacher's hint is the rejected completion's answer as CEPO's
code takes it: the content of its last ``\\boxed{...}``, else its first 50 characters. What the hint is comes
from the run's ``algorithm.teacher_hint``, ``teacher_context`` and ``teacher_cot_tokens``.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Sequence

import torch

from rlvr.algorithms.extra_producers import ExtraContext, produces
from rlvr.core.batch import RolloutBatch, build_batch
from rlvr.core.types import Completion, Example
from rlvr.models import logprobs
from rlvr.models.logprobs import logit_softcap, output_head, pass_args, trunk_hidden
from rlvr.passes.policy import capped_logits

__all__ = ["rejected_answer", "teacher_completions", "teacher_kl"]


def rejected_answer(text: str) -> str:
    """The content of the last ``\\boxed{...}`` in ``text`` (braces balanced), else its first 50 characters."""
    start = text.rfind("\\boxed{")
    if start >= 0:
        depth, i = 1, start + len("\\boxed{")
        for j in range(i, len(text)):
            depth += {"{": 1, "}": -1}.get(text[j], 0)
            if depth == 0:
                return text[i:j].strip()
    return text[:50].strip()


def teacher_completions(completions: Sequence[Completion], examples: Sequence[Example], rewards: torch.Tensor,
                        tokenizer, hint: str, negative: bool, context: str = "answer",
                        cot_tokens: int = 200) -> list[Completion]:
    """Copies of ``completions`` whose prompts carry a hint, after the prompt (after any chat template) and
    before the completion, which is unchanged.

    ``context="answer"``: the hint is ``hint`` formatted with the gold answer, or (``negative``) with the
    answer of the lowest-reward completion of the same group when it scored below 0.5 (else the gold answer);
    that answer is :func:`rejected_answer` of its text (the gold answer if empty).

    ``context="cot_prefix"`` / ``"cot_suffix"`` (CEPO's CoT teacher, as its code builds it): the hint is the
    first / last ``cot_tokens`` token ids of the group's best correct completion (reward >= 0.5, the highest;
    " " + the gold answer when the group has none), or (``negative``) of its worst rejected one (reward < 0.5;
    the positive hint when the group has none).
    """
    worst: dict[int, int] = {}
    best: dict[int, int] = {}
    for i, comp in enumerate(completions):
        g, r = comp.group, float(rewards[i])
        if r < 0.5 and (g not in worst or r < float(rewards[worst[g]])):
            worst[g] = i
        if r >= 0.5 and (g not in best or r > float(rewards[best[g]])):
            best[g] = i

    def cot(j: int) -> list[int]:
        ids = list(completions[j].completion_ids)
        return ids[:cot_tokens] if context == "cot_prefix" else ids[max(0, len(ids) - cot_tokens):]

    out = []
    for i, comp in enumerate(completions):
        answer = examples[i].answer
        if context == "answer":
            if negative and comp.group in worst:
                answer = rejected_answer(completions[worst[comp.group]].text) or answer
            hint_ids = tokenizer.encode(hint.format(answer=answer), add_special_tokens=False)
        else:
            pos = cot(best[comp.group]) if comp.group in best else tokenizer.encode(f" {answer}",
                                                                                     add_special_tokens=False)
            hint_ids = cot(worst[comp.group]) if negative and comp.group in worst else pos
        out.append(replace(comp, prompt_ids=list(comp.prompt_ids) + list(hint_ids)))
    return out


@torch.no_grad()
def teacher_kl(model, batch: RolloutBatch, teacher: RolloutBatch, temperature: float, micro_batch_size: int,
               chunk_tokens: int) -> torch.Tensor:
    """``[N, T]`` KL(P_S || P_T) at each completion position: the policy's next-token distribution given the
    prompt against the same policy's given the prompt and the hint (``teacher``: the same completions after
    a longer prompt), both at ``temperature``. Full-vocabulary logits are built per chunk of tokens."""
    n, t = batch.completion_mask.shape
    out = torch.zeros(n, t)
    trunk = getattr(model, model.base_model_prefix)
    head = output_head(model)
    softcap = logit_softcap(model)

    def positions(mb):
        h = trunk_hidden(trunk, mb)
        p, tm = mb.prompt_len, mb.completion_mask.shape[1]
        return h[:, p - 1: p + tm - 1][mb.completion_mask.bool()]  # position j predicts completion token j

    def logsm(h):
        return torch.log_softmax(capped_logits(head, h, softcap) / temperature, -1)

    for idx in batch.micro_batch_rows(micro_batch_size):
        mb, tb = batch.select(idx).trim(), teacher.select(idx).trim()
        hs, ht = positions(mb), positions(tb)
        vals = []
        for k in range(0, hs.shape[0], chunk_tokens):
            ls, lt = logsm(hs[k: k + chunk_tokens]), logsm(ht[k: k + chunk_tokens])
            vals.append((ls.exp() * (ls - lt)).sum(-1))
        full = torch.zeros(mb.completion_mask.shape)
        if vals:
            full[mb.completion_mask.bool().cpu()] = torch.cat(vals).cpu()
        out[idx, : full.shape[1]] = full
    return out


def _hinted(ctx: ExtraContext, negative: bool) -> RolloutBatch:
    """The batch's completions after their prompt plus the teacher's hint, on the device."""
    a = ctx.algorithm
    comps = teacher_completions(ctx.completions, ctx.examples, ctx.batch.rewards, ctx.tokenizer, a.teacher_hint,
                                negative, a.teacher_context, a.teacher_cot_tokens)
    return build_batch(comps, ctx.batch.rewards.tolist(), ctx.tokenizer.pad_token_id).to(ctx.device)


@produces("teacher_logp")
def _teacher_logp(ctx: ExtraContext, keys: frozenset[str]) -> dict[str, torch.Tensor]:
    """The policy's log-probs given the positive teacher's hint: one policy forward."""
    return {"teacher_logp": logprobs.batch_logprobs(ctx.model, _hinted(ctx, False), **pass_args(ctx.settings)).cpu()}


@produces("neg_teacher_logp")
def _neg_teacher_logp(ctx: ExtraContext, keys: frozenset[str]) -> dict[str, torch.Tensor]:
    """The policy's log-probs given the negative teacher's hint: one policy forward."""
    return {"neg_teacher_logp": logprobs.batch_logprobs(ctx.model, _hinted(ctx, True),
                                                        **pass_args(ctx.settings)).cpu()}


@produces("teacher_kl")
def _teacher_kl(ctx: ExtraContext, keys: frozenset[str]) -> dict[str, torch.Tensor]:
    """KL(P_S || P_T) at each completion position: a policy forward over each of the two contexts."""
    s = ctx.settings
    return {"teacher_kl": teacher_kl(ctx.model, ctx.batch, _hinted(ctx, False), s.temperature, s.micro_batch_size,
                                     s.chunk_tokens)}

"""Extra per-batch tensors that components request with ``needs=`` (the batch contract for extra passes).

The loop computes the union of what the run's configured components ask for, once per step, after the
rewards are known and before advantages: so an advantage, a transform or an objective can read e.g. the
self-certainty of every token or the log-probs under a teacher context, and the loop never branches on a
method's name. Everything here runs without gradients; names and shapes are listed in
:data:`rlvr.algorithms.registry.EXTRAS`.

Costs: ``old_logp`` one policy forward; ``ref_logp`` one reference forward; ``entropy``,
``self_certainty``, ``chosen_logit`` and ``hidden`` share one policy forward that keeps full-vocabulary
logits per chunk of tokens; ``teacher_logp`` and ``neg_teacher_logp`` one policy forward each over
prompt + hint + completion; ``teacher_kl`` a policy forward over each of prompt + completion and
prompt + hint + completion, keeping full-vocabulary logits per chunk; ``segment_end`` decodes each distinct
completion token once (no model pass); ``belief_progress`` / ``belief_segment`` (together) one no-grad
forward per segment boundary of each completion, prompt + prefix + suffix + gold answer
(:mod:`rlvr.passes.belief`); ``values`` / ``values_std`` (together) one no-grad forward of the critic
(:mod:`rlvr.learners.critic`); ``disc_perception`` / ``disc_reasoning`` / ``disc_format`` (together) one no-grad
forward of the discriminator per expert (:mod:`rlvr.learners.discriminator`); ``vision_similarity`` one no-grad policy forward keeping every layer's
hidden states (:mod:`rlvr.passes.perception`).

Logits are those the log-probs use: after the model's final-logit soft-capping when it has one (Gemma 2),
divided by the training temperature (``algorithm.train_temperature``, default the rollout temperature) for
entropy and self-certainty; ``chosen_logit`` is before temperature.
``hidden`` pools the last hidden states at the completion tokens' own positions (the last one has read the
whole completion). The negative teacher's hint is the rejected completion's answer as CEPO's code takes it:
the content of its last ``\\boxed{...}``, else its first 50 characters.
"""

from __future__ import annotations

import contextlib
from dataclasses import replace
from typing import Any, Sequence

import torch

from rlvr.algorithms.registry import EXTRAS
from rlvr.core.batch import RolloutBatch, build_batch
from rlvr.core.types import Completion, Example
from rlvr.models import logprobs
from rlvr.models.logprobs import capped, logit_softcap, output_head, pass_args, trunk_hidden

__all__ = ["compute_extras", "token_statistics", "teacher_completions", "rejected_answer", "segment_ends",
           "SEGMENT_DELIMITERS"]

_STATS = ("entropy", "self_certainty", "chosen_logit", "hidden")


def capped_logits(head, hidden: torch.Tensor, softcap: float | None) -> torch.Tensor:
    """Float32 logits of ``hidden``, after the model's final-logit soft-capping when it has one (Gemma 2,
    PaliGemma 2), with a suppressing head's tokens suppressed after the cap (:func:`rlvr.models.logprobs.capped`)."""
    return capped(head, hidden, softcap)


@torch.no_grad()
def token_statistics(model, batch: RolloutBatch, temperature: float, micro_batch_size: int,
                     chunk_tokens: int, wanted: Sequence[str], max_tokens: int | None = None,
                     autocast: str | None = None) -> dict[str, torch.Tensor]:
    """Entropy, self-certainty and raw chosen logit per token, and mean-pooled hidden states per row; with
    ``logp`` in ``wanted``, the log-probs of the sampled tokens from the same pass (what ``batch_logprobs``
    computes), so old log-probs cost no second forward when token statistics are needed anyway."""
    n, t = batch.completion_mask.shape
    out = {k: torch.zeros(n, t) for k in wanted if k != "hidden"}
    trunk = getattr(model, model.base_model_prefix)
    head = output_head(model)
    softcap = logit_softcap(model)
    for idx in batch.micro_batch_rows(micro_batch_size, max_tokens=max_tokens):
        mb = batch.select(idx).trim()
        def amp():
            return (torch.autocast(mb.input_ids.device.type, dtype=getattr(torch, autocast)) if autocast
                    else contextlib.nullcontext())

        with amp():
            h = trunk_hidden(trunk, mb)
        p, tm = mb.prompt_len, mb.completion_mask.shape[1]
        hid = h[:, p - 1: p + tm - 1]  # position j predicts token j + 1
        sel = mb.completion_mask.bool()
        if "hidden" in wanted:
            m = mb.completion_mask[..., None].to(h.dtype)
            pooled = (h[:, p: p + tm] * m).sum(1) / m.sum(1).clamp(min=1)
            out.setdefault("hidden", torch.zeros(n, pooled.shape[-1]))[idx] = pooled.float().cpu()
        flat_h, flat_t = hid[sel], mb.input_ids[:, p: p + tm][sel]
        vals: dict[str, list[torch.Tensor]] = {k: [] for k in wanted if k != "hidden"}
        for s in range(0, flat_h.shape[0], chunk_tokens):
            with amp():
                z = capped_logits(head, flat_h[s: s + chunk_tokens], softcap)
            tgt = flat_t[s: s + chunk_tokens]
            zt = z / temperature if temperature != 1.0 else z
            if "chosen_logit" in vals:
                vals["chosen_logit"].append(z.gather(-1, tgt[:, None]).squeeze(-1))
            if "self_certainty" in vals:
                vals["self_certainty"].append(torch.logsumexp(zt, -1) - zt.mean(-1))
            if "entropy" in vals or "logp" in vals:
                logsm = torch.log_softmax(zt, -1)
                if "entropy" in vals:
                    vals["entropy"].append(-(logsm.exp() * logsm).sum(-1))
                if "logp" in vals:
                    vals["logp"].append(logsm.gather(-1, tgt[:, None]).squeeze(-1))
        for k, parts in vals.items():
            full = torch.zeros(sel.shape)
            if parts:
                full[sel.cpu()] = torch.cat(parts).cpu()
            out[k][idx, : full.shape[1]] = full
    return out


SEGMENT_DELIMITERS = ",.;:!?\uff0c\u3002\uff1b\uff1a\uff01\uff1f"  # ASCII and full-width sub-sentence ends


def segment_ends(batch: RolloutBatch, tokenizer) -> torch.Tensor:
    """``[N, T]`` 1.0 at completion tokens whose text ends a sub-sentence: it ends (trailing spaces aside) in
    one of :data:`SEGMENT_DELIMITERS` or holds a newline. Each distinct token id is decoded once."""
    ids = batch.input_ids[:, batch.prompt_len: batch.prompt_len + batch.completion_mask.shape[1]].cpu().contiguous()
    uniq = torch.unique(ids)
    flags = []
    for u in uniq.tolist():
        text = tokenizer.decode([u])
        flags.append("\n" in text or text.rstrip(" \t").endswith(tuple(SEGMENT_DELIMITERS)))
    ends = torch.tensor(flags, dtype=torch.float32)[torch.searchsorted(uniq, ids)]
    return ends * (batch.completion_mask.cpu() > 0)


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


def compute_extras(needs: frozenset[str], c: Any, batch: RolloutBatch, s: Any, completions: Sequence[Completion],
                   examples: Sequence[Example], hint: str, context: str = "answer",
                   cot_tokens: int = 200, belief: Any = None) -> dict[str, torch.Tensor]:
    """The requested extras for ``batch`` (rows in the order of ``completions``), on the batch's device.

    This is the one producer of extra tensors in a step: the loop calls it once, with every need of the
    step (:func:`rlvr.train.loop.step_needs`), and nothing else computes log-probs outside the update."""

    unknown = needs - set(EXTRAS)
    if unknown:
        raise ValueError(f"unknown extras requested: {sorted(unknown)}; known: {sorted(EXTRAS)}")
    out: dict[str, torch.Tensor] = {}
    dev = batch.to(c.device)  # a no-op for the loop's batch, which is already there
    wanted = [k for k in _STATS if k in needs]
    if wanted and "old_logp" in needs:  # one policy pass for both
        stats = token_statistics(c.model, dev, s.temperature, s.micro_batch_size, s.chunk_tokens, wanted + ["logp"],
                                 getattr(s, "micro_batch_tokens", None), getattr(s, "autocast", None))
        out["old_logp"] = stats.pop("logp")
        out.update(stats)
        wanted = []
    elif "old_logp" in needs:
        out["old_logp"] = logprobs.batch_logprobs(c.model, dev, **pass_args(s)).cpu()
    if "ref_logp" in needs:
        if c.ref_model is None:
            raise ValueError("a component needs reference log-probs but no reference model is loaded")
        out["ref_logp"] = logprobs.batch_logprobs(c.ref_model, dev, **pass_args(s)).cpu()
    if wanted:
        out.update(token_statistics(c.model, dev, s.temperature, s.micro_batch_size, s.chunk_tokens, wanted,
                                    getattr(s, "micro_batch_tokens", None), getattr(s, "autocast", None)))
    if "segment_end" in needs:
        out["segment_end"] = segment_ends(batch, c.tokenizer)
    if "belief_progress" in needs or "belief_segment" in needs:  # K + 1 probe forwards per completion
        from rlvr.config.sections import BeliefConfig
        from rlvr.passes.belief import belief_extras

        b = belief or BeliefConfig()
        ends = out["segment_end"] if "segment_end" in out else segment_ends(batch, c.tokenizer)
        out.update(belief_extras(c.model, dev, ends, completions, examples, c.tokenizer, s, b.suffix,
                                 b.max_segments))
    if "vision_similarity" in needs:  # one no-grad forward with every layer's hidden states (PEPO)
        from rlvr.passes.perception import vision_similarity

        out["vision_similarity"] = vision_similarity(c.model, dev, s.micro_batch_size)
    if "context_index" in needs:  # set by the contexts engine wrapper (no model pass)
        from rlvr.rollout.contexts import context_rows

        out["context_index"] = context_rows(completions, batch.completion_mask)
    if needs & {"values", "values_std"}:  # one no-grad forward of the critic (rlvr.learners.critic)
        if getattr(c, "critic", None) is None:
            raise ValueError("a component reads the critic's values, but the run has no critic (algorithm.critic)")
        out.update(c.critic.extras(dev))
    if needs & {"disc_perception", "disc_reasoning", "disc_format"}:  # two no-grad passes (rlvr.learners.discriminator)
        if getattr(c, "discriminator", None) is None:
            raise ValueError("a component reads the discriminator's scores, but the run has none "
                             "(algorithm.discriminator.enabled)")
        out.update(c.discriminator.extras(completions, examples))
    if needs & {"tree_node", "tree_parent", "tree_branch"}:  # set by the rose rollout strategy (no model pass)
        from rlvr.rollout.strategies.rose import tree_rows

        out.update(tree_rows(completions, batch.completion_mask))
    if "guided" in needs:  # flags set by the guidance engine wrapper (no model pass)
        from rlvr.rollout.guidance import guided_rows

        out["guided"] = guided_rows(completions, batch.completion_mask)
    if "turn_index" in needs or "turn_reward" in needs:  # from the episodes' segments (no model pass)
        from rlvr.envs.turns import turn_tensors

        out["turn_index"], out["turn_reward"] = (x.cpu() for x in turn_tensors(completions, batch.completion_mask))
    if "process_value" in needs:  # set by the propa strategy (no model pass)
        out["process_value"] = torch.tensor([float(getattr(comp, "process_value", -1.0)) for comp in completions])
    if "scaffold_credit" in needs:  # set by the scaffold wrapper, from the texts (no model pass)
        from rlvr.rollout.scaffold import credit_rows

        out["scaffold_credit"] = credit_rows(completions)
    if "step_useful_frac" in needs:  # from the texts (no model pass)
        from rlvr.algorithms.transforms.scope import useful_fraction

        out["step_useful_frac"] = torch.tensor([useful_fraction(comp.text) for comp in completions])
    if "prompt_key" in needs:  # each row's example id as an int64 key (no model pass)
        from rlvr.core.prompt_keys import prompt_keys

        out["prompt_key"] = torch.tensor(prompt_keys(ex.id for ex in examples), dtype=torch.int64)
    if "reference_rouge_l" in needs:  # from the texts (no model pass)
        from rlvr.verifiers.textmetrics import rouge_l

        out["reference_rouge_l"] = torch.tensor([-1.0 if ex.target is None else rouge_l(comp.text, ex.target)
                                                 for comp, ex in zip(completions, examples)])
    if "teacher_kl" in needs:  # one more pass each over the prompt and the hinted prompt, full distributions
        comps = teacher_completions(completions, examples, batch.rewards, c.tokenizer, hint, False, context, cot_tokens)
        tb = build_batch(comps, batch.rewards.tolist(), c.tokenizer.pad_token_id).to(c.device)
        out["teacher_kl"] = teacher_kl(c.model, dev, tb, s.temperature, s.micro_batch_size, s.chunk_tokens)
    for key, negative in (("teacher_logp", False), ("neg_teacher_logp", True)):
        if key in needs:
            comps = teacher_completions(completions, examples, batch.rewards, c.tokenizer, hint, negative, context,
                                        cot_tokens)
            tb = build_batch(comps, batch.rewards.tolist(), c.tokenizer.pad_token_id).to(c.device)
            out[key] = logprobs.batch_logprobs(c.model, tb, **pass_args(s)).cpu()
    return {k: v.to(c.device) for k, v in out.items()}

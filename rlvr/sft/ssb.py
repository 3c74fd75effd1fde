"""SSB, semantic soft bootstrapping (``sft.method: ssb``): the warm-up distils the model's own robust, hinted
solutions into the bare question.

Mitra et al. 2025, "Semantic Soft Bootstrapping", arXiv:2512.05105; code ``purbeshmitra/semantic-soft-
bootstrapping`` (``logit_gen.py``: data and teacher logits; ``ssb_train.py``: the KD trainer; docs/methods.md, ``ssb``),
EXACT from code except where noted. Per training problem (``sft.ssb``):

    K attempts at temperature 0.8 (``rollouts``), each scored by the task's verifier; its final answer is
        the content of its last \\boxed{...} (the code's rule), else its last number, else its last line
    skip unless >= 1 correct and >= 1 incorrect attempt with an answer
    wrong = the most common wrong answer if it occurs more than once, else a random wrong answer
            (its first attempt); correct = the first correct attempt
    teacher prompt = ``template`` (problem, correct attempt, wrong attempt, the instructions)
    robust solution y ~ pi(. | teacher prompt) at temperature 0.4; kept only if the verifier says it is correct

then ``sft.steps`` steps of knowledge distillation over the kept rows, the teacher being the frozen model as
it was before the warm-up and the student the model (its LoRA adapters with ``model.lora``, as in the paper):

    L = lambda_KD T^2 KL( softmax(z_teacher / T) || softmax(z_student / T) ) + lambda_CE CE(y)

over y's tokens (and its end token), z_teacher the teacher's logits on [teacher prompt || y], z_student the
student's on [bare prompt || y], the KL summed over the vocabulary and averaged over the selected tokens
(the code's ``batchmean`` over flattened tokens). Defaults are the paper's: K 4, T 2, lambda_KD 1,
lambda_CE 0. rlvr's changes: the teacher's logits are recomputed each step from the frozen copy instead of
stored (nothing large on disk); correctness is the task's verifier rather than an exact string match; the
attempts sample with the rollout's top-p instead of top-k 50; the template drops the code's \\boxed{} wording
(a task keeps its own answer format). The curated rows are written to the run directory as ``ssb_data.jsonl``.

Caution: the teacher is the model reading its own attempts; a model that cannot (the demo's tiny model:
``benchmarks/ssb_warmup.py``) curates few rows and its distributions under the teacher prompt are worse
than the student's, so distilling them lowers accuracy. Check ``ssb_data.jsonl`` before long runs.
"""

from __future__ import annotations

import copy
import json
import random
import re
from collections import Counter
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Sequence

import torch
import torch.nn.functional as F

from rlvr.core.batch import build_batch
from rlvr.core.types import Completion, Example, GenerationRequest, SamplingParams
from rlvr.models.logprobs import forward_inputs
from rlvr.models.prompts import encode_example, rewrite_prompt
from rlvr.rollout.demos import question_text
from rlvr.sft.supervised import train_steps

__all__ = ["SSBRow", "final_answer", "select_pair", "curate", "kd_loss", "distill"]

_NUMBER = re.compile(r"-?\d+(?:\.\d+)?")


@dataclass(frozen=True)
class SSBRow:
    example: Example  # the problem (the student's prompt)
    teacher: Example  # the problem in the teacher's prompt
    solution_ids: tuple[int, ...]  # the robust solution (with its end token when it stopped)
    solution: str


def final_answer(text: str) -> str | None:
    """The content of the last balanced ``\\boxed{...}``, else the last number, else the last non-empty line."""
    last = None
    for m in re.finditer(r"\\boxed\{", text):
        i, depth = m.end(), 1
        while i < len(text) and depth:
            depth += {"{": 1, "}": -1}.get(text[i], 0)
            i += 1
        if depth == 0:
            last = text[m.end(): i - 1]
    if last is not None:
        return last.strip()
    nums = _NUMBER.findall(text)
    if nums:
        return nums[-1]
    lines = [x.strip() for x in text.splitlines() if x.strip()]
    return lines[-1] if lines else None


def select_pair(attempts: Sequence[tuple[str, bool]], rng: random.Random) -> tuple[str, str] | None:
    """``(correct attempt, wrong attempt)`` from ``(text, correct)`` attempts, or None without a mix."""
    right = [t for t, ok in attempts if ok]
    wrong = [(t, final_answer(t)) for t, ok in attempts if not ok]
    wrong = [(t, a) for t, a in wrong if a is not None]
    if not right or not wrong:
        return None
    counts = Counter(a for _, a in wrong)
    answer, n = counts.most_common(1)[0]
    if n <= 1:
        answer = rng.choice(list(counts))
    return right[0], next(t for t, a in wrong if a == answer)


def curate(engine, task, tokenizer, examples: Sequence[Example], cfg, max_new_tokens: int, seed: int,
           on_progress: Callable[[int, int], None] | None = None) -> list[SSBRow]:
    """The SSB rows of ``examples`` (attempts and robust solutions from ``engine``, judged by ``task``)."""
    rng = random.Random(seed)
    examples = list(examples)[: cfg.max_problems] if cfg.max_problems else list(examples)
    rows: list[SSBRow] = []
    chunk = 32
    for s in range(0, len(examples), chunk):
        part = examples[s: s + chunk]
        comps = engine.generate([GenerationRequest(ex, cfg.rollouts) for ex in part],
                                SamplingParams(cfg.temperature, max_new_tokens=max_new_tokens, seed=seed + s))
        texts = [[c.text for c in comps if c.group == i] for i in range(len(part))]
        scores = task.score_batch([ex for ex, ts in zip(part, texts) for _ in ts], [t for ts in texts for t in ts])
        it = iter(scores)
        asks = []
        for ex, ts in zip(part, texts):
            pair = select_pair([(t, next(it).correct) for t in ts], rng)
            if pair is not None:
                prompt = cfg.template.format(question=question_text(ex), correct=pair[0], incorrect=pair[1])
                asks.append((ex, rewrite_prompt(ex, lambda _text, p=prompt: p)))
        if asks:
            sols = engine.generate([GenerationRequest(t, 1) for _, t in asks],
                                   SamplingParams(cfg.teacher_temperature, max_new_tokens=max_new_tokens,
                                                  seed=seed + s + 1))
            ok = task.score_batch([ex for ex, _ in asks], [c.text for c in sols])
            for (ex, teacher), sol, sc in zip(asks, sols, ok):
                if sc.correct and len(sol.completion_ids):
                    rows.append(SSBRow(ex, teacher, tuple(sol.completion_ids), sol.text))
        if on_progress is not None:
            on_progress(min(s + chunk, len(examples)), len(examples))
    return rows


def kd_loss(student: torch.Tensor, teacher: torch.Tensor, mask: torch.Tensor, temperature: float) -> torch.Tensor:
    """``T^2 KL(softmax(teacher / T) || softmax(student / T))`` averaged over the tokens where ``mask`` is 1
    (logits ``[N, T, V]``)."""
    sel = mask.bool()
    t = temperature
    s_logp = F.log_softmax(student[sel].float() / t, dim=-1)
    t_logp = F.log_softmax(teacher[sel].float() / t, dim=-1)
    kl = (t_logp.exp() * (t_logp - s_logp)).sum(-1)
    return kl.sum() / max(int(sel.sum()), 1) * t * t


def _logits(model, batch) -> torch.Tensor:
    """``[N, T, V]`` logits at the positions that predict each completion token."""
    out = model(**forward_inputs(model, batch)).logits
    p, t = batch.prompt_len, batch.completion_mask.shape[1]
    return out[:, p - 1: p + t - 1]


def distill(model, tokenizer, rows: Sequence[SSBRow], cfg, steps: int, batch_size: int, lr: float,
            warmup_steps: int = 0, seed: int = 0, chat_template: bool = False, micro_batch_size: int = 64,
            on_step: Callable[[int, float], None] | None = None,
            stop: Callable[[], bool] | None = None, checkpoint: Any = None,
            teacher: torch.nn.Module | None = None) -> list[float]:
    """``steps`` KD steps of ``model`` toward a frozen copy of itself that reads the teacher prompts
    (``teacher``: that copy, made by a caller that resumes the distillation into weights it loaded since;
    ``checkpoint``: as in :func:`rlvr.sft.supervised.sft`)."""
    if steps == 0 or not rows:
        return []
    teacher = (teacher if teacher is not None else copy.deepcopy(model)).eval().requires_grad_(False)
    eos = [tokenizer.eos_token_id]

    def comp(ex: Example, r: SSBRow) -> Completion:
        ids = list(r.solution_ids)
        ids = ids if ids and ids[-1] == eos[0] else ids + eos
        prompt, vision = encode_example(tokenizer, ex, chat_template)
        return Completion(ex.id, prompt, ids, None, "stop", r.solution, vision=vision)

    student_rows = [comp(r.example, r) for r in rows]
    teacher_rows = [comp(r.teacher, r) for r in rows]
    device = next(model.parameters()).device

    def step_loss(picked: list[int]) -> float:
        n_tok = float(sum(len(student_rows[i]) for i in picked))
        total = 0.0
        for m in range(0, len(picked), micro_batch_size):
            idx = picked[m: m + micro_batch_size]
            sb = build_batch([student_rows[i] for i in idx], [0.0] * len(idx), tokenizer.pad_token_id).to(device)
            tb = build_batch([teacher_rows[i] for i in idx], [0.0] * len(idx), tokenizer.pad_token_id).to(device)
            with torch.no_grad():
                zt = _logits(teacher, tb)
            zs = _logits(model, sb)
            mask = sb.completion_mask
            share = float(mask.sum()) / n_tok  # this micro-batch's share of the step's tokens
            loss = cfg.kd_weight * kd_loss(zs, zt, mask, cfg.kd_temperature) * share
            if cfg.ce_weight:
                logp = F.log_softmax(zs.float(), -1).gather(-1, sb.completion_ids[..., None]).squeeze(-1)
                loss = loss - cfg.ce_weight * (logp * mask).sum() / n_tok
            loss.backward()
            total += float(loss.detach())
        return total

    return train_steps(model, len(rows), steps, batch_size, lr, warmup_steps, seed, step_loss, on_step=on_step,
                       stop=stop, keeper=checkpoint.keeper(model) if checkpoint is not None else None)


def write_rows(rows: Sequence[SSBRow], path: Path) -> None:
    """The curated rows as JSONL (id, question, teacher prompt, solution)."""
    with open(path, "w", encoding="utf-8") as f:
        for r in rows:
            f.write(json.dumps({"id": r.example.id, "question": question_text(r.example),
                                "teacher_prompt": question_text(r.teacher), "solution": r.solution}) + "\n")

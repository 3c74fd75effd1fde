"""PRISM's discriminator (``algorithm.discriminator``): perception and reasoning experts trained beside the
policy to tell demonstrations from the policy's own responses.

Wang et al. 2026, PRISM, arXiv:2604.28123 (code ``XIAO4579/PRISM``: ``verl/workers/critic/dp_critic.py``'s
``mm_gad`` mode and ``core_algos.compute_discriminator_loss``). The alignment stage between SFT and RLVR is a
black-box, response-level adversarial game: the discriminator never sees teacher logits, only demonstrations
(responses) and the policy's responses to the same prompts; the policy is rewarded by its scores (the
``prism`` advantage transform, :mod:`rlvr.algorithms.transforms.prism`).

**Spans.** A response is well-formed when it matches ``format`` in full (the reference's
``<caption>...</caption><think>...</think><answer>...</answer>``). Its *perception span* is the response up to
and including ``</perception_tag>`` (the caption: what the model says it sees), its *reasoning span* the rest
(think and answer). Both spans are cut from the response's *text* and tokenised on their own, for the
policy's responses exactly as for the demonstrations: the discriminator judges text, never how it was
tokenised or that a sampled response ends in EOS (a cue that, left in, let it tell every sampled response from
every demonstration without reading them, and gave the policy no signal).

**Scores.** The perception expert scores prompt + perception span, the reasoning expert prompt + reasoning
span (the caption is not in the reasoning expert's input, as in the reference; ``reasoning_reads_perception``
puts it there, before the reasoning, so the expert can see an answer that disagrees with the caption), each from
the hidden state of the span's last token: ``D_e(x, s) = head_e(h_last)``, clamped to ``+-score_clip``. A malformed response
scores 0 on both (and ``disc_format`` 0).

**Loss**, per step on the rows of the batch it scored that are well-formed and have a well-formed
demonstration y* (Bradley-Terry, the reference's pairwise loss; ``s`` student, ``t`` teacher scores):

    L = sum_e mean_i [ -log sigmoid(D_e(x_i, y*_e) - D_e(x_i, y_i,e)) ]  +  score_reg * mean(s^2 and t^2)

one AdamW step (lr ``lr``; gradient clipped at ``max_grad_norm``) after the policy's update.

RECONSTRUCTED, stated: the reference's discriminator is a sparse-upcycled Mixture-of-Experts VLM (4 FFN experts,
top-2 routing, a token-classification value head) warmed up on teacher/student pairs before alignment; here
it is a copy of the policy's trunk at the start of RL (the post-SFT model, as the critic is) with two
*dedicated* experts, one small MLP head per span type, the span type acting as the router. No warm-up stage
(the reference's ``critic_warmup`` is 0 in the alignment script too).

Checkpoints hold ``discriminator.safetensors``, ``discriminator_optimizer.safetensors`` and
``discriminator.json``. Under ``torchrun`` (DDP) every rank holds the whole discriminator: each scores and
trains on the rows of its own groups, the loss normalised by the global pair count, and the gradients are
summed over ranks before the same AdamW step everywhere; with FSDP too, as a whole replica beside the sharded
policy (as the critic: built from a copy of the policy taken before sharding). With a
LoRA policy the trunk copy is the merged weights, frozen, with adapters of its own (as the critic's). Metrics
``discriminator/{loss, acc, perception_acc, reasoning_acc, pairs, student_mean, teacher_mean, grad_norm}``; the
accuracies count the pairs whose spans differ (a response that repeats its demonstration's span cannot be told
from it; absent when every pair repeats it), ``{perception,reasoning}_differ`` is the fraction of such pairs.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any, Sequence

import torch

from rlvr.algorithms.extra_producers import ExtraContext, produces
from rlvr.core.batch import build_batch
from rlvr.core.jsonl import iter_jsonl
from rlvr.core.optim_state import load_trained, save_trained, trained_meta
from rlvr.core.types import Completion, Example
from rlvr.models.logprobs import trunk_hidden
from rlvr.models.lora import side_trunk
from rlvr.distributed.world import World

__all__ = ["Discriminator", "build_discriminator", "split_text", "pairwise_loss", "read_demos"]

EXPERTS = ("perception", "reasoning")


def split_text(text: str, fmt: re.Pattern | None, tag: str | None) -> tuple[str, str] | None:
    """``(perception span, reasoning span)`` of a response's text, or None when it is malformed (no full match
    of ``fmt``, no closing tag, or an empty reasoning span). Without a tag the perception span is empty."""
    if fmt is not None and not fmt.fullmatch(text):
        return None
    if tag is None:
        return ("", text) if text.strip() else None
    close = f"</{tag}>"
    at = text.find(close)
    if at < 0:
        return None
    cut = at + len(close)
    return (text[:cut], text[cut:]) if text[cut:].strip() else None


def pairwise_loss(teacher: torch.Tensor, student: torch.Tensor) -> torch.Tensor:
    """``[n]`` Bradley-Terry loss per pair: -log sigmoid(t - s)."""
    return -torch.nn.functional.logsigmoid(teacher - student)


def read_demos(path: str | Path) -> dict[str, str]:
    """``{example id: demonstration}`` from a JSONL of ``{"id": ..., "response": ...}`` lines; a malformed line
    raises naming it (a demonstration file is small and hand-made, so a bad line is a mistake)."""
    out: dict[str, str] = {}
    for lineno, rec, err in iter_jsonl(path):
        if err is None and not (isinstance(rec.get("id"), (str, int)) and isinstance(rec.get("response"), str)):
            err = 'needs "id" (string) and "response" (string)'
        if err is not None:
            raise ValueError(f"{path}:{lineno}: {err}")
        out[str(rec["id"])] = rec["response"]
    if not out:
        raise ValueError(f"{path}: no demonstrations")
    return out


def _row(prompt: Completion, span: list[int]) -> Completion:
    return Completion(prompt.example_id, list(prompt.prompt_ids), span, None, "stop", "", vision=prompt.vision)


class Discriminator:
    """Perception and reasoning experts on a copy of ``model``'s trunk."""

    def __init__(self, model, tokenizer, cfg, device: torch.device, micro_batch_size: int,
                 demos: dict[str, str] | None = None, world: Any = None):
        self.cfg, self.tok, self.micro, self.demos = cfg, tokenizer, micro_batch_size, demos
        self.world = world if world is not None else World()
        self.fmt = re.compile(cfg.format, re.DOTALL) if cfg.format is not None else None
        self.experts = EXPERTS if cfg.perception_tag is not None else EXPERTS[1:]
        trunk = side_trunk(model)  # with a LoRA policy: merged weights, frozen, adapters of its own
        hidden = model.get_output_embeddings().in_features
        heads = {}
        for e in self.experts:
            head = torch.nn.Sequential(torch.nn.Linear(hidden, hidden), torch.nn.GELU(), torch.nn.Linear(hidden, 1))
            with torch.no_grad():
                for lin in (head[0], head[2]):
                    lin.weight.normal_(0.0, cfg.init_std) if cfg.init_std > 0 else lin.weight.zero_()
                    lin.bias.zero_()
            heads[e] = head
        dtype = next(trunk.parameters()).dtype
        self.net = torch.nn.ModuleDict({"trunk": trunk, "heads": torch.nn.ModuleDict(heads).to(dtype)}).to(device)
        self.optimizer = torch.optim.AdamW([q for q in self.net.parameters() if q.requires_grad], lr=cfg.lr, weight_decay=0.0)
        self._memo: list[tuple[Completion, Example, dict | None]] | None = None
        self._demo_spans: dict[str, dict[str, list[int]] | None] = {}  # example id -> its demonstration's spans

    # ---- scoring -------------------------------------------------------------------------------------
    def _scores(self, expert: str, rows: list[Completion]) -> torch.Tensor:
        """``[n]`` expert scores of prompt + span rows (with gradient when enabled), float32 on the device."""
        out = []
        for s in range(0, len(rows), self.micro):
            part = rows[s: s + self.micro]
            mb = build_batch(part, [0.0] * len(part), self.tok.pad_token_id).to(next(self.net.parameters()).device)
            h = trunk_hidden(self.net["trunk"], mb)
            last = mb.prompt_len + mb.lengths.to(h.device) - 1
            v = self.net["heads"][expert](h[torch.arange(len(part), device=h.device), last]).squeeze(-1).float()
            out.append(v.clamp(-self.cfg.score_clip, self.cfg.score_clip) if self.cfg.score_clip else v)
        return torch.cat(out)

    def spans(self, text: str | None) -> dict[str, list[int]] | None:
        """The token ids of a response's perception and reasoning spans (None when it is malformed)."""
        parts = None if text is None else split_text(text, self.fmt, self.cfg.perception_tag)
        if parts is None:
            return None
        reasoning = parts[0] + parts[1] if self.cfg.reasoning_reads_perception else parts[1]
        enc = [self.tok(x, add_special_tokens=False)["input_ids"] for x in (parts[0], reasoning)]
        return {"perception": enc[0], "reasoning": enc[1]} if enc[1] else None

    def _teacher_spans(self, example: Example) -> dict[str, list[int]] | None:
        """The example's demonstration's spans, tokenised once per example."""
        if example.id not in self._demo_spans:
            self._demo_spans[example.id] = self.spans(self.demos.get(example.id) if self.demos is not None
                                                      else example.sft_target)
        return self._demo_spans[example.id]

    @torch.no_grad()
    def extras(self, completions: Sequence[Completion], examples: Sequence[Example]) -> dict[str, torch.Tensor]:
        """The extras ``disc_perception``, ``disc_reasoning``, ``disc_format`` ``[N]`` (scores 0 where malformed);
        the rows are kept for :meth:`update`."""
        parts = [self.spans(c.text) for c in completions]  # each response's spans (None: malformed)
        valid = [i for i, k in enumerate(parts) if k is not None]
        n = len(completions)
        out = {"disc_perception": torch.zeros(n), "disc_reasoning": torch.zeros(n),
               "disc_format": torch.tensor([float(k is not None) for k in parts])}
        was = self.net.training
        self.net.eval()
        try:
            for e in self.experts:
                # each distinct (prompt, images, span) is scored once: identical responses of a group get identical
                # scores, so their group spread is exactly 0, not float noise that GN would blow up to +-1
                spans = {i: parts[i][e] for i in valid}
                keys = {i: (tuple(completions[i].prompt_ids), id(completions[i].vision), tuple(spans[i]))
                        for i in valid}
                reps: dict[tuple, int] = {}
                for i in valid:
                    reps.setdefault(keys[i], i)
                if reps:
                    scores = self._scores(e, [_row(completions[i], spans[i]) for i in reps.values()]).cpu()
                    slot = {k: j for j, k in enumerate(reps)}
                    out[f"disc_{e}"][valid] = scores[[slot[keys[i]] for i in valid]]
        finally:
            self.net.train(was)
        self._memo = list(zip(completions, examples, parts))
        return out

    # ---- training ------------------------------------------------------------------------------------
    def update(self, batch: Any = None, step: int = 0) -> dict[str, float]:
        """One optimizer step on the pairs of the rows last scored (after the policy's update); {} when
        nothing was scored this step (the rows come from :meth:`extras`, not from ``batch``)."""
        memo, self._memo = self._memo, None
        pairs = []
        for comp, ex, student in memo or ():
            teacher = self._teacher_spans(ex) if student is not None else None
            if teacher is not None:
                pairs.append((comp, student, teacher))
        # (several ranks: each holds the pairs of its own groups; every rank takes part in the sums)
        scored, n = self.world.sum([float(memo is not None), float(len(pairs))]) if self.world.distributed else (
            float(memo is not None), float(len(pairs)))
        if not scored:
            return {}
        if not n:
            return {"discriminator/pairs": 0.0}
        self.net.train()
        self.optimizer.zero_grad(set_to_none=True)
        n, total, sums = int(n), 0.0, {f"{e}_{k}": 0.0 for e in self.experts for k in ("acc", "differ")}
        sums.update(student=0.0, teacher=0.0)
        n_scores = 2 * len(self.experts) * n
        for s in range(0, len(pairs), self.micro):
            part = pairs[s: s + self.micro]
            loss = torch.zeros((), device=next(self.net.parameters()).device)
            for e in self.experts:
                st = self._scores(e, [_row(c, spans[e]) for c, spans, _ in part])
                te = self._scores(e, [_row(c, t[e]) for c, _, t in part])
                loss = loss + pairwise_loss(te, st).sum() / n
                loss = loss + self.cfg.score_reg * ((st ** 2).sum() + (te ** 2).sum()) / n_scores
                # a response that repeats the demonstration's span cannot be told from it (its pair's gradient is
                # exactly 0): accuracy counts the pairs whose spans differ
                differ = torch.tensor([spans[e] != t[e] for _, spans, t in part], device=te.device)
                sums[f"{e}_acc"] += float(((te > st) & differ).float().sum())
                sums[f"{e}_differ"] += float(differ.float().sum())
                sums["student"] += float(st.detach().sum())
                sums["teacher"] += float(te.detach().sum())
            loss.backward()
            total += float(loss.detach())
        if self.world.distributed:
            self.world.sum_grads_([q for q in self.net.parameters() if q.requires_grad])
            keys = ["student", "teacher", *(f"{e}_{k}" for e in self.experts for k in ("acc", "differ"))]
            total, *vals = self.world.sum([total, *(sums[k] for k in keys)])
            sums = dict(zip(keys, vals))
        params = [p for p in self.net.parameters() if p.grad is not None]
        norm = (torch.nn.utils.clip_grad_norm_(params, self.cfg.max_grad_norm) if self.cfg.max_grad_norm
                else torch.stack([p.grad.norm() for p in params]).norm() if params else torch.tensor(0.0))
        self.optimizer.step()
        m = {"discriminator/loss": total, "discriminator/pairs": float(n), "discriminator/grad_norm": float(norm),
             "discriminator/student_mean": sums["student"] / (n * len(self.experts)),
             "discriminator/teacher_mean": sums["teacher"] / (n * len(self.experts))}
        for e in self.experts:
            m[f"discriminator/{e}_differ"] = sums[f"{e}_differ"] / n
            if sums[f"{e}_differ"]:
                m[f"discriminator/{e}_acc"] = sums[f"{e}_acc"] / sums[f"{e}_differ"]
        differ = sum(sums[f"{e}_differ"] for e in self.experts)
        if differ:
            m["discriminator/acc"] = sum(sums[f"{e}_acc"] for e in self.experts) / differ
        return m

    # ---- checkpoints ---------------------------------------------------------------------------------
    def save(self, folder: str | Path) -> None:
        save_trained(folder, "discriminator", self.net, self.optimizer, experts=list(self.experts))

    def load(self, folder: str | Path) -> None:
        meta = trained_meta(folder, "discriminator")
        if meta is None:
            raise ValueError(f"{folder} holds no discriminator (discriminator.safetensors): it was written by a run "
                             "without algorithm.discriminator")
        if tuple(meta["experts"]) != self.experts:
            raise ValueError(f"{folder}: the discriminator has experts {meta['experts']}, the config asks for "
                             f"{list(self.experts)}")
        load_trained(folder, "discriminator", self.net, self.optimizer, meta)
        self._memo = None




_READS = frozenset({"disc_perception", "disc_reasoning", "disc_format"})


def build_discriminator(cfg, model, tokenizer, task, device: torch.device, world: Any = None,
                        needs: frozenset[str] = frozenset()) -> Discriminator | None:
    """The run's discriminator, or None without ``algorithm.discriminator.enabled``. Checks up front that some
    component reads it (``needs``: the extras the run's components read) and that the demonstrations of the
    train split include well-formed ones."""
    d = cfg.algorithm.discriminator
    if not d.enabled:
        if _READS & needs:
            raise ValueError("the prism advantage transform reads the discriminator's scores; set "
                             "algorithm.discriminator.enabled=true")
        return None
    if not _READS & needs:
        raise ValueError("algorithm.discriminator is enabled but no component reads its scores (the prism "
                         "advantage transform does)")
    demos = read_demos(d.demos) if d.demos is not None else None
    fmt = re.compile(d.format, re.DOTALL) if d.format is not None else None
    sample = task.examples("train")[:200]
    texts = [demos.get(ex.id) if demos is not None else ex.sft_target for ex in sample]
    if not any(t is not None and split_text(t, fmt, d.perception_tag) for t in texts):
        where = d.demos if d.demos is not None else "the train examples' reference targets"
        raise ValueError(f"none of the first {len(sample)} train examples has a well-formed demonstration in {where} "
                         f"(algorithm.discriminator.format {d.format!r}, perception_tag {d.perception_tag!r}); "
                         "the discriminator would have nothing to learn from")
    return Discriminator(model, tokenizer, d, device, cfg.train.micro_batch_size, demos, world)


@produces("disc_perception", "disc_reasoning", "disc_format")
def _scores(ctx: ExtraContext, keys: frozenset[str]) -> dict[str, torch.Tensor]:
    """The experts' scores of each response's spans: one no-grad forward of the discriminator per expert."""
    d = ctx.learner(Discriminator, "a component reads the discriminator's scores, but the run has none "
                                   "(algorithm.discriminator.enabled)")
    return d.extras(ctx.completions, ctx.examples)

"""Context rollouts (``rollout.contexts``): each group sampled under several strategy contexts, NudgeRL's
rollouts.

Kim et al. 2026, "Nudging Beyond the Comfort Zone: Efficient Strategy-Guided Exploration for RLVR",
arXiv:2605.15726; code ``tally0818/NudgeRL`` (``NudgeRLTrainer._get_rollout_counts``; EXACT from code;
docs/methods.md, `rollout.contexts`). For a request of ``n = num_contexts x per_context`` completions, the
example's first ``num_contexts`` contexts (strategy hints: ``Example.meta[source]``, a list of strings; else, with
``model``, hints a model writes for it once, :class:`rlvr.rollout.annotations.ModelAnnotations`; else
``fallback``) each get ``per_context`` draws, and each draw moves to the plain ("dropout") group with probability
``p_dropout``:

    d_h ~ Binomial(per_context, p_dropout)          group sizes: [sum_h d_h (plain), per_context - d_h, ...]

A context's completions are sampled from ``template`` (the prompt with its exploration condition) and keep
that prompt's token ids: the policy gradient trains them under the context (x1). Each is a
:class:`ContextCompletion` carrying ``context`` (1, 2, ...; the plain ones are 0, ordinary completions) and
the plain prompt's ids, over which the ``context_distill`` loss term raises their log-probability (x0). The
extra ``context_index`` gives each row's context to the ``nudge`` advantage. An example with fewer contexts
samples the missing contexts' draws plainly. The draws are seeded by (the step's sampling seed, example id),
so a resumed run draws what the uninterrupted one did. Evaluation samples plainly (the wrapper is for
training). Metric ``engine/context_frac``: completions under a context / all.

With ``peers`` (MEML-GRPO's mutual learning, :mod:`rlvr.algorithms.loss_terms.mutual_learning`) a context
completion carries a peer context's prompt instead of the plain one: the k-th completion of context c is
read under the (k mod (M' - 1))-th of the request's other contexts (M' of them), so the completions of one
expert are spread over all the others.

With ``hard_examples`` (MEML-GRPO's hard-example buffer, RECONSTRUCTED: the paper's summary confirms the
buffer, not its size or schedule) the wrapper watches each step's outcomes (``observe``): a question on which
some context solved it (a correct completion) and another context with draws did not is stored as its plain
prompt with the first correct completion of its most accurate context, at most ``hard_examples`` a step;
``sft_rows`` hands them to the interleaved SFT phases (``sft.interleave_source: rollouts``). Rows gathered
after a phase and before a checkpoint are not saved in it.
"""

from __future__ import annotations

import random
from dataclasses import dataclass, replace
from typing import Any, Sequence

from pydantic import BaseModel, ConfigDict, Field

from rlvr.algorithms.extra_producers import SIDE_ROWS, ExtraContext, SideContext, produces
from rlvr.core.batch import RolloutBatch, SideRows, build_batch
from rlvr.core.types import Completion, Example, GenerationRequest, SamplingParams
from rlvr.lazy import torch
from rlvr.models.prompts import encode_prompt, rewrite_prompt
from rlvr.rollout.annotations import ModelAnnotations, ModelSettings
from rlvr.rollout.wrappers import ENGINE_WRAPPERS, as_subclass, generate_parts

__all__ = ["ContextsConfig", "ContextCompletion", "ContextsWrapper", "context_rows", "context_examples", "draw_counts",
           "build_contexts", "with_plain_context", "plain_context_of"]

TEMPLATE = ("{prompt}\n\nExploration condition: use the following strategy as your primary approach, even if "
            "another seems more natural.\nStrategy: {context}\n")


class ContextsConfig(BaseModel):
    """NudgeRL's strategy-context rollouts (rlvr.rollout.contexts); off while ``num_contexts`` is 0."""

    model_config = ConfigDict(extra="forbid", frozen=True)
    num_contexts: int = Field(0, ge=0, description="contexts per group (NudgeRL num_hints: 2; 0: off)")
    per_context: int = Field(4, gt=0, description="draws per context (rollouts_per_hint); rollout.group_size must "
                                                  "be num_contexts x per_context")
    p_dropout: float = Field(0.5, ge=0.0, le=1.0, description="chance a draw is sampled without its context")
    source: str = Field("hints", description="Example.meta key holding the example's contexts (a list of strings)")
    fallback: list[str] = Field(default_factory=list, description="contexts for examples without their own")
    template: str = Field(TEMPLATE, description="the prompt under a context ({prompt}, {context})")
    peers: bool = Field(False, description="context completions carry a peer context's prompt, not the plain one "
                                           "(MEML-GRPO's mutual learning)")
    hard_examples: int = Field(0, ge=0, description="questions some contexts solved and others not, stored a step "
                                                    "for the interleaved SFT phases (MEML-GRPO's buffer; 0: off)")
    model: ModelSettings = Field(None, description="a model that writes the hints of examples without their "
                                         "own, once each (params of rlvr.models.ask.ModelParams: base_url and model, "
                                         "or backend hf and path); null: the fallback")
    model_template: str | None = Field(None, description="the model's request ({prompt}, {answer}, {n}; default: "
                                                         "rlvr.rollout.annotations.HINTS_TEMPLATE)")


@dataclass
class ContextCompletion(Completion):
    """A completion sampled under a context; ``prompt_ids`` are the context's prompt, ``plain_prompt_ids``
    the example's own."""

    context: int = 0
    plain_prompt_ids: list[int] | None = None


def draw_counts(num_contexts: int, per_context: int, p_dropout: float, rng: random.Random) -> list[int]:
    """``[plain, context 1, ..., context M]`` completions of one request."""
    dropped = [sum(rng.random() < p_dropout for _ in range(per_context)) for _ in range(num_contexts)]
    return [sum(dropped)] + [per_context - d for d in dropped]


def _own(ex: Example, cfg: ContextsConfig) -> list[Any]:
    own = ex.meta.get(cfg.source) if isinstance(ex.meta, dict) else None
    return list(own) if isinstance(own, (list, tuple)) and own else []


def _contexts(ex: Example, cfg: ContextsConfig, written: ModelAnnotations | None = None) -> list[str]:
    """The example's own contexts, else those a model wrote for it, else the fallback."""
    items = _own(ex, cfg) or (written.get(ex.id) if written is not None else None) or list(cfg.fallback)
    return [str(c) for c in items[: cfg.num_contexts]]


def context_examples(ex: Example, cfg: ContextsConfig) -> list[Example]:
    """``ex`` under each of its contexts (``template``), ids suffixed ``@c``: MEML-GRPO's expert fine-tuning data
    (``sft.under_contexts``), the reference target kept."""
    return [replace(rewrite_prompt(ex, lambda text, h=h: cfg.template.format(prompt=text, context=h)), id=f"{ex.id}@{c}")
            for c, h in enumerate(_contexts(ex, cfg), start=1)]


def context_rows(completions: Sequence[Completion], mask: torch.Tensor) -> torch.Tensor:
    """[N, T] each row's context (0: plain) on its completion tokens (rows in the order of ``completions``)."""
    ids = torch.tensor([float(getattr(c, "context", 0)) for c in completions], dtype=mask.dtype)
    return ids[:, None].to(mask.device) * (mask > 0).to(mask.dtype)


class ContextsWrapper:
    """Wraps an engine; splits each request's completions over the example's contexts."""

    name = "contexts"
    forwards_trainer_model = False  # it rewrites requests; the engine underneath generates

    def __init__(self, inner: Any, tokenizer, cfg: ContextsConfig, chat_template: bool = False):
        self.inner, self.tokenizer, self.cfg, self.chat_template = inner, tokenizer, cfg, chat_template
        self._under, self._total = 0, 0
        self._plain: dict[str, list[int]] = {}  # example id -> its plain prompt ids (this step's requests)
        self._rows: list[Completion] = []  # hard examples since the last sft_rows()
        self.written = (ModelAnnotations("hints", cfg.model, cfg.num_contexts, cfg.model_template)
                        if cfg.model is not None else None)  # hints a model writes for examples without their own

    def sync_weights(self) -> None:
        self.inner.sync_weights()

    def generate(self, requests: Sequence[GenerationRequest], sampling: SamplingParams) -> list[Completion]:
        cfg = self.cfg
        if self.written is not None:  # one call for this step's examples that have no hints yet
            self.written.ensure([r.example for r in requests if not _own(r.example, cfg)])
        parts = []  # (request index, context, sub-request)
        for i, req in enumerate(requests):
            contexts = _contexts(req.example, cfg, self.written)
            rng = random.Random(f"{sampling.seed}:{req.example.id}:{i}")
            counts = draw_counts(cfg.num_contexts, cfg.per_context, cfg.p_dropout, rng)
            counts[0] += sum(counts[1 + len(contexts):])  # contexts the example lacks: sampled plainly
            for c, n in enumerate(counts[: 1 + len(contexts)]):
                if n > 0:  # a chat prompt: the condition joins its last message
                    ex = req.example if c == 0 else rewrite_prompt(
                        req.example, lambda text, h=contexts[c - 1]: cfg.template.format(prompt=text, context=h))
                    parts.append((i, c, replace(req, example=ex, n=n)))
        plain_ids = [encode_prompt(self.tokenizer, r.example.prompt, self.chat_template) for r in requests]
        self._plain = {r.example.id: ids for r, ids in zip(requests, plain_ids)}
        peer_ids: dict[int, dict[int, list[int]]] = {}  # each request's context prompts, encoded once
        if cfg.peers:
            for i, c, req in parts:
                if c:
                    peer_ids.setdefault(i, {})[c] = encode_prompt(self.tokenizer, req.example.prompt,
                                                                  self.chat_template)
        seen: dict[tuple[int, int], int] = {}
        out: list[Completion] = []
        for comp, c in generate_parts(self.inner, parts, sampling):
            if not c:
                out.append(comp)
                continue
            ids = plain_ids[comp.group]
            if cfg.peers:
                others = sorted(k for k in peer_ids[comp.group] if k != c)
                k = seen[comp.group, c] = seen.get((comp.group, c), -1) + 1
                ids = peer_ids[comp.group][others[k % len(others)]] if others else ids
            out.append(as_subclass(comp, ContextCompletion, context=c, plain_prompt_ids=list(ids)))
        self._under += sum(getattr(c, "context", 0) > 0 for c in out)
        self._total += len(out)
        return out

    def observe(self, completions: Sequence[Completion], scores: Sequence[Any]) -> None:
        """Store this step's hard examples (``hard_examples``; see the module docstring)."""
        if not self.cfg.hard_examples:
            return
        by: dict[str, dict[int, list[tuple[Completion, bool]]]] = {}
        for comp, sc in zip(completions, scores):
            by.setdefault(comp.example_id, {}).setdefault(getattr(comp, "context", 0), []).append(
                (comp, bool(getattr(sc, "correct", False))))
        kept = 0
        for ex_id, per in by.items():
            experts = {c: rows for c, rows in per.items() if c > 0}
            solved = {c for c, rows in experts.items() if any(ok for _, ok in rows)}
            if not solved or len(solved) == len(experts) or ex_id not in self._plain:
                continue
            best = max(sorted(solved), key=lambda c: sum(ok for _, ok in experts[c]) / len(experts[c]))
            comp = next(c for c, ok in experts[best] if ok)
            self._rows.append(Completion(ex_id, list(self._plain[ex_id]), list(comp.completion_ids), None, "stop",
                                         comp.text, loss_mask=comp.loss_mask, segments=comp.segments))
            kept += 1
            if kept >= self.cfg.hard_examples:
                break

    def sft_rows(self) -> list[Completion]:
        """The hard examples stored since the last call (MEML-GRPO's buffer)."""
        rows, self._rows = self._rows, []
        return rows

    def metrics(self) -> dict[str, float]:
        out = {"context_frac": self._under / self._total} if self._total else {}
        self._under, self._total = 0, 0
        return {**out, **(self.written.metrics() if self.written is not None else {})}

    def state_dict(self) -> dict[str, Any]:
        return {"hints": self.written.state_dict()} if self.written is not None else {}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        if self.written is not None and "hints" in state:
            self.written.load_state_dict(state["hints"])


@ENGINE_WRAPPERS.register("contexts", order=250)
def build_contexts(engine: Any, model, tokenizer, rollout_cfg, chat_template: bool = False) -> ContextsWrapper | None:
    """NudgeRL's strategy contexts for ``rollout.contexts.num_contexts`` > 0 (outermost)."""
    c = rollout_cfg.contexts
    return ContextsWrapper(engine, tokenizer, c, chat_template) if c.num_contexts > 0 else None


@produces("context_index")
def _context_index(ctx: ExtraContext, keys: frozenset[str]) -> dict[str, torch.Tensor]:
    """Each row's strategy context, set by this wrapper (no model pass)."""
    return {"context_index": context_rows(ctx.completions, ctx.batch.completion_mask)}


def with_plain_context(batch: RolloutBatch, completions: Sequence[Completion], pad_id: int) -> RolloutBatch:
    """``batch`` with the side rows ``context`` when some completion was sampled under a context (it has
    ``plain_prompt_ids``): the same completions after each one's plain prompt, row for row; else unchanged."""
    if not any(getattr(c, "plain_prompt_ids", None) is not None for c in completions):
        return batch
    plain = [replace(c, prompt_ids=list(c.plain_prompt_ids)) if getattr(c, "plain_prompt_ids", None) is not None
             else c for c in completions]
    rows = build_batch(plain, batch.rewards.tolist(), pad_id).to(batch.input_ids.device)
    return replace(batch, side=(*batch.side, SideRows("context", "context_logp", rows)))


def plain_context_of(batch: RolloutBatch) -> RolloutBatch | None:
    """The rows of :func:`with_plain_context` on ``batch`` (None when it carries none)."""
    return next((sd.rows for sd in batch.side if sd.trait == "context_logp"), None)


@SIDE_ROWS.register("context_logp")
def _plain_context(ctx: SideContext, batch: RolloutBatch) -> RolloutBatch:
    """The batch's completions under their plain prompts, for loss terms that score them there."""
    return with_plain_context(batch, ctx.completions, ctx.tokenizer.pad_token_id)

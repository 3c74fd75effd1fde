"""Guided rollouts: a fraction of each group is generated from the prompt plus a privileged hint.

For OC-GRPO (objective ``oc_grpo``; docs/methods.md, `rollout.guidance`): a wrapper around any engine that, for
each request of n completions, samples ``k = floor(fraction * n + 1/2)`` of them from the prompt with
``rollout.guidance.hint`` appended (``{answer}``: the gold answer, ``{target}``: the reference solution) and the
rest from the plain prompt, in one call to the wrapped engine. Every returned completion carries the *unguided*
prompt's token ids, so the batch trains the hint-free policy, while a guided completion keeps the engine's
behaviour log-probs, taken under the guided context, and is a :class:`GuidedCompletion` (its ``guided`` extra is
1). The hint goes at the end of the prompt text (inside the user turn when a chat template applies; appended to the
last message of a chat prompt).

With ``demos`` > 0 (ICPO, :mod:`rlvr.rollout.demos`), a guided prompt also opens with that many
in-context demonstrations drawn from a pool, and its question is put in ``question_format``; the hint, if
any, still follows. With an empty hint and no demos the wrapped engine sees exactly the rows it would have
seen unwrapped, in the same order, so the completions are identical. Metrics (``engine/guided_frac``):
guided completions / all, since the last report.
"""

from __future__ import annotations

import random
from dataclasses import dataclass, replace
from typing import Any, Sequence

from pydantic import BaseModel, ConfigDict, Field

from rlvr.core.paths import LocalPathStr
from rlvr.algorithms.extra_producers import ExtraContext, produces
from rlvr.core.types import Completion, Example, GenerationRequest, SamplingParams
from rlvr.lazy import torch
from rlvr.models.prompts import encode_prompt, rewrite_prompt
from rlvr.rollout.demos import DemoPool, icl_example
from rlvr.rollout.wrappers import ENGINE_WRAPPERS, as_subclass, generate_parts

__all__ = ["GuidanceConfig", "GuidedCompletion", "GuidanceWrapper", "guided_rows", "guided_count", "guided_example",
           "build_guidance"]


class GuidanceConfig(BaseModel):
    """Guided rollouts for OC-GRPO (rlvr.rollout.guidance): a fraction of each group sees prompt + hint."""

    model_config = ConfigDict(extra="forbid", frozen=True)
    fraction: float = Field(0.0, ge=0.0, le=1.0, description="share of each group generated with the hint "
                                                             "(round(fraction x n) completions; 0: off)")
    hint: str = Field(" {answer}\n", description="text appended to the prompt of guided rollouts ({answer}: "
                                                  "the gold answer, {target}: the reference solution)")
    demos: int = Field(0, ge=0, description="in-context demonstrations opening each guided prompt (ICPO: 1; 0: none)")
    demo_path: LocalPathStr | None = Field(None, description="JSONL of demonstrations (prompt, target/solution/answer); "
                                                    "default: the training examples seen so far")
    pool_size: int = Field(75000, gt=0, description="most seen examples kept as demonstrations (oldest dropped)")
    demo_format: str = Field("Question: {prompt}\nAnswer: {target}", description="one demonstration ({prompt}, "
                                                                                   "{target})")
    demo_separator: str = Field("\n\n\n", description="between demonstrations and before the question")
    question_format: str = Field("Question: {prompt}\nAnswer:", description="the question after the "
                                                                             "demonstrations ({prompt})")


@dataclass
class GuidedCompletion(Completion):
    """A completion sampled under prompt + hint; ``prompt_ids`` are the unguided prompt's."""

    hint: str = ""


def guided_count(n: int, fraction: float) -> int:
    """Completions of a request of ``n`` generated with the hint."""
    return min(n, int(fraction * n + 0.5))


def guided_example(ex: Example, hint_template: str) -> Example:
    """``ex`` with the formatted hint appended to its prompt text (or to its last chat message)."""
    hint = hint_template.format(answer=ex.answer, target=ex.sft_target)
    return rewrite_prompt(ex, lambda text: text + hint)


def guided_rows(completions: Sequence[Completion], mask: torch.Tensor) -> torch.Tensor:
    """[N, T] 1.0 on the completion tokens of guided rows (rows in the order of ``completions``)."""
    flags = torch.tensor([isinstance(c, GuidedCompletion) for c in completions], dtype=mask.dtype)
    return flags[:, None].to(mask.device) * (mask > 0).to(mask.dtype)


class GuidanceWrapper:
    """Wraps an engine; ``fraction`` of each request's completions see ``prompt + hint``."""

    name = "guidance"
    forwards_trainer_model = False  # it rewrites requests; the engine underneath generates

    def __init__(self, inner: Any, tokenizer, fraction: float, hint: str, chat_template: bool = False,
                 cfg: GuidanceConfig | None = None):
        self.inner, self.tokenizer = inner, tokenizer
        self.fraction, self.hint, self.chat_template = fraction, hint, chat_template
        self.cfg = cfg or GuidanceConfig(fraction=fraction, hint=hint)
        self.pool = DemoPool(self.cfg.demo_path, self.cfg.pool_size) if self.cfg.demos else None
        self._guided, self._total = 0, 0

    def _guided_example(self, i: int, ex: Example, seed: int | None) -> Example:
        if self.pool is not None:
            c = self.cfg
            shots = self.pool.draw(c.demos, ex.id, random.Random(f"{seed}:{ex.id}:{i}"))
            ex = icl_example(ex, shots, c.demo_format, c.demo_separator, c.question_format)
        return guided_example(ex, self.hint)

    def sync_weights(self) -> None:
        self.inner.sync_weights()

    def generate(self, requests: Sequence[GenerationRequest], sampling: SamplingParams) -> list[Completion]:
        parts = []  # (request index, guided, sub-request); prefix, lengths and stops kept
        if self.pool is not None:
            self.pool.see([r.example for r in requests])
        for i, req in enumerate(requests):
            k = guided_count(req.n, self.fraction)
            for n, guided in ((req.n - k, False), (k, True)):
                if n > 0:
                    ex = self._guided_example(i, req.example, sampling.seed) if guided else req.example
                    parts.append((i, guided, replace(req, example=ex, n=n)))
        plain_ids = [encode_prompt(self.tokenizer, r.example.prompt, self.chat_template) for r in requests]
        out: list[Completion] = []
        for comp, guided in generate_parts(self.inner, parts, sampling):
            ex = requests[comp.group].example
            if guided:
                out.append(as_subclass(comp, GuidedCompletion, prompt_ids=list(plain_ids[comp.group]),
                                       hint=self.hint.format(answer=ex.answer, target=ex.sft_target)))
            else:
                out.append(replace(comp, prompt_ids=list(plain_ids[comp.group])))
        self._guided += sum(isinstance(c, GuidedCompletion) for c in out)
        self._total += len(out)
        return out

    def metrics(self) -> dict[str, float]:
        out = {"guided_frac": self._guided / self._total} if self._total else {}
        self._guided, self._total = 0, 0
        return out

    def state_dict(self) -> dict[str, Any]:
        return {} if self.pool is None else {"demos": self.pool.state_dict()}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        if self.pool is not None:
            self.pool.load_state_dict(state.get("demos", {}))


@ENGINE_WRAPPERS.register("guidance", order=100)
def build_guidance(engine: Any, model, tokenizer, rollout_cfg, chat_template: bool = False) -> GuidanceWrapper | None:
    """Guided prompts for ``rollout.guidance.fraction`` of each group (inside parameter noise)."""
    g = rollout_cfg.guidance
    return GuidanceWrapper(engine, tokenizer, g.fraction, g.hint, chat_template, g) if g.fraction > 0 else None


@produces("guided")
def _guided(ctx: ExtraContext, keys: frozenset[str]) -> dict[str, torch.Tensor]:
    """The flags this wrapper sets on guided rows (no model pass)."""
    return {"guided": guided_rows(ctx.completions, ctx.batch.completion_mask)}

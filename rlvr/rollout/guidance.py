"""Guided rollouts: a fraction of each group is generated from the prompt plus a privileged hint.

For OC-GRPO (METHODS-objectives C12; objective ``oc_grpo``): a wrapper around any engine that, for each
request of n completions, samples ``k = floor(fraction * n + 1/2)`` of them from the prompt with
``rollout.guidance.hint`` appended (``{answer}``: the gold answer, ``{target}``: the reference solution)
and the rest from the plain prompt, in one call to the wrapped engine. Every returned completion carries
the *unguided* prompt's token ids, so the batch trains the hint-free policy, while a guided completion
keeps the engine's behaviour log-probs, taken under the guided context, and is a :class:`GuidedCompletion`
(its ``guided`` extra is 1). The hint goes at the end of the prompt text (inside the user turn when a chat
template applies; appended to the last message of a chat prompt).

With an empty hint the wrapped engine sees exactly the rows it would have seen unwrapped, in the same order,
so the completions are identical. Metrics (``engine/guided_frac``): guided completions / all, since the
last report.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Any, Sequence

from pydantic import BaseModel, ConfigDict, Field

from rlvr.core.types import Completion, Example, GenerationRequest, SamplingParams
from rlvr.lazy import torch
from rlvr.rollout.base import encode_prompt, rewrite_prompt
from rlvr.rollout.wrappers import ENGINE_WRAPPERS, as_subclass, generate_parts

__all__ = ["GuidanceConfig", "GuidedCompletion", "GuidedEngine", "guided_rows", "guided_count", "guided_example",
           "build_guidance"]


class GuidanceConfig(BaseModel):
    """Guided rollouts for OC-GRPO (rlvr.rollout.guidance): a fraction of each group sees prompt + hint."""

    model_config = ConfigDict(extra="forbid", frozen=True)
    fraction: float = Field(0.0, ge=0.0, le=1.0, description="share of each group generated with the hint "
                                                             "(round(fraction x n) completions; 0: off)")
    hint: str = Field(" {answer}\n", description="text appended to the prompt of guided rollouts ({answer}: "
                                                  "the gold answer, {target}: the reference solution)")


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


class GuidedEngine:
    """Wraps an engine; ``fraction`` of each request's completions see ``prompt + hint``."""

    name = "guidance"

    def __init__(self, inner: Any, tokenizer, fraction: float, hint: str, chat_template: bool = False):
        self.inner, self.tokenizer = inner, tokenizer
        self.fraction, self.hint, self.chat_template = fraction, hint, chat_template
        self._guided, self._total = 0, 0

    def sync_weights(self) -> None:
        self.inner.sync_weights()

    def generate(self, requests: Sequence[GenerationRequest], sampling: SamplingParams) -> list[Completion]:
        parts = []  # (request index, guided, sub-request); prefix, lengths and stops kept
        for i, req in enumerate(requests):
            k = guided_count(req.n, self.fraction)
            for n, guided in ((req.n - k, False), (k, True)):
                if n > 0:
                    ex = guided_example(req.example, self.hint) if guided else req.example
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
        return {}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        return None


@ENGINE_WRAPPERS.register("guidance", order=100)
def build_guidance(engine: Any, model, tokenizer, rollout_cfg, chat_template: bool = False) -> GuidedEngine | None:
    """Guided prompts for ``rollout.guidance.fraction`` of each group (inside parameter noise)."""
    g = rollout_cfg.guidance
    return GuidedEngine(engine, tokenizer, g.fraction, g.hint, chat_template) if g.fraction > 0 else None

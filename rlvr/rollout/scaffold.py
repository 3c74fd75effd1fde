"""Answer-hidden scaffolds for problems the model cannot solve yet (``rollout.scaffold``): SCOPE-RL's first
stage.

"SCOPE-RL: Scaffolded Chain Optimization with Process Efficiency" (arXiv id not known; code not public;
docs/methods.md, `rollout.scaffold`). RECONSTRUCTED. A problem's reference solution is decomposed offline into
sub-questions q_1..q_m with verifiable intermediate answers a_1..a_m (``Example.meta[source]``: a list of
``{"question": ..., "answer": ...}``, written by the user or an LLM: ``rlvr data annotate --kind scaffold``, or
``model``, which asks a model once for each failed problem without one,
:class:`rlvr.rollout.annotations.ModelAnnotations`). Training prompts of problems the model fails
get the first j sub-questions (never their answers):

    prompt = ``template`` with the problem and "1. q_1 ... j. q_j"           (j: the problem's depth)
    depth:  none until the problem's last observed pass rate is 0, then m (start large);
            one less after each observation with a pass rate >= ``shrink_at`` (at 0: no scaffold again)

read from the run's per-prompt statistics (the same :class:`~rlvr.sampling.stats.PromptStats` the samplers
use; the wrapper gets them through ``bind_stats``), one update per new observation; the depths are saved in
checkpoints. A sub-question that contains the final answer would leak it: such sub-questions are left out
of the prompt (metric ``leaks``). Completions of a scaffolded prompt keep its ids (trained under it) and are
:class:`ScaffoldCompletion`\\ s; the extra ``scaffold_credit`` is, for them, the fraction of the scaffold's
sub-answers the completion states (each sub-answer, whitespace-normalised, found in its text), -1 for
other rows, and the reward transform ``scope_prefix`` turns it into the prefix-decomposed reward.
Metrics ``engine/scaffold/{scaffolded_frac, mean_depth, leaks}``.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Any, Sequence

from pydantic import BaseModel, ConfigDict, Field

from rlvr.algorithms.extra_producers import ExtraContext, produces
from rlvr.core.types import Completion, Example, GenerationRequest, SamplingParams
from rlvr.lazy import torch
from rlvr.models.prompts import rewrite_prompt
from rlvr.rollout.annotations import ModelAnnotations, ModelSettings
from rlvr.rollout.wrappers import ENGINE_WRAPPERS, as_subclass, generate_parts

__all__ = ["ScaffoldConfig", "ScaffoldCompletion", "ScaffoldWrapper", "scaffold_of", "scaffold_credit",
           "credit_rows", "build_scaffold"]

TEMPLATE = "{prompt}\n\nWork through these sub-questions first:\n{steps}\n"


class ScaffoldConfig(BaseModel):
    """SCOPE-RL's answer-hidden scaffolds (rlvr.rollout.scaffold); off unless ``enabled``."""

    model_config = ConfigDict(extra="forbid", frozen=True)
    enabled: bool = Field(False, description="scaffold the prompts of problems the model fails")
    source: str = Field("scaffold", description="Example.meta key of the sub-questions ([{question, answer}])")
    shrink_at: float = Field(0.5, gt=0.0, le=1.0, description="a pass rate at least this removes one sub-question")
    template: str = Field(TEMPLATE, description="the scaffolded prompt ({prompt}, {steps})")
    step_format: str = Field("{index}. {question}", description="one sub-question ({index}, {question})")
    model: ModelSettings = Field(None, description="a model that writes the scaffold of a failed problem "
                                         "without its own, once each (params of rlvr.models.ask.ModelParams); "
                                         "null: only the data's scaffolds")
    model_template: str | None = Field(None, description="the model's request ({prompt}, {answer}, {n}; default: "
                                                         "rlvr.rollout.annotations.SCAFFOLD_TEMPLATE)")


@dataclass
class ScaffoldCompletion(Completion):
    """A completion of a scaffolded prompt: the scaffold's sub-answers and how many sub-questions it saw."""

    sub_answers: tuple[str, ...] = ()
    depth: int = 0


def scaffold_of(ex: Example, source: str, raw: Any = None) -> list[tuple[str, str]]:
    """The example's ``(sub-question, sub-answer)`` pairs (empty when it has none or they are malformed);
    ``raw``: the scaffold to read instead of the example's own."""
    raw = raw if raw is not None else ex.meta.get(source) if isinstance(ex.meta, dict) else None
    out = []
    for item in raw if isinstance(raw, (list, tuple)) else ():
        q = item.get("question") if isinstance(item, dict) else (item[0] if isinstance(item, (list, tuple)) else None)
        a = item.get("answer") if isinstance(item, dict) else (item[1] if isinstance(item, (list, tuple)) else None)
        if isinstance(q, str) and q.strip() and a is not None:
            out.append((q.strip(), str(a)))
    return out


def _norm(text: str) -> str:
    return " ".join(text.lower().split())


def scaffold_credit(text: str, sub_answers: Sequence[str]) -> float:
    """The fraction of ``sub_answers`` stated in ``text`` (whitespace- and case-normalised substrings)."""
    if not sub_answers:
        return 0.0
    t = _norm(text)
    return sum(_norm(a) in t for a in sub_answers if _norm(a)) / len(sub_answers)


def credit_rows(completions: Sequence[Completion]) -> torch.Tensor:
    """The extra ``scaffold_credit`` ``[N]``: the credit of scaffolded rows, -1 elsewhere."""
    return torch.tensor([scaffold_credit(c.text, c.sub_answers) if isinstance(c, ScaffoldCompletion) else -1.0
                         for c in completions])


class ScaffoldWrapper:
    """Wraps an engine; prompts of problems the model fails get their first ``depth`` sub-questions."""

    name = "scaffold"
    forwards_trainer_model = False  # it rewrites requests; the engine underneath generates

    def __init__(self, inner: Any, cfg: ScaffoldConfig):
        self.inner, self.cfg = inner, cfg
        self.stats = None
        self.depth: dict[str, int] = {}
        self.seen: dict[str, int] = {}  # the last observation (step) each depth was updated from
        self._m = {"rows": 0.0, "scaffolded": 0.0, "depth": 0.0, "leaks": 0.0}
        self.written = (ModelAnnotations("scaffold", cfg.model, 0, cfg.model_template)
                        if cfg.model is not None else None)  # scaffolds a model writes for failed problems

    def bind_stats(self, stats) -> None:
        """The run's per-prompt statistics, which the depths follow."""
        self.stats = stats

    def sync_weights(self) -> None:
        self.inner.sync_weights()

    def _update(self, ex: Example, steps: list[tuple[str, str]]) -> int:
        """The example's depth after its latest observation."""
        if self.stats is None or not steps:
            return 0
        step, rate = self.stats.last_step(ex.id), self.stats.last_pass_rate(ex.id)
        if step is None or rate is None or self.seen.get(ex.id) == step:
            return self.depth.get(ex.id, 0)
        self.seen[ex.id] = step
        d = self.depth.get(ex.id, 0)
        if d == 0 and rate == 0.0:
            d = len(steps)
        elif d > 0 and rate >= self.cfg.shrink_at:
            d -= 1
        self.depth[ex.id] = d
        return d

    def _failed(self, ex: Example) -> bool:
        """The problem's last observation passed none of its completions (it would get a scaffold)."""
        return self.stats is not None and self.stats.last_pass_rate(ex.id) == 0.0

    def _steps(self, ex: Example) -> list[tuple[str, str]]:
        own = scaffold_of(ex, self.cfg.source)
        if own or self.written is None:
            return own
        return scaffold_of(ex, self.cfg.source, self.written.get(ex.id) or [])

    def generate(self, requests: Sequence[GenerationRequest], sampling: SamplingParams) -> list[Completion]:
        c = self.cfg
        if self.written is not None:  # one call for this step's failed problems that have no scaffold yet
            self.written.ensure([r.example for r in requests
                                 if not scaffold_of(r.example, c.source) and self._failed(r.example)])
        parts = []
        for i, req in enumerate(requests):
            steps = self._steps(req.example)
            d = min(self._update(req.example, steps), len(steps))
            if d == 0 or req.prefix_ids:
                parts.append((i, None, req))
                continue
            shown = [q for q, _ in steps[:d] if _norm(req.example.answer) not in _norm(q)]
            self._m["leaks"] += d - len(shown)
            lines = "\n".join(c.step_format.format(index=k + 1, question=q) for k, q in enumerate(shown))
            ex = rewrite_prompt(req.example, lambda text, s=lines: c.template.format(prompt=text, steps=s))
            parts.append((i, (tuple(a for _, a in steps), d), replace(req, example=ex)))
        out = []
        for comp, tag in generate_parts(self.inner, parts, sampling):
            out.append(comp if tag is None else as_subclass(comp, ScaffoldCompletion, sub_answers=tag[0], depth=tag[1]))
        self._m["rows"] += len(out)
        self._m["scaffolded"] += sum(isinstance(x, ScaffoldCompletion) for x in out)
        self._m["depth"] += sum(x.depth for x in out if isinstance(x, ScaffoldCompletion))
        return out

    def metrics(self) -> dict[str, float]:
        m, self._m = self._m, {k: 0.0 for k in self._m}
        if not m["rows"]:
            return {}
        out = {"scaffold/scaffolded_frac": m["scaffolded"] / m["rows"], "scaffold/leaks": m["leaks"]}
        if m["scaffolded"]:
            out["scaffold/mean_depth"] = m["depth"] / m["scaffolded"]
        return {**out, **(self.written.metrics() if self.written is not None else {})}

    def state_dict(self) -> dict[str, Any]:
        state = {"depth": dict(self.depth), "seen": dict(self.seen)}
        return {**state, "written": self.written.state_dict()} if self.written is not None else state

    def load_state_dict(self, state: dict[str, Any]) -> None:
        self.depth = {k: int(v) for k, v in state.get("depth", {}).items()}
        self.seen = {k: int(v) for k, v in state.get("seen", {}).items()}
        if self.written is not None and "written" in state:
            self.written.load_state_dict(state["written"])


@ENGINE_WRAPPERS.register("scaffold", order=90)
def build_scaffold(engine: Any, model, tokenizer, rollout_cfg, chat_template: bool = False) -> ScaffoldWrapper | None:
    """SCOPE-RL's scaffolds for ``rollout.scaffold.enabled`` (inside guidance, outside rollout strategies)."""
    s = rollout_cfg.scaffold
    return ScaffoldWrapper(engine, s) if s.enabled else None


@produces("scaffold_credit")
def _scaffold_credit(ctx: ExtraContext, keys: frozenset[str]) -> dict[str, torch.Tensor]:
    """The share of its scaffold's sub-answers each row states, from the texts (no model pass)."""
    return {"scaffold_credit": credit_rows(ctx.completions)}

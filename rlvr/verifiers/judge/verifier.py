"""A judge model as a verifier: a model reads each completion against a rubric and answers with a score.

``task.verifier: judge`` (or ``{fn: judge, params: {...}}`` in ``task.rewards``)::

    verifier_params:
      backend: http                         # or hf: a local causal-LM directory in this process (path:)
      base_url: http://localhost:8000/v1    # any OpenAI-compatible server: vllm serve, a hosted API
      model: Qwen/Qwen2.5-7B-Instruct
      api: chat                             # or completions: batch_size prompts per request
      rubric: "10 for a correct, complete proof; 0 for a wrong one"
      scale: [0, 10]                        # reward = (score - 0) / 10, clipped to [0, 1]

Each step's completions are judged together (``batched``): replies already in the cache are reused, identical
requests are asked once, and the rest go out ``concurrency`` requests at a time. Every request has
``request_timeout_s``; the whole call has ``deadline_s`` from its start (keep it below ``scoring.timeout_s``,
30 s by default, which would otherwise score the whole call as timed out). A request that fails in a way a retry
may cure (no connection, a timeout, HTTP 408/429/5xx, a malformed reply) is retried ``retries`` times with
exponential back-off (``backoff_s``, doubled each time, with jitter; a server's ``Retry-After`` is honoured),
within the deadline. The verifier never raises: a completion whose judgement failed (the server down, slow or
garbled, the reply holding no score, the budget spent) scores 0 with ``reason: "verifier error: judge: ..."``,
which the scorer counts (``score/errors``) and stops on past ``scoring.max_error_frac``, as for any verifier.

What is asked and how the reply is read: :mod:`rlvr.verifiers.judge.parse`; the cache and the budget:
:mod:`rlvr.models.ask.cache`; the backends: :mod:`rlvr.models.ask.backends`. ``stats`` counts requests,
retries, cache hits, failures by kind and tokens.
"""

from __future__ import annotations

import re
from typing import Annotated, Any, Literal, Sequence

from pydantic import AfterValidator, Field, field_validator, model_validator

from rlvr.core.paths import ParamsOf
from rlvr.core.types import Example, Score
from rlvr.verifiers.base import VERIFIERS
from rlvr.models.ask.client import ModelClient, ModelParams
from rlvr.verifiers.judge.parse import UnparsableReply, parse_score, render, template_fields

__all__ = ["JudgeParams", "JudgeVerifier", "DEFAULT_TEMPLATE", "DEFAULT_RUBRIC", "PRESETS", "CriterionJudge", "check_judge",
           "build_judge"]

DEFAULT_TEMPLATE = """You are grading a response to a task.

Task:
{prompt}

Reference answer (may be empty):
{answer}

Response:
{completion}

Grading rubric:
{rubric}

Judge the response by the rubric. End your reply with "Score: N", N from 0 to 10."""

DEFAULT_RUBRIC = ("10 for a response that is correct and complete, 0 for one that is wrong or does not answer; "
                  "partial credit in between.")

# preset -> (template, parse, scale): the requests the seed methods' judges make. ``consistency`` and
# ``grounding`` stand in for FGRPO's rule-based checks (rlvr/verifiers/faithfulness.py) when given that ``name``
# in task.rewards; ``equivalence`` is an appeal verifier (scoring.appeal). RECONSTRUCTED: the papers do not
# publish their judge prompts; these are ours.
PRESETS: dict[str, tuple[str, str, tuple[float, float]]] = {
    "grade": (DEFAULT_TEMPLATE, "number", (0.0, 10.0)),
    "consistency": ("""Read a response to a task. Does the conclusion its reasoning reaches agree with the final \
answer it gives? A response without reasoning has nothing that contradicts its answer: say yes.

Task:
{prompt}

Response:
{completion}

Answer yes or no on the last line.""", "verdict", (0.0, 1.0)),
    "grounding": ("""Read a response to a task. Count the factual claims its reasoning makes about the task's \
given information, and how many of them the task supports.

Task:
{prompt}

Response:
{completion}

End your reply with "Score: N", N from 0 to 10: ten times the share of the claims the task supports (10 when \
there are none).""", "number", (0.0, 10.0)),
    "criterion": ("""Read a response to a task and decide whether it meets one criterion.

Task:
{prompt}

Response:
{completion}

Criterion:
{rubric}

Does the response meet the criterion? Answer yes or no on the last line.""", "verdict", (0.0, 1.0)),
    "equivalence": ("""Is the final answer of the response equivalent to the reference answer (the same value, \
possibly written differently)?

Task:
{prompt}

Reference answer:
{answer}

Response:
{completion}

Answer yes or no on the last line.""", "verdict", (0.0, 1.0)),
}


class JudgeParams(ModelParams):
    preset: Literal["grade", "consistency", "grounding", "criterion", "equivalence"] = Field(
        "grade", description="a ready request: grade (0-10 against the rubric), consistency and grounding (FGRPO's "
        "checks), criterion (one rubric criterion met, yes/no: POW3R's judged criteria), equivalence (an appeal: "
        "yes/no against the reference); sets template, parse and scale unless they are given")
    template: str | None = Field(None, description="the request: fields {prompt} {completion} {answer} {rubric} "
                                                   "(default: the preset's)")
    rubric: str = Field(DEFAULT_RUBRIC, description="{rubric} when an example has no meta.rubric")
    parse: Literal["number", "verdict"] | None = Field(None, description="a numeric score, or yes/no-like "
                                                                        "verdicts (default: the preset's)")
    score_pattern: str | None = Field(None, description="a regex whose first group is the score (the last match)")
    scale: tuple[float, float] | None = Field(None, description="[lo, hi]: the score's range, mapped onto [0, 1] "
                                                                "(default: the preset's)")
    threshold: float = Field(0.5, ge=0.0, le=1.0, description="correct when the [0, 1] reward is at least this")

    @field_validator("template")
    @classmethod
    def _template(cls, v: str | None) -> str | None:
        if v is not None and "completion" not in template_fields(v):
            raise ValueError("the template must contain {completion}: the judge has to see what it grades")
        return v

    @property
    def request(self) -> tuple[str, str, tuple[float, float]]:
        """``(template, parse, scale)``: those given, the preset's for the rest."""
        template, parse, scale = PRESETS[self.preset]
        return (self.template if self.template is not None else template,
                self.parse if self.parse is not None else parse,
                tuple(self.scale) if self.scale is not None else scale)

    @field_validator("score_pattern")
    @classmethod
    def _pattern(cls, v: str | None) -> str | None:
        if v is not None:
            try:
                groups = re.compile(v).groups
            except re.error as e:
                raise ValueError(f"score_pattern is not a regular expression: {e}") from None
            if groups < 1:
                raise ValueError("score_pattern needs a group around the score, e.g. 'Grade: (\\d+)'")
        return v

    @model_validator(mode="after")
    def _scale(self) -> "JudgeParams":
        _, parse, (lo, hi) = self.request
        if not lo < hi:
            raise ValueError(f"scale {[lo, hi]}: the low end must be below the high end")
        if parse == "verdict" and self.score_pattern is None and (lo, hi) != (0.0, 1.0):
            raise ValueError("parse: verdict reads 1 or 0: set scale: [0, 1]")
        return self


def _error(why: str) -> Score:
    return Score(0.0, {"correct": 0.0}, {"reason": f"verifier error: judge: {why}"})


class JudgeVerifier:
    """See the module docstring. Thread-safe: the scorer may call it from its worker threads."""

    name = "judge"
    batched = True

    def __init__(self, p: JudgeParams):
        self.p = p
        self.client = ModelClient(p, "rlvr-judge")
        self.stats = self.client.stats
        self._pattern = re.compile(p.score_pattern) if p.score_pattern else None
        self.template, self.parse, self.scale = p.request

    def replies(self, examples: Sequence[Example], texts: Sequence[str]) -> list[tuple[str | None, str | None]]:
        """``(reply, None)`` or ``(None, why it failed)`` per completion, in order."""
        return self.client.ask([render(self.template, e, t, self.p.rubric) for e, t in zip(examples, texts)])

    def _score(self, reply: str) -> Score:
        try:
            raw = parse_score(reply, self.parse, self._pattern)
        except UnparsableReply as e:
            self.client.count("unparsable")
            return Score(0.0, {"correct": 0.0}, {"reason": f"verifier error: judge: {e}", "judge_reply": reply[:500]})
        lo, hi = self.scale
        reward = min(1.0, max(0.0, (raw - lo) / (hi - lo)))
        info: dict[str, Any] = {"judge_reply": reply[:500]}
        if not lo <= raw <= hi:
            info["judge_clipped"] = f"score {raw:g} outside scale [{lo:g}, {hi:g}]"
        return Score(reward, {"correct": float(reward >= self.p.threshold), "judge_score": raw}, info)

    def score_batch(self, examples: Sequence[Example], texts: Sequence[str]) -> list[Score]:
        try:
            got = self.replies(examples, texts)
            return [self._score(r) if r is not None else _error(why or "no reply") for r, why in got]
        except Exception as e:  # the contract: never raise
            return [_error(f"{type(e).__name__}: {e}") for _ in texts]

    def __call__(self, example: Example, text: str) -> Score:
        return self.score_batch([example], [text])[0]

    def close(self) -> None:
        self.client.close()


def check_judge(params: dict[str, Any] | None, preset: str) -> dict[str, Any] | None:
    """Another component's ``judge:`` params (a rubric's), validated now, with ``preset`` unless one is named."""
    if params is not None:
        JudgeParams.model_validate({"preset": preset, **params})
    return params


# A component's judge: field (a rubric's), checked at config load with the preset ``criterion`` unless one is named
CriterionJudge = Annotated[dict[str, Any] | None, AfterValidator(lambda v: check_judge(v, "criterion")),
                           ParamsOf(JudgeParams)]


def build_judge(params: dict[str, Any] | None, preset: str) -> JudgeVerifier | None:
    return None if params is None else JudgeVerifier(JudgeParams.model_validate({"preset": preset, **params}))


@VERIFIERS.register("judge", JudgeParams)
def _judge(p: JudgeParams) -> JudgeVerifier:
    """A judge model (an OpenAI-compatible endpoint or a local model) grades completions against a rubric
    (rlvr/verifiers/judge/)."""
    return JudgeVerifier(p)

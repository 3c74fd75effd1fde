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
:mod:`rlvr.verifiers.judge.cache`; the backends: :mod:`rlvr.verifiers.judge.backends`. ``stats`` counts requests,
retries, cache hits, failures by kind and tokens.
"""

from __future__ import annotations

import concurrent.futures as cf
import random
import re
import threading
import time
from collections import Counter
from typing import Any, Literal, Sequence

from pydantic import Field, field_validator, model_validator

from rlvr.core.daemon_pool import DaemonPool
from rlvr.core.paths import LocalPathStr
from rlvr.core.types import Example, Score
from rlvr.registry import Params
from rlvr.verifiers.base import VERIFIERS
from rlvr.verifiers.judge.backends import HFBackend, HTTPBackend, RequestFailed
from rlvr.verifiers.judge.cache import Budget, ReplyCache, cache_key
from rlvr.verifiers.judge.parse import UnparsableReply, parse_score, render, template_fields

__all__ = ["JudgeParams", "JudgeVerifier", "DEFAULT_TEMPLATE", "DEFAULT_RUBRIC", "PRESETS", "check_judge",
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


class JudgeParams(Params):
    backend: Literal["http", "hf"] = Field("http", description="an OpenAI-compatible HTTP endpoint, or a local "
                                                               "causal-LM directory run in this process")
    base_url: str | None = Field(None, description="http: the API root, e.g. http://localhost:8000/v1")
    model: str | None = Field(None, description="http: the model name the server serves")
    api: Literal["chat", "completions"] = Field("chat", description="http: /chat/completions (one conversation per "
                                                                   "request) or /completions (batch_size prompts)")
    api_key_env: str = Field("OPENAI_API_KEY", description="http: the environment variable holding the API key "
                                                           "(sent as a bearer token when set)")
    extra_body: dict[str, Any] = Field(default_factory=dict, description="http: more request fields (e.g. top_p)")
    path: LocalPathStr | None = Field(None, description="hf: the judge model's directory (with its tokenizer)")
    device: Literal["auto", "cpu", "cuda"] = Field("auto", description="hf: where the judge runs")
    preset: Literal["grade", "consistency", "grounding", "criterion", "equivalence"] = Field(
        "grade", description="a ready request: grade (0-10 against the rubric), consistency and grounding (FGRPO's "
        "checks), criterion (one rubric criterion met, yes/no: POW3R's judged criteria), equivalence (an appeal: "
        "yes/no against the reference); sets template, parse and scale unless they are given")
    template: str | None = Field(None, description="the request: fields {prompt} {completion} {answer} {rubric} "
                                                   "(default: the preset's)")
    rubric: str = Field(DEFAULT_RUBRIC, description="{rubric} when an example has no meta.rubric")
    system: str | None = Field(None, description="a system message before the request")
    parse: Literal["number", "verdict"] | None = Field(None, description="a numeric score, or yes/no-like "
                                                                        "verdicts (default: the preset's)")
    score_pattern: str | None = Field(None, description="a regex whose first group is the score (the last match)")
    scale: tuple[float, float] | None = Field(None, description="[lo, hi]: the score's range, mapped onto [0, 1] "
                                                                "(default: the preset's)")
    threshold: float = Field(0.5, ge=0.0, le=1.0, description="correct when the [0, 1] reward is at least this")
    max_tokens: int = Field(256, gt=0, description="reply tokens at most")
    temperature: float = Field(0.0, ge=0.0, description="the judge's sampling temperature (0: greedy)")
    seed: int = Field(0, description="hf: the sampling seed when temperature > 0")
    batch_size: int = Field(16, gt=0, description="requests per call for api: completions and the hf backend")
    concurrency: int = Field(8, gt=0, description="requests in flight at once")
    request_timeout_s: float = Field(15.0, gt=0, description="one request's limit")
    deadline_s: float = Field(25.0, gt=0, description="one scoring call's limit, retries included (keep below "
                                                      "scoring.timeout_s)")
    retries: int = Field(2, ge=0, description="tries after the first, for failures a retry may cure")
    backoff_s: float = Field(0.5, ge=0, description="the first retry's wait, doubled for each next one")
    cache: bool = Field(True, description="reuse replies to identical requests")
    cache_path: str | None = Field(None, description="a JSONL file that keeps the cache across runs and resumes")
    max_requests: int | None = Field(None, gt=0, description="requests this process may send at most")
    max_tokens_total: int | None = Field(None, gt=0, description="tokens (prompt and reply) it may spend at most")

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
    def _backend(self) -> "JudgeParams":
        _, parse, (lo, hi) = self.request
        if not lo < hi:
            raise ValueError(f"scale {[lo, hi]}: the low end must be below the high end")
        if parse == "verdict" and self.score_pattern is None and (lo, hi) != (0.0, 1.0):
            raise ValueError("parse: verdict reads 1 or 0: set scale: [0, 1]")
        if self.backend == "http":
            missing = [k for k in ("base_url", "model") if not getattr(self, k)]
            if missing:
                raise ValueError(f"backend http needs {' and '.join(missing)} (e.g. base_url: "
                                 "http://localhost:8000/v1, model: the served model's name)")
            if not str(self.base_url).startswith(("http://", "https://")):
                raise ValueError(f"base_url {self.base_url!r} must start with http:// or https://")
        elif not self.path:
            raise ValueError("backend hf needs path: a local causal-LM directory")
        return self


def _error(why: str) -> Score:
    return Score(0.0, {"correct": 0.0}, {"reason": f"verifier error: judge: {why}"})


class JudgeVerifier:
    """See the module docstring. Thread-safe: the scorer may call it from its worker threads."""

    name = "judge"
    batched = True

    def __init__(self, p: JudgeParams):
        self.p = p
        if p.backend == "http":
            self.backend: Any = HTTPBackend(p.base_url, p.model, p.api, p.system, p.max_tokens, p.temperature,
                                            p.api_key_env, p.extra_body)
        else:
            self.backend = HFBackend(p.path, p.device, p.system, p.max_tokens, p.temperature, p.seed)
        self.cache = ReplyCache(p.cache_path, p.cache)
        self.budget = Budget(p.max_requests, p.max_tokens_total)
        self.stats: Counter[str] = Counter()
        self._pattern = re.compile(p.score_pattern) if p.score_pattern else None
        self.template, self.parse, self.scale = p.request
        self._lock = threading.Lock()
        self._pool: DaemonPool | None = None
        self._rng = random.Random()

    def _count(self, key: str, n: int = 1) -> None:
        with self._lock:
            self.stats[key] += n

    def _ask(self, prompts: list[str], t_end: float) -> tuple[list[str] | None, str | None]:
        """One request (retried as the policy says): the replies, or why there are none."""
        last = ""
        for attempt in range(self.p.retries + 1):
            left = t_end - time.monotonic()
            if left <= 0:
                return None, f"deadline_s={self.p.deadline_s:g} reached" + (f" (last failure: {last})" if last else "")
            spent = self.budget.take_request()
            if spent:
                self._count("failures/budget")
                return None, spent
            self._count("requests")
            try:
                got = self.backend.complete(prompts, min(self.p.request_timeout_s, left))
            except RequestFailed as e:
                self._count(f"failures/{e.kind}")
                last = str(e)
                if not e.retry or attempt == self.p.retries:
                    return None, last + (f" (after {attempt + 1} tries)" if attempt else "")
                wait = e.after if e.after is not None else self.p.backoff_s * 2 ** attempt * (1 + self._rng.random() / 4)
                if time.monotonic() + wait >= t_end:
                    return None, f"{last} (no time left to retry within deadline_s={self.p.deadline_s:g})"
                self._count("retries")
                time.sleep(wait)
                continue
            tokens = sum(r.tokens for r in got)
            self.budget.spend_tokens(tokens)
            self._count("tokens", tokens)
            return [r.text for r in got], None
        return None, last  # (not reached: the loop returns)

    def _pool_for(self) -> DaemonPool:
        with self._lock:
            if self._pool is None:
                self._pool = DaemonPool(self.p.concurrency, "rlvr-judge")
            return self._pool

    def replies(self, examples: Sequence[Example], texts: Sequence[str]) -> list[tuple[str | None, str | None]]:
        """``(reply, None)`` or ``(None, why it failed)`` per completion, in order."""
        t_end = time.monotonic() + self.p.deadline_s
        requests = [render(self.template, e, t, self.p.rubric) for e, t in zip(examples, texts)]
        keys = [cache_key(self.backend.key, r) for r in requests]
        out: list[tuple[str | None, str | None]] = [(None, None)] * len(texts)
        wanted: dict[str, list[int]] = {}
        for i, k in enumerate(keys):
            hit = self.cache.get(k)
            if hit is not None:
                out[i] = (hit, None)
                self._count("cache_hits")
            else:
                wanted.setdefault(k, []).append(i)
        order = list(wanted)
        per = self.backend.per_request or self.p.batch_size
        chunks = [order[j:j + per] for j in range(0, len(order), per)]
        pool = self._pool_for()
        futures = [pool.submit(self._ask, [requests[wanted[k][0]] for k in chunk], t_end) for chunk in chunks]
        cf.wait(futures, timeout=max(0.0, t_end - time.monotonic()) + 0.05)
        for chunk, fut in zip(chunks, futures):
            if fut.done() and not fut.cancelled() and fut.exception() is None:
                got, why = fut.result()
            else:
                pool.abandon(fut)
                self._count("failures/deadline")
                got, why = None, (f"{type(fut.exception()).__name__}: {fut.exception()}" if fut.done()
                                  and not fut.cancelled() and fut.exception() is not None
                                  else f"no reply within deadline_s={self.p.deadline_s:g}")
            for j, k in enumerate(chunk):
                if got is not None:
                    self.cache.put(k, got[j])
                for i in wanted[k]:
                    out[i] = (got[j], None) if got is not None else (None, why)
        return out

    def _score(self, reply: str) -> Score:
        try:
            raw = parse_score(reply, self.parse, self._pattern)
        except UnparsableReply as e:
            self._count("unparsable")
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
        if self._pool is not None:
            self._pool.shutdown(wait=False, cancel_futures=True)


def check_judge(params: dict[str, Any] | None, preset: str) -> dict[str, Any] | None:
    """Another component's ``judge:`` params (a rubric's), validated now, with ``preset`` unless one is named."""
    if params is not None:
        JudgeParams.model_validate({"preset": preset, **params})
    return params


def build_judge(params: dict[str, Any] | None, preset: str) -> JudgeVerifier | None:
    return None if params is None else JudgeVerifier(JudgeParams.model_validate({"preset": preset, **params}))


@VERIFIERS.register("judge", JudgeParams)
def _judge(p: JudgeParams) -> JudgeVerifier:
    """A judge model (an OpenAI-compatible endpoint or a local model) grades completions against a rubric
    (rlvr/verifiers/judge/)."""
    return JudgeVerifier(p)

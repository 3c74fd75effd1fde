"""Asking a model many things at once: the request machinery shared by the judge verifier and
``rlvr data annotate`` (hints and scaffolds written by a model).

:class:`ModelClient` takes rendered requests and returns each one's reply, or why there is none: replies already
in the cache are reused, identical requests are asked once, the rest go out ``concurrency`` at a time
(``batch_size`` prompts a request where the API takes several), each request under ``request_timeout_s`` and the
whole call under ``deadline_s`` from its start; failures a retry may cure are retried with exponential back-off
and jitter (or the server's ``Retry-After``), within the deadline; a spent budget stops the sending. It never
raises: a failure is a reason. ``stats`` counts requests, retries, cache hits, tokens and failures by kind.
"""

from __future__ import annotations

import concurrent.futures as cf
import random
import threading
import time
from collections import Counter
from typing import Any, Literal, Sequence

from pydantic import Field, model_validator

from rlvr.core.daemon_pool import DaemonPool
from rlvr.core.paths import LocalPathStr
from rlvr.registry import Params
from rlvr.models.ask.backends import HFBackend, HTTPBackend, RequestFailed
from rlvr.models.ask.cache import Budget, ReplyCache, cache_key

__all__ = ["ModelParams", "ModelClient"]


class ModelParams(Params):
    """Which model answers (an OpenAI-compatible endpoint, or a local directory in this process) and how it is
    asked (sampling, batching, deadlines, retries, the cache and the budget)."""

    backend: Literal["http", "hf"] = Field("http", description="an OpenAI-compatible HTTP endpoint, or a local "
                                                               "causal-LM directory run in this process")
    base_url: str | None = Field(None, description="http: the API root, e.g. http://localhost:8000/v1")
    model: str | None = Field(None, description="http: the model name the server serves")
    api: Literal["chat", "completions"] = Field("chat", description="http: /chat/completions (one conversation per "
                                                                   "request) or /completions (batch_size prompts)")
    api_key_env: str = Field("OPENAI_API_KEY", description="http: the environment variable holding the API key "
                                                           "(sent as a bearer token when set)")
    extra_body: dict[str, Any] = Field(default_factory=dict, description="http: more request fields (e.g. top_p)")
    path: LocalPathStr | None = Field(None, description="hf: the model's directory (with its tokenizer)")
    device: Literal["auto", "cpu", "cuda"] = Field("auto", description="hf: where the model runs")
    system: str | None = Field(None, description="a system message before the request")
    max_tokens: int = Field(256, gt=0, description="reply tokens at most")
    temperature: float = Field(0.0, ge=0.0, description="the sampling temperature (0: greedy)")
    seed: int = Field(0, description="hf: the sampling seed when temperature > 0")
    batch_size: int = Field(16, gt=0, description="requests per call for api: completions and the hf backend")
    concurrency: int = Field(8, gt=0, description="requests in flight at once")
    request_timeout_s: float = Field(15.0, gt=0, description="one request's limit")
    deadline_s: float = Field(25.0, gt=0, description="one call's limit, retries included (a verifier's: keep "
                                                      "it below scoring.timeout_s)")
    retries: int = Field(2, ge=0, description="tries after the first, for failures a retry may cure")
    backoff_s: float = Field(0.5, ge=0, description="the first retry's wait, doubled for each next one")
    cache: bool = Field(True, description="reuse replies to identical requests")
    cache_path: LocalPathStr | None = Field(None, description="a JSONL file that keeps the cache across runs and "
                                                              "resumes")
    max_requests: int | None = Field(None, gt=0, description="requests this process may send at most")
    max_tokens_total: int | None = Field(None, gt=0, description="tokens (prompt and reply) it may spend at most")

    @model_validator(mode="after")
    def _backend(self) -> "ModelParams":
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


class ModelClient:
    """See the module docstring. Thread-safe."""

    def __init__(self, p: ModelParams, pool_name: str = "rlvr-model"):
        self.p = p
        if p.backend == "http":
            self.backend: Any = HTTPBackend(p.base_url, p.model, p.api, p.system, p.max_tokens, p.temperature,
                                            p.api_key_env, p.extra_body)
        else:
            self.backend = HFBackend(p.path, p.device, p.system, p.max_tokens, p.temperature, p.seed)
        self.cache = ReplyCache(p.cache_path, p.cache)
        self.budget = Budget(p.max_requests, p.max_tokens_total)
        self.stats: Counter[str] = Counter()
        self._lock = threading.Lock()
        self._pool: DaemonPool | None = None
        self._pool_name = pool_name
        self._rng = random.Random()

    def __getstate__(self) -> dict[str, Any]:
        """Pickled (a Ray scoring task carries its verifiers): settings, cache and budget; no lock, no threads."""
        state = dict(self.__dict__)
        for key in ("_lock", "_pool", "_rng"):
            state.pop(key)
        return state

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.__dict__.update(state)
        self._lock, self._pool, self._rng = threading.Lock(), None, random.Random()

    def count(self, key: str, n: int = 1) -> None:
        with self._lock:
            self.stats[key] += n

    def _send(self, prompts: list[str], t_end: float) -> tuple[list[str] | None, str | None]:
        """One request (retried as the policy says): the replies, or why there are none."""
        last = ""
        for attempt in range(self.p.retries + 1):
            left = t_end - time.monotonic()
            if left <= 0:
                return None, f"deadline_s={self.p.deadline_s:g} reached" + (f" (last failure: {last})" if last else "")
            spent = self.budget.take_request()
            if spent:
                self.count("failures/budget")
                return None, spent
            self.count("requests")
            try:
                got = self.backend.complete(prompts, min(self.p.request_timeout_s, left))
            except RequestFailed as e:
                self.count(f"failures/{e.kind}")
                last = str(e)
                if not e.retry or attempt == self.p.retries:
                    return None, last + (f" (after {attempt + 1} tries)" if attempt else "")
                wait = e.after if e.after is not None else self.p.backoff_s * 2 ** attempt * (1 + self._rng.random() / 4)
                if time.monotonic() + wait >= t_end:
                    return None, f"{last} (no time left to retry within deadline_s={self.p.deadline_s:g})"
                self.count("retries")
                time.sleep(wait)
                continue
            tokens = sum(r.tokens for r in got)
            self.budget.spend_tokens(tokens)
            self.count("tokens", tokens)
            return [r.text for r in got], None
        return None, last  # (not reached: the loop returns)

    def _pool_for(self) -> DaemonPool:
        with self._lock:
            if self._pool is None:
                self._pool = DaemonPool(self.p.concurrency, self._pool_name)
            return self._pool

    def ask(self, requests: Sequence[str]) -> list[tuple[str | None, str | None]]:
        """``(reply, None)`` or ``(None, why it failed)`` per request, in order, within ``deadline_s``."""
        t_end = time.monotonic() + self.p.deadline_s
        keys = [cache_key(self.backend.key, r) for r in requests]
        out: list[tuple[str | None, str | None]] = [(None, None)] * len(requests)
        wanted: dict[str, list[int]] = {}
        for i, k in enumerate(keys):
            hit = self.cache.get(k)
            if hit is not None:
                out[i] = (hit, None)
                self.count("cache_hits")
            else:
                wanted.setdefault(k, []).append(i)
        order = list(wanted)
        per = self.backend.per_request or self.p.batch_size
        chunks = [order[j:j + per] for j in range(0, len(order), per)]
        pool = self._pool_for()
        futures = [pool.submit(self._send, [requests[wanted[k][0]] for k in chunk], t_end) for chunk in chunks]
        cf.wait(futures, timeout=max(0.0, t_end - time.monotonic()) + 0.05)
        for chunk, fut in zip(chunks, futures):
            if fut.done() and not fut.cancelled() and fut.exception() is None:
                got, why = fut.result()
            else:
                error = fut.exception() if fut.done() and not fut.cancelled() else None
                pool.abandon(fut)
                self.count("failures/deadline")
                got, why = None, (f"{type(error).__name__}: {error}" if error is not None
                                  else f"no reply within deadline_s={self.p.deadline_s:g}")
            for j, k in enumerate(chunk):
                if got is not None:
                    self.cache.put(k, got[j])
                for i in wanted[k]:
                    out[i] = (got[j], None) if got is not None else (None, why)
        return out

    def close(self) -> None:
        if self._pool is not None:
            self._pool.shutdown(wait=False, cancel_futures=True)

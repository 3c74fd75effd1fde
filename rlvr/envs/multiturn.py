"""The multi-turn rollout driver: policy turn, environment step, next policy turn, for a batch of episodes.

:class:`MultiTurnWrapper` wraps any engine and keeps its contract (``generate(requests, sampling)`` ->
``sum(n)`` completions, completion ``k`` of request ``i`` with ``group == i``), so the loop, scoring and
training see ordinary completions. Each completion is one whole episode (:class:`EpisodeCompletion`)::

    for each of the n episodes of a request: a fresh environment, reset(example, seed)
    repeat up to max_turns (while the episode is live and under max_tokens):
        one engine call for every live episode (finished ones drop out), each a GenerationRequest whose
        prefix_ids are the episode's tokens so far, with their behaviour log-probs
        env.step(decoded text of the new turn) -> observation, reward, done
        the observation's tokens (rendered once, rlvr.envs.render) are appended as an inserted span

**Token in, token out.** The policy's tokens are never decoded and encoded again: the engine continues
the exact ids it sampled, and the final ``completion_ids`` are the sampled spans and the inserted
observation spans, in order, with ``segments`` saying which is which (``"sampled"`` / ``"inserted"``) so
inserted tokens are masked out of the loss. ``logprobs`` are the engine's behaviour log-probs on sampled
tokens (0.0 on inserted ones, which are masked). Decoding happens only to hand the environment its action
text and to give the completion its texts: ``text``, what the task's verifier scores, is the policy's own
turns (each turn decoded, special tokens skipped, joined by newlines), so nothing an environment says (a
tool result that echoes an answer, or text shaped like a tool call) can earn reward; ``transcript`` is the
whole episode, observations included.

**Rewards.** The task's verifier scores the episode's text, as for any completion (a deterministic
environment such as the issue tracker can be re-checked from the text: ``toolcall_env`` replays the
calls). The environment's own rewards ride on the completion: ``turn_rewards`` (one per step),
``env_reward`` (their sum; 0 when the environment failed) and ``env_error``; :func:`env_scores` turns them
into per-completion rewards for a task that wants the environment's reward instead of, or added to, the
verifier's. Only episode-level rewards exist so far; per-turn credit (turn-level advantages) is left for
later, and ``turn_rewards`` keeps what it would need.

**Ends and failures.** An episode ends when the environment says done (``finish_reason="stop"``), or at
``max_turns`` or the ``max_tokens`` budget of all its completion tokens, observations included
(``"length"``: truncated, like a completion cut at its token limit). Without ``max_tokens`` an episode is
at most ``max_turns`` turns of ``turn_tokens`` (default the sampling's ``max_new_tokens``) plus
``max_turns - 1`` observations of ``max_observation_tokens``. The environment sees every policy
turn, the last one included; an observation after the last turn is not inserted. An environment that
raises, or whose ``reset``/``step`` outlives ``step_timeout_s``, ends its episode with ``env_reward`` 0
and ``env_error`` set; the rest of the batch goes on. A timed-out call's thread is abandoned (Python
cannot kill it), as is its environment. The episodes' environment calls of one turn run ``env_workers``
at a time (threads: for environments that wait on a sandbox or a service; 1, the default, for ones that
are not thread-safe). An opening observation from ``reset`` is inserted before the first turn; with chat
prompts it follows an empty assistant turn, so such tasks put the opening in their prompt instead.

Metrics (``metrics()``, reported as ``engine/env/...``): episodes, errors, turns per episode, truncated
fraction, mean environment reward and seconds spent in the environment, since the last report.
"""

from __future__ import annotations

import sys
import threading
import time
from dataclasses import dataclass, field, replace
from typing import Any, Callable, Sequence

from rlvr.core.types import Completion, Example, GenerationRequest, SamplingParams, Segment
from rlvr.envs.base import Environment, Step, episode_seed
from rlvr.envs.render import ObservationRenderer
from rlvr.models.prompts import encode_prompt

__all__ = ["EpisodeCompletion", "MultiTurnWrapper", "EnvTimeout", "env_scores", "scored_example"]


@dataclass
class EpisodeCompletion(Completion):
    """A whole episode as one completion, with what the environment said."""

    turns: int = 0  # policy turns
    turn_rewards: list[float] = field(default_factory=list)
    env_reward: float = 0.0  # sum of turn rewards; 0 when the environment failed
    env_done: bool = False  # the environment ended the episode (else it was cut at max_turns / max_tokens)
    env_error: str | None = None
    env_info: dict[str, Any] = field(default_factory=dict)  # the last step's info
    transcript: str = ""  # every token decoded, observations included (``text``: the policy's turns only)


class EnvTimeout(Exception):
    pass


def _call_all(calls: list[tuple[Callable, tuple]], timeout_s: float | None, workers: int) -> list[Any]:
    """``fn(*args)`` of each call, up to ``workers`` at a time; each result is the value or the exception it
    raised (:class:`EnvTimeout` for one still running ``timeout_s`` after its batch started: its thread is
    abandoned, daemonic, since Python cannot kill it). Without a timeout and with one worker, in line."""
    if timeout_s is None and workers == 1:
        out: list[Any] = []
        for fn, args in calls:
            try:
                out.append(fn(*args))
            except Exception as e:  # noqa: BLE001 - handed back, not raised
                out.append(e)
        return out
    out = [None] * len(calls)
    for start in range(0, len(calls), workers):
        boxes: list[dict[str, Any]] = [{} for _ in calls[start: start + workers]]
        threads = []
        for box, (fn, args) in zip(boxes, calls[start: start + workers]):
            def run(box=box, fn=fn, args=args):
                try:
                    box["value"] = fn(*args)
                except BaseException as e:  # noqa: BLE001 - handed back to the caller's thread
                    box["value"] = e
            threads.append(threading.Thread(target=run, daemon=True))
            threads[-1].start()
        deadline = None if timeout_s is None else time.monotonic() + timeout_s
        for i, (t, box) in enumerate(zip(threads, boxes)):
            t.join(None if deadline is None else max(0.0, deadline - time.monotonic()))
            out[start + i] = box["value"] if "value" in box else EnvTimeout(f"took longer than {timeout_s:g} s")
    return out


@dataclass
class _Episode:
    group: int
    req: GenerationRequest
    env: Environment | None
    chat: bool
    ids: list[int] = field(default_factory=list)
    lps: list[float] = field(default_factory=list)
    lp_known: bool = True
    segments: list[Segment] = field(default_factory=list)
    prompt_ids: list[int] = field(default_factory=list)
    turns: int = 0
    rewards: list[float] = field(default_factory=list)
    done: bool = False  # no more policy turns
    env_done: bool = False
    error: str | None = None
    info: dict[str, Any] = field(default_factory=dict)
    last_action: str = ""  # the decoded text of the latest policy turn (what the environment acts on)
    last_stop: bool = False  # the latest turn ended on a stop token (it closed itself)

    def insert(self, ids: Sequence[int], source: str, lps: Sequence[float] | None = None) -> None:
        if not ids:
            return
        start = len(self.ids)
        self.ids.extend(ids)
        self.lps.extend(lps if lps is not None else [0.0] * len(ids))
        self.segments.append(Segment(start, len(self.ids), source))  # type: ignore[arg-type]

    def fail(self, reason: str) -> None:
        self.error, self.done = reason, True


class MultiTurnWrapper:
    """Wraps an engine; every completion is an episode of ``env_factory()`` environments."""

    name = "multiturn"
    forwards_trainer_model = False  # it rewrites requests; the engine underneath generates

    def __init__(self, inner: Any, tokenizer, env_factory: Callable[[], Environment], max_turns: int = 4,
                 max_tokens: int | None = None, turn_tokens: int | None = None, step_timeout_s: float | None = 30.0,
                 observation_template: str | None = None, observation_role: str = "user",
                 max_observation_tokens: int = 1024, chat_template: bool = False, env_workers: int = 1):
        if max_turns < 1 or env_workers < 1:
            raise ValueError(f"max_turns and env_workers must be >= 1, got {max_turns} and {env_workers}")
        self.inner, self.tokenizer, self.env_factory = inner, tokenizer, env_factory
        self.max_turns, self.max_tokens, self.turn_tokens = max_turns, max_tokens, turn_tokens
        self.step_timeout_s, self.max_observation_tokens = step_timeout_s, max_observation_tokens
        self.chat_template, self.env_workers = chat_template, env_workers
        self.renderer = (ObservationRenderer(tokenizer, observation_template, observation_role)
                         if observation_template is not None else ObservationRenderer(tokenizer, role=observation_role))
        self._reset_metrics()

    def sync_weights(self) -> None:
        self.inner.sync_weights()

    # ---- the episode loop ---------------------------------------------------------------------
    def generate(self, requests: Sequence[GenerationRequest], sampling: SamplingParams) -> list[Completion]:
        episodes = self._start(requests, sampling)
        budget = self.max_tokens if self.max_tokens is not None else sys.maxsize
        for turn in range(self.max_turns):
            for e in episodes:
                if len(e.ids) >= budget:
                    e.done = True  # no token left for another policy turn
            live = [e for e in episodes if not e.done]
            if not live:
                break
            self._policy_turn(live, sampling, turn, budget)
            self._env_turn(live, last_turn=turn + 1 == self.max_turns, budget=budget)
        out = [self._completion(e) for e in episodes]
        self._count(out)
        return out

    def _start(self, requests: Sequence[GenerationRequest], sampling: SamplingParams) -> list[_Episode]:
        episodes, resets = [], []
        for gi, req in enumerate(requests):
            prompt = encode_prompt(self.tokenizer, req.example.prompt, self.chat_template)  # until the engine's
            for k in range(req.n):
                ep = _Episode(gi, req, None, self.chat_template or isinstance(req.example.prompt, list),
                              prompt_ids=list(prompt))
                if req.prefix_ids:  # a request that already continues something keeps it as its opening span
                    ep.insert(list(req.prefix_ids), req.prefix_source, req.prefix_logprobs)
                    ep.lp_known = req.prefix_logprobs is not None
                episodes.append(ep)
                resets.append((self._reset_one, (ep, episode_seed(sampling.seed, req.example.id, k))))
        t0 = time.perf_counter()
        for ep, got in zip(episodes, _call_all(resets, self.step_timeout_s, self.env_workers)):
            if isinstance(got, BaseException):  # a broken environment ends its episode, not the run
                ep.fail(f"reset: {type(got).__name__}: {got}")
            elif got:
                ep.insert(self._observation_ids(ep, str(got)), "inserted")
        self._seconds += time.perf_counter() - t0
        return episodes

    def _reset_one(self, ep: _Episode, seed: int) -> str:
        ep.env = self.env_factory()
        return ep.env.reset(ep.req.example, seed)

    def _policy_turn(self, live: list[_Episode], sampling: SamplingParams, turn: int, budget: int) -> None:
        per_turn = self.turn_tokens if self.turn_tokens is not None else sampling.max_new_tokens
        reqs = []
        for ep in live:
            stop = tuple(getattr(ep.env, "stop", ())) + tuple(ep.req.stop)
            reqs.append(replace(ep.req, n=1, prefix_ids=tuple(ep.ids), prefix_logprobs=tuple(ep.lps),
                                prefix_source="prefix", max_new_tokens=max(0, min(per_turn, budget - len(ep.ids))),
                                stop=stop))
        seed = None if sampling.seed is None else (sampling.seed * 1_000_003 + turn) % 2**31
        comps = self.inner.generate(reqs, replace(sampling, seed=seed))
        if len(comps) != len(reqs):
            raise RuntimeError(f"engine returned {len(comps)} completions for {len(reqs)} episode turns")
        for comp in comps:
            ep = live[comp.group]
            n0 = len(ep.ids)
            if list(comp.completion_ids[:n0]) != ep.ids:
                raise RuntimeError("engine did not continue the episode's tokens exactly (prefix_ids changed)")
            new = list(comp.completion_ids[n0:])
            ep.lp_known = ep.lp_known and comp.logprobs is not None
            ep.insert(new, "sampled", list(comp.logprobs[n0:]) if comp.logprobs is not None else None)
            ep.prompt_ids, ep.turns = list(comp.prompt_ids), ep.turns + 1
            ep.last_stop = comp.finish_reason == "stop"
            ep.last_action = self.tokenizer.decode(new, skip_special_tokens=True)

    def _env_turn(self, live: list[_Episode], last_turn: bool, budget: int) -> None:
        t0 = time.perf_counter()
        results = _call_all([(ep.env.step, (ep.last_action,)) for ep in live], self.step_timeout_s, self.env_workers)
        self._seconds += time.perf_counter() - t0
        for ep, got in zip(live, results):
            try:
                if isinstance(got, BaseException):
                    raise got
                out = Step(*got)
                reward = float(out.reward)
            except Exception as e:  # noqa: BLE001 - a broken environment ends its episode, not the run
                ep.fail(f"step {ep.turns}: {type(e).__name__}: {e}")
                continue
            ep.rewards.append(reward)
            ep.info = dict(out.info or {})
            self._steps += 1
            self._tool_errors += bool(ep.info.get("tool_error"))  # a malformed or failed tool call
            if out.done:
                ep.done = ep.env_done = True
            elif last_turn or len(ep.ids) >= budget:
                ep.done = True  # the environment saw the last turn; no observation after it
            else:
                obs = self._observation_ids(ep, str(out.observation))
                room = budget - len(ep.ids)
                ep.insert(obs[:room], "inserted")
                ep.done = len(obs) >= room  # no token left for the policy

    def _observation_ids(self, ep: _Episode, observation: str) -> list[int]:
        if ep.chat:
            last = ep.ids[-1] if ep.ids and ep.last_stop else None
            ids = self.renderer.chat(observation, last)
        else:
            ids = self.renderer.plain(observation)
        return ids[: self.max_observation_tokens]

    def _completion(self, ep: _Episode) -> EpisodeCompletion:
        reason = "stop" if ep.env_done else "length"
        turns = [self.tokenizer.decode(ep.ids[s.start: s.end], skip_special_tokens=True)
                 for s in ep.segments if s.source != "inserted"]
        env_reward = 0.0 if ep.error else float(sum(ep.rewards))
        return EpisodeCompletion(
            ep.req.example.id, ep.prompt_ids, list(ep.ids), list(ep.lps) if ep.lp_known else None, reason,
            "\n".join(turns), group=ep.group, segments=list(ep.segments), turns=ep.turns,
            turn_rewards=list(ep.rewards), env_reward=env_reward, env_done=ep.env_done, env_error=ep.error,
            env_info=ep.info, transcript=self.tokenizer.decode(ep.ids, skip_special_tokens=True))

    # ---- metrics ----------------------------------------------------------------------------------
    def _reset_metrics(self) -> None:
        self._episodes = self._errors = self._turns = self._truncated = self._steps = self._tool_errors = 0
        self._reward, self._seconds = 0.0, 0.0

    def _count(self, out: list[EpisodeCompletion]) -> None:
        self._episodes += len(out)
        self._errors += sum(c.env_error is not None for c in out)
        self._turns += sum(c.turns for c in out)
        self._truncated += sum(not c.env_done and c.env_error is None for c in out)
        self._reward += sum(c.env_reward for c in out)

    def metrics(self) -> dict[str, float]:
        """Since the last call: ``env/episodes``, ``env/errors``, ``env/turns_mean``, ``env/truncated_frac``,
        ``env/reward_mean``, ``env/seconds`` and ``env/tool_error_rate`` (the share of environment steps
        whose info says ``tool_error``: a malformed or failed tool call)."""
        if not self._episodes:
            return {}
        n = self._episodes
        out = {"env/episodes": float(n), "env/errors": float(self._errors), "env/turns_mean": self._turns / n,
               "env/truncated_frac": self._truncated / n, "env/reward_mean": self._reward / n,
               "env/seconds": self._seconds, "env/tool_error_rate": self._tool_errors / max(self._steps, 1)}
        self._reset_metrics()
        return out


def scored_example(example: Example, completion: Completion) -> Example:
    """The example a verifier scores ``completion`` against. For an episode, its ``meta`` also holds the
    environment's last ``info`` (``env_info``) and its reward (``env_reward``), so a verifier (or a user's
    reward function, which receives meta fields as keyword lists) can check answers only the environment
    knows: a value it drew at reset, the state a tool call left behind."""
    if not isinstance(completion, EpisodeCompletion):
        return example
    return replace(example, meta={**example.meta, "env_info": dict(completion.env_info),
                                  "env_reward": completion.env_reward})


def env_scores(completions: Sequence[Completion], verifier_rewards: Sequence[float], mode: str = "verifier",
               weight: float = 1.0) -> list[float]:
    """Per-completion rewards from the verifier's and the environment's: ``"verifier"`` (as scored),
    ``"env"`` (the episode's ``env_reward``), ``"sum"`` (verifier + ``weight`` * env). A completion that is
    not an episode keeps its verifier reward; an episode whose environment failed gets 0 in every mode."""
    if mode not in ("verifier", "env", "sum"):
        raise ValueError(f"unknown reward mode {mode!r}; valid: verifier, env, sum")
    out = []
    for c, r in zip(completions, verifier_rewards, strict=True):
        if not isinstance(c, EpisodeCompletion):
            out.append(float(r))
        elif c.env_error is not None:
            out.append(0.0)
        else:
            out.append({"verifier": float(r), "env": c.env_reward, "sum": float(r) + weight * c.env_reward}[mode])
    return out

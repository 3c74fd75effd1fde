"""Prompt Replay (Baroian & Berger 2026, "Prompt Replay: Speeding up GRPO with On-Policy Reuse of High-Signal
Prompts", arXiv:2603.21177; code ``baroian/GRPO_prompt_replay``, open-instruct ``grpo_fast.py``).

Prompts (never old trajectories: replayed prompts get fresh rollouts, so training stays on-policy) whose
last pass rate was medium are put back into later batches, nearest 0.5 first::

    after scoring prompt q at step t with pass rate pr:
        if 0 < pr and pr_min <= pr <= pr_max and reuse[q] < max_reuse:  push (|pr - 0.5|, pr, q) on a min-heap
    building a batch of P prompts at step t:
        budget = min(floor(P * fraction), P // 2)                       # never more than half of the batch
        pop candidates until ``budget`` replays are found; a candidate is skipped (and pushed back after the
        batch) when it is already in this batch, not scored yet since its last replay (active), or still
        cooling down (t - last_replay[q] < cooldown); one with reuse[q] >= max_reuse is dropped for good
        replay: reuse[q] += 1, last_replay[q] = t;  the other slots are fresh prompts (uniform stream)

Ties in distance pop the lower pass rate first (0.4 before 0.6). ``cooldown_by_rate`` uses the code's
rate-dependent cooldown (distance from 0.5 rounded to 0.1: 0 -> 5 steps, 0.1 -> 10, 0.2 -> 15, >= 0.3 -> 20)
without its +-20% jitter. Deviation: a prompt has at most one live heap entry (its latest observation);
the code pushes one per observation and refreshes stale ones by a reuse-count snapshot, which selects the
same prompts. The whole state (heap, reuse counts, last replay steps, active set, fresh stream) is JSON.
"""

from __future__ import annotations

import heapq
import math
from typing import Any, Sequence

from pydantic import Field, model_validator

from rlvr.core.types import Example
from rlvr.registry import Params
from rlvr.sampling.base import SAMPLERS, Group, SamplerContext
from rlvr.sampling.prompts import uniform_stream

__all__ = ["PromptReplayParams", "PromptReplaySampler", "replay_budget"]


class PromptReplayParams(Params):
    fraction: float = Field(0.5, ge=0.0, le=1.0, description="replayed share of a batch (capped at half)")
    cooldown: int = Field(5, ge=0, description="steps between two replays of a prompt")
    cooldown_by_rate: bool = Field(False, description="cooldown 5/10/15/20 steps by distance of the rate from 0.5")
    max_reuse: int = Field(20, ge=1, description="replays of one prompt at most")
    pr_min: float = Field(0.24, ge=0.0, le=1.0, description="lowest pass rate eligible (inclusive; 0 never is)")
    pr_max: float = Field(0.7, ge=0.0, le=1.0, description="highest pass rate eligible (inclusive)")

    @model_validator(mode="after")
    def _window(self) -> "PromptReplayParams":
        if self.pr_min > self.pr_max:
            raise ValueError("pr_min must be <= pr_max")
        return self


def replay_budget(prompts: int, fraction: float) -> int:
    """Replay slots in a batch of ``prompts``: ``min(floor(P * fraction), P // 2)``."""
    return min(math.floor(prompts * fraction + 1e-9), prompts // 2)


class PromptReplaySampler:
    def __init__(self, examples: Sequence[Example], p: PromptReplayParams, fresh):
        self.p, self.fresh = p, fresh
        self.by_id = {e.id: e for e in examples}
        self.heap: list[list] = []  # [distance, pass rate, version, id]
        self.version: dict[str, int] = {}
        self.reuse: dict[str, int] = {}
        self.last_replay: dict[str, int] = {}
        self.active: set[str] = set()
        self._last = {"replayed": 0.0, "batch": 0.0, "buffer": 0.0}

    def _cooldown(self, rate: float) -> int:
        if not self.p.cooldown_by_rate:
            return self.p.cooldown
        return {0: 5, 1: 10, 2: 15}.get(min(round(abs(rate - 0.5) * 10), 3), 20)

    def _pop(self, step: int, taken: set[str], aside: list[list]) -> str | None:
        while self.heap:
            entry = heapq.heappop(self.heap)
            _, rate, ver, ex_id = entry
            if self.version.get(ex_id) != ver:
                continue  # superseded by a later observation
            if self.reuse.get(ex_id, 0) >= self.p.max_reuse:
                self.version.pop(ex_id, None)  # used up: dropped for good
                continue
            last = self.last_replay.get(ex_id)
            if ex_id in taken or ex_id in self.active or (last is not None and step - last < self._cooldown(rate)):
                aside.append(entry)
                continue
            self.version.pop(ex_id)
            return ex_id
        return None

    def next(self, k: int, step: int = 0) -> list[Example]:
        budget = replay_budget(k, self.p.fraction)
        out: list[Example] = []
        taken: set[str] = set()
        aside: list[list] = []
        while len(out) < budget:
            ex_id = self._pop(step, taken, aside)
            if ex_id is None:
                break
            self.reuse[ex_id] = self.reuse.get(ex_id, 0) + 1
            self.last_replay[ex_id] = step
            self.active.add(ex_id)
            taken.add(ex_id)
            out.append(self.by_id[ex_id])
        for entry in aside:
            heapq.heappush(self.heap, entry)
        self._last = {"replayed": float(len(out)), "batch": float(k), "buffer": float(len(self.version))}
        return out + self.fresh.next(k - len(out), step)

    def observe(self, groups: Sequence[Group], step: int) -> None:
        for g in groups:
            ex_id, rate = g.example.id, g.pass_rate
            self.active.discard(ex_id)
            if 0 < rate and self.p.pr_min <= rate <= self.p.pr_max and self.reuse.get(ex_id, 0) < self.p.max_reuse:
                ver = self.version.get(ex_id, -1) + 1
                self.version[ex_id] = ver
                heapq.heappush(self.heap, [abs(rate - 0.5), rate, ver, ex_id])
            else:
                self.version.pop(ex_id, None)  # its latest rate left the window: any queued entry is stale

    def metrics(self) -> dict[str, float]:
        b = self._last["batch"]
        return {"replayed": self._last["replayed"], "replayed_frac": self._last["replayed"] / b if b else 0.0,
                "buffer": self._last["buffer"]}

    def state_dict(self) -> dict[str, Any]:
        live = [e for e in self.heap if self.version.get(e[3]) == e[2]]
        return {"heap": live, "version": self.version, "reuse": self.reuse, "last_replay": self.last_replay,
                "active": sorted(self.active), "fresh": self.fresh.state_dict()}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        self.heap = [list(e) for e in state["heap"]]
        heapq.heapify(self.heap)
        self.version = {k: int(v) for k, v in state["version"].items()}
        self.reuse = {k: int(v) for k, v in state["reuse"].items()}
        self.last_replay = {k: int(v) for k, v in state["last_replay"].items()}
        self.active = set(state["active"])
        self.fresh.load_state_dict(state["fresh"])


@SAMPLERS.register("prompt_replay", PromptReplayParams)
def prompt_replay(ctx: SamplerContext, p: PromptReplayParams) -> PromptReplaySampler:
    """Prompt Replay: re-issue prompts whose pass rate was nearest 0.5, capped at half a batch."""
    return PromptReplaySampler(ctx.examples, p, uniform_stream(ctx))

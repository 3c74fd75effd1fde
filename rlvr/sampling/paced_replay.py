"""PACED-RL's error-prioritised replay of stored rollouts, as a rollout budget (``paced_replay``).

Kim, Kim, Kim, Lee, Rhee, Jung 2026, "Beyond Normalization: Rethinking the Partition Function as a Difficulty
Scheduler for RLVR", arXiv:2602.12642 (no code; docs/methods.md, `paced_replay`; RECONSTRUCTED: the replay ratio,
buffer size, staleness limit and the refresh of priorities were not recovered). After scoring, each prompt's group
is stored with the error of the accuracy estimate it was scheduled by; the most wrongly estimated stored groups are
mixed into the next batches::

    allocate(examples):  G completions each (one round); p_before(x) = p_hat(x) now
    finalize(groups, t):
      1. drop stored groups older than max_age steps
      2. replay n = min(floor(replay_ratio * #groups), #candidates) stored groups of prompts not in this
         batch, highest priority first (ties: lower id), where
             priority(x) = | p_hat(x) - p_obs(x) |      p_obs = the stored group's mean correctness
         with p_hat the current estimate (``refresh``) or the one at storing; a group leaves the buffer
         after max_replays replays
      3. store this batch's groups (one per prompt: its latest replaces the older) with
             priority(x) = | p_before(x) - p_obs(x) |   when > min_priority
         and keep the capacity highest-priority groups

p_hat is the learned log Z table of ``tb`` (``log_z: learned``: p_hat = clip((Z - 1)/(e^beta - 1), 0, 1))
when the run has one (``estimate``, as the ``paced`` sampler's), else the decayed pass rate; ``prior`` for a
prompt never seen. With dynamic sampling each generation round is one batch here. Replayed groups are
off-policy rows: every completion keeps its token ids, loss mask, behaviour log-probs
(``Completion.logprobs``, so ``algorithm.correction`` weighs them against the policy that trains on them;
``tb`` toward the reference needs none), scores and training rewards as stored; they count as reused
completions (``rollouts/reused``), are part of the trained batch's ``accuracy`` (``generated/accuracy`` is
the fresh rollouts') and never reach the prompt statistics again. Groups whose prompts have images are not
stored. The buffer (at most ``capacity`` groups) is JSON in the checkpoint.
"""

from __future__ import annotations

import math
from typing import Any, Literal, Sequence

from pydantic import Field

from rlvr.core.completion_json import completion_from_json, completion_to_json
from rlvr.core.types import Example, GenerationRequest, Score
from rlvr.registry import Params
from rlvr.sampling.base import ALLOCATORS, Allocator, AllocatorContext, Group
from rlvr.sampling.paced import accuracy_table, estimate_of

__all__ = ["PacedReplayParams", "PacedReplay", "replay_priority", "replay_count"]


class PacedReplayParams(Params):
    replay_ratio: float = Field(0.25, ge=0.0, description="replayed groups per fresh group (RECONSTRUCTED)")
    capacity: int = Field(256, gt=0, description="stored groups at most (one per prompt, highest priority kept)")
    max_age: int | None = Field(8, ge=0, description="steps a stored group stays replayable (null: no limit)")
    max_replays: int = Field(1, ge=1, description="replays of one stored group at most")
    min_priority: float = Field(0.0, ge=0.0, description="groups with an estimate error at or below this are "
                                                         "not stored")
    refresh: bool = Field(True, description="rank stored groups by the current estimate's error (else the "
                                            "error when stored)")
    prior: float = Field(0.5, ge=0.0, le=1.0, description="accuracy estimate of a prompt never seen")
    estimate: Literal["auto", "log_z", "pass_rate"] = Field("auto", description="p_hat from tb's log Z table, "
                                                            "pass rates, or the table when the run has one")
    group_size: int | None = Field(None, gt=0, description="completions per prompt (default: rollout.group_size)")


def replay_priority(p_hat: float, p_obs: float) -> float:
    """PACED-RL's replay priority: the accuracy estimate's error ``|p_hat - p_obs|``."""
    return abs(float(p_hat) - float(p_obs))


def replay_count(fresh_groups: int, ratio: float) -> int:
    """Replayed groups mixed into a batch of ``fresh_groups``: ``floor(fresh_groups * ratio)``."""
    return math.floor(fresh_groups * ratio + 1e-9)


def _store(g: Group, step: int, priority: float) -> dict[str, Any]:
    comps = [completion_to_json(c) for c in g.completions]
    scores = [{"reward": float(s.reward),
               "components": {k: float(v) for k, v in s.components.items() if isinstance(v, (int, float))}}
              for s in g.scores]
    return {"step": int(step), "priority": float(priority), "p_obs": float(g.pass_rate), "replays": 0,
            "completions": comps, "scores": scores, "rewards": [float(r) for r in g.rewards]}


def _group(example: Example, entry: dict[str, Any]) -> Group:
    comps = [completion_from_json(example.id, c) for c in entry["completions"]]
    scores = [Score(s["reward"], dict(s["components"]), {"replayed": True, "stored_step": entry["step"]})
              for s in entry["scores"]]
    return Group(example, comps, scores, list(entry["rewards"]), reused=len(comps))


class PacedReplay(Allocator):
    def __init__(self, p: PacedReplayParams, group_size: int, examples: Sequence[Example], stats: Any, table: Any):
        super().__init__(p.group_size or group_size)
        self.p, self.stats, self.table = p, stats, table
        self.by_id = {e.id: e for e in examples}
        self.buffer: dict[str, dict[str, Any]] = {}
        self._before: dict[str, float] = {}
        self._last: dict[str, float] = {"replayed": 0.0, "replayed_completions": 0.0, "buffer": 0.0}

    def _estimates(self, ids: Sequence[str]) -> list[float]:
        return estimate_of(list(ids), self.table, self.stats, self.p.prior)

    def allocate(self, examples: Sequence[Example], stats: Any = None) -> list[GenerationRequest]:
        self._before = dict(zip([e.id for e in examples], self._estimates([e.id for e in examples])))
        return super().allocate(examples, stats)

    def _choose(self, fresh: set[str], n: int) -> list[tuple[str, float]]:
        ids = [i for i in self.buffer if i not in fresh and i in self.by_id]
        if self.p.refresh:
            pri = [replay_priority(e, self.buffer[i]["p_obs"]) for i, e in zip(ids, self._estimates(ids))]
        else:
            pri = [self.buffer[i]["priority"] for i in ids]
        return sorted(zip(ids, pri), key=lambda kv: (-kv[1], kv[0]))[:n]

    def finalize(self, groups: list[Group], step: int) -> list[Group]:
        if self.p.max_age is not None:
            self.buffer = {i: e for i, e in self.buffer.items() if step - e["step"] <= self.p.max_age}
        fresh = [g for g in groups if g.completions]
        chosen = self._choose({g.example.id for g in groups}, replay_count(len(fresh), self.p.replay_ratio))
        replayed = []
        for i, _ in chosen:
            entry = self.buffer[i]
            replayed.append(_group(self.by_id[i], entry))
            entry["replays"] += 1
            if entry["replays"] >= self.p.max_replays:
                del self.buffer[i]
        for g in fresh:
            if any(getattr(c, "vision", None) is not None for c in g.completions) or g.example.images:
                continue  # images are not JSON: such groups are not stored
            before = self._before.get(g.example.id)
            if before is None:
                before = self._estimates([g.example.id])[0]
            pri = replay_priority(before, g.pass_rate)
            if pri > self.p.min_priority:
                self.buffer[g.example.id] = _store(g, step, pri)
                self.by_id.setdefault(g.example.id, g.example)
            else:
                self.buffer.pop(g.example.id, None)  # its older stored group is superseded
        if len(self.buffer) > self.p.capacity:
            keep = sorted(self.buffer.items(), key=lambda kv: (-kv[1]["priority"], kv[0]))[: self.p.capacity]
            self.buffer = dict(keep)
        self._last = {"replayed": float(len(replayed)),
                      "replayed_completions": float(sum(g.n for g in replayed)),
                      "replay_priority": sum(p for _, p in chosen) / len(chosen) if chosen else 0.0,
                      "buffer": float(len(self.buffer))}
        return groups + replayed

    def metrics(self) -> dict[str, float]:
        return dict(self._last)

    def state_dict(self) -> dict[str, Any]:
        return {"buffer": self.buffer}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        self.buffer = {k: dict(v) for k, v in state["buffer"].items()}


@ALLOCATORS.register("paced_replay", PacedReplayParams)
def paced_replay(ctx: AllocatorContext, p: PacedReplayParams) -> PacedReplay:
    """PACED-RL: store each prompt's scored group; replay the groups whose accuracy estimate is most wrong (off-policy)."""
    return PacedReplay(p, ctx.group_size, ctx.examples, ctx.stats, accuracy_table(ctx.algorithm_state, p.estimate))

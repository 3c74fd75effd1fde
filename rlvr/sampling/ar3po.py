"""AR3PO, adaptive rollout with response reuse (Zhang et al. 2025, "Improving Sampling Efficiency in RLVR
through Adaptive Rollout and Response Reuse", arXiv:2509.25808) — PARTIAL: stage sizes RECONSTRUCTED.

Prompts are sampled in stages of ``k`` and a prompt stops as soon as it has one correct response::

    for stage s = 1..S:  every prompt still without a correct response gets k more completions
    a prompt with >= 1 correct response: its latest correct response replaces the one stored for it
    a prompt with none after S stages: the stored correct response (if any) joins its group (reward as
        scored then), so its group-relative advantage is not all zero; else the group stays constant

Easy prompts cost k completions, hard ones up to S k. The reused response is off-policy; like the paper we
treat it as an ordinary group member: the trainer recomputes its old log-probs under the current policy
(the PPO ratio starts at 1) and its stored behaviour log-probs only feed the mismatch metric. The buffer
holds one response per prompt (token ids, text, log-probs, reward) and is saved with the checkpoint.
Replaces DAPO's dynamic sampling (the two are not combined).
"""

from __future__ import annotations

from typing import Any, Sequence

from pydantic import Field

from rlvr.core.completion_json import completion_from_json, completion_to_json
from rlvr.core.types import Score
from rlvr.registry import Params
from rlvr.sampling.base import ALLOCATORS, Allocator, AllocatorContext, Group

__all__ = ["AR3POParams", "AR3POAllocator"]


class AR3POParams(Params):
    k: int = Field(4, gt=0, description="completions per stage (RECONSTRUCTED)")
    stages: int = Field(3, gt=0, description="stages at most (RECONSTRUCTED)")
    reuse: bool = Field(True, description="add a stored correct response to groups with none")


class AR3POAllocator(Allocator):
    def __init__(self, p: AR3POParams):
        super().__init__(p.k)
        self.p = p
        self.buffer: dict[str, dict[str, Any]] = {}
        self._last = {"reused": 0.0, "buffer": 0.0}

    def extend(self, groups: Sequence[Group], stage: int) -> list[int]:
        if stage >= self.p.stages:
            return [0] * len(groups)
        return [self.p.k if g.n and not any(c >= 1.0 for c in g.correct) else 0 for g in groups]

    def finalize(self, groups: list[Group], step: int) -> list[Group]:
        reused = 0
        for g in groups:
            hits = [i for i, c in enumerate(g.correct) if c >= 1.0]
            if hits:
                i = hits[-1]
                comp, sc = g.completions[i], g.scores[i]
                self.buffer[g.example.id] = {
                    **completion_to_json(comp), "reward": float(g.rewards[i]), "score": float(sc.reward),
                    "components": {k: float(v) for k, v in sc.components.items() if isinstance(v, (int, float))}}
            elif self.p.reuse and g.n and g.example.id in self.buffer:
                b = self.buffer[g.example.id]
                vision = g.completions[0].vision if g.completions else None  # the same prompt's images
                g.completions.append(completion_from_json(g.example.id, b, vision))
                g.scores.append(Score(b["score"], dict(b["components"]), {"reused": True}))
                g.rewards.append(b["reward"])
                g.reused += 1
                reused += 1
        self._last = {"reused": float(reused), "buffer": float(len(self.buffer))}
        return groups

    def metrics(self) -> dict[str, float]:
        return dict(self._last)

    def state_dict(self) -> dict[str, Any]:
        return {"buffer": self.buffer}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        self.buffer = {k: dict(v) for k, v in state["buffer"].items()}


def _check(run_cfg, p: AR3POParams) -> list[str]:
    if run_cfg.algorithm.dynamic_sampling.enabled:
        return ["replaces DAPO dynamic sampling; set algorithm.dynamic_sampling.enabled=false"]
    return []


@ALLOCATORS.register("ar3po", AR3POParams, check=_check)
def ar3po(ctx: AllocatorContext, p: AR3POParams) -> AR3POAllocator:
    """AR3PO: stages of k until a prompt has a correct response; reuse a stored one for prompts with none."""
    return AR3POAllocator(p)

"""AERO, Adaptive Efficient Rollout Optimization (Zhang et al. 2026, "Train Less, Learn More: Adaptive Efficient
Rollout Optimization for Group-Based Reinforcement Learning", arXiv:2602.14338) — PARTIAL: the stage
structure, rescue increment and rejection rule are from a review; the Bayesian part is RECONSTRUCTED.

    Stage I: n_explore completions per prompt; u = pass rate
    Stage II, within a step budget N_budget = budget_per_prompt x prompts:
      rescue (u <= u_res, no correct yet): n_extra more per stage until the first correct one or the budget
          runs out; when the budget cannot serve every rescue prompt, higher posterior means go first
      rejection (0 < u < 0.5): keep all c correct, keep m = ceil(k c) incorrect chosen at random, drop the rest
      high accuracy (u >= 0.5): nothing (``prune_high`` mirrors the rejection: keep ceil(k f) of c correct,
          RECONSTRUCTED)
    posterior per prompt: Beta(a, b), a += c, b += n - c with every generated completion (prior Beta(a0, b0))

The paper also uses the posterior mean as the baseline of all-0 / all-1 groups (A = r - p~) to avoid
zero-advantage groups. That is the advantage estimator's job (``algorithm.advantage: aero``): each kept
completion's score carries the prompt's posterior mean *before* this step's update as the component
``prior_pass_rate``, so the baseline never depends on the group it is applied to. Random subsets are seeded by ``(seed, step, prompt id)``.
Replaces DAPO's dynamic sampling.
"""

from __future__ import annotations

import math
from dataclasses import replace
from typing import Any, Sequence

from pydantic import Field

from rlvr.core.types import Example, GenerationRequest
from rlvr.registry import Params
from rlvr.sampling.base import ALLOCATORS, Allocator, AllocatorContext, Group, rng_for

__all__ = ["AEROParams", "AEROAllocator", "reject"]


class AEROParams(Params):
    n_explore: int = Field(4, gt=0, description="stage-I completions per prompt (RECONSTRUCTED)")
    n_extra: int = Field(2, gt=0, description="completions per rescue stage")
    u_res: float = Field(0.0, ge=0.0, lt=0.5, description="stage-I pass rate at or below which a prompt is rescued")
    k: float = Field(1.0, gt=0.0, description="incorrect kept per correct one in low-success groups")
    prune_high: bool = Field(False, description="also prune surplus correct completions of u >= 0.5 groups")
    budget_per_prompt: int | None = Field(None, gt=0, description="step budget per prompt (default: rollout.group_size)")
    prior: tuple[float, float] = Field((1.0, 1.0), description="Beta prior (a0, b0) of each prompt's success rate")


def reject(correct: Sequence[float], keep_ratio: float, rng, minority_correct: bool = True) -> list[int]:
    """Indices kept: every member of the minority class and ``ceil(keep_ratio x minority)`` of the majority."""
    pos = [i for i, c in enumerate(correct) if c >= 1.0]
    neg = [i for i, c in enumerate(correct) if c < 1.0]
    few, many = (pos, neg) if minority_correct else (neg, pos)
    m = min(len(many), math.ceil(keep_ratio * len(few) - 1e-9))
    chosen = sorted(rng.choice(len(many), size=m, replace=False).tolist()) if m else []
    return sorted(few + [many[j] for j in chosen])


class AEROAllocator(Allocator):
    def __init__(self, p: AEROParams, group_size: int, seed: int):
        super().__init__(p.n_explore)
        self.p, self.seed = p, seed
        self.per_prompt = p.budget_per_prompt or group_size
        self.posterior: dict[str, list[float]] = {}
        self._left = 0
        self._stage1: list[float] = []
        self._last: dict[str, float] = {}

    def allocate(self, examples: Sequence[Example], stats: Any = None) -> list[GenerationRequest]:
        self._left = self.per_prompt * len(examples) - self.p.n_explore * len(examples)
        self._stage1 = []
        return [GenerationRequest(ex, self.p.n_explore) for ex in examples]

    def _mean(self, ex_id: str) -> float:
        a, b = self.posterior.get(ex_id, self.p.prior)
        return a / (a + b)

    def extend(self, groups: Sequence[Group], stage: int) -> list[int]:
        if stage == 1:
            self._stage1 = [g.pass_rate for g in groups]
        rescue = [i for i, g in enumerate(groups)
                  if g.n and self._stage1[i] <= self.p.u_res and not any(c >= 1.0 for c in g.correct)]
        rescue.sort(key=lambda i: (-self._mean(groups[i].example.id), i))
        out = [0] * len(groups)
        for i in rescue:
            if self._left < self.p.n_extra:
                break
            out[i] = self.p.n_extra
            self._left -= self.p.n_extra
        return out

    def finalize(self, groups: list[Group], step: int) -> list[Group]:
        rejected = 0
        for g in groups:
            c = sum(1 for x in g.correct if x >= 1.0)
            a, b = self.posterior.get(g.example.id, self.p.prior)
            self.posterior[g.example.id] = [a + c, b + g.n - c]
            prior_mean = a / (a + b)
            g.scores = [replace(sc, components={**sc.components, "prior_pass_rate": prior_mean}) for sc in g.scores]
            u = c / g.n if g.n else 0.0
            if 0 < u < 0.5 or (self.p.prune_high and 0.5 <= u < 1):
                keep = reject(g.correct, self.p.k, rng_for(int(self.seed), "aero", step, g.example.id), u < 0.5)
                rejected += g.n - len(keep)
                g.completions = [g.completions[i] for i in keep]
                g.scores = [g.scores[i] for i in keep]
                g.rewards = [g.rewards[i] for i in keep]
        self._last = {"rejected": float(rejected), "budget_left": float(self._left)}
        return groups

    def metrics(self) -> dict[str, float]:
        return dict(self._last)

    def state_dict(self) -> dict[str, Any]:
        return {"posterior": self.posterior}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        self.posterior = {k: [float(v[0]), float(v[1])] for k, v in state["posterior"].items()}


def _check(run_cfg, p: AEROParams) -> list[str]:
    out = []
    if run_cfg.algorithm.dynamic_sampling.enabled:
        out.append("replaces DAPO dynamic sampling; set algorithm.dynamic_sampling.enabled=false")
    if p.n_explore > (p.budget_per_prompt or run_cfg.rollout.group_size):
        out.append(f"n_explore={p.n_explore} exceeds the budget per prompt")
    return out


@ALLOCATORS.register("aero", AEROParams, check=_check, provides=("prior_pass_rate",))
def aero(ctx: AllocatorContext, p: AEROParams) -> AEROAllocator:
    """AERO: explore, rescue zero-accuracy prompts in small increments, reject surplus incorrect completions."""
    return AEROAllocator(p, ctx.group_size, ctx.seed)

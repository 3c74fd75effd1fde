"""PACED-RL's prompt scheduling and accuracy-error-prioritised replay (Kim et al. 2026, "Beyond Normalization:
Rethinking the Partition Function as a Difficulty Scheduler for RLVR", arXiv:2602.12642) — RECONSTRUCTED.

In GFlowNet-style training the learned partition function is an accuracy estimate: with binary rewards and
target ``pi* ~ pi_b exp(beta r)``, ``Z(x) = 1 + p(x)(e^beta - 1)``, so ``p_hat = (Z - 1) / (e^beta - 1)``
(:func:`accuracy_from_partition`). For group-relative objectives the same idea is a learned p_hat table,
here the decayed pass rates of PromptStats. Each batch::

    replay slots (floor(k * replay_fraction)): prompts with the largest estimate error
        priority(x) = | p_hat(x) before scoring - p_obs(x) |    (buffer of at most buffer_size prompts)
    other slots: drawn without replacement with weight  p_hat (1 - p_hat) + floor   (prior for unseen prompts)

Deviation: the paper replays stored rollouts (off-policy, with their behaviour log-probs); rlvr replays the
prompts with fresh rollouts, which keeps every update on-policy. The replay ratio and floor were not
recovered (RECONSTRUCTED defaults).
"""

from __future__ import annotations

import math
from typing import Any, Sequence

from pydantic import Field

from rlvr.core.types import Example
from rlvr.lazy import np
from rlvr.registry import Params
from rlvr.sampling.base import SAMPLERS, ExampleRows, Group, SamplerContext, gumbel_top_k, rng_for

__all__ = ["PacedParams", "PacedSampler", "accuracy_from_partition", "paced_weights"]


class PacedParams(Params):
    replay_fraction: float = Field(0.25, ge=0.0, le=1.0, description="share of a batch replayed (RECONSTRUCTED)")
    floor: float = Field(0.05, ge=0.0, description="added to p(1-p) so no prompt starves (RECONSTRUCTED)")
    prior: float = Field(0.5, ge=0.0, le=1.0, description="accuracy estimate of a prompt never seen")
    buffer_size: int = Field(4096, gt=0, description="prompts kept in the replay buffer (highest priority)")
    min_priority: float = Field(0.0, ge=0.0, description="errors at or below this are not buffered")


def accuracy_from_partition(log_z: float, beta: float) -> float:
    """``p_hat = (Z - 1) / (e^beta - 1)`` for binary rewards (the paper's Z <-> accuracy relation)."""
    return (math.exp(log_z) - 1.0) / math.expm1(beta)


def paced_weights(p_hat: np.ndarray, floor: float) -> np.ndarray:
    p_hat = np.asarray(p_hat, dtype=np.float64)
    return p_hat * (1.0 - p_hat) + floor


class PacedSampler:
    def __init__(self, examples: Sequence[Example], stats: Any, p: PacedParams, seed: int):
        if not examples:
            raise ValueError("cannot sample prompts from an empty split")
        self.examples, self.p, self.seed, self.stats = list(examples), p, seed, stats
        self.index = {e.id: i for i, e in enumerate(self.examples)}
        self.rows = ExampleRows(self.examples, stats)
        self.buffer: dict[str, float] = {}
        self.calls = 0
        self._last: dict[str, float] = {}

    def next(self, k: int, step: int = 0) -> list[Example]:
        n_replay = min(math.floor(k * self.p.replay_fraction + 1e-9), len(self.buffer))
        ranked = sorted(self.buffer.items(), key=lambda kv: (-kv[1], kv[0]))[:n_replay]
        replay = [self.index[i] for i, _ in ranked]
        for i, _ in ranked:
            del self.buffer[i]
        w = paced_weights(self.rows.estimate(self.p.prior), self.p.floor)
        rng = rng_for(int(self.seed), "paced", step, self.calls)
        self.calls += 1
        rest = gumbel_top_k(w, k - len(replay), rng, exclude=np.asarray(replay, dtype=np.int64))
        idx = replay + rest.tolist()
        if len(idx) < k:
            idx = list(np.resize(np.asarray(idx), k))
        self._last = {"replayed": float(len(replay)), "buffer": float(len(self.buffer))}
        return [self.examples[i] for i in idx]

    def observe(self, groups: Sequence[Group], step: int) -> None:
        """Priorities from the estimate *before* this step's statistics update (called first)."""
        for g in groups:
            if g.example.id not in self.index or not g.completions:
                continue
            before = self.stats.pass_rate(g.example.id)
            seen = before is not None and self.stats.row(g.example.id)["visits"] > 0
            err = abs((before if seen else self.p.prior) - g.pass_rate)
            if err > self.p.min_priority:
                self.buffer[g.example.id] = err
        if len(self.buffer) > self.p.buffer_size:
            keep = sorted(self.buffer.items(), key=lambda kv: (-kv[1], kv[0]))[: self.p.buffer_size]
            self.buffer = dict(keep)

    def metrics(self) -> dict[str, float]:
        return dict(self._last)

    def state_dict(self) -> dict[str, Any]:
        return {"calls": self.calls, "buffer": dict(self.buffer)}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        self.calls, self.buffer = int(state["calls"]), {k: float(v) for k, v in state["buffer"].items()}


@SAMPLERS.register("paced", PacedParams)
def paced(ctx: SamplerContext, p: PacedParams) -> PacedSampler:
    """PACED-RL: prompts weighted by p(1-p) of their accuracy estimate, replay of the worst-estimated (RECONSTRUCTED)."""
    return PacedSampler(ctx.examples, ctx.stats, p, ctx.seed)

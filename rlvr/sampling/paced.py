"""PACED-RL's prompt scheduling and accuracy-error-prioritised replay (Kim et al. 2026, "Beyond Normalization:
Rethinking the Partition Function as a Difficulty Scheduler for RLVR", arXiv:2602.12642) — RECONSTRUCTED.

In GFlowNet-style training the learned partition function is an accuracy estimate: with binary rewards and
target ``pi* ~ pi_b exp(beta r)``, ``Z(x) = 1 + p(x)(e^beta - 1)``, so ``p_hat = (Z - 1) / (e^beta - 1)``
(:func:`accuracy_from_partition`). ``estimate`` picks where p_hat comes from: ``log_z``, the learned table of
``tb`` with ``log_z: learned`` (read through the run's algorithm state, p_hat clipped to [0, 1]; a prompt the
table has not trained gets ``prior``); ``pass_rate``, the decayed pass rates of PromptStats (the same idea
for group-relative objectives); ``auto`` (default), the table when the run has one, else pass rates.
Each batch::

    replay slots (floor(k * replay_fraction)): prompts with the largest estimate error
        priority(x) = | p_hat(x) before scoring - p_obs(x) |    (buffer of at most buffer_size prompts)
    other slots: drawn without replacement with weight  p_hat (1 - p_hat) + floor   (prior for unseen prompts)

The sampler's replay re-issues prompts with fresh rollouts (on-policy); the paper's replay of *stored*
rollouts (off-policy, with their behaviour log-probs) is the ``paced_replay`` budget
(:mod:`rlvr.sampling.paced_replay`; then set ``replay_fraction: 0``). The replay ratio and floor were not
recovered (RECONSTRUCTED defaults).
"""

from __future__ import annotations

import math
from typing import Any, Literal, Sequence

from pydantic import Field

from rlvr.core.prompt_keys import prompt_keys
from rlvr.core.types import Example
from rlvr.lazy import np
from rlvr.registry import Params
from rlvr.sampling.base import SAMPLERS, ExampleRows, Group, SamplerContext, gumbel_top_k, rng_for

__all__ = ["PacedParams", "PacedSampler", "accuracy_from_partition", "paced_weights", "accuracy_table",
           "AccuracyEstimates", "estimate_of"]

Estimate = Literal["auto", "log_z", "pass_rate"]


class PacedParams(Params):
    replay_fraction: float = Field(0.25, ge=0.0, le=1.0, description="share of a batch replayed (RECONSTRUCTED)")
    floor: float = Field(0.05, ge=0.0, description="added to p(1-p) so no prompt starves (RECONSTRUCTED)")
    prior: float = Field(0.5, ge=0.0, le=1.0, description="accuracy estimate of a prompt never seen")
    buffer_size: int = Field(4096, gt=0, description="prompts kept in the replay buffer (highest priority)")
    min_priority: float = Field(0.0, ge=0.0, description="errors at or below this are not buffered")
    estimate: Estimate = Field("auto", description="p_hat from tb's learned log Z table (log_z), decayed pass "
                                                   "rates (pass_rate), or the table when the run has one (auto)")


def accuracy_from_partition(log_z: float, beta: float) -> float:
    """``p_hat = (Z - 1) / (e^beta - 1)`` for binary rewards (the paper's Z <-> accuracy relation)."""
    return (math.exp(log_z) - 1.0) / math.expm1(beta)


def paced_weights(p_hat: np.ndarray, floor: float) -> np.ndarray:
    p_hat = np.asarray(p_hat, dtype=np.float64)
    return p_hat * (1.0 - p_hat) + floor


def accuracy_table(algorithm_state: Any, estimate: Estimate = "auto") -> Any:
    """The run's learned per-prompt accuracy table (the one algorithm state with ``accuracy_rows``: tb's log Z
    table), or None for ``estimate: pass_rate`` or when ``auto`` finds none."""
    if estimate == "pass_rate":
        return None
    found = [st for st in (getattr(algorithm_state, "states", None) or {}).values() if hasattr(st, "accuracy_rows")]
    if len(found) > 1:
        raise ValueError("more than one algorithm component keeps a per-prompt accuracy table")
    if not found and estimate == "log_z":
        raise ValueError("estimate: log_z reads tb's learned log Z table; configure algorithm.objective tb with "
                         "log_z: learned (and build the sampler with the run's algorithm state)")
    return found[0] if found else None


def estimate_of(example_ids: Sequence[str], table: Any, stats: Any, prior: float) -> list[float]:
    """p_hat of a few prompts: the table's (``prior`` where it has not trained), else the decayed pass rate
    (``prior`` for a prompt never seen)."""
    if table is not None:
        return table.accuracy(prompt_keys(example_ids), prior).tolist()
    out = []
    for i in example_ids:
        row = stats.row(i)
        out.append(float(row["ema_pass"]) if row is not None and row["visits"] > 0 else prior)
    return out


class AccuracyEstimates:
    """p_hat of a fixed list of examples, vectorised: table rows are looked up once per prompt the table adds
    (it only appends; a reload starts over), pass rates through :class:`ExampleRows`."""

    def __init__(self, examples: Sequence[Example], stats: Any, table: Any):
        self.table, self.rows = table, ExampleRows(examples, stats)
        if table is not None:
            self._pos = {k: i for i, k in enumerate(prompt_keys(e.id for e in examples))}
            self._rows = np.full(len(examples), -1, dtype=np.int64)
            self._seen, self._generation = 0, None

    def all(self, prior: float) -> np.ndarray:
        if self.table is None:
            return self.rows.estimate(prior)
        t = self.table
        if self._generation != t.generation:
            self._rows[:], self._seen, self._generation = -1, 0, t.generation
        for r in range(self._seen, len(t.keys)):
            i = self._pos.get(t.keys[r])
            if i is not None:
                self._rows[i] = r
        self._seen = len(t.keys)
        return t.accuracy_rows(self._rows, prior)


class PacedSampler:
    def __init__(self, examples: Sequence[Example], stats: Any, p: PacedParams, seed: int, table: Any = None):
        if not examples:
            raise ValueError("cannot sample prompts from an empty split")
        self.examples, self.p, self.seed, self.stats, self.table = list(examples), p, seed, stats, table
        self.index = {e.id: i for i, e in enumerate(self.examples)}
        self.estimates = AccuracyEstimates(self.examples, stats, table)
        self.buffer: dict[str, float] = {}
        self.calls = 0
        self._last: dict[str, float] = {}

    def next(self, k: int, step: int = 0) -> list[Example]:
        n_replay = min(math.floor(k * self.p.replay_fraction + 1e-9), len(self.buffer))
        ranked = sorted(self.buffer.items(), key=lambda kv: (-kv[1], kv[0]))[:n_replay]
        replay = [self.index[i] for i, _ in ranked]
        for i, _ in ranked:
            del self.buffer[i]
        p_hat = self.estimates.all(self.p.prior)
        w = paced_weights(p_hat, self.p.floor)
        rng = rng_for(int(self.seed), "paced", step, self.calls)
        self.calls += 1
        rest = gumbel_top_k(w, k - len(replay), rng, exclude=np.asarray(replay, dtype=np.int64))
        idx = replay + rest.tolist()
        if len(idx) < k:
            idx = list(np.resize(np.asarray(idx), k))
        self._last = {"replayed": float(len(replay)), "buffer": float(len(self.buffer)),
                      "p_hat_mean": float(p_hat[idx].mean()) if idx else 0.0,
                      "from_log_z": float(self.table is not None)}
        return [self.examples[i] for i in idx]

    def observe(self, groups: Sequence[Group], step: int) -> None:
        """Priorities from the estimate *before* this step's statistics (and log Z) update (called first);
        nothing is buffered without replay slots (``replay_fraction: 0``)."""
        if self.p.replay_fraction == 0.0:
            return
        groups = [g for g in groups if g.example.id in self.index and g.completions]
        before = estimate_of([g.example.id for g in groups], self.table, self.stats, self.p.prior)
        for g, b in zip(groups, before):
            err = abs(b - g.pass_rate)
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
    return PacedSampler(ctx.examples, ctx.stats, p, ctx.seed, accuracy_table(ctx.algorithm_state, p.estimate))

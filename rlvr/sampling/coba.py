"""CoBA-RL, Capability-Oriented Budget Allocation (Yao et al. 2026, "CoBA-RL: Capability-Oriented Budget
Allocation for Reinforcement Learning in LLMs", arXiv:2602.03048; code ``Within-yao/CoBA-RL``,
``recipe/coba_rl/budget_allocators.py``, ``BetaAllocator``).

A fixed step budget B = budget_per_prompt x M is split over the M prompts by greedy marginal value::

    p_i: success rate over the prompt's last ``window`` observations (unseen: 0.5; all unseen: equal split)
    alloc_i = n_low; R = B - M n_low (B < M n_low: equal split)
    very hard p < 0.05, very easy p > 0.99, explore otherwise;  E = floor(R rho),
        rho = explore_ratio if |explore| > M/2 else 0.6 + (explore_ratio - 0.6) 2 |explore| / M
    tau = tau_min + (tau_max - tau_min) clip(Var(clip(p, s, 1-s)) / var_max, 0, 1)     over the explore set
    V(N, p) = (1 - exp(-N p (1-p) / tau)) BetaPDF(p; a, b)        (p clipped to [s, 1-s], s = smoothing)
    max-heap greedy: give E units one at a time to the explore prompt of largest V(N+1) - V(N), N <= n_up
    leftover: to very hard, then explore, then very easy prompts, proportional to (1-p)^weight_alpha
        (floor), capped at n_up, the remainder spread evenly until spent or every prompt is at n_up
    after scoring, the Beta shape follows the failure rate f (mean over prompts of this step's per-prompt
    failure rate, averaged over the last ``window`` steps): f <- sigmoid(10 (f - 0.5)) if f <= 0.5;
    a = clip(1 + (S_ab - 2) f, 1, S_ab - 1), b = S_ab - a   (start: a = S_ab - 2, b = 2)

Early on (high f) the Beta mode is near high p: budget goes to easier prompts; later to harder ones.
"""

from __future__ import annotations

import heapq
import math
from typing import Any, Literal, Sequence

from pydantic import Field

from rlvr.core.types import Example, GenerationRequest
from rlvr.lazy import np
from rlvr.registry import Params
from rlvr.sampling.base import ALLOCATORS, Allocator, AllocatorContext, Group

__all__ = ["CoBAParams", "CoBAAllocator", "coba_value", "coba_allocate", "beta_shape", "greedy_allocate"]


class CoBAParams(Params):
    budget_per_prompt: int | None = Field(None, gt=0, description="nominal completions per prompt (default: rollout.group_size)")
    n_low: int = Field(2, gt=0, description="completions per prompt at least")
    n_up: int = Field(32, gt=0, description="completions per prompt at most (7B script: 128)")
    window: int = Field(3, gt=0, description="observations per prompt, and steps, in the sliding windows (script: 1)")
    s_ab: float = Field(7.0, gt=2.0, description="alpha + beta of the Beta value shape (script: 11)")
    tau_min: float = Field(3.0, gt=0.0, description="smallest value temperature")
    tau_max: float = Field(12.0, gt=0.0, description="largest value temperature")
    var_max: float = Field(0.1667, gt=0.0, description="pass-rate variance that gives tau_max")
    explore_ratio: float = Field(0.8, ge=0.0, le=1.0, description="share of the spare budget for the explore set")
    smoothing: float = Field(0.01, ge=0.0, lt=0.5, description="pass rates clipped to [s, 1 - s] in the value")
    weight_alpha: float = Field(1.0, ge=0.0, description="leftover weights (1 - p)^weight_alpha")
    remaining: Literal["weighted", "uniform"] = Field("weighted", description="how the leftover budget is spread")


def _beta_pdf(p: float, a: float, b: float) -> float:
    p = min(max(p, 1e-10), 1 - 1e-10)
    return math.exp((a - 1) * math.log(p) + (b - 1) * math.log(1 - p) - (math.lgamma(a) + math.lgamma(b) - math.lgamma(a + b)))


def coba_value(n: int, p: float, tau: float, a: float, b: float, smoothing: float = 0.01) -> float:
    """``V(N, p) = (1 - exp(-N p (1-p) / tau)) BetaPDF(p; a, b)``."""
    p = min(max(p, smoothing), 1 - smoothing)
    return (1 - math.exp(-n / tau * p * (1 - p))) * _beta_pdf(p, a, b)


def greedy_allocate(rates: Sequence[float], total: int, n_low: int, n_up: int, tau: float, a: float, b: float,
                    smoothing: float = 0.01) -> np.ndarray:
    """Heap greedy: start from ``n_low`` each, give ``total - K n_low`` units by largest marginal value."""
    k = len(rates)
    if k * n_low > total:
        return np.full(k, total // k) + (np.arange(k) < total % k)
    n = np.full(k, n_low, dtype=np.int64)
    left = total - k * n_low
    heap = [(-(coba_value(n_low + 1, p, tau, a, b, smoothing) - coba_value(n_low, p, tau, a, b, smoothing)), i)
            for i, p in enumerate(rates) if n_low < n_up]
    heapq.heapify(heap)
    while left > 0 and heap:
        _, i = heapq.heappop(heap)
        n[i] += 1
        left -= 1
        if n[i] < n_up:
            p = rates[i]
            gain = coba_value(n[i] + 1, p, tau, a, b, smoothing) - coba_value(n[i], p, tau, a, b, smoothing)
            heapq.heappush(heap, (-gain, i))
    return n


def _spread(left: int, idx: list[int], rates: np.ndarray, alloc: np.ndarray, p: CoBAParams) -> int:
    room = [i for i in idx if alloc[i] < p.n_up]
    if left <= 0 or not room:
        return left
    if p.remaining == "weighted":
        w = {i: (1 - min(max(rates[i], 1e-6), 1 - 1e-6)) ** p.weight_alpha for i in room}
        total_w = sum(w.values())
        if total_w > 0:
            for i in room:  # the code scales the budget still left, not the initial one; kept as is
                give = min(int(left * w[i] / total_w), p.n_up - alloc[i])
                alloc[i] += give
                left -= give
    return _uniform(left, room, alloc, p.n_up)


def _uniform(left: int, idx: list[int], alloc: np.ndarray, n_up: int) -> int:
    """Spread ``left`` units evenly, again and again until it is spent or every prompt is at ``n_up`` (the code
    spreads once and can leave units unspent when caps bind; the budget is meant to be spent)."""
    room = [i for i in idx if alloc[i] < n_up]
    while left > 0 and room:
        per, extra = divmod(left, len(room))
        for j, i in enumerate(room):
            give = min(per + (1 if j < extra else 0), n_up - alloc[i])
            alloc[i] += give
            left -= give
        room = [i for i in room if alloc[i] < n_up]
    return left


def coba_allocate(rates: Sequence[float | None], total: int, p: CoBAParams, a: float, b: float) -> np.ndarray:
    """Completions per prompt for a step budget ``total`` (see the module docstring)."""
    m = len(rates)
    if m == 0:
        return np.zeros(0, dtype=np.int64)
    if all(r is None for r in rates) or total < m * p.n_low:
        return np.full(m, total // m, dtype=np.int64) + (np.arange(m) < total % m)
    r = np.asarray([0.5 if x is None else x for x in rates], dtype=np.float64)
    alloc = np.full(m, p.n_low, dtype=np.int64)
    left = total - m * p.n_low
    hard = [i for i in range(m) if r[i] < 0.05]
    easy = [i for i in range(m) if r[i] > 0.99]
    explore = [i for i in range(m) if 0.05 <= r[i] <= 0.99]
    if explore:
        rho = p.explore_ratio if len(explore) > m / 2 else 0.6 + (p.explore_ratio - 0.6) * (2 * len(explore) / m)
        budget = int(left * rho)
        if budget > 0:
            clipped = np.clip(r[explore], p.smoothing, 1 - p.smoothing)
            tau = p.tau_min + (p.tau_max - p.tau_min) * float(np.clip(clipped.var() / p.var_max, 0.0, 1.0))
            got = greedy_allocate(r[explore].tolist(), len(explore) * p.n_low + budget, p.n_low, p.n_up, tau, a, b,
                                  p.smoothing)
            alloc[explore] = got
            left -= int(got.sum()) - len(explore) * p.n_low
    for part in (hard, explore, easy):
        left = _spread(left, part, r, alloc, p)
    _uniform(left, list(range(m)), alloc, p.n_up)
    return alloc


def beta_shape(window_success: Sequence[float], s_ab: float) -> tuple[float, float]:
    """``(a, b)`` from the per-step mean success rates of the window."""
    f = 1.0 - float(np.mean(window_success))
    if f <= 0.5:
        f = 1.0 / (1.0 + math.exp(-10.0 * (f - 0.5)))
    a = min(max(1.0 + (s_ab - 2.0) * f, 1.0), s_ab - 1.0)
    return a, s_ab - a


class CoBAAllocator(Allocator):
    def __init__(self, p: CoBAParams, group_size: int):
        super().__init__(p.budget_per_prompt or group_size)
        self.p = p
        self.history: dict[str, list[list[float]]] = {}  # id -> last `window` [successes, total]
        self.steps: list[float] = []  # last `window` per-step mean success rates
        self.a, self.b = p.s_ab - 2.0, 2.0
        self._last: dict[str, float] = {}

    def rate(self, ex_id: str) -> float | None:
        h = self.history.get(ex_id)
        if not h:
            return None
        tot = sum(t for _, t in h)
        return sum(s for s, _ in h) / tot if tot else None

    def allocate(self, examples: Sequence[Example], stats: Any = None) -> list[GenerationRequest]:
        alloc = coba_allocate([self.rate(e.id) for e in examples], self.group_size * len(examples), self.p,
                              self.a, self.b)
        self._last = {"alpha": self.a, "beta": self.b, "alloc_min": float(alloc.min()) if len(alloc) else 0.0,
                      "alloc_max": float(alloc.max()) if len(alloc) else 0.0}
        return [GenerationRequest(e, int(n)) for e, n in zip(examples, alloc)]

    def finalize(self, groups: list[Group], step: int) -> list[Group]:
        rates = []
        for g in groups:
            if not g.n:
                continue
            s = float(sum(1 for c in g.correct if c >= 1.0))
            h = self.history.setdefault(g.example.id, [])
            h.append([s, float(g.n)])
            del h[: -self.p.window]
            rates.append(s / g.n)
        if rates:
            self.steps.append(float(np.mean(rates)))
            del self.steps[: -self.p.window]
            self.a, self.b = beta_shape(self.steps, self.p.s_ab)
        return groups

    def metrics(self) -> dict[str, float]:
        return dict(self._last)

    def state_dict(self) -> dict[str, Any]:
        return {"history": self.history, "steps": self.steps, "alpha": self.a, "beta": self.b}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        self.history = {k: [list(x) for x in v] for k, v in state["history"].items()}
        self.steps, self.a, self.b = list(state["steps"]), float(state["alpha"]), float(state["beta"])


def _check(run_cfg, p: CoBAParams) -> list[str]:
    return [f"n_low={p.n_low} must be <= n_up={p.n_up}"] if p.n_low > p.n_up else []


@ALLOCATORS.register("coba", CoBAParams, check=_check)
def coba(ctx: AllocatorContext, p: CoBAParams) -> CoBAAllocator:
    """CoBA-RL: a fixed budget split greedily by a Beta-shaped marginal value of more completions."""
    return CoBAAllocator(p, ctx.group_size)

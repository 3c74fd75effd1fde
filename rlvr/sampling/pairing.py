"""Positive-negative prompt pairing (Sheng et al. 2026, "Beyond Variance: Prompt-Efficient RLVR via Rare-Event
Amplification and Bidirectional Pairing", arXiv:2602.03452) — RECONSTRUCTED selection rule.

Every batch holds hard-but-solvable prompts q+ (low but non-zero pass rate) and easy-but-brittle prompts q-
(high but below 1), half each::

    q+ = the lowest estimates p in (0, tau_low];    q- = the highest estimates p in [tau_high, 1)

(0 and 1 give no signal and are never chosen.) Until both kinds are known, the batch is filled with fresh
prompts from the uniform stream, which scores the pool online (the paper scores its pool offline with M
rollouts per prompt). Estimates are the decayed pass rates of PromptStats. ``fixed: true`` keeps the first
pairs found for the rest of the run (the paper's 1-shot-style regime); ``false`` re-selects every step.
Group normalisation then turns q+'s rare success into a large positive advantage and q-'s rare failure into
a large negative one (``grpo``: with G = 8 and one success, A = +2.6458 for it with the population std);
the paper's pair-level reweighting (Weighted GRPO) is an advantage transform and not part of this sampler.
"""

from __future__ import annotations

from typing import Any, Sequence

from pydantic import Field, model_validator

from rlvr.core.types import Example
from rlvr.lazy import np
from rlvr.registry import Params
from rlvr.sampling.base import SAMPLERS, ExampleRows, Group, SamplerContext
from rlvr.sampling.prompts import uniform_stream

__all__ = ["PairingParams", "PairingSampler", "select_pairs"]


class PairingParams(Params):
    tau_low: float = Field(0.2, gt=0.0, lt=1.0, description="q+ has pass rate in (0, tau_low] (RECONSTRUCTED)")
    tau_high: float = Field(0.8, gt=0.0, lt=1.0, description="q- has pass rate in [tau_high, 1) (RECONSTRUCTED)")
    fixed: bool = Field(True, description="keep the first pairs found for the whole run")

    @model_validator(mode="after")
    def _order(self) -> "PairingParams":
        if self.tau_low >= self.tau_high:
            raise ValueError("tau_low must be below tau_high")
        return self


def select_pairs(est: np.ndarray, seen: np.ndarray, tau_low: float, tau_high: float,
                 n: int) -> tuple[list[int], list[int]]:
    """Up to ``n`` q+ indices (lowest estimate in (0, tau_low]) and ``n`` q- (highest in [tau_high, 1))."""
    est = np.asarray(est, dtype=np.float64)
    plus = np.flatnonzero(seen & (est > 0) & (est <= tau_low))
    minus = np.flatnonzero(seen & (est >= tau_high) & (est < 1))
    plus = plus[np.argsort(est[plus], kind="stable")][:n]
    minus = minus[np.argsort(-est[minus], kind="stable")][:n]
    return plus.tolist(), minus.tolist()


class PairingSampler:
    def __init__(self, examples: Sequence[Example], stats: Any, p: PairingParams, fresh):
        self.examples, self.p, self.fresh = list(examples), p, fresh
        self.rows = ExampleRows(self.examples, stats)
        self.stats = stats
        self.pairs: tuple[list[int], list[int]] | None = None
        self._last = {"paired": 0.0}

    def next(self, k: int, step: int = 0) -> list[Example]:
        half = k // 2
        if self.pairs is not None and self.p.fixed:
            plus, minus = self.pairs
        else:
            rows = self.rows.rows()
            seen = self.stats.column("visits")[rows] > 0
            plus, minus = select_pairs(self.rows.estimate(0.0), seen, self.p.tau_low, self.p.tau_high, half)
            if self.p.fixed and len(plus) == len(minus) == half and half > 0:
                self.pairs = (plus, minus)
        if not plus or not minus:
            self._last = {"paired": 0.0}
            return self.fresh.next(k, step)
        chosen = [plus[i % len(plus)] for i in range(half)] + [minus[i % len(minus)] for i in range(half)]
        out = [self.examples[i] for i in chosen]
        self._last = {"paired": float(len(out))}
        return out + self.fresh.next(k - len(out), step)

    def observe(self, groups: Sequence[Group], step: int) -> None:
        return None

    def metrics(self) -> dict[str, float]:
        return dict(self._last)

    def state_dict(self) -> dict[str, Any]:
        return {"pairs": None if self.pairs is None else [list(self.pairs[0]), list(self.pairs[1])],
                "fresh": self.fresh.state_dict()}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        self.pairs = None if state["pairs"] is None else (list(state["pairs"][0]), list(state["pairs"][1]))
        self.fresh.load_state_dict(state["fresh"])


@SAMPLERS.register("pairing", PairingParams)
def pairing(ctx: SamplerContext, p: PairingParams) -> PairingSampler:
    """Positive-negative pairing: half hard-but-solvable, half easy-but-brittle prompts (RECONSTRUCTED)."""
    return PairingSampler(ctx.examples, ctx.stats, p, uniform_stream(ctx))

"""FG-ExPO's Gaussian Curriculum Sampling (Lin et al. 2026, "FG-ExPO: Frontier-Guided Exploration-Prioritized
Policy Optimization via Adaptive KL and Gaussian Curriculum", arXiv:2605.11403) — RECONSTRUCTED.

Prompts are drawn with probability proportional to a Gaussian of their running accuracy, centred on the
learning frontier::

    w_q = exp(-(acc_q - mu)^2 / (2 sigma^2)) + w_min          acc_q: decayed pass rate (PromptStats),
    P(q) = w_q / sum_j w_j                                     mu (the prior) for a prompt never seen

and a batch is ``k`` draws without replacement from P (Gumbel-top-k, seeded by ``(seed, step, call)``).
Only "Gaussian centred at about 0.5" is confirmed by the paper; sigma = 0.2 and w_min = 1e-3 (so no prompt
starves) are guesses. The paper's other half, the accuracy-conditioned KL coefficient, is the KL schedule
``accuracy_conditioned`` (see the ``fg_expo`` recipe).
"""

from __future__ import annotations

from typing import Any, Sequence

from pydantic import Field

from rlvr.core.types import Example
from rlvr.lazy import np
from rlvr.registry import Params
from rlvr.sampling.base import SAMPLERS, ExampleRows, Group, SamplerContext, gumbel_top_k, rng_for

__all__ = ["GaussianCurriculumParams", "GaussianCurriculumSampler", "gaussian_weights"]


class GaussianCurriculumParams(Params):
    mu: float = Field(0.5, ge=0.0, le=1.0, description="target accuracy (the centre), also the unseen prior")
    sigma: float = Field(0.2, gt=0.0, description="width of the Gaussian (RECONSTRUCTED)")
    w_min: float = Field(1e-3, ge=0.0, description="weight floor so no prompt starves (RECONSTRUCTED)")


def gaussian_weights(acc: np.ndarray, mu: float, sigma: float, w_min: float) -> np.ndarray:
    """``exp(-(acc - mu)^2 / (2 sigma^2)) + w_min``."""
    acc = np.asarray(acc, dtype=np.float64)
    return np.exp(-((acc - mu) ** 2) / (2 * sigma * sigma)) + w_min


class GaussianCurriculumSampler:
    def __init__(self, examples: Sequence[Example], stats: Any, p: GaussianCurriculumParams, seed: int):
        if not examples:
            raise ValueError("cannot sample prompts from an empty split")
        self.examples, self.p, self.seed = list(examples), p, seed
        self.rows = ExampleRows(self.examples, stats)
        self.calls = 0
        self._last: dict[str, float] = {}

    def next(self, k: int, step: int = 0) -> list[Example]:
        acc = self.rows.estimate(self.p.mu)
        w = gaussian_weights(acc, self.p.mu, self.p.sigma, self.p.w_min)
        rng = rng_for(int(self.seed), "gcs", step, self.calls)
        self.calls += 1
        idx = gumbel_top_k(w, k, rng)
        if len(idx) < k:  # fewer prompts than slots: repeat the draw order
            idx = np.resize(idx, k)
        self._last = {"mean_est_accuracy": float(acc[idx].mean()) if len(idx) else 0.0}
        return [self.examples[i] for i in idx]

    def observe(self, groups: Sequence[Group], step: int) -> None:
        return None

    def metrics(self) -> dict[str, float]:
        return dict(self._last)

    def state_dict(self) -> dict[str, Any]:
        return {"calls": self.calls}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        self.calls = int(state["calls"])


@SAMPLERS.register("gaussian_curriculum", GaussianCurriculumParams)
def gaussian_curriculum(ctx: SamplerContext, p: GaussianCurriculumParams) -> GaussianCurriculumSampler:
    """FG-ExPO GCS: draw prompts by a Gaussian of their running accuracy around mu (RECONSTRUCTED)."""
    return GaussianCurriculumSampler(ctx.examples, ctx.stats, p, ctx.seed)

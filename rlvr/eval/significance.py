"""Significance of a difference between two methods: paired sign-flip permutation tests and bootstrap intervals.

Two pairings are used when comparing method B with method A:

* over held-out prompts: d_p = acc_B(p) - acc_A(p), each method's per-prompt accuracy averaged over its
  seeds. Under H0 (no difference) each d_p is as likely to be -d_p, so the p-value is the share of the
  2^P sign assignments whose |mean| is at least the observed |mean| (exact for P <= 16, else Monte Carlo
  with the (count + 1) / (R + 1) estimate, which never reports p = 0). This measures the difference
  beyond evaluation noise for the trained models at hand; it does not see the variance between training runs.
* over seeds: d_s = final_B(s) - final_A(s) for the seeds both methods ran. Same test, exact over
  2^S assignments; with S seeds the smallest attainable two-sided p is 2 / 2^S (0.25 for 3 seeds),
  which the report states. This one does see training-run variance.

``bootstrap_diff_ci`` gives a percentile bootstrap interval of mean(d).
"""

from __future__ import annotations

import itertools
from typing import Sequence

import numpy as np

__all__ = ["sign_flip_test", "bootstrap_diff_ci", "min_attainable_p"]

_EXACT_MAX = 16


def sign_flip_test(diffs: Sequence[float], resamples: int = 20000, seed: int = 0) -> float:
    """Two-sided p-value of the paired sign-flip permutation test that mean(diffs) = 0."""
    d = np.asarray(diffs, dtype=np.float64)
    if d.size == 0:
        return float("nan")
    observed = abs(d.mean())
    tol = 1e-12 * max(1.0, float(np.abs(d).max()))
    if d.size <= _EXACT_MAX:
        signs = np.array(list(itertools.product((1.0, -1.0), repeat=d.size)))
        means = np.abs(signs @ d) / d.size
        return float(np.mean(means >= observed - tol))
    rng = np.random.default_rng(seed)
    count = 0
    for start in range(0, resamples, 2000):
        m = min(2000, resamples - start)
        signs = rng.choice((1.0, -1.0), size=(m, d.size))
        count += int(np.sum(np.abs(signs @ d) / d.size >= observed - tol))
    return (count + 1) / (resamples + 1)


def min_attainable_p(n: int) -> float:
    """The smallest two-sided p the exact sign-flip test can give with n pairs."""
    return 2.0 / 2**n if n <= _EXACT_MAX else 0.0


def bootstrap_diff_ci(diffs: Sequence[float], level: float = 0.95, resamples: int = 2000,
                      seed: int = 0) -> tuple[float, float]:
    """Percentile bootstrap interval of mean(diffs)."""
    d = np.asarray(diffs, dtype=np.float64)
    if d.size == 0:
        return float("nan"), float("nan")
    idx = np.random.default_rng(seed).integers(0, d.size, size=(resamples, d.size))
    lo, hi = np.quantile(d[idx].mean(axis=1), [(1 - level) / 2, (1 + level) / 2])
    return float(lo), float(hi)

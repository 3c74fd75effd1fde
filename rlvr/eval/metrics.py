"""Evaluation metrics: unbiased pass@k, avg@k, maj@k, and bootstrap confidence intervals over prompts.

pass@k (Chen et al. 2021, arXiv:2107.03374): from n samples of which c are correct,
``pass@k = 1 - C(n-c, k) / C(n, k)``, computed as a product of min(c, k) factors so large n never
overflows; k > n is an error, never a guess. avg@k is the mean correctness of k samples (an estimate of
pass@1). maj@k scores the most frequent answer among k (answers compared by a key such as a normalised
string or an exact fraction; ties go to the answer that appeared first; unparsable answers are dropped,
and a prompt whose answers are all unparsable scores 0).
"""

from __future__ import annotations

from collections import Counter
from typing import Callable, Hashable, Mapping, Sequence

import numpy as np

__all__ = ["pass_at_k", "avg_at_k", "maj_at_k", "majority_answer", "bootstrap_ci", "bootstrap_cis", "mean"]


def pass_at_k(n: int, c: int, k: int) -> float:
    """Unbiased pass@k for one prompt with ``c`` correct among ``n`` samples."""
    if not (0 <= c <= n) or not (1 <= k <= n):
        raise ValueError(f"pass@k needs 0 <= c <= n and 1 <= k <= n (got n={n}, c={c}, k={k})")
    if n - c < k:
        return 1.0
    if c <= k:  # product over c factors: prod_{i=n-c+1}^{n} (1 - k/i)
        prod = 1.0
        for i in range(n - c + 1, n + 1):
            prod *= 1.0 - k / i
        return 1.0 - prod
    prod = 1.0  # product over k factors: prod_{i=0}^{k-1} (n-c-i)/(n-i)
    for i in range(k):
        prod *= (n - c - i) / (n - i)
    return 1.0 - prod


def mean(xs: Sequence[float]) -> float:
    return sum(xs) / len(xs) if xs else float("nan")


def avg_at_k(correct: Sequence[Sequence[float]]) -> float:
    """Mean over prompts of the mean correctness of that prompt's samples."""
    return mean([mean(c) for c in correct])


def majority_answer(answers: Sequence[Hashable | None]) -> Hashable | None:
    """The most frequent non-None answer; ties go to the one that appeared first."""
    counts = Counter(a for a in answers if a is not None)
    if not counts:
        return None
    best = max(counts.values())
    return next(a for a in answers if a is not None and counts[a] == best)


def maj_at_k(answers: Sequence[Sequence[Hashable | None]], golds: Sequence[Hashable],
             key: Callable[[Hashable], Hashable] = lambda a: a) -> float:
    """Majority-vote accuracy: per prompt, 1 when the majority answer's key equals the gold's key."""
    scores = []
    for ans, gold in zip(answers, golds):
        keyed = [key(a) if a is not None else None for a in ans]
        scores.append(float(majority_answer(keyed) == key(gold)))
    return mean(scores)


def bootstrap_cis(columns: Mapping[str, Sequence[float]], level: float = 0.95, resamples: int = 2000,
                  seed: int = 0) -> dict[str, tuple[float, float]]:
    """Percentile bootstrap intervals of the mean over prompts for several per-prompt columns.

    Every column of one length is resampled with the same prompt indices, so intervals of metrics measured
    on the same prompts come from the same bootstrap replicates. Empty columns give ``(nan, nan)``.
    """
    rng = np.random.default_rng(seed)
    idx_by_n: dict[int, np.ndarray] = {}
    out: dict[str, tuple[float, float]] = {}
    lo_q, hi_q = (1 - level) / 2, (1 + level) / 2
    for name, col in columns.items():
        values = np.asarray(col, dtype=np.float64)
        n = len(values)
        if n == 0:
            out[name] = (float("nan"), float("nan"))
            continue
        if n not in idx_by_n:
            idx_by_n[n] = rng.integers(0, n, size=(resamples, n))
        stats = values[idx_by_n[n]].mean(axis=1)
        lo, hi = np.quantile(stats, [lo_q, hi_q])
        out[name] = (float(lo), float(hi))
    return out


def bootstrap_ci(per_prompt: Sequence[float], level: float = 0.95, resamples: int = 2000,
                 seed: int = 0) -> tuple[float, float]:
    """Percentile bootstrap interval of the mean over prompts."""
    return bootstrap_cis({"x": per_prompt}, level, resamples, seed)["x"]

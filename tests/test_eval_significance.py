"""Paired sign-flip tests and the bootstrap interval of a mean difference, against independent computations."""

import itertools
import math

import numpy as np
import pytest

from rlvr.eval.significance import bootstrap_diff_ci, min_attainable_p, sign_flip_test


def _naive_sign_flip(d):
    """Enumerate every sign assignment with plain Python."""
    obs = abs(sum(d)) / len(d)
    hits = total = 0
    for signs in itertools.product([1, -1], repeat=len(d)):
        total += 1
        hits += abs(sum(s * x for s, x in zip(signs, d))) / len(d) >= obs - 1e-12
    return hits / total


@pytest.mark.parametrize("d", [[0.5, 0.25, 0.25, -0.1], [1, 1, 1], [0.2, -0.2, 0.0, 0.4, 0.1, 0.3, -0.05],
                               [0.0, 0.0], [1.0, -1.0, 0.5, 0.5, 0.25, 0.75, 1.0, 0.1, 0.0, 0.3]])
def test_exact_test_equals_naive_enumeration(d):
    assert sign_flip_test(d) == pytest.approx(_naive_sign_flip(d))


def test_hand_computed_values():
    assert sign_flip_test([1, 1, 1]) == pytest.approx(0.25) == min_attainable_p(3)  # only +++ and --- reach 1
    assert sign_flip_test([0, 0, 0]) == 1.0
    assert sign_flip_test([1, -1]) == 1.0
    assert math.isnan(sign_flip_test([]))


def test_monte_carlo_test_matches_the_normal_approximation_for_many_prompts():
    """For 400 prompts the sign-flip null of the mean is close to normal with variance sum(d^2)/P^2."""
    rng = np.random.default_rng(3)
    for shift in (0.0, 0.03, 0.06):
        d = rng.normal(shift, 0.4, 400)
        z = abs(d.mean()) / (math.sqrt((d ** 2).sum()) / len(d))
        normal_p = math.erfc(z / math.sqrt(2))
        assert sign_flip_test(d, resamples=20000) == pytest.approx(normal_p, abs=0.02)


def test_monte_carlo_agrees_with_exact_at_the_switch_size():
    d = np.random.default_rng(5).normal(0.1, 0.3, 16)
    exact = sign_flip_test(d)
    from rlvr.eval import significance

    old = significance._EXACT_MAX
    significance._EXACT_MAX = 0
    try:
        mc = sign_flip_test(d, resamples=40000)
    finally:
        significance._EXACT_MAX = old
    assert mc == pytest.approx(exact, abs=0.01)


def test_type_one_error_is_controlled():
    rng = np.random.default_rng(11)
    rejections = sum(sign_flip_test(rng.normal(0, 1, 30), resamples=2000, seed=i) < 0.05 for i in range(200))
    assert rejections / 200 <= 0.09


def test_bootstrap_diff_interval_matches_normal_theory():
    d = np.random.default_rng(2).normal(0.1, 0.5, 500)
    lo, hi = bootstrap_diff_ci(d)
    half = 1.96 * d.std(ddof=1) / math.sqrt(len(d))
    assert lo == pytest.approx(d.mean() - half, abs=0.01) and hi == pytest.approx(d.mean() + half, abs=0.01)

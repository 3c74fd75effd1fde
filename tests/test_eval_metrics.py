"""Golden values for pass@k, avg@k and maj@k (pass@k: Chen et al. 2021, arXiv:2107.03374) and the bootstrap."""

import itertools
import math

import pytest

from rlvr.eval.metrics import avg_at_k, bootstrap_ci, maj_at_k, majority_answer, pass_at_k


@pytest.mark.parametrize("n,c,k,want", [(5, 2, 2, 0.7), (10, 3, 1, 0.3), (10, 0, 4, 0.0), (10, 10, 4, 1.0),
                                        (10, 8, 3, 1.0), (10, 1, 10, 1.0), (4, 1, 2, 0.5)])
def test_pass_at_k_oracle(n, c, k, want):
    assert pass_at_k(n, c, k) == pytest.approx(want)


def test_pass_at_k_equals_brute_force_subsets():
    for n in range(1, 11):
        for c in range(n + 1):
            for k in range(1, n + 1):
                samples = [1] * c + [0] * (n - c)
                subsets = list(itertools.combinations(range(n), k))
                brute = sum(any(samples[i] for i in s) for s in subsets) / len(subsets)
                assert pass_at_k(n, c, k) == pytest.approx(brute, abs=1e-12), (n, c, k)


def test_pass_at_k_is_monotone_and_stable_for_large_n():
    vals = [pass_at_k(1024, 10, k) for k in range(1, 257)]
    assert all(a <= b + 1e-15 for a, b in zip(vals, vals[1:]))
    assert math.isfinite(pass_at_k(1024, 500, 256))
    assert pass_at_k(1024, 7, 1) == pytest.approx(7 / 1024)


@pytest.mark.parametrize("n,c,k", [(4, 1, 5), (4, 5, 2), (4, -1, 1), (4, 1, 0)])
def test_pass_at_k_rejects_invalid(n, c, k):
    with pytest.raises(ValueError):
        pass_at_k(n, c, k)


def test_avg_at_k_oracle():
    assert avg_at_k([[1, 0, 1, 0], [1, 1, 1, 1]]) == 0.75
    assert avg_at_k([[1, 0, 0], [0, 1, 1]]) == pytest.approx((pass_at_k(3, 1, 1) + pass_at_k(3, 2, 1)) / 2)


def test_maj_at_k_oracle_and_tie_break():
    answers = ["4", "4", "5", "6", "5", "4"]
    assert maj_at_k([answers], ["4"]) == 1.0 and maj_at_k([answers], ["5"]) == 0.0
    assert majority_answer(["5", "4", "4", "5"]) == "5"
    assert majority_answer([None, None]) is None and maj_at_k([[None, None]], ["1"]) == 0.0
    from rlvr.verifiers import parse_number
    assert maj_at_k([["0.5", "1/2", "3"]], ["2/4"], key=parse_number) == 1.0


def test_bootstrap_ci_brackets_the_mean_and_narrows_with_data():
    lo, hi = bootstrap_ci([1, 0] * 50)
    assert lo < 0.5 < hi and 0.05 < hi - lo < 0.3
    lo2, hi2 = bootstrap_ci([1, 0] * 500)
    assert hi2 - lo2 < hi - lo
    assert bootstrap_ci([1.0] * 10) == (1.0, 1.0)

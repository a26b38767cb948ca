"""002 (Wang & Kong 2025) App. C.1: generalised chi-square (Imhof) and the Monte-Carlo error."""
from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings, strategies as st
from scipy import stats

from robattr.bounds import (generalized_chi2_cdf, generalized_chi2_ppf, mc_error_chebyshev,
                            mc_error_quantile)

FAST = settings(max_examples=12, deadline=None)


@pytest.mark.parametrize("k", [1, 2, 5])
@pytest.mark.parametrize("w", [0.3, 1.0, 7.0])
def test_cdf_equal_weights_is_scaled_chi2(k, w):
    # three equal terms w chi2_k = w chi2_{3k}
    x = w * np.array([0.05, 0.5, 1.0, 3.0, 3 * k, 10.0, 40.0])
    got = generalized_chi2_cdf(x, [w] * 3, dofs=k)
    np.testing.assert_allclose(got, stats.chi2.cdf(x / w, 3 * k), atol=1e-8)


@pytest.mark.parametrize("k,lam", [(1, 0.5), (3, 2.5), (4, 10.0)])
def test_cdf_single_noncentral_term_is_ncx2(k, lam):
    x = np.array([0.1, 1.0, 5.0, k + lam, 20.0, 50.0])
    got = generalized_chi2_cdf(2.0 * x, 2.0, dofs=k, noncentrality=lam)
    np.testing.assert_allclose(got, stats.ncx2.cdf(x, k, lam), atol=1e-8)


@pytest.mark.parametrize("signs", ["positive", "mixed"])
def test_cdf_matches_simulation_unequal_weights(signs):
    rng = np.random.default_rng(12)
    w = rng.uniform(0.05, 2.0, size=6)
    if signs == "mixed":
        w[:2] *= -1
    k = np.array([1, 1, 2, 1, 3, 1])
    lam = np.array([0.0, 0.7, 0.0, 1.5, 0.0, 0.0])
    n = 200_000
    q = sum(wj * rng.noncentral_chisquare(kj, lj, size=n) if lj > 0
            else wj * rng.chisquare(kj, size=n) for wj, kj, lj in zip(w, k, lam))
    xs = np.quantile(q, [0.01, 0.1, 0.3, 0.5, 0.7, 0.9, 0.99])
    emp = (q[:, None] <= xs).mean(0)
    got = generalized_chi2_cdf(xs, w, dofs=k, noncentrality=lam)
    se = np.sqrt(got * (1 - got) / n)           # binomial standard error of the empirical CDF
    assert np.all(np.abs(got - emp) <= 5 * se + 1e-6), (got, emp, se)


def test_ppf_inverts_cdf():
    w = np.array([0.2, 1.0, 3.0, 0.05])
    for q in [1e-3, 0.5, 0.999]:
        x = generalized_chi2_ppf(q, w)
        assert generalized_chi2_cdf(x, w) == pytest.approx(q, abs=1e-8)
    wm = np.array([1.0, -0.5, 2.0])
    xs = generalized_chi2_ppf(np.array([0.01, 0.99]), wm, dofs=2)
    np.testing.assert_allclose(generalized_chi2_cdf(xs, wm, dofs=2), [0.01, 0.99], atol=1e-8)
    assert xs[0] < 0 < xs[1]


def test_cdf_edges():
    assert generalized_chi2_cdf(-1.0, [1.0, 2.0]) == 0.0
    assert generalized_chi2_cdf(0.0, [1.0, 2.0]) == 0.0
    assert generalized_chi2_cdf(1e6, [1.0, 2.0]) == pytest.approx(1.0, abs=1e-10)
    assert generalized_chi2_cdf(1.0, [-1.0, -2.0]) == 1.0
    # zero weights are dropped
    assert generalized_chi2_cdf(2.0, [1.0, 0.0]) == pytest.approx(stats.chi2.cdf(2.0, 1), abs=1e-9)


@FAST
@given(st.lists(st.floats(0.01, 10.0), min_size=1, max_size=5),
       st.lists(st.floats(0.0, 30.0), min_size=2, max_size=6))
def test_cdf_monotone_in_x(w, xs):
    xs = np.sort(np.array(xs)) * max(w)
    c = np.asarray(generalized_chi2_cdf(xs, w))
    assert np.all((c >= 0) & (c <= 1))
    assert np.all(np.diff(c) >= -1e-8)


@pytest.mark.parametrize("dist", ["gauss", "uniform"])
def test_mc_error_quantile_matches_simulation(dist):
    # MC mean of N draws of a vector with known diagonal variances; check the (1-alpha)
    # quantile of ||mean - true|| against the empirical one over many repeats.
    rng = np.random.default_rng(3)
    d, n, reps, alpha = 8, 200, 20_000, 0.05
    s2 = rng.uniform(0.1, 2.0, size=d)
    if dist == "gauss":
        draws_mean = rng.standard_normal((reps, d)) * np.sqrt(s2 / n)   # exact law of the mean
    else:
        half = np.sqrt(3 * s2)                   # U(-half, half) has variance s2
        draws_mean = np.zeros((reps, d))
        for _ in range(n):
            draws_mean += rng.uniform(-half, half, size=(reps, d))
        draws_mean /= n
    err = np.linalg.norm(draws_mean, axis=1)
    t = mc_error_quantile(s2, n, alpha)
    # the empirical coverage P(err <= t) should be 1 - alpha up to binomial error
    cover = (err <= t).mean()
    se = np.sqrt(alpha * (1 - alpha) / reps)
    assert abs(cover - (1 - alpha)) <= 4 * se, (cover, se)
    assert t <= mc_error_chebyshev(s2, n, alpha)
    assert (err <= mc_error_chebyshev(s2, n, alpha)).mean() >= 1 - alpha


@settings(max_examples=6, deadline=None)
@given(st.lists(st.floats(1e-4, 5.0), min_size=1, max_size=10),
       st.integers(1, 10_000), st.floats(0.001, 0.5))
def test_chebyshev_dominates_gaussian_quantile(s2, n, alpha):
    assert mc_error_chebyshev(s2, n, alpha) >= mc_error_quantile(s2, n, alpha) * (1 - 1e-9)


def test_mc_error_scaling_and_zero():
    s2 = np.array([0.5, 1.0, 2.0])
    t1, t4 = mc_error_quantile(s2, 100, 0.01), mc_error_quantile(s2, 400, 0.01)
    assert t4 == pytest.approx(t1 / 2, rel=1e-7)            # error ~ 1/sqrt(N)
    assert mc_error_quantile(np.zeros(4), 10, 0.1) == 0.0
    # one coordinate: t = s z_{1 - alpha/2} / sqrt(N)
    assert mc_error_quantile([4.0], 25, 0.05) == pytest.approx(
        2.0 * stats.norm.ppf(0.975) / 5.0, rel=1e-7)


@pytest.mark.parametrize("call", [
    lambda: generalized_chi2_cdf(1.0, []),
    lambda: generalized_chi2_cdf(1.0, [0.0, 0.0]),
    lambda: generalized_chi2_cdf(1.0, [1.0, np.nan]),
    lambda: generalized_chi2_cdf(1.0, [1.0], dofs=0),
    lambda: generalized_chi2_cdf(1.0, [1.0], noncentrality=-1.0),
    lambda: generalized_chi2_cdf(np.nan, [1.0]),
    lambda: generalized_chi2_cdf(1.0, [1.0], method="davies"),
    lambda: generalized_chi2_ppf(1.0, [1.0]),
    lambda: generalized_chi2_ppf(0.0, [1.0]),
    lambda: mc_error_quantile([1.0], 10, 0.0),
    lambda: mc_error_quantile([1.0], 10, 1.0),
    lambda: mc_error_quantile([1.0], 0, 0.1),
    lambda: mc_error_quantile([1.0], 2.5, 0.1),
    lambda: mc_error_quantile([-1.0], 10, 0.1),
    lambda: mc_error_chebyshev([1.0], 10, 1.5),
])
def test_bad_input_raises(call):
    with pytest.raises(ValueError):
        call()

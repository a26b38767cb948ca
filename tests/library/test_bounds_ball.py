"""002 (Wang & Kong 2025): uniform l2-ball smoothing bounds in robattr.bounds."""
from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings, strategies as st
from scipy import optimize

from robattr.bounds import (ball_smoothing_cosine_bound, ball_smoothing_max_eps,
                            ball_smoothing_min_radius, ball_volume_ratio, shift_cosine_bound)

FAST = settings(max_examples=60, deadline=None)


def uniform_ball(n, d, r, rng):
    u = rng.standard_normal((n, d))
    u /= np.linalg.norm(u, axis=1, keepdims=True)
    return u * r * rng.random((n, 1)) ** (1.0 / d)


@pytest.mark.parametrize("d", [1, 2, 3, 10])
@pytest.mark.parametrize("ratio", [0.1, 0.5, 1.0, 1.7])
def test_volume_ratio_matches_monte_carlo(d, ratio):
    rng = np.random.default_rng(d * 100 + int(ratio * 10))
    r, n = 1.3, 200_000
    eps = ratio * r
    z = uniform_ball(n, d, r, rng)
    shift = np.zeros(d)
    shift[0] = eps
    # fraction of B(x) outside B(x~) is half of V_U / V_S (the two crescents are congruent)
    p = np.mean(np.linalg.norm(z - shift, axis=1) > r)
    est = 2 * p
    se = 2 * np.sqrt(p * (1 - p) / n)
    assert abs(ball_volume_ratio(d, r, eps) - est) < 5 * se + 1e-12


def test_volume_ratio_known_cases_and_limits():
    assert ball_volume_ratio(1, 2.0, 0.5) == pytest.approx(0.25)           # intervals: eps / r
    # d = 2: lens area 2 r^2 acos(t) - (eps/2) sqrt(4 r^2 - eps^2), t = eps / 2r
    r, e = 1.0, 0.6
    lens = 2 * r**2 * np.arccos(e / (2 * r)) - e / 2 * np.sqrt(4 * r**2 - e**2)
    assert ball_volume_ratio(2, r, e) == pytest.approx(2 * (1 - lens / (np.pi * r**2)), rel=1e-12)
    assert ball_volume_ratio([1, 5, 784], 1.0, 0.0).tolist() == [0.0, 0.0, 0.0]
    assert np.all(ball_volume_ratio([1, 5, 784], 1.0, [2.0, 2.5, 10.0]) == 2.0)
    # small eps: V_U / V_S ~ eps * 2 Γ(d/2+1) / (sqrt(pi) r Γ((d+1)/2)); no cancellation
    from scipy.special import gammaln
    for d in (2, 784, 3072):
        lin = 1e-9 * 2 * np.exp(gammaln(d / 2 + 1) - gammaln((d + 1) / 2)) / np.sqrt(np.pi)
        assert ball_volume_ratio(d, 1.0, 1e-9) == pytest.approx(lin, rel=1e-6)


@FAST
@given(st.integers(1, 4000), st.floats(0.01, 10), st.floats(0, 3), st.floats(0, 3))
def test_volume_ratio_monotone_in_eps(d, r, e1, e2):
    lo, hi = sorted((e1 * r, e2 * r))
    v_lo, v_hi = ball_volume_ratio(d, r, lo), ball_volume_ratio(d, r, hi)
    assert 0.0 <= v_lo <= v_hi + 1e-15 <= 2.0 + 1e-15


@FAST
@given(st.floats(1e-3, 1.0), st.floats(0.0, 5.0))
def test_corrected_below_printed(c, q):
    a = q * c
    cor, pr = shift_cosine_bound(c, a, True), shift_cosine_bound(c, a, False)
    assert cor <= pr + 1e-15
    if a == 0:
        assert cor == pr == 1.0
    elif q > 1e-3:          # the gap is q^4/2 + O(q^6): below 1e-3 it is lost to rounding
        assert cor < pr


def test_corrected_is_the_minimum_over_theta():
    rng = np.random.default_rng(0)
    theta = np.linspace(0, np.pi, 200_001)
    for _ in range(200):
        c = rng.uniform(0.01, 1.0)
        a = rng.uniform(0, 0.999) * c
        f = lambda t: (c + a * np.cos(t)) / np.hypot(c + a * np.cos(t), a * np.sin(t))  # noqa: E731
        grid = f(theta).min()
        res = optimize.minimize_scalar(f, bounds=(0, np.pi), method="bounded",
                                       options={"xatol": 1e-12})
        want = shift_cosine_bound(c, a)
        assert res.fun == pytest.approx(want, abs=1e-9)
        assert grid == pytest.approx(want, abs=1e-9)
        assert np.cos(res.x) == pytest.approx(-a / c, abs=1e-4)
        assert want < shift_cosine_bound(c, a, corrected=False) or a == 0


def test_no_certificate_convention():
    assert shift_cosine_bound(0.5, 0.5) == 0.0
    assert shift_cosine_bound(0.5, 0.6) == -1.0
    out = ball_smoothing_cosine_bound(0.1, 1.0, 2, 1.0, [0.0, 1.0, 3.0])
    assert out[0] == 1.0 and out[1] == -1.0 and out[2] == -1.0


def test_paper_example_numbers():
    assert ball_smoothing_cosine_bound(0.5, 1.0, 2, 1.0, 0.3) == pytest.approx(0.6487, abs=1e-4)
    assert ball_smoothing_cosine_bound(0.5, 1.0, 2, 1.0, 0.3, corrected=False) == pytest.approx(
        0.7958, abs=1e-4)


@pytest.mark.parametrize("corrected", [True, False])
def test_max_eps_and_min_radius_invert_the_bound(corrected):
    rng = np.random.default_rng(1 + corrected)
    finite = 0
    for _ in range(200):
        d = int(rng.choice([1, 2, 3, 10, 64, 784, 3072]))
        M = rng.uniform(0.1, 5)
        h = rng.uniform(0.05, 1.0) * M
        T = rng.uniform(0.5, 0.99)
        r = rng.uniform(0.1, 5)
        e = ball_smoothing_max_eps(h, M, d, r, T, corrected)
        if np.isinf(e):
            assert not corrected
            assert ball_smoothing_cosine_bound(h, M, d, r, 100 * r, corrected) >= T
            continue
        finite += 1
        assert ball_smoothing_cosine_bound(h, M, d, r, e, corrected) == pytest.approx(T, abs=1e-8)
        assert ball_smoothing_cosine_bound(h, M, d, r, 0.99 * e, corrected) >= T
        eps = rng.uniform(0.01, 2)
        rmin = ball_smoothing_min_radius(h, M, d, eps, T, corrected)
        assert ball_smoothing_cosine_bound(h, M, d, rmin, eps, corrected) == pytest.approx(T, abs=1e-8)
        assert ball_smoothing_cosine_bound(h, M, d, 1.01 * rmin, eps, corrected) >= T
    assert finite >= 100, finite                # the inversions were checked, not skipped


def test_corrected_certificates_are_smaller():
    r = np.array([0.5, 1.0, 3.5])
    for T in (0.8, 0.9):
        assert np.all(ball_smoothing_max_eps(0.5, 1, 784, r, T) < ball_smoothing_max_eps(
            0.5, 1, 784, r, T, corrected=False))
        assert ball_smoothing_min_radius(0.5, 1, 784, 0.5, T) > ball_smoothing_min_radius(
            0.5, 1, 784, 0.5, T, corrected=False)


@pytest.mark.parametrize("call, name", [
    (lambda: ball_volume_ratio(2, -1.0, 0.1), "r"),
    (lambda: ball_volume_ratio(2, 1.0, -0.1), "eps"),
    (lambda: ball_volume_ratio(0, 1.0, 0.1), "d"),
    (lambda: ball_volume_ratio(2.5, 1.0, 0.1), "d"),
    (lambda: ball_smoothing_cosine_bound(0.5, -1.0, 2, 1.0, 0.1), "M"),
    (lambda: ball_smoothing_cosine_bound(2.0, 1.0, 2, 1.0, 0.1), "h_norm"),
    (lambda: ball_smoothing_cosine_bound(0.0, 1.0, 2, 1.0, 0.1), "h_norm"),
    (lambda: ball_smoothing_max_eps(0.5, 1.0, 2, 1.0, 1.0), "T"),
    (lambda: ball_smoothing_max_eps(0.5, 1.0, 2, 1.0, 0.0), "T"),
    (lambda: ball_smoothing_max_eps(0.5, 1.0, 2, -1.0, 0.9), "r"),
    (lambda: ball_smoothing_min_radius(0.5, 1.0, 2, -0.5, 0.9), "eps"),
    (lambda: ball_smoothing_min_radius(0.5, 1.0, 0, 0.5, 0.9), "d"),
    (lambda: ball_smoothing_min_radius(0.5, 1.0, 2, 0.5, 1.5), "T"),
])
def test_bad_input_names_the_argument(call, name):
    with pytest.raises(ValueError, match=rf"^{name} "):
        call()


def test_max_eps_is_unbounded_only_from_q_two():
    """With q = ||h|| k_T / M (certified_eps, §1), the budget is at most 2r while q < 2 and
    unbounded from q = 2 on, because V_U/V_S never exceeds 2 (issue 26: not from q = 1)."""
    d, r, M = 784, 1.5, 1.0
    for T in (0.45, 0.44):                       # printed k_T = sqrt(1/T^2 - 1): 1.98, 2.04
        q = float(np.sqrt(1 / T**2 - 1))
        e = ball_smoothing_max_eps(M, M, d, r, T, corrected=False)
        if q < 2:
            assert np.isfinite(e) and 0 < e <= 2 * r
            assert ball_smoothing_cosine_bound(M, M, d, r, 1.01 * e, corrected=False) < T
        else:
            assert np.isinf(e)
            assert ball_smoothing_cosine_bound(M, M, d, r, 100 * r, corrected=False) >= T
    # a valid M (||h|| <= M) keeps q <= k_T < 2 for T >= 0.45, so the budget stays finite
    assert np.isfinite(ball_smoothing_max_eps(1.0, 1.0, d, r, 0.8, corrected=False))
    assert np.isfinite(ball_smoothing_max_eps(1.0, 1.0, d, r, 0.8))

"""wangkong2025: the center-smoothing certificate and the ball-smoothing statistics."""
import numpy as np
import pytest
import torch
from hypothesis import given, settings, strategies as st
from scipy import special, stats

from robattr.bounds import (ball_smoothing_max_eps, ball_smoothing_stats,
                            center_smoothing_certificate, center_smoothing_quantile,
                            cosine_relaxation_ratio)


def test_quantile_matches_scipy():
    q = center_smoothing_quantile([0.0, 0.3], 0.5, delta=0.05)
    ref = stats.norm.cdf(stats.norm.ppf(0.55) + np.array([0.0, 0.6]))
    np.testing.assert_allclose(q, ref, rtol=1e-12)
    q2 = center_smoothing_quantile(0.3, 0.5, delta=0.05, n_cert=1000, alpha=0.01)
    assert q2 == pytest.approx(ref[1] + np.sqrt(np.log(100) / 2000))


@pytest.mark.parametrize("bad", [dict(sigma=0), dict(sigma=-1), dict(delta=0.5),
                                 dict(delta=0), dict(n_cert=0), dict(alpha=1.0)])
def test_quantile_rejects(bad):
    kw = dict(sigma=1.0, delta=0.05, n_cert=10, alpha=0.01) | bad
    with pytest.raises(ValueError):
        center_smoothing_quantile(0.1, **kw)
    with pytest.raises(ValueError):
        center_smoothing_quantile(-0.1, 1.0)


@settings(max_examples=200, deadline=None)
@given(st.integers(2, 30), st.integers(0, 10_000))
def test_cosine_relaxation_at_most_two(dim, seed):
    """1 - cos obeys the triangle inequality with factor gamma = 2 (exact statement)."""
    rng = np.random.default_rng(seed)
    a, b, c = (rng.standard_normal((50, dim)) for _ in range(3))
    assert np.all(cosine_relaxation_ratio(a, b, c) <= 2 + 1e-9)


def test_cosine_relaxation_two_is_tight():
    t = 1e-3
    r = cosine_relaxation_ratio([1, 0], [np.cos(t), np.sin(t)], [np.cos(2 * t), np.sin(2 * t)])
    assert r[0] > 1.999          # so gamma < 2 would fail: the factor 2 is needed


def test_center_smoothing_identity_l2_covers_shift():
    """For f = identity (l2), the center moves by about the input shift: the certified
    output radius must be at least eps."""
    x = torch.zeros(6)
    eps = [0.1, 0.3, 0.5]
    out = center_smoothing_certificate(lambda z: z, x, eps, sigma=0.5, distance="l2",
                                       n_pred=1500, n_cert=1500, seed=0)
    assert out["accepted"]
    assert np.all(out["bound"] >= np.array(eps))
    assert np.all(np.diff(out["bound"]) >= 0)            # monotone in eps
    # a sampled center: its distance to x is about sigma * sqrt(d) / few, never 0
    assert 0 < float(out["center"].norm()) < 0.5 * 6 ** 0.5 * 2


def test_center_smoothing_rejects():
    x = torch.zeros(3)
    with pytest.raises(ValueError):
        center_smoothing_certificate(lambda z: z, x, 0.1, sigma=1.0, distance="linf")
    with pytest.raises(ValueError):
        center_smoothing_certificate("f", x, 0.1, sigma=1.0)
    with pytest.raises(ValueError):
        center_smoothing_certificate(lambda z: z, x, 0.1, sigma=1.0, n_pred=0)
    with pytest.raises(ValueError):
        center_smoothing_certificate(lambda z: z, x, 0.1, sigma=1.0, gamma=0.5)


def test_center_smoothing_quantile_above_one_is_nan():
    out = center_smoothing_certificate(lambda z: z, torch.zeros(2), [0.1, 50.0], sigma=0.1,
                                       distance="l2", n_pred=50, n_cert=2000, seed=1)
    assert np.isfinite(out["bound"][0]) and np.isnan(out["bound"][1])


class _Lin(torch.nn.Module):
    def __init__(self, d, c, seed):
        super().__init__()
        g = torch.Generator().manual_seed(seed)
        self.w = torch.nn.Parameter(torch.randn(c, d, generator=g))

    def forward(self, x):
        return torch.tanh(x.flatten(1) @ self.w.T)


@settings(max_examples=15, deadline=None)
@given(st.integers(2, 12), st.integers(0, 1000), st.floats(0.1, 3.0))
def test_ball_stats_on_random_networks(d, seed, r):
    """Exact facts on random small networks: ||h_unit|| <= 1, ||h|| <= g_max, the l_inf
    stand-in never exceeds the l2 one, and the unit certificate is defined everywhere."""
    model = _Lin(d, 3, seed)
    x = torch.rand(4, d, generator=torch.Generator().manual_seed(seed))
    out = ball_smoothing_stats(model, x, r=r, n_samples=16, seed=seed)
    hn = out["h"].flatten(1).norm(dim=1)
    assert torch.all(hn <= out["g_max"] * (1 + 1e-5))
    assert torch.all(out["h_unit"].flatten(1).norm(dim=1) <= 1 + 1e-5)
    assert torch.all(out["g_linf"] <= out["g_max"] * (1 + 1e-6))
    assert torch.all(out["var"] >= 0) and torch.all(out["var_unit"] >= 0)
    e = ball_smoothing_max_eps(out["h_unit"].flatten(1).norm(dim=1).clamp(max=1).numpy(), 1.0,
                               d, r, 0.9)
    assert np.all(e >= 0)


def test_ball_stats_mean_matches_noise_average():
    """h is the same estimator as robattr.attributions.ball_smooth with the same seed."""
    from robattr.attributions import ball_smooth
    model = _Lin(5, 3, 0)
    x = torch.rand(3, 5, generator=torch.Generator().manual_seed(1))
    y = torch.tensor([0, 1, 2])
    out = ball_smoothing_stats(model, x, y, r=0.7, n_samples=32, seed=3)
    ref = ball_smooth(model, x, y, r=0.7, n_samples=32, seed=3)
    torch.testing.assert_close(out["h"], ref, rtol=1e-5, atol=1e-6)


def test_ball_stats_rejects():
    model = _Lin(3, 2, 0)
    x = torch.rand(2, 3)
    with pytest.raises(ValueError):
        ball_smoothing_stats(model, x, r=0.0, n_samples=4)
    with pytest.raises(ValueError):
        ball_smoothing_stats(model, x, r=1.0, n_samples=1)
    with pytest.raises(ValueError):
        ball_smoothing_stats(model, x, r=1.0, n_samples=4, base="grad")


@settings(max_examples=200, deadline=None)
@given(st.integers(1, 200_000), st.floats(1e-4, 0.6), st.booleans())
def test_eps_ratio_lower_bound(d, q9, corrected):
    """eps_max(T=0.8) / eps_max(T=0.9) >= k(0.8)/k(0.9) for every d and ||h||/M: the
    inequality the certified_eps notebook holds the paper's Tables 5-7 to."""
    k = (lambda T: np.sqrt(1 - T * T)) if corrected else (lambda T: np.sqrt(1 / T**2 - 1))
    lam = k(0.8) / k(0.9)
    hm = min(1.0, q9 / k(0.9))
    if hm * k(0.8) >= 1:
        return
    e9 = ball_smoothing_max_eps(hm, 1.0, d, 1.0, 0.9, corrected=corrected)
    e8 = ball_smoothing_max_eps(hm, 1.0, d, 1.0, 0.8, corrected=corrected)
    assert e8 >= lam * e9 * (1 - 1e-7)
    # and the convexity behind it, directly with scipy
    z = lambda q: np.sqrt(special.betaincinv(0.5, (d + 1) / 2, q / 2))  # noqa: E731
    assert z(lam * q9 * hm / q9 * k(0.9)) >= lam * z(hm * k(0.9)) * (1 - 1e-7)

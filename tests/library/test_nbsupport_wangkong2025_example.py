"""Helpers moved out of the wangkong2025 notebooks (issue 19): NumPy ball sampler, random l2
shift, the 002 checks (grid minima, extremal and random bounded g, self-consistent radii,
Monte-Carlo tolerances) and the Monte-Carlo simulation helpers."""
import numpy as np
import pytest
import torch

from robattr.attributions.noise import ball_noise_numpy, random_l2_shift
from robattr.bounds import ball_smoothing_cosine_bound, ball_volume_ratio, shift_cosine_bound
from robattr.bounds.ball import (crescent_field, extremal_crescent_field, first_crossing_radius,
                                 min_cosine_over_directions, random_crescent_fields,
                                 smoothed_cosine_tolerance)
from robattr.bounds.montecarlo import covariance_weights, mc_moments, mc_repeats


# ---- samplers ----

def test_ball_noise_numpy_in_ball_and_uniform_radius():
    rng = np.random.default_rng(0)
    z = ball_noise_numpy(20000, 5, 2.0, rng)
    assert z.shape == (20000, 5)
    rad = np.linalg.norm(z, axis=1)
    assert rad.max() <= 2.0
    assert abs(np.mean((rad / 2.0) ** 5) - 0.5) < 0.01          # (||eta|| / r)^d ~ U[0, 1)
    assert np.abs(z.mean(0)).max() < 0.03


def test_ball_noise_numpy_draw_order_is_documented():
    a, b = np.random.default_rng(3), np.random.default_rng(3)
    u = a.standard_normal((4, 3))
    u /= np.linalg.norm(u, axis=1, keepdims=True)
    expected = u * 1.5 * a.random((4, 1)) ** (1.0 / 3)
    np.testing.assert_array_equal(ball_noise_numpy(4, 3, 1.5, b), expected)


@pytest.mark.parametrize("kw", [dict(n=0), dict(d=1.5), dict(r=0.0), dict(rng=0)])
def test_ball_noise_numpy_rejects_bad_input(kw):
    args = dict(n=3, d=2, r=1.0, rng=np.random.default_rng(0)) | kw
    with pytest.raises(ValueError):
        ball_noise_numpy(**args)


def test_random_l2_shift_has_the_given_norm_and_is_seeded():
    x = torch.rand(3, 1, 4, 4)
    dist = torch.tensor([0.0, 0.5, 2.0])
    s = random_l2_shift(x, dist, seed=1)
    torch.testing.assert_close((s - x).flatten(1).norm(dim=1), dist)
    assert torch.equal(s, random_l2_shift(x, dist, seed=1))
    assert not torch.equal(random_l2_shift(x, 1.0, seed=1), random_l2_shift(x, 1.0, seed=2))


@pytest.mark.parametrize("dist,seed", [(-1.0, 0), (torch.ones(2), 0), (1.0, -1), (1.0, 0.5)])
def test_random_l2_shift_rejects_bad_input(dist, seed):
    with pytest.raises(ValueError):
        random_l2_shift(torch.rand(3, 4), dist, seed=seed)


# ---- ball-smoothing checks ----

def test_min_cosine_over_directions_matches_the_corrected_bound():
    rng = np.random.default_rng(0)
    c = rng.uniform(0.01, 1.0, 300)
    a = rng.uniform(0.0, 0.99, 300) * c
    got = min_cosine_over_directions(c, a, n_grid=20001, chunk=64)
    exact = shift_cosine_bound(c, a)
    assert np.all(got >= exact - 1e-12) and np.abs(got - exact).max() < 1e-6
    assert np.all(got < shift_cosine_bound(c, a, corrected=False) + 1e-12)


@pytest.mark.parametrize("c,a,n_grid",
                         [([1.0], [0.1, 0.2], 10), ([0.0], [0.1], 10), ([1.0], [0.1], 1)])
def test_min_cosine_over_directions_rejects_bad_input(c, a, n_grid):
    with pytest.raises(ValueError):
        min_cosine_over_directions(c, a, n_grid=n_grid)


def test_extremal_crescent_field_attains_the_corrected_bound():
    c, M, d, r, eps = 0.5, 1.0, 2, 1.0, 0.3
    ex = extremal_crescent_field(c, M, d, r, eps)
    assert np.linalg.norm(ex["w"]) <= M * (1 + 1e-12)
    np.testing.assert_allclose(ex["h_x"], [c, 0.0], atol=1e-12)
    assert np.isclose(np.linalg.norm(ex["h_xt"] - ex["h_x"]), ex["a"])
    cos = ex["h_x"] @ ex["h_xt"] / (np.linalg.norm(ex["h_x"]) * np.linalg.norm(ex["h_xt"]))
    assert np.isclose(cos, ball_smoothing_cosine_bound(c, M, d, r, eps), atol=1e-12)
    assert cos < ball_smoothing_cosine_bound(c, M, d, r, eps, corrected=False)


def test_extremal_crescent_field_none_where_inadmissible():
    assert extremal_crescent_field(0.1, 1.0, 2, 1.0, 1.5) is None           # a >= c
    with pytest.raises(ValueError):
        extremal_crescent_field(0.0, 1.0, 2, 1.0, 0.3)


def test_crescent_field_takes_each_value_on_its_piece():
    x, xt = np.zeros(2), np.array([1.0, 0.0])
    z = np.array([[-0.5, 0.0], [0.5, 0.0], [1.5, 0.0], [5.0, 5.0]])
    out = crescent_field(z, x, xt, 1.0, [-1.0, 0.0], [0.0, 2.0], [1.0, 0.0])
    np.testing.assert_array_equal(out, [[-1, 0], [0, 2], [1, 0], [0, 0]])
    with pytest.raises(ValueError):
        crescent_field(z[0], x, xt, 1.0, [-1.0, 0.0], [0.0, 2.0], [1.0, 0.0])


def test_random_crescent_fields_respect_the_crescent_and_corrected_bounds():
    out = random_crescent_fields(500, 1.0, 1.0, np.random.default_rng(0))
    shift = np.linalg.norm(out["h_xt"] - out["h_x"], axis=1)
    assert np.all(shift <= out["ratio"] * (1 + 1e-12))
    assert out["d"].min() >= 2 and out["d"].max() <= 784
    np.testing.assert_allclose(out["ratio"], ball_volume_ratio(out["d"], 1.0, out["rho"]))
    c = np.linalg.norm(out["h_x"], axis=1)
    cos = (out["h_x"] * out["h_xt"]).sum(1) / (c * np.linalg.norm(out["h_xt"], axis=1))
    assert np.all(cos >= ball_smoothing_cosine_bound(c, 1.0, out["d"], 1.0, out["rho"]) - 1e-12)
    with pytest.raises(ValueError):
        random_crescent_fields(0, 1.0, 1.0, np.random.default_rng(0))


def test_first_crossing_radius_cases():
    radii = [1.0, 2.0, 3.0]
    eps_max = [[0.6, 1.0, 2.0],        # first point already reaches 0.5
               [0.1, 0.3, 0.9],        # crosses between 2 and 3
               [0.1, 0.2, 0.3],        # never: beyond the grid
               [0.1, 0.9, 0.2]]        # not monotone: the first crossing
    got = first_crossing_radius(eps_max, radii, 0.5)
    np.testing.assert_allclose(got, [1.0, 2.0 + 0.2 / 0.6, np.inf, 1.5])
    with pytest.raises(ValueError):
        first_crossing_radius(eps_max, [3.0, 2.0, 1.0], 0.5)
    with pytest.raises(ValueError):
        first_crossing_radius(eps_max, [1.0, 2.0], 0.5)


def test_smoothed_cosine_tolerance_formula_and_cap():
    ones = torch.ones(2, 2)
    h0 = {"h": torch.tensor([[3.0, 4.0], [1e-6, 0.0]]), "var": ones}
    h1 = {"h": torch.tensor([[6.0, 8.0], [1.0, 0.0]]), "var": ones}
    tol = smoothed_cosine_tolerance(h0, h1, 4)
    assert torch.isclose(tol[0], torch.tensor(3 * 1.0 / 5.0))          # sqrt(4 / 4) = 1, min norm 5
    assert tol[1] == 2.0                                                # capped
    with pytest.raises(ValueError):
        smoothed_cosine_tolerance(h0, h1, 0)


# ---- Monte-Carlo simulation ----

def test_mc_moments_match_numpy_and_do_not_depend_on_the_chunk():
    pts = np.random.default_rng(0).standard_normal((1000, 3))
    f = lambda z: np.c_[z, z[:, :1] ** 2]               # noqa: E731

    def drawer():
        pos = [0]

        def draw(m):
            pos[0] += m
            return pts[pos[0] - m:pos[0]]
        return draw

    mean, cov = mc_moments(f, drawer(), 1000, chunk=1000)
    vals = f(pts)
    np.testing.assert_allclose(mean, vals.mean(0))
    np.testing.assert_allclose(cov, np.cov(vals.T, bias=True), atol=1e-12)
    mean2, cov2 = mc_moments(f, drawer(), 1000, chunk=7)
    np.testing.assert_allclose(mean2, mean, atol=1e-12)
    np.testing.assert_allclose(cov2, cov, atol=1e-12)
    with pytest.raises(ValueError):
        mc_moments(f, drawer(), 1)


def test_mc_repeats_shapes_and_values():
    rng = np.random.default_rng(0)
    draw = lambda n: rng.standard_normal((n, 4))       # noqa: E731
    out = mc_repeats(lambda z: z, draw, 50, 7, np.zeros(4), n_own=3)
    assert out["errors"].shape == (7,) and out["norms"].shape == (7,)
    np.testing.assert_allclose(out["errors"], out["norms"])            # reference 0
    assert len(out["variances"]) == 3 and out["variances"][0].shape == (4,)
    with pytest.raises(ValueError):
        mc_repeats(lambda z: z, draw, 1, 7, np.zeros(4))


def test_covariance_weights_are_positive_eigenvalues_over_n():
    cov = np.diag([4.0, 2.0, 0.0])
    np.testing.assert_allclose(np.sort(covariance_weights(cov, 2)), [1.0, 2.0])
    with pytest.raises(ValueError):
        covariance_weights(np.ones((2, 3)), 2)
    with pytest.raises(ValueError):
        covariance_weights(cov, 0)


def test_diagonal_law_undercovers_when_every_coordinate_is_the_same():
    """montecarlo §3's constructed map (the erratum on 002 C.1): every coordinate is the same
    bounded function of the noise, so the diagonal law of ||h^||^2 is too narrow and its
    central interval covers far fewer runs than 1 - alpha; the full-covariance law does not."""
    from robattr.bounds import generalized_chi2_ppf

    rng = np.random.default_rng(0)
    d, n, reps, alpha = 8, 50, 200, 0.01
    w = rng.standard_normal(d)
    g = lambda z: np.tanh(z @ w + 0.3)[:, None] * np.ones(d) / np.sqrt(d)  # noqa: E731
    draw = lambda m: ball_noise_numpy(m, d, 1.0, rng)                         # noqa: E731
    h, cov = mc_moments(g, draw, 20000)
    sq = mc_repeats(g, draw, n, reps, h)["norms"] ** 2
    var = np.diag(cov)
    mu, U = np.linalg.eigh(cov)
    top = mu > 1e-12 * mu.max()
    assert top.sum() == 1                                   # rank one: all coordinates move together
    laws = {"diagonal": (var / n, n * h ** 2 / var),
            "full": (mu[top] / n, n * (U.T @ h)[top] ** 2 / mu[top])}
    cover = {}
    for name, (ww, ll) in laws.items():
        t1, t2 = generalized_chi2_ppf([alpha / 2, 1 - alpha / 2], ww, noncentrality=ll)
        cover[name] = float(np.mean((sq >= t1) & (sq <= t2)))
    assert cover["diagonal"] < 0.85 and cover["full"] > 0.95, cover

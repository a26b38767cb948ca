"""000 (Wang et al. 2020): robattr.bounds.geometry -- Lipschitz searches, Stein's lemma,
the smoothed Hessian and Theorem 2's bounds, checked against closed forms and scipy."""
from __future__ import annotations

import math

import numpy as np
import pytest
import torch
from hypothesis import assume, given, settings, strategies as st
from scipy import integrate, stats
from torch import nn

from robattr.bounds import (E_ABS_Z2_MINUS_1, first_order_excess_shrinks, input_hessian_spectral_norm,
                            max_grad_norm, max_gradient_change, max_gradient_change_converged,
                            power_iteration, prop2_sigma_threshold,
                            saliency_lipschitz, smoothed_hessian_quadrature,
                            smoothed_hessian_spectral_norm, smoothed_hvp,
                            smoothgrad_lipschitz_bound, stein_gradient, thm1_bound, thm3_bound)

FAST = settings(max_examples=25, deadline=None)


@pytest.fixture(autouse=True)
def _float64():
    """float64 inside these tests only (the default dtype is restored afterwards)."""
    old = torch.get_default_dtype()
    torch.set_default_dtype(torch.float64)
    yield
    torch.set_default_dtype(old)


class Quadratic(nn.Module):
    """logit 0 = ½ xᵀAx + bᵀx, logit 1 = 0: gradient Ax + b, Hessian A everywhere."""

    def __init__(self, a, b):
        super().__init__()
        self.a, self.b = a, b

    def forward(self, x):
        f = 0.5 * ((x @ self.a) * x).sum(1) + x @ self.b
        return torch.stack([f, torch.zeros_like(f)], 1)


class Sine(nn.Module):
    """logit 0 = sin(wᵀx): smoothed gradient w cos(wᵀx) exp(−σ²‖w‖²/2)."""

    def __init__(self, w):
        super().__init__()
        self.w = w

    def forward(self, x):
        f = torch.sin(x @ self.w)
        return torch.stack([f, torch.zeros_like(f)], 1)


def random_mlp(d, seed, width=8, beta=1.0, scale=0.8):
    g = torch.Generator().manual_seed(seed)
    net = nn.Sequential(nn.Linear(d, width), nn.Softplus(beta), nn.Linear(width, 3))
    with torch.no_grad():
        for p in net.parameters():
            p.copy_(torch.randn(p.shape, generator=g) * scale)
    return net.double()


def sym(d, seed):
    rng = np.random.default_rng(seed)
    m = rng.standard_normal((d, d))
    return torch.tensor(m + m.T)


# --------------------------------------------------------------------------- constants
def test_e_abs_z2_minus_1_matches_quadrature():
    val, _ = integrate.quad(lambda z: abs(z * z - 1) * stats.norm.pdf(z), -12, 12,
                            points=[-1, 1], epsabs=1e-13)
    assert E_ABS_Z2_MINUS_1 == pytest.approx(val, rel=1e-9)
    assert E_ABS_Z2_MINUS_1 == pytest.approx(0.9679, abs=1e-4)


def test_bounds_values_and_errors():
    assert smoothgrad_lipschitz_bound(1.0, 0.5) == pytest.approx(8.0)
    assert smoothgrad_lipschitz_bound(1.0, 0.5, tight=True) == pytest.approx(4 * E_ABS_Z2_MINUS_1)
    s = prop2_sigma_threshold(0.3, 2.0, 5.0)
    assert smoothgrad_lipschitz_bound(2.0, s) == pytest.approx(2 * 5.0 / 0.3)   # the crossing
    st_ = prop2_sigma_threshold(0.3, 2.0, 5.0, tight=True)
    assert smoothgrad_lipschitz_bound(2.0, st_, tight=True) == pytest.approx(2 * 5.0 / 0.3)
    assert thm1_bound(2.0, 0.5) == pytest.approx(8.0)
    assert thm3_bound(0.1, 3.0) == pytest.approx(0.3)
    for bad in (lambda: smoothgrad_lipschitz_bound(1.0, 0.0),
                lambda: smoothgrad_lipschitz_bound(-1.0, 1.0),
                lambda: prop2_sigma_threshold(0.1, 1.0, 0.0),
                lambda: thm1_bound(1.0, 0.0), lambda: thm3_bound(-0.1, 1.0)):
        with pytest.raises(ValueError):
            bad()


# --------------------------------------------------------------------------- quadrature
@FAST
@given(st.integers(1, 3), st.floats(0.05, 2.0), st.integers(0, 10_000))
def test_quadrature_exact_for_quadratics_and_sines(d, sigma, seed):
    a = sym(d, seed)
    x = torch.tensor(np.random.default_rng(seed + 1).standard_normal(d))
    h = smoothed_hessian_quadrature(lambda z: 0.5 * ((z @ a) * z).sum(1) + z.sum(1) ** 3, x, sigma=sigma,
                                    nodes=8 if d == 3 else 12)
    # Hessian of (Σz)^3 is 6 (Σz) 11ᵀ, whose Gaussian average is 6 (Σx) 11ᵀ
    assert torch.allclose(h, a + 6 * x.sum() * torch.ones(d, d), atol=1e-8)
    w = torch.tensor(np.random.default_rng(seed + 2).standard_normal(d))
    # 30 nodes per axis: exact to degree 59, enough for sin at sigma ||w|| up to about 5
    hs = smoothed_hessian_quadrature(lambda z: torch.sin(z @ w), x, sigma=sigma, nodes=30)
    exact = -torch.outer(w, w) * torch.sin(x @ w) * math.exp(-sigma ** 2 * float(w @ w) / 2)
    assert torch.allclose(hs, exact, atol=1e-4)


@FAST
@given(st.integers(1, 2), st.floats(0.1, 1.5), st.floats(0.3, 3.0), st.integers(0, 10_000))
def test_thm2_tight_bound_holds_on_random_networks(d, sigma, scale, seed):
    """‖H̃‖₂ ≤ E|Z²−1| F/σ² ≤ 2F/σ² with f = a softmax probability (F = 1)."""
    net = random_mlp(d, seed, scale=scale)
    x = torch.tensor(np.random.default_rng(seed).standard_normal(d))
    f = lambda z: torch.softmax(net(z), 1)[:, 0]    # noqa: E731
    n = 200 if d == 1 else 80
    h = smoothed_hessian_quadrature(f, x, sigma=sigma, nodes=n).detach()
    hs = smoothed_hessian_quadrature(f, x, sigma=sigma, nodes=n, form="stein").detach()
    err = (h - hs).abs().max().item()
    bound = smoothgrad_lipschitz_bound(1.0, sigma, tight=True)
    assume(err < 1e-3 * bound)          # the quadrature has converged (both forms agree)
    norm = torch.linalg.eigvalsh(h).abs().max().item()
    assert norm <= bound + d * err


def test_thm2_tight_constant_is_approached_by_the_extreme_function():
    """f(z) = tanh(k((z−x)² − σ²)) → F·sign((z−x)² − σ²): σ²‖H̃‖ → E|Z²−1| (not 2)."""
    sigma = 0.7
    vals = []
    for k in (1.0, 10.0, 1000.0):
        f = lambda z: np.tanh(k * (z * z - sigma ** 2)) * stats.norm.pdf(z, scale=sigma)
        # Stein form in 1-D: H̃ = E[(u² − σ²) f(x + u)] / σ⁴ at x = 0
        val, _ = integrate.quad(lambda u: (u * u - sigma ** 2) * f(u), -8 * sigma, 8 * sigma,
                                points=[-sigma, sigma], limit=400)
        vals.append(val / sigma ** 4)
    bound = smoothgrad_lipschitz_bound(1.0, sigma, tight=True)
    assert all(v <= bound * (1 + 1e-9) for v in vals)
    assert vals[-1] / bound > 0.99 and vals[0] < vals[1] < vals[2]
    assert vals[-1] < 0.5 * smoothgrad_lipschitz_bound(1.0, sigma)   # 2F/σ² is loose by ~2x


# --------------------------------------------------------------------------- power iteration
@FAST
@given(st.integers(2, 12), st.integers(0, 10_000))
def test_power_iteration_matches_eigvalsh(d, seed):
    a = torch.stack([sym(d, seed), sym(d, seed + 7)])
    v0 = torch.randn(2, d, generator=torch.Generator().manual_seed(seed), dtype=torch.float64)
    est, v = power_iteration(lambda v: torch.einsum("nij,nj->ni", a, v), v0, iters=3000,
                             tol=1e-13)
    ev = np.linalg.eigvalsh(a.numpy())
    exact = np.abs(ev).max(1)
    gaps = np.sort(np.abs(ev), 1)
    ok = (gaps[:, -1] - gaps[:, -2]) / gaps[:, -1] > 0.05     # distinct top |eigenvalue|
    assume(bool(ok.any()))                                       # else nothing to compare
    assert np.all(est.numpy() <= exact * (1 + 1e-9))
    assert np.allclose(est.numpy()[ok], exact[ok], rtol=1e-4)


def test_smoothed_hessian_operators_match_dense_average():
    torch.manual_seed(0)
    d, n, sigma = 3, 16, 0.4
    net = random_mlp(d, 3)
    x = torch.randn(2, d)
    t = torch.tensor([0, 1])
    noise = sigma * torch.randn(n, 2, d)
    dense = []
    for i in range(2):
        hs = [torch.autograd.functional.hessian(
            lambda z: torch.softmax(net(z[None]), 1)[0, t[i]], x[i] + noise[j, i])
            for j in range(n)]
        dense.append(torch.stack(hs).mean(0))
    dense = torch.stack(dense)
    op = smoothed_hvp(net, x, t, noise=noise, sigma=sigma, output="prob")
    v = torch.randn(2, d)
    assert torch.allclose(op(v), torch.einsum("nij,nj->ni", dense, v), atol=1e-10)
    # the Stein operator is symmetric: <A v, w> = <v, A w>
    stein = smoothed_hvp(net, x, t, noise=noise, sigma=sigma, output="prob", estimator="stein")
    w = torch.randn(2, d)
    assert torch.allclose((stein(v) * w).sum(1), (v * stein(w)).sum(1), atol=1e-10)
    norm = smoothed_hessian_spectral_norm(net, x, t, sigma=sigma, n_samples=n, iters=500,
                                          seed=0)
    assert norm.shape == (2,) and torch.all(norm > 0)


def test_input_hessian_spectral_norm_matches_dense():
    net = random_mlp(4, 11)
    x = torch.randn(3, 4, generator=torch.Generator().manual_seed(1), dtype=torch.float64)
    t = torch.tensor([0, 1, 2])
    est = input_hessian_spectral_norm(net, x, t, iters=2000, seed=0)
    for i in range(3):
        h = torch.autograd.functional.hessian(lambda z: net(z[None])[0, t[i]], x[i])
        ev = np.abs(np.linalg.eigvalsh(h.numpy()))
        assert est[i].item() <= ev.max() * (1 + 1e-9)
        assert est[i].item() == pytest.approx(ev.max(), rel=1e-3)


# --------------------------------------------------------------------------- Stein (Prop 1)
def test_stein_estimators_agree_with_the_closed_form():
    w = torch.tensor([1.5, -0.5, 2.0])
    model = Sine(w)
    x = torch.tensor([[0.3, 0.1, -0.2], [1.0, 0.0, 0.5]])
    sigma = 0.5
    exact = w * torch.cos(x @ w)[:, None] * math.exp(-sigma ** 2 * float(w @ w) / 2)
    path, stein = stein_gradient(model, x, 0, sigma=sigma, n_samples=40_000, output="logit",
                                 control_variate=True, seed=0)
    assert torch.allclose(path, exact, atol=0.03)
    assert torch.allclose(stein, exact, atol=0.05)
    p2, s2 = stein_gradient(model, x, 0, sigma=sigma, n_samples=40_000, output="logit", seed=0)
    assert torch.allclose(p2, path) and torch.allclose(s2, exact, atol=0.06)
    with pytest.raises(ValueError):
        stein_gradient(model, x, 0, sigma=0.0)
    with pytest.raises(ValueError):
        stein_gradient(model, x, 0, sigma=0.1, output="softmax")


# --------------------------------------------------------------------------- searches
def test_searches_on_a_quadratic_reach_their_closed_forms():
    a = sym(4, 5)
    b = torch.zeros(4)
    model = Quadratic(a, b)
    x = torch.zeros(2, 4)
    top = np.abs(np.linalg.eigvalsh(a.numpy())).max()
    eps = 0.3
    # Lemma 1: max ‖A x'‖ over the ball around 0 is eps ‖A‖₂
    L, _ = max_grad_norm(model, x, 0, eps=eps, steps=200, step_size=eps / 5,
                         random_start=True, seed=0)
    assert torch.all(L <= eps * top * (1 + 1e-9)) and torch.allclose(L, torch.full((2,), eps * top), rtol=1e-3)
    # Thm 1: the ratio is at most ‖A‖₂ and the search attains it; 2L/dist bounds it
    lam, xs, dist = saliency_lipschitz(model, x, 0, eps=eps, steps=200, step_size=eps / 5,
                                       seed=0)
    assert torch.all(lam <= top * (1 + 1e-9)) and torch.allclose(lam, torch.full((2,), top), rtol=1e-3)
    assert torch.all(lam <= torch.as_tensor(thm1_bound(L.numpy(), dist.numpy())) * (1 + 1e-9))
    # Thm 3 is exact for a quadratic: max ‖∇f(x) − ∇f(x')‖ = δ ‖H‖₂
    ch, _ = max_gradient_change(model, x, 0, eps=eps, steps=200, step_size=eps / 5, seed=0)
    hn = input_hessian_spectral_norm(model, x, 0, iters=3000, seed=0)
    assert torch.all(ch <= eps * hn * (1 + 1e-6))
    assert torch.allclose(ch, eps * hn, rtol=1e-3)


def test_max_grad_norm_never_below_the_start():
    net = random_mlp(5, 2)
    x = torch.randn(4, 5, generator=torch.Generator().manual_seed(0), dtype=torch.float64)
    t = torch.tensor([0, 1, 2, 0])
    from robattr.bounds.geometry import output_grad
    g0 = output_grad(net, x, t).flatten(1).norm(dim=1)
    L, xd = max_grad_norm(net, x, t, eps=0.5, steps=10)
    assert torch.all(L >= g0 - 1e-12)
    assert torch.all((xd - x).norm(dim=1) <= 0.5 + 1e-9)


def test_search_argument_errors():
    net = random_mlp(3, 0)
    x = torch.zeros(2, 3)
    with pytest.raises(ValueError):
        max_grad_norm(net, x, 0, eps=0.0)
    with pytest.raises(ValueError):
        saliency_lipschitz(net, x, 0, eps=0.1, min_dist=0.2)
    with pytest.raises(ValueError):
        max_gradient_change(net, x, 0, eps=0.1, output="probs")
    with pytest.raises(ValueError):
        smoothed_hvp(net, x, torch.tensor([0, 0]), noise=torch.zeros(3, 2), sigma=0.1)
    with pytest.raises(ValueError):
        smoothed_hvp(net, x, torch.tensor([0, 0]), noise=torch.zeros(3, 2, 3), sigma=0.1,
                     estimator="exact")


# --------------------------------------------------------------------------- Thm 3: the converged search
def test_input_hessian_top_vector_is_the_top_eigenvector():
    a = sym(5, 3)
    model = Quadratic(a, torch.zeros(5))
    x = torch.zeros(3, 5)
    hn, v = input_hessian_spectral_norm(model, x, 0, iters=3000, seed=0, return_vector=True)
    top = np.abs(np.linalg.eigvalsh(a.numpy())).max()
    assert torch.all(hn <= top * (1 + 1e-12)) and torch.allclose(hn, torch.full((3,), top), rtol=1e-5)
    assert torch.allclose(v.norm(dim=1), torch.ones(3))
    assert torch.allclose((v @ a).norm(dim=1), hn, rtol=1e-5)        # ‖A v‖ = ‖A‖₂


def test_converged_search_on_a_quadratic_is_exact():
    """For f = ½ xᵀAx the largest change over B(x, eps) is eps ‖A‖₂, at x ± eps v_top."""
    a = sym(4, 5)
    model = Quadratic(a, torch.zeros(4))
    x = torch.randn(3, 4, generator=torch.Generator().manual_seed(1))
    top = np.abs(np.linalg.eigvalsh(a.numpy())).max()
    _, v = input_hessian_spectral_norm(model, x, 0, iters=3000, seed=0, return_vector=True)
    ch, xp, conv, rounds = max_gradient_change_converged(model, x, 0, eps=0.3, directions=v, seed=0)
    assert torch.allclose(ch, torch.full((3,), 0.3 * top), rtol=1e-9)
    assert bool(conv.all()) and rounds == 2
    assert torch.all((xp - x).norm(dim=1) <= 0.3 + 1e-9)
    # from random starts alone the rounds still climb to the maximum, and never above it
    ch2, _, conv2, rounds2 = max_gradient_change_converged(model, x, 0, eps=0.3, restarts=1, tol=1e-8,
                                                           max_rounds=40, seed=0)
    assert torch.all(ch2 <= 0.3 * top * (1 + 1e-9))
    assert torch.allclose(ch2, torch.full((3,), 0.3 * top), rtol=1e-4)
    assert bool(conv2.all()) and 2 <= rounds2 <= 40


def test_converged_search_on_a_sine_finds_the_exact_maximum_above_the_first_order_bound():
    """f = sin(wᵀx): ∇f(x') − ∇f(x) = w (cos(a + t) − cos a) with a = wᵀx, t = wᵀ(x' − x), so the
    largest change is ‖w‖ max_{|t| ≤ eps‖w‖} |cos(a + t) − cos a| (a 1-D maximum, by a dense grid),
    while eps ‖H_x‖₂ = eps ‖w‖² |sin a|: their ratio exceeds 1 at a small radius, by O(eps)."""
    w = torch.tensor([0.8, -1.1, 0.5])
    model = Sine(w)
    x = torch.tensor([[0.3, 0.2, -0.4], [1.0, 0.1, 0.7]])
    a = (x @ w).numpy()
    nw = float(w.norm())
    hn, v = input_hessian_spectral_norm(model, x, 0, iters=500, seed=0, return_vector=True)
    assert np.allclose(hn.numpy(), nw ** 2 * np.abs(np.sin(a)), rtol=1e-9)
    ratios = {}
    for eps in (0.003, 0.01, 0.3):
        ch, _, conv, _ = max_gradient_change_converged(model, x, 0, eps=eps, directions=v, tol=1e-10,
                                                       max_rounds=30, seed=0)
        t = np.linspace(-eps * nw, eps * nw, 200_001)
        exact = nw * np.abs(np.cos(a[:, None] + t) - np.cos(a[:, None])).max(1)
        assert np.allclose(ch.numpy(), exact, rtol=1e-6) and bool(conv.all())
        ratios[eps] = ch.numpy() / (eps * hn.numpy())
    assert np.all(ratios[0.003] > 1) and np.all(ratios[0.003] - 1 < ratios[0.01] - 1)
    assert np.all(first_order_excess_shrinks(ratios[0.003], ratios[0.01], 0.003, 0.01, tol=1e-6))


def test_converged_search_needs_two_rounds_to_converge_and_a_start():
    net = random_mlp(4, 1)
    x = torch.randn(3, 4, generator=torch.Generator().manual_seed(2))
    t = torch.tensor([0, 1, 2])
    ch, _, conv, rounds = max_gradient_change_converged(net, x, t, eps=0.1, max_rounds=1, seed=0)
    assert rounds == 1 and not bool(conv.any())
    # every start is scored: the result is never below the change at x + eps v
    v = torch.randn(3, 4, generator=torch.Generator().manual_seed(3))
    ch, _, _, _ = max_gradient_change_converged(net, x, t, eps=0.1, directions=v, restarts=0, seed=0)
    from robattr.bounds.geometry import output_grad
    at_v = (output_grad(net, x + 0.1 * v / v.norm(dim=1, keepdim=True), t) - output_grad(net, x, t)).norm(dim=1)
    assert torch.all(ch >= at_v - 1e-12)
    with pytest.raises(ValueError):
        max_gradient_change_converged(net, x, t, eps=0.1, restarts=0)
    with pytest.raises(ValueError):
        max_gradient_change_converged(net, x, t, eps=0.1, directions=torch.zeros(3, 5))
    with pytest.raises(ValueError):
        max_gradient_change_converged(net, x, t, eps=0.1, tol=0.0)


@FAST
@given(st.floats(0.0, 50.0), st.floats(1e-4, 0.05), st.floats(1.5, 20.0))
def test_first_order_rule_passes_an_o_eps_excess_and_fails_a_constant_or_growing_one(c, eps1, k):
    eps2 = k * eps1
    # ratio = 1 + c eps: the excess vanishes in proportion to eps
    assert first_order_excess_shrinks([1 + c * eps1], [1 + c * eps2], eps1, eps2)[0]
    # a wrong constant (ratio -> 1.5, with a first-order slope that has not yet taken over) or
    # a jump (excess ~ 1 / eps) keeps or grows the excess
    c_small = min(c, 0.2 / eps2)
    assert not first_order_excess_shrinks([1.5 + c_small * eps1], [1.5 + c_small * eps2], eps1, eps2)[0]
    assert not first_order_excess_shrinks([1 + 0.01 / eps1], [1 + 0.01 / eps2], eps1, eps2)[0]


def test_first_order_rule_tolerance_and_errors():
    # at the smallest radius within 1 + tol: the bound holds there, whatever the trend
    assert first_order_excess_shrinks([1.0005, 0.99], [1.0, 0.98], 0.01, 0.03, tol=1e-3).all()
    assert not first_order_excess_shrinks([1.002], [1.0], 0.01, 0.03, tol=1e-3)[0]
    # sqrt(eps1 / eps2) = 1/2: an excess that halves passes, one that shrinks less fails
    assert first_order_excess_shrinks([1.05], [1.1], 0.01, 0.04, tol=1e-3)[0]
    assert not first_order_excess_shrinks([1.06], [1.1], 0.01, 0.04, tol=1e-3)[0]
    for bad in (lambda: first_order_excess_shrinks([1.0], [1.0], 0.03, 0.01),
                lambda: first_order_excess_shrinks([1.0], [1.0, 1.0], 0.01, 0.03),
                lambda: first_order_excess_shrinks([1.0], [1.0], 0.01, 0.03, tol=0.0)):
        with pytest.raises(ValueError):
            bad()

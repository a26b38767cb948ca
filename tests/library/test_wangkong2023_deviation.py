"""001 (Wang & Kong 2023): worst-case attribution deviation bounds in robattr.bounds.deviation."""
from __future__ import annotations

import math

import numpy as np
import pytest
import torch
from hypothesis import given, settings, strategies as st
from torch import nn

from robattr.attributions import grad, integrated_gradients
from robattr.bounds import deviation as D
from robattr.bounds.gauss_newton import logit_input_hessian

FAST = settings(max_examples=15, deadline=None)


def softplus_mlp(seed, d=6, h=8, k=3, beta=2.0):
    torch.manual_seed(seed)
    return nn.Sequential(nn.Linear(d, h), nn.Softplus(beta), nn.Linear(h, h), nn.Softplus(beta),
                         nn.Linear(h, k)).double().eval()


def linear_fn(A):
    """g(x) = A x per example: a linear attribution function with Jacobian A."""
    return lambda z: z @ A.T


# ------------------------------------------------------------------ spectral norm
@FAST
@given(seed=st.integers(0, 10_000), method=st.sampled_from(["lanczos", "power"]))
def test_spectral_norm_matches_svd_of_linear_map(seed, method):
    rng = np.random.default_rng(seed)
    d = int(rng.integers(2, 12))
    A = torch.from_numpy(rng.standard_normal((d, d)))
    x = torch.from_numpy(rng.standard_normal((3, d)))
    xi = D.jacobian_spectral_norm(linear_fn(A), x, method, tol=1e-10, max_iter=2000)
    ref = np.linalg.svd(A.numpy(), compute_uv=False)[0]
    assert torch.allclose(xi, torch.full((3,), ref, dtype=torch.float64), rtol=1e-4)


@FAST
@given(seed=st.integers(0, 10_000), method=st.sampled_from(["sm", "ig", "ixg"]))
def test_lanczos_matches_dense_on_random_softplus_nets(seed, method):
    model = softplus_mlp(seed)
    x = torch.rand(4, 6, dtype=torch.float64, generator=torch.Generator().manual_seed(seed))
    fn = D.attribution_function(model, method, 1, steps=8)
    lz = D.jacobian_spectral_norm(fn, x, "lanczos", tol=1e-10, return_vector=True)
    de = D.jacobian_spectral_norm(fn, x, "dense", return_vector=True)
    assert torch.allclose(lz.value, de.value, rtol=1e-7, atol=1e-12)
    # Thm 1 is attained at eps * v_max for the linear part: ||J v_max|| = xi_max
    ops = D.jacobian_ops(fn, x)
    jv = ops.jvp(lz.vector).reshape(4, -1).norm(dim=1)
    assert torch.allclose(jv, lz.value, rtol=1e-6, atol=1e-12)


def test_dense_jacobian_of_saliency_is_the_logit_hessian():
    model = softplus_mlp(3)
    x = torch.rand(2, 6, dtype=torch.float64)
    J = D.dense_jacobian(lambda z: grad(model, z, 2, create_graph=True), x)
    H = logit_input_hessian(model, x, 2)
    assert torch.allclose(J, H, atol=1e-10)


def test_dense_jacobian_of_ig_matches_autograd_functional():
    model = softplus_mlp(4)
    x = torch.rand(1, 6, dtype=torch.float64)
    f = lambda z: integrated_gradients(model, z, 0, steps=5, create_graph=True)  # noqa: E731
    J = D.dense_jacobian(f, x)[0]
    ref = torch.autograd.functional.jacobian(lambda z: f(z.unsqueeze(0))[0], x[0])
    assert torch.allclose(J, ref, atol=1e-10)


def test_func_backend_agrees_with_autograd():
    model = softplus_mlp(5)
    x = torch.rand(3, 6, dtype=torch.float64)
    fn = D.attribution_function(model, "sm", 0)
    a = D.jacobian_spectral_norm(fn, x, tol=1e-10)
    b = D.jacobian_spectral_norm(fn, x, tol=1e-10, backend="func")
    assert torch.allclose(a, b, rtol=1e-8)


def test_zero_jacobian_gives_zero():
    x = torch.rand(2, 5, dtype=torch.float64)
    assert torch.all(D.jacobian_spectral_norm(lambda z: 0 * z + 1.0, x) == 0)


def test_dense_refused_when_too_large_and_bad_arguments():
    x = torch.rand(1, 3, 224, 224)
    with pytest.raises(MemoryError, match="matrix-free"):
        D.jacobian_spectral_norm(lambda z: 2 * z, x, "dense")
    with pytest.raises(ValueError, match="method"):
        D.jacobian_spectral_norm(lambda z: z, x, "svd")
    with pytest.raises(ValueError, match="tol"):
        D.jacobian_spectral_norm(lambda z: z, x, tol=0)
    with pytest.raises(ValueError, match="max_iter"):
        D.jacobian_spectral_norm(lambda z: z, x, max_iter=0)
    with pytest.raises(ValueError, match="differentiabl"):
        D.jacobian_spectral_norm(lambda z: z.detach(), x[:, :, :4, :4])
    with pytest.raises(ValueError, match="x must be"):
        D.jacobian_spectral_norm(lambda z: z, torch.ones(3))
    with pytest.raises(ValueError, match="method"):
        D.attribution_function(nn.Linear(2, 2), "lrp")


# ------------------------------------------------------------------ Thm 2 (l-inf)
@FAST
@given(seed=st.integers(0, 10_000), rank=st.integers(1, 4))
def test_thm2_vertex_maximum_below_bound_and_sign_condition(seed, rank):
    rng = np.random.default_rng(seed)
    d = int(rng.integers(2, 9))
    J = rng.standard_normal((rank, d))
    P = J.T @ J
    eps = float(rng.uniform(0.01, 1.0))
    vmax, s = D.vertex_maximum(P, eps)
    bound = eps ** 2 * np.abs(P).sum()
    assert vmax <= bound * (1 + 1e-12)
    assert vmax == pytest.approx(eps ** 2 * s @ P @ s)
    ok, s_star = D.sign_consistent(P)
    # the bound is attained exactly when one sign vector explains every sign of P
    assert ok == (vmax >= bound * (1 - 1e-10))
    if rank == 1:                      # P = j j^T: sign(P_ij) = sign(j_i) sign(j_j)
        assert ok and vmax == pytest.approx(bound)
    # and the l-inf bound of the blockwise routine is the same number
    t = D.linf_deviation_bound(torch.from_numpy(J)[None], eps, block=3)
    assert float(t) == pytest.approx(math.sqrt(bound))
    # random points of the cube stay below the vertex maximum
    delta = rng.uniform(-eps, eps, (200, d))
    assert (np.einsum("ni,ij,nj->n", delta, P, delta) <= vmax * (1 + 1e-12)).all()


def test_sign_consistent_counterexample():
    P = np.array([[2.0, 1.0, 1.0], [1.0, 2.0, -1.0], [1.0, -1.0, 2.0]])  # PSD, odd cycle
    assert np.all(np.linalg.eigvalsh(P) >= -1e-12)
    ok, _ = D.sign_consistent(P)
    vmax, _ = D.vertex_maximum(P)
    assert not ok and vmax < np.abs(P).sum()


# ------------------------------------------------------------------ Lemma 1, Cor 1
@FAST
@given(seed=st.integers(0, 10_000), q=st.floats(0.5, 3), extra=st.floats(0.1, 5))
def test_lemma1(seed, q, extra):
    rng = np.random.default_rng(seed)
    d = int(rng.integers(1, 50))
    p = q + extra
    x = rng.standard_normal(d) * rng.uniform(0.01, 10)
    c = D.lp_norm_constant(d, q, p)
    norm = lambda v, r: (np.abs(v) ** r).sum() ** (1 / r)  # noqa: E731
    assert norm(x, q) <= c * norm(x, p) * (1 + 1e-9)
    ones = np.ones(d)
    assert norm(ones, q) == pytest.approx(c * norm(ones, p))
    assert D.lp_norm_constant(d, 2, math.inf) == pytest.approx(math.sqrt(d))
    with pytest.raises(ValueError):
        D.lp_norm_constant(d, 2, 1.5)
    with pytest.raises(ValueError):
        D.lp_deviation_bound(1.0, 0.1, d, 2)


# ------------------------------------------------------------------ Cor 2, Sec. E
@FAST
@given(seed=st.integers(0, 10_000))
def test_cor2_cosine_bound_holds_and_is_attained(seed):
    rng = np.random.default_rng(seed)
    d = int(rng.integers(2, 20))
    g = rng.standard_normal(d)
    gn = np.linalg.norm(g)
    T = rng.uniform(0, 0.99) * gn
    s = rng.standard_normal((500, d))
    s *= (T * rng.random((500, 1)) ** (1 / d)) / np.linalg.norm(s, axis=1, keepdims=True)
    h = g + s
    cosd = 1 - h @ g / (np.linalg.norm(h, axis=1) * gn)
    bound = D.cosine_distance_bound(T, gn)
    assert (cosd <= bound + 1e-12).all()
    # extremal shift: s perpendicular to g + s, i.e. cos(g, s) = -T/||g||
    u = rng.standard_normal(d)
    u -= u @ g / gn ** 2 * g
    u /= np.linalg.norm(u)
    s_star = T * (-(T / gn) * g / gn + math.sqrt(1 - (T / gn) ** 2) * u)
    h = g + s_star
    assert 1 - h @ g / (np.linalg.norm(h) * gn) == pytest.approx(bound, abs=1e-10)
    assert D.angle_bound(T, gn) == pytest.approx(math.degrees(math.asin(T / gn)))
    assert D.angle_bound(2 * gn, gn) == 180.0


@FAST
@given(omega=st.floats(1e-4, 1.0), gn=st.floats(0.01, 100), xi=st.floats(0.01, 100),
       lam=st.floats(0.1, 10))
def test_sec_e_corrected_inverts_cor2_and_printed_does_not_scale(omega, gn, xi, lam):
    eps = D.max_eps_for_tolerance(omega, gn, xi_max=xi, distance="cosine")
    # plugging eps back into Cor 2 gives exactly the tolerance (when T < ||g||)
    if xi * eps < gn * (1 - 1e-9):
        assert D.cosine_distance_bound(xi * eps, gn) == pytest.approx(omega, rel=1e-6, abs=1e-9)
    # rescaling g (and so xi) by lam leaves the corrected budget unchanged; Eq. 52 is not
    assert D.max_eps_for_tolerance(omega, lam * gn, xi_max=lam * xi, distance="cosine") == \
        pytest.approx(eps)
    pr = D.max_eps_for_tolerance(omega, gn, xi_max=xi, distance="cosine", printed=True)
    pr2 = D.max_eps_for_tolerance(omega, lam * gn, xi_max=lam * xi, distance="cosine",
                                  printed=True)
    assert pr2 == pytest.approx(lam * pr)
    assert D.max_eps_for_tolerance(omega, xi_max=xi) == pytest.approx(omega / xi)


def test_sec_e_bad_arguments():
    with pytest.raises(ValueError, match="exactly one"):
        D.max_eps_for_tolerance(0.1, 1.0)
    with pytest.raises(ValueError, match="cosine distance"):
        D.max_eps_for_tolerance(1.5, 1.0, xi_max=1.0, distance="cosine")
    with pytest.raises(ValueError, match="g_norm"):
        D.max_eps_for_tolerance(0.5, None, xi_max=1.0, distance="cosine")


# ------------------------------------------------------------------ Thm 3, Eqs. 37-39, B.1
@FAST
@given(seed=st.integers(0, 10_000), eps=st.floats(0.01, 1.0))
def test_thm3_with_the_smallest_admissible_c_and_eq38_eq39(seed, eps):
    model = softplus_mlp(seed, beta=3.0)
    gen = torch.Generator().manual_seed(seed)
    x = torch.rand(4, 6, dtype=torch.float64, generator=gen)
    fn = D.attribution_function(model, "sm", 0)
    res = D.jacobian_spectral_norm(fn, x, tol=1e-10, return_vector=True)
    ops = D.jacobian_ops(fn, x)
    delta = torch.randn(x.shape, generator=gen, dtype=x.dtype)
    delta = eps * delta / delta.norm(dim=1, keepdim=True)
    c = D.remainder_constant(fn, x, delta, ops=ops)
    dev = (fn(x + delta) - fn(x)).detach().norm(dim=1)
    assert torch.all(dev <= c * res.value * eps * (1 + 1e-9))
    c39 = D.taylor_constant(fn, x, res.vector, res.value, eps)
    c38 = D.taylor_constant(fn, x, res.vector, res.value, eps, form="eq38", ops=ops)
    assert torch.allclose(c38, c39, rtol=1e-6) and torch.all(c39 >= 1)
    # B.1's residual is the norm of the Taylor remainder
    eta = D.linearity_residual(fn, x, delta, ops=ops)
    R = fn(x + delta).detach() - fn(x).detach() - ops.jvp(delta)
    assert torch.allclose(eta, R.norm(dim=1))


def test_linear_attribution_has_c_one_and_no_residual():
    torch.manual_seed(1)
    A = torch.randn(5, 5, dtype=torch.float64)
    x = torch.rand(3, 5, dtype=torch.float64)
    fn = linear_fn(A)
    res = D.jacobian_spectral_norm(fn, x, tol=1e-12, return_vector=True)
    assert torch.allclose(D.taylor_constant(fn, x, res.vector, res.value, 0.3),
                          torch.ones(3, dtype=torch.float64))
    assert torch.all(D.linearity_residual(fn, x, 0.1 * torch.randn_like(x)) < 1e-12)
    _, dev = D.deviation_attack(fn, x, 0.3, norm="l2", steps=10, clip=False)
    assert torch.all(dev <= res.value * 0.3 * (1 + 1e-9))
    # started at the linear worst case, the attack keeps it: exactly T_e
    _, dev = D.deviation_attack(fn, x, 0.3, norm="l2", steps=5, clip=False,
                                start=0.3 * res.vector)
    assert torch.allclose(dev, res.value * 0.3, rtol=1e-9)


# ------------------------------------------------------------------ Prop 1
def test_prop1_is_exact_for_a_linear_model():
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(8, 4)).double().eval()
    x = torch.rand(64, 8, dtype=torch.float64)
    delta = 0.8 * torch.randn_like(x)
    cond, kept = D.label_constraint_condition(model, x, delta, method="ig", steps=4)
    assert torch.equal(cond, kept) and (~kept).any() and kept.any()


def test_diagonal_dominance():
    J = torch.diag_embed(torch.ones(2, 4)) + 0.1
    out = D.diagonal_dominance(J)
    assert torch.allclose(out["dominant_rows"], torch.ones(2, dtype=torch.float64))
    assert torch.allclose(out["diag_mass"], torch.full((2,), 4.4 / 5.6, dtype=torch.float64))
    with pytest.raises(ValueError):
        D.diagonal_dominance(torch.ones(2, 3, 4))


def test_evaluate_bounds_shapes_and_relations():
    torch.manual_seed(0)
    model = nn.Sequential(nn.Flatten(), nn.Linear(16, 8), nn.Softplus(3.0), nn.Linear(8, 3)).eval()
    x = torch.rand(3, 1, 4, 4)
    y = model(x).argmax(1)
    for norm in ("l2", "linf"):
        r = D.evaluate_bounds(model, x, y, method="sm", norm=norm, eps=0.05, k=2, paper_steps=2,
                              direct_steps=2)
        assert all(v.shape == (3,) for v in r.values())
        assert torch.all(r["T_e"] > 0) and torch.all(r["T_c_deg"] <= 180)
        if norm == "l2":
            assert torch.all(r["T_prime_e"] >= r["T_e"])
            assert torch.allclose(r["T_e"], 0.05 * r["xi_max"])
    with pytest.raises(ValueError, match="norm"):
        D.evaluate_bounds(model, x, y, norm="l1", eps=0.1)


# ------------------------------------------------------------------ local linearity at the budget
@FAST
@given(seed=st.integers(0, 10_000), eps=st.floats(1e-3, 10.0))
def test_a_linear_map_is_locally_linear_at_any_budget(seed, eps):
    gen = torch.Generator().manual_seed(seed)
    A = torch.randn(5, 5, generator=gen, dtype=torch.float64)
    x = torch.randn(3, 5, generator=gen, dtype=torch.float64)
    delta = eps * torch.randn(3, 5, generator=gen, dtype=torch.float64)
    fn = linear_fn(A)
    assert torch.all(D.remainder_ratio(fn, x, delta) < 1e-10)
    assert torch.all(D.budget_linearity(fn, x, delta) <= D.LINEARITY_TOL)


def quadratic_map(Q):
    """g(z) = z + (z^T Q_i z)_i: J = I at z = 0, remainder (δ^T Q_i δ)_i, exactly quadratic."""
    return lambda z: z + torch.einsum("nj,ijk,nk->ni", z, Q, z)


def test_a_quadratic_map_is_not_locally_linear_and_its_remainder_grows_like_eps():
    torch.manual_seed(0)
    Q = torch.randn(4, 4, 4, dtype=torch.float64)
    x = torch.zeros(2, 4, dtype=torch.float64)
    v = torch.randn(2, 4, dtype=torch.float64)
    v = v / v.norm(dim=1, keepdim=True)
    fn = quadratic_map(Q)
    r1, r2 = D.remainder_ratio(fn, x, 0.01 * v), D.remainder_ratio(fn, x, 0.02 * v)
    # the remainder is exactly (δ^T Q_i δ)_i and J δ = δ, so the ratio is ε ‖(v^T Q_i v)_i‖
    want = torch.einsum("nj,ijk,nk->ni", v, Q, v).norm(dim=1)
    assert torch.allclose(r1, 0.01 * want, rtol=1e-8) and torch.allclose(r2, 2 * r1, rtol=1e-8)
    # the same at -δ: the probe takes the larger of the two sides
    assert torch.allclose(D.budget_linearity(fn, x, 0.01 * v), r1, rtol=1e-8)
    # at a large budget the map is not locally linear
    big = D.budget_linearity(fn, x, 1.0 * v)
    assert torch.all(big > D.LINEARITY_TOL)


def test_remainder_ratio_where_the_linear_change_vanishes_and_bad_input():
    x = torch.zeros(2, 3, dtype=torch.float64)
    delta = torch.ones(2, 3, dtype=torch.float64)
    square = lambda z: z ** 2  # noqa: E731   J = 0 at 0: any change is all remainder
    assert torch.all(torch.isinf(D.remainder_ratio(square, x, delta)))
    const = lambda z: 0 * z + 1.0  # noqa: E731   no change at all: ratio 0
    assert torch.all(D.remainder_ratio(const, x, delta) == 0)
    with pytest.raises(ValueError, match="delta"):
        D.remainder_ratio(square, x, torch.ones(2, 4))
    with pytest.raises(ValueError, match="delta"):
        D.budget_linearity(square, x, torch.ones(3, 3))


def test_evaluate_bounds_reports_the_linearity_of_the_budget():
    torch.manual_seed(0)
    model = nn.Sequential(nn.Flatten(), nn.Linear(16, 8), nn.Softplus(3.0), nn.Linear(8, 3)).eval()
    x = torch.rand(3, 1, 4, 4)
    y = model(x).argmax(1)
    r = D.evaluate_bounds(model, x, y, method="sm", norm="l2", eps=0.05, k=2, paper_steps=2, direct_steps=2)
    for key in ("linearity", "linearity_paper", "linearity_direct"):
        assert r[key].shape == (3,) and torch.all(r[key] >= 0)
    # a linear model's input*gradient map is linear in x: no remainder at any budget
    lin = nn.Sequential(nn.Flatten(), nn.Linear(16, 3)).double().eval()
    r = D.evaluate_bounds(lin, x.double(), y, method="ixg", norm="linf", eps=0.05, k=2, paper_steps=2,
                          direct_steps=2)
    assert torch.all(r["linearity"] < 1e-10)

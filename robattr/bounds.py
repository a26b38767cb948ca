"""Each paper's quantities: Jacobians, input Hessians and the bounds built on them.

This module starts with the pieces of 000 (Wang et al., NeurIPS 2020) that SSR trains
through and that the wang2020 chapter checks; later chapters add theirs.

**Notation.** ``x`` is a batch of N inputs with d = C_in·H·W pixels each, ``z = model(x)``
the C logits, ``p = softmax(z)``. ``W`` is the paper's d×C input Jacobian of the logits,
one column ``∇_x z_c`` per class (:func:`input_jacobian` returns it batched, (N, d, C)).

**Gauss-Newton input Hessian (000 Prop. 3).** The input Hessian of the cross-entropy is
``H = W A Wᵀ + Σ_c (p_c − y_c) ∇²_x z_c`` with ``A = diag(p) − p pᵀ``. For a
piecewise-linear network (ReLU, max-pool, linear layers) every ``∇²_x z_c`` vanishes
almost everywhere, so ``H = W A Wᵀ`` exactly (:func:`gauss_newton_hessian`); for smooth
networks ``W A Wᵀ`` is the Gauss-Newton part. It is positive semi-definite: A is (it is
the covariance of a one-hot draw from p), and ``A = L Lᵀ`` gives ``H = (WL)(WL)ᵀ``.

**The C×C trick (000 B1).** ``(WL)(WL)ᵀ`` (d×d) and ``(WL)ᵀ(WL)`` (C×C) have the same
nonzero eigenvalues, so the top eigenvalue comes from a C×C ``eigvalsh``
(:func:`gauss_newton_top_eigenvalue`), differentiable, which is what SSR trains through.
We use the closed-form root ``L = diag(√p) − p √pᵀ`` (``L Lᵀ = A`` because
``I − √p √pᵀ`` is a projection, ``Σ p = 1``) instead of an eigendecomposition of A as in
the reference code: no clipping of A's eigenvalues is needed and the gradient is exact.

**Hutchinson (003, Dombrowski et al. 2022).** For ``v ~ N(0, I)``,
``E ‖H v‖² = tr(HᵀH) = ‖H‖²_F``: :func:`hutchinson_hessian_sq_norm` estimates the squared
Frobenius norm of the input Hessian of the target logit from Hessian-vector products
(double backward), without ever forming H.

The dense functions (:func:`gauss_newton_hessian`, :func:`loss_input_hessian`,
:func:`logit_input_hessian`) are for checks on small d.
"""
from __future__ import annotations

import math as _math

import numpy as _np
import torch
from scipy import integrate as _integrate
from scipy import optimize as _optimize
from scipy import special as _sp
from torch import nn
from torch.nn import functional as F

from robattr.attributions import resolve_target

__all__ = [
    "logit_jacobian", "input_jacobian", "gauss_newton_factor", "gauss_newton_small_matrix",
    "gauss_newton_top_eigenvalue", "gauss_newton_hessian", "loss_input_hessian",
    "logit_input_hessian", "hutchinson_hessian_sq_norm",
]


def _as_input(x: torch.Tensor) -> torch.Tensor:
    if not torch.is_tensor(x) or x.ndim < 2 or not x.is_floating_point():
        raise ValueError("x must be a floating-point batch tensor (N, ...)")
    return x.detach().requires_grad_(True)


# --------------------------------------------------------------------------- Jacobian
def logit_jacobian(logits: torch.Tensor, x: torch.Tensor, *, create_graph: bool = False,
                   vectorize: bool = False) -> torch.Tensor:
    """W = ∂logits/∂x as (N, d, C), from logits already computed from ``x`` (which must
    require grad). Column c is ``∇_x z_c`` of each example.

    ``vectorize=False`` loops over the C classes (C backward passes, each through the
    whole batch: the examples do not interact unless the model couples them, e.g.
    BatchNorm in train mode); ``vectorize=True`` does the same with one batched backward
    (``is_grads_batched``, vmap). On 2 CPU cores the loop was faster (LeNet, 32×32).
    ``create_graph=True`` keeps W differentiable (w.r.t. x and the parameters).
    """
    if logits.ndim != 2 or logits.shape[0] != x.shape[0]:
        raise ValueError(f"logits must be (N, C) with N = {x.shape[0]}, got {tuple(logits.shape)}")
    n, c = logits.shape
    if vectorize:
        eye = torch.eye(c, device=logits.device, dtype=logits.dtype)
        (jac,) = torch.autograd.grad(logits, x, eye.unsqueeze(1).expand(c, n, c),
                                     is_grads_batched=True, create_graph=create_graph,
                                     retain_graph=True)
    else:
        jac = torch.stack([torch.autograd.grad(logits[:, k].sum(), x, create_graph=create_graph,
                                               retain_graph=True)[0] for k in range(c)])
    return jac.reshape(c, n, -1).permute(1, 2, 0)  # (N, d, C)


def input_jacobian(model: nn.Module, x: torch.Tensor, *, create_graph: bool = False,
                   vectorize: bool = False) -> torch.Tensor:
    """W, the input Jacobian of the logits, batched: (N, d, C) (000's d×C matrix)."""
    x = _as_input(x)
    with torch.enable_grad():
        logits = model(x)
        return logit_jacobian(logits, x, create_graph=create_graph, vectorize=vectorize)


# --------------------------------------------------------------------------- Gauss-Newton
def gauss_newton_factor(logits: torch.Tensor) -> torch.Tensor:
    """L (N, C, C) with ``L Lᵀ = diag(p) − p pᵀ``, p = softmax(logits): ``diag(√p) − p √pᵀ``.

    √p is computed as ``exp(log_softmax / 2)``, whose derivative stays bounded where p
    underflows.
    """
    logp = F.log_softmax(logits, dim=1)
    p, sp = logp.exp(), (0.5 * logp).exp()
    return torch.diag_embed(sp) - p.unsqueeze(2) * sp.unsqueeze(1)


def gauss_newton_small_matrix(jac: torch.Tensor, logits: torch.Tensor) -> torch.Tensor:
    """``(WL)ᵀ(WL)`` (N, C, C): same nonzero spectrum as the d×d ``W A Wᵀ`` (000 B1).

    ``jac`` is W as (N, d, C) (:func:`logit_jacobian`), ``logits`` (N, C).
    """
    lf = gauss_newton_factor(logits)
    gram = jac.transpose(1, 2) @ jac                      # Wᵀ W, (N, C, C)
    m = lf.transpose(1, 2) @ gram @ lf
    return 0.5 * (m + m.transpose(1, 2))


def gauss_newton_top_eigenvalue(model: nn.Module, x: torch.Tensor, *,
                                create_graph: bool = False, vectorize: bool = False,
                                logits: torch.Tensor | None = None) -> torch.Tensor:
    """Largest eigenvalue of ``W (diag p − p pᵀ) Wᵀ`` per example, (N,), via the C×C trick.

    The spectral norm of the Gauss-Newton input Hessian of the cross-entropy (000's SSR
    quantity; for ReLU networks the exact input Hessian, Prop. 3). Differentiable when
    ``create_graph=True``. ``logits``: pass ``model(x)`` if already computed, with ``x``
    requiring grad (saves a forward pass, as the SSR loss does).
    """
    if logits is None and not (create_graph and x.requires_grad):
        x = _as_input(x)  # else keep x's graph: the result is differentiable w.r.t. x too
    with torch.enable_grad():
        if logits is None:
            logits = model(x)
        jac = logit_jacobian(logits, x, create_graph=create_graph, vectorize=vectorize)
        small = gauss_newton_small_matrix(jac, logits if create_graph else logits.detach())
        top = torch.linalg.eigvalsh(small)[:, -1]
    top = top.clamp_min(0.0)  # PSD: only rounding makes it negative
    return top if create_graph else top.detach()


def gauss_newton_hessian(model: nn.Module, x: torch.Tensor, y=None) -> torch.Tensor:
    """Dense ``W (diag p − p pᵀ) Wᵀ`` per example, (N, d, d), d = pixels per example.

    The Gauss-Newton input Hessian of the cross-entropy; equal to the exact input Hessian
    for piecewise-linear networks (000 Prop. 3). It does not depend on the label: ``y``
    is accepted (and checked) for symmetry with :func:`loss_input_hessian`, whose
    second-order term does. For checks on small inputs (memory N·d²).
    """
    x = _as_input(x)
    if y is not None:
        resolve_target(model, x, y)
    with torch.enable_grad():
        logits = model(x)
        jac = logit_jacobian(logits, x).detach()
    p = F.softmax(logits.detach(), dim=1)
    a = torch.diag_embed(p) - p.unsqueeze(2) * p.unsqueeze(1)
    return jac @ a @ jac.transpose(1, 2)


def _per_example_hessian(fn, x: torch.Tensor) -> torch.Tensor:
    out = []
    for i in range(x.shape[0]):
        xi = x[i].detach()
        h = torch.autograd.functional.hessian(lambda v: fn(i, v), xi)
        out.append(h.reshape(xi.numel(), xi.numel()))
    return torch.stack(out)


def loss_input_hessian(model: nn.Module, x: torch.Tensor, y) -> torch.Tensor:
    """Exact input Hessian of the cross-entropy ``CE(model(x_i), y_i)`` per example,
    (N, d, d), by autograd (d double-backward passes per example): the reference the
    Gauss-Newton form is checked against. Small d only."""
    y = resolve_target(model, x, y)
    return _per_example_hessian(
        lambda i, v: F.cross_entropy(model(v.unsqueeze(0)), y[i:i + 1]), x)


def logit_input_hessian(model: nn.Module, x: torch.Tensor, target) -> torch.Tensor:
    """Exact input Hessian of the target logit per example, (N, d, d), by autograd (zero
    almost everywhere for piecewise-linear networks). Small d only."""
    t = resolve_target(model, x, target)
    return _per_example_hessian(lambda i, v: model(v.unsqueeze(0))[0, t[i]], x)


# --------------------------------------------------------------------------- Hutchinson
def _hutchinson(logits: torch.Tensor, x: torch.Tensor, target: torch.Tensor, samples: int,
                generator: torch.Generator | None, create_graph: bool) -> torch.Tensor:
    sel = logits.gather(1, target[:, None]).sum()
    (g,) = torch.autograd.grad(sel, x, create_graph=True)
    total = x.new_zeros(x.shape[0])
    gdev = generator.device if generator is not None else x.device
    for s in range(samples):
        v = torch.randn(x.shape, generator=generator, device=gdev, dtype=x.dtype).to(x.device)
        (hv,) = torch.autograd.grad((g * v).sum(), x, create_graph=create_graph,
                                    retain_graph=create_graph or s < samples - 1)
        total = total + hv.reshape(x.shape[0], -1).pow(2).sum(1)
    return total / samples


def hutchinson_hessian_sq_norm(model: nn.Module, x: torch.Tensor, target, *,
                               samples: int = 1, generator: torch.Generator | None = None,
                               create_graph: bool = False) -> torch.Tensor:
    """Unbiased estimate of ``‖∇²_x z_target(x)‖²_F`` per example, (N,): the mean of
    ``‖H v‖²`` over ``samples`` draws ``v ~ N(0, I)`` (Hutchinson; 003 / Dombrowski et al.
    2022 regularise it). One forward pass, one backward with ``create_graph`` and one
    double-backward per draw. Zero for piecewise-linear (ReLU) networks.
    """
    if isinstance(samples, bool) or not isinstance(samples, int) or samples < 1:
        raise ValueError(f"samples must be an integer >= 1, got {samples!r}")
    x = _as_input(x)
    t = resolve_target(model, x, target)
    with torch.enable_grad():
        est = _hutchinson(model(x), x, t, samples, generator, create_graph)
    return est if create_graph else est.detach()


# =========================================================================== 002
# 002: uniform l2-ball smoothing (Wang & Kong, ICLR 2025 submission, arXiv 2405.06361)
# ---------------------------------------------------------------------------
# h(x) = mean of g over the l2 ball B(x; r). Moving the centre by eps swaps the two
# crescents of the symmetric difference, so ||h(x~) - h(x)|| <= a := M V_U / V_S when
# ||g|| <= M everywhere. V_U / V_S (two caps of height r - eps/2) in closed form:
#     V_U / V_S = 2 (1 - I_{1 - (eps/2r)^2}((d+1)/2, 1/2)) = 2 I_{(eps/2r)^2}(1/2, (d+1)/2),
# the second form (symmetry of the regularised incomplete beta) is the one computed: it
# has no cancellation for small eps / r. Thm 1 as printed minimises the cosine over the
# angle theta of the shift at cos(theta) = 0; the minimum is at cos(theta) = -a/c, which
# gives sqrt(1 - a^2/c^2) (the corrected bound). Cor 1 inverts the bound with betaincinv.
__all__ += [
    "ball_volume_ratio", "shift_cosine_bound", "ball_smoothing_cosine_bound",
    "ball_smoothing_max_eps", "ball_smoothing_min_radius",
]


def _arr(name: str, v, *, low: float | None = None, strict: bool = False,
         high: float | None = None, high_strict: bool = False) -> _np.ndarray:
    """``v`` as a float array, with a ValueError naming ``name`` on NaN or out-of-range."""
    try:
        a = _np.asarray(v, dtype=float)
    except (TypeError, ValueError):
        raise ValueError(f"{name} must be a number or an array of numbers, got {v!r}") from None
    if _np.isnan(a).any():
        raise ValueError(f"{name} must not be NaN")
    if low is not None and (_np.any(a <= low) if strict else _np.any(a < low)):
        raise ValueError(f"{name} must be {'>' if strict else '>='} {low}, got {v!r}")
    if high is not None and (_np.any(a >= high) if high_strict else _np.any(a > high)):
        raise ValueError(f"{name} must be {'<' if high_strict else '<='} {high}, got {v!r}")
    return a


def _dim(d) -> _np.ndarray:
    a = _np.asarray(d)
    if a.dtype == bool or not (_np.issubdtype(a.dtype, _np.integer)
                               or (_np.issubdtype(a.dtype, _np.floating)
                                   and _np.all(_np.isfinite(a)) and _np.all(a == _np.round(a)))):
        raise ValueError(f"d must be an integer >= 1 (or an array of them), got {d!r}")
    if _np.any(a < 1):
        raise ValueError(f"d must be an integer >= 1, got {d!r}")
    return a.astype(float)


def _out(x: _np.ndarray):
    return float(x) if x.ndim == 0 else x


def ball_volume_ratio(d, r, eps):
    """V_U / V_S: the volume of the symmetric difference of two l2 balls of radius ``r``
    in R^d whose centres are ``eps`` apart, over the volume of one ball.

    ``2 I_{(eps/2r)^2}(1/2, (d+1)/2)`` (= ``2(1 - I_{1-(eps/2r)^2}((d+1)/2, 1/2))``), and
    exactly 2 for ``eps >= 2r`` (disjoint balls). In [0, 2], increasing in eps, 0 at eps = 0.
    Broadcasts over numpy arrays. Computed with ``scipy.special.betainc`` in the symmetric
    form, so small ``eps / r`` keeps full relative precision (no ``1 - I`` cancellation);
    for large d the ratio rises to 2 and nothing underflows.
    """
    d = _dim(d)
    r = _arr("r", r, low=0.0, strict=True)
    eps = _arr("eps", eps, low=0.0)
    x = _np.minimum((eps / (2.0 * r)) ** 2, 1.0)
    return _out(_np.asarray(2.0 * _sp.betainc(0.5, (d + 1.0) / 2.0, x)))


def shift_cosine_bound(c, a, corrected: bool = True):
    """Lower bound on cos(h, h + s) over all shifts with ||s|| <= a, for ||h|| = c > 0.

    ``corrected=True``: the exact infimum, ``sqrt(1 - a^2/c^2)`` for a <= c (0 at a = c)
    and **-1** for a > c (then h + s can point against h: no certificate; -1 is the
    trivially true cosine bound). ``corrected=False``: the printed ``c / sqrt(c^2 + a^2)``
    of 002 Thm 1, which is larger than the infimum for every a > 0 and so not a bound.
    """
    c = _arr("h_norm", c, low=0.0, strict=True)
    a = _arr("a", a, low=0.0)
    if not corrected:
        return _out(_np.asarray(c / _np.sqrt(c * c + a * a)))
    q = a / c
    return _out(_np.asarray(_np.where(q <= 1.0, _np.sqrt(_np.clip(1.0 - q * q, 0.0, 1.0)), -1.0)))


def _check_hM(h_norm, M):
    M = _arr("M", M, low=0.0, strict=True)
    h = _arr("h_norm", h_norm, low=0.0, strict=True)
    if _np.any(h > M * (1 + 1e-12)):
        raise ValueError("h_norm must be <= M (h averages g and ||g|| <= M), "
                         f"got h_norm={h_norm!r}, M={M!r}")
    return h, M


def ball_smoothing_cosine_bound(h_norm, M, d, r, eps, corrected: bool = True):
    """002 Thm 1: a lower bound on cos(h(x), h(x~)) for all ||x~ - x||_2 <= eps, where h is
    g averaged uniformly over B(x; r), ||g|| <= M everywhere and ``h_norm`` = ||h(x)||.

    With a = M V_U/V_S (:func:`ball_volume_ratio`) and c = h_norm: ``corrected=True``
    gives sqrt(1 - a^2/c^2) (or -1, "no certificate", for a > c); ``corrected=False``
    the printed c / sqrt(c^2 + a^2), which a bounded g can violate. Vectorised.
    """
    h, M = _check_hM(h_norm, M)
    return shift_cosine_bound(h, M * ball_volume_ratio(d, r, eps), corrected=corrected)


def _check_T(T):
    return _arr("T", T, low=0.0, strict=True, high=1.0, high_strict=True)


def _cap_quantile(h, M, d, T, corrected):
    """q = the largest admissible V_U/(2 V_S) and z = the largest (eps/2r)^2 (inf if none)."""
    k = _np.sqrt(1.0 - T * T) if corrected else _np.sqrt(1.0 / (T * T) - 1.0)
    q = h * k / (2.0 * M)                       # = 1 - Z of the paper's Eq. (10)
    with _np.errstate(invalid="ignore"):
        z = _sp.betaincinv(0.5, (d + 1.0) / 2.0, _np.minimum(q, 1.0))
    return q, z


def ball_smoothing_max_eps(h_norm, M, d, r, T, corrected: bool = True):
    """002 Cor 1 (i): the largest eps with :func:`ball_smoothing_cosine_bound` >= T.

    eps_max = 2 r sqrt(z), z = betaincinv(1/2, (d+1)/2, q), q = h_norm k / (2M), with
    k = sqrt(1 - T^2) (corrected) or sqrt(1/T^2 - 1) (printed). This is the paper's
    2r sqrt(1 - I^{-1}_Z((d+1)/2, 1/2)) with Z = 1 - q, by the symmetry of I. ``inf``
    when q >= 1 (the bound never drops below T; possible only for the printed form).
    """
    h, M = _check_hM(h_norm, M)
    d = _dim(d)
    r = _arr("r", r, low=0.0, strict=True)
    T = _check_T(T)
    q, z = _cap_quantile(h, M, d, T, corrected)
    return _out(_np.asarray(_np.where(q >= 1.0, _np.inf, 2.0 * r * _np.sqrt(z))))


def ball_smoothing_min_radius(h_norm, M, d, eps, T, corrected: bool = True):
    """002 Cor 1 (ii): the smallest radius r with :func:`ball_smoothing_cosine_bound` >= T
    at budget ``eps``: r_min = eps / (2 sqrt(z)), z as in :func:`ball_smoothing_max_eps`
    (0 when q >= 1).

    ``h_norm`` is taken as given: in the paper ||h(x)|| is the norm of the smoothed map
    *at radius r* and so changes with r; this formula (like the paper's) holds r fixed
    inside h_norm. A self-consistent r_min would iterate r -> ||h_r(x)|| -> r_min.
    """
    h, M = _check_hM(h_norm, M)
    d = _dim(d)
    eps = _arr("eps", eps, low=0.0)
    T = _check_T(T)
    q, z = _cap_quantile(h, M, d, T, corrected)
    with _np.errstate(divide="ignore", invalid="ignore"):
        rmin = eps / (2.0 * _np.sqrt(z))
    return _out(_np.asarray(_np.where(q >= 1.0, 0.0, rmin)))


# ---------------------------------------------------------------------------------------
# 002: Monte-Carlo estimate of the smoothed attribution
# ---------------------------------------------------------------------------------------
# 002 App. C.1 estimates h(x) = E_{eta ~ U(B(0; r))} g(x + eta) by the mean h^ of N draws,
# approximates h^ - h by N(0, diag(s_j^2 / N)) (CLT, diagonal covariance), so that
# ||h^ - h||^2 ~ sum_j (s_j^2 / N) Z_j^2, a generalised chi-square variable, and evaluates
# its CDF (the paper with R's CompQuadForm). Here: Imhof's (1961) inversion integral.

__all__ += [
    "generalized_chi2_cdf", "generalized_chi2_ppf", "mc_error_quantile", "mc_error_chebyshev",
]


def _gchi2_params(weights, dofs, noncentrality):
    try:
        w = _np.asarray(weights, dtype=float).ravel()
    except (TypeError, ValueError):
        raise ValueError(f"weights must be an array of numbers, got {weights!r}") from None
    if w.size == 0:
        raise ValueError("weights must not be empty")
    if not _np.all(_np.isfinite(w)):
        raise ValueError("weights must be finite")
    k = _np.ones_like(w) if dofs is None else _np.broadcast_to(
        _arr("dofs", dofs, low=0.0, strict=True), w.shape).astype(float).ravel()
    lam = _np.zeros_like(w) if noncentrality is None else _np.broadcast_to(
        _arr("noncentrality", noncentrality, low=0.0), w.shape).astype(float).ravel()
    if not (_np.all(_np.isfinite(k)) and _np.all(_np.isfinite(lam))):
        raise ValueError("dofs and noncentrality must be finite")
    keep = w != 0.0                      # a zero weight contributes nothing to Q
    if not keep.any():
        raise ValueError("weights must contain at least one non-zero value")
    return w[keep], k[keep], lam[keep]


def _imhof_sf(x, w, k, lam, tol):
    """P(Q > x) by Imhof's formula; weights already scaled so that max |w| = 1."""
    def parts(u):
        wu = w * u
        s = 1.0 + wu * wu
        A = 0.5 * (k * _np.arctan(wu) + lam * wu / s).sum()            # theta(u) + x u / 2
        log_rho = (0.25 * k * _np.log(s) + 0.5 * lam * wu * wu / s).sum()
        return A, _math.exp(-log_rho) / u

    def integrand(u):                    # sin(theta) / (u rho), finite at u -> 0
        if u == 0.0:
            return 0.5 * (_np.sum(w * (k + lam)) - x)
        A, f = parts(u)
        return _np.sin(A - 0.5 * x * u) * f

    opts = dict(limit=200, epsabs=tol, epsrel=1e-10)
    aw = _np.abs(w)

    def log_tail_bound(U):
        # (1/pi) int_U^inf du / (u rho(u)) <= this, using only the terms with |w_j| U >= 1:
        # for them 1 + w^2 u^2 >= (1 + w^2 U^2)/2 (u/U)^2 when u >= U; the exp factor grows.
        wU2 = (aw * U) ** 2
        J = wU2 >= 1.0
        if not J.any():
            return _np.inf
        return (-_np.sum(0.25 * k[J] * _np.log(0.5 * (1.0 + wU2[J])))
                - _np.sum(0.5 * lam * wU2 / (1.0 + wU2))
                - _np.log(0.5 * _np.sum(k[J])) - _np.log(_np.pi))

    lo, hi = 0.0, 700.0                  # bisection on log U for the truncation point U_T
    for _ in range(60):
        mid = 0.5 * (lo + hi)
        lo, hi = (mid, hi) if log_tail_bound(_np.exp(mid)) > _np.log(tol) else (lo, mid)
    u_t = float(_np.exp(hi))
    # head [0, u_h]: theta(u) directly (no cancellation), cut into pieces of ten periods of
    # its fastest possible oscillation |theta'| <= rate (at most 300), plus log-spaced pieces.
    rate = 0.5 * (abs(x) + _np.sum(aw * (k + lam)))
    period = 2.0 * _np.pi / rate
    # u_a: from there on |A'(u)| <= D(u) = 1/2 sum |w|(k + lam)/(1 + w^2 u^2) <= |x| / 20
    D = lambda U: 0.5 * _np.sum(aw * (k + lam) / (1.0 + (aw * U) ** 2))   # noqa: E731
    lo, hi = -30.0, 300.0                # (aw U)^2 stays finite
    for _ in range(60):
        mid = 0.5 * (lo + hi)
        lo, hi = (mid, hi) if D(_np.exp(mid)) > abs(x) / 20.0 else (lo, mid)
    u_h = min(u_t, max(float(_np.exp(hi)), 4.0 * _np.pi / max(abs(x), 1e-300)), 3000.0 * period)
    pts = _np.unique(_np.concatenate([
        _np.geomspace(min(1e-3, period), u_h, 12),
        _np.arange(1, 301) * (10.0 * period)]))
    pts = _np.concatenate([[0.0], pts[pts < u_h], [u_h]])
    head = sum(_integrate.quad(integrand, a_, b_, **opts)[0] for a_, b_ in zip(pts[:-1], pts[1:]))
    tail = 0.0
    if u_h < u_t:                        # the rest: A(u) slow next to x u / 2, or x u / 2 slow
        u0 = u_h
        if abs(x) < 1e-300 or 4.0 * _np.pi / abs(x) > u0:   # slow x u / 2: log-space first
            u1 = u_t if abs(x) < 1e-300 else min(4.0 * _np.pi / abs(x), u_t)
            tail += _integrate.quad(lambda s: integrand(_np.exp(s)) * _np.exp(s), _np.log(u0),
                                    _np.log(u1), **opts)[0]
            u0 = u1
        if u0 < u_t:
            # sin(A - xu/2) = sin A cos(xu/2) - cos A sin(xu/2): Fourier integrals (QAWF)
            c = 0.5 * abs(x)
            sgn = 1.0 if x > 0 else -1.0
            def f_sin(u):
                A, f = parts(u)
                return _np.sin(A) * f

            def f_cos(u):
                A, f = parts(u)
                return _np.cos(A) * f
            tail += (_integrate.quad(f_sin, u0, _np.inf, weight="cos", wvar=c, limlst=200)[0]
                     - sgn * _integrate.quad(f_cos, u0, _np.inf, weight="sin", wvar=c,
                                             limlst=200)[0])
    return 0.5 + (head + tail) / _np.pi


def generalized_chi2_cdf(x, weights, dofs=None, noncentrality=None, *, method: str = "imhof",
                         tol: float = 1e-10):
    """CDF of the generalised chi-square Q = sum_j w_j chi^2_{k_j}(lambda_j) at ``x``.

    ``weights`` w_j: non-zero reals (negative ones allowed; zeros are dropped);
    ``dofs`` k_j > 0 (default 1); ``noncentrality`` lambda_j >= 0 (default 0); both
    broadcast against ``weights``. ``x`` may be an array (looped over).

    Imhof (1961): P(Q > x) = 1/2 + (1/pi) int_0^inf sin(theta(u)) / (u rho(u)) du with
    theta(u) = 1/2 sum_j [k_j arctan(w_j u) + lambda_j w_j u / (1 + w_j^2 u^2)] - x u / 2 and
    rho(u) = prod_j (1 + w_j^2 u^2)^{k_j/4} exp(1/2 sum_j lambda_j w_j^2 u^2 / (1 + w_j^2 u^2)).
    The weights are rescaled to max |w| = 1 (Q and x scale together); the integral is done
    with ``scipy.integrate.quad`` up to u0 = min(4 pi/|x|, U_T) (in log u beyond u = 1) and
    as two Fourier integrals (QAWF) on [u0, inf); U_T is Imhof's truncation point for an
    error <= ``tol``. With all weights > 0 the CDF is exactly 0 for x <= 0. The result is clipped
    to [0, 1]; its absolute error is typically below 1e-8.
    """
    if method != "imhof":
        raise ValueError(f"method must be 'imhof', got {method!r}")
    w, k, lam = _gchi2_params(weights, dofs, noncentrality)
    xs = _arr("x", x)
    if not _np.all(_np.isfinite(xs)):
        raise ValueError("x must be finite")
    scale = _np.max(_np.abs(w))
    w = w / scale
    all_pos, all_neg = _np.all(w > 0), _np.all(w < 0)
    out = _np.empty(xs.shape)
    for i, xi in _np.ndenumerate(xs / scale):
        if all_pos and xi <= 0.0:
            out[i] = 0.0
        elif all_neg and xi >= 0.0:
            out[i] = 1.0
        else:
            out[i] = 1.0 - _imhof_sf(float(xi), w, k, lam, tol)
    return _out(_np.clip(out, 0.0, 1.0))


def generalized_chi2_ppf(q, weights, dofs=None, noncentrality=None, *, method: str = "imhof",
                         xtol: float = 1e-12, rtol: float = 1e-10):
    """Quantile of the generalised chi-square (see :func:`generalized_chi2_cdf`): the x with
    CDF(x) = q, for q in (0, 1), by ``scipy.optimize.brentq`` on the Imhof CDF. The bracket
    starts at mean +- 5 sd (clipped at 0 when all weights are positive) and is widened
    until it holds the root. ``q`` may be an array (looped over)."""
    w, k, lam = _gchi2_params(weights, dofs, noncentrality)
    qs = _arr("q", q, low=0.0, strict=True, high=1.0, high_strict=True)
    mean = float(_np.sum(w * (k + lam)))
    sd = float(_np.sqrt(2.0 * _np.sum(w * w * (k + 2.0 * lam))))
    all_pos = bool(_np.all(w > 0))
    cdf = lambda t: generalized_chi2_cdf(t, w, k, lam, method=method)   # noqa: E731
    out = _np.empty(qs.shape)
    for i, qi in _np.ndenumerate(qs):
        lo, hi, step = mean - 5.0 * sd, mean + 5.0 * sd, 5.0 * sd
        if all_pos:
            lo = 0.0
        while cdf(hi) < qi:
            step *= 2.0
            hi = mean + step
        while cdf(lo) > qi:              # never for all_pos (CDF(0) = 0 < q)
            step *= 2.0
            lo = mean - step
        out[i] = _optimize.brentq(lambda t: cdf(t) - qi, lo, hi, xtol=xtol, rtol=rtol)
    return _out(out)


def _mc_check(variances, n_samples, alpha):
    v = _arr("variances", variances, low=0.0).ravel()
    if v.size == 0 or not _np.all(_np.isfinite(v)):
        raise ValueError("variances must be a non-empty array of finite numbers >= 0")
    if isinstance(n_samples, bool) or not float(n_samples).is_integer() or n_samples < 1:
        raise ValueError(f"n_samples must be an integer >= 1, got {n_samples!r}")
    a = float(_arr("alpha", alpha, low=0.0, strict=True, high=1.0, high_strict=True))
    return v, int(n_samples), a


def mc_error_quantile(variances, n_samples, alpha):
    """The (1 - alpha) quantile t of ||h^ - h||_2, h^ the mean of ``n_samples`` i.i.d. draws
    whose coordinates have variances ``variances`` (s_j^2), under 002's approximation:
    h^ - h ~ N(0, diag(s_j^2 / N)), so ||h^ - h||^2 = sum_j (s_j^2 / N) Z_j^2 is a generalised
    chi-square with weights s_j^2 / N and one degree of freedom each; t = sqrt(ppf(1 - alpha)).

    **Approximate, not rigorous**: it relies on the CLT (exact only as N -> inf or for
    Gaussian draws), on ignoring the correlations between coordinates (the diagonal
    covariance), and in practice on variances that are themselves estimated. For a
    distribution-free guarantee use :func:`mc_error_chebyshev`, which is always larger.
    Returns 0 when all variances are 0.
    """
    v, n, a = _mc_check(variances, n_samples, alpha)
    if not _np.any(v > 0):
        return 0.0
    return float(_np.sqrt(generalized_chi2_ppf(1.0 - a, v[v > 0] / n)))


def mc_error_chebyshev(variances, n_samples, alpha):
    """Distribution-free (1 - alpha) bound on ||h^ - h||_2: sqrt(sum_j s_j^2 / (N alpha)).

    E||h^ - h||^2 = sum_j s_j^2 / N (= trace of the covariance of h^, correlations or not),
    so Markov's inequality on ||h^ - h||^2 gives P(||h^ - h|| > t) <= alpha for this t.
    **Rigorous** for any N >= 1 and any distribution of the draws, given the true variances;
    the price is looseness (about 1/sqrt(alpha) times the mean error).
    """
    v, n, a = _mc_check(variances, n_samples, alpha)
    return float(_np.sqrt(_np.sum(v) / (n * a)))

"""002 (wangkong2025): the Monte-Carlo error of the smoothed attribution.

002 App. C.1 estimates h(x) = E_{eta ~ U(B(0; r))} g(x + eta) by the mean h^ of N draws,
approximates h^ - h by N(0, diag(s_j^2 / N)) (CLT, diagonal covariance), so that
||h^ - h||^2 ~ sum_j (s_j^2 / N) Z_j^2, a generalised chi-square variable, and evaluates
its CDF (the paper with R's CompQuadForm). Here: Imhof's (1961) inversion integral.
"""
from __future__ import annotations

import math as _math

import numpy as _np
from scipy import integrate as _integrate
from scipy import optimize as _optimize

from robattr.bounds._checks import _arr, _out

__all__ = [
    "generalized_chi2_cdf", "generalized_chi2_ppf", "mc_error_quantile", "mc_error_chebyshev",
    "mc_moments", "mc_repeats", "covariance_weights",
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



# ---- simulating the estimate: reference moments and repeated N-draw estimates ----

def _count(name, v, low):
    if isinstance(v, bool) or not isinstance(v, (int, _np.integer)) or v < low:
        raise ValueError(f"{name} must be an integer >= {low}, got {v!r}")
    return int(v)


def mc_moments(f, draw, n: int, chunk: int = 20000):
    """Mean and covariance of ``f(z)`` (rows of an ``(m, d)`` array) over ``n`` points
    ``z = draw(m)``, drawn ``chunk`` at a time (the covariance divides by ``n``). For a
    reference h(x) and the covariance of one draw from many draws. Returns ``(mean, cov)``."""
    n, chunk = _count("n", n, 2), _count("chunk", chunk, 1)
    s1 = s2 = None
    done = 0
    while done < n:
        m = min(chunk, n - done)
        gz = f(draw(m))
        if s1 is None:
            s1, s2 = _np.zeros(gz.shape[1]), _np.zeros((gz.shape[1], gz.shape[1]))
        s1 += gz.sum(0)
        s2 += gz.T @ gz
        done += m
    mean = s1 / n
    return mean, s2 / n - _np.outer(mean, mean)


def mc_repeats(f, draw, n_samples: int, n_repeats: int, reference, n_own: int = 5):
    """``n_repeats`` independent estimates ``h^ = mean of f(draw(n_samples))``, compared with
    ``reference``. Returns a dict: ``errors`` (``||h^ - reference||`` per run), ``norms``
    (``||h^||`` per run) and ``variances``, the per-coordinate sample variances (ddof 1) of
    the draws of the first ``n_own`` runs (what a single run would estimate its error from)."""
    n_samples, n_repeats = _count("n_samples", n_samples, 2), _count("n_repeats", n_repeats, 1)
    n_own = _count("n_own", n_own, 0)
    reference = _np.asarray(reference, dtype=float)
    errors, norms, variances = _np.empty(n_repeats), _np.empty(n_repeats), []
    for i in range(n_repeats):
        gz = f(draw(n_samples))
        h_hat = gz.mean(0)
        errors[i] = _np.linalg.norm(h_hat - reference)
        norms[i] = _np.linalg.norm(h_hat)
        if i < n_own:
            variances.append(gz.var(0, ddof=1))
    return {"errors": errors, "norms": norms, "variances": variances}


def covariance_weights(cov, n_samples: int):
    """Weights of the generalised chi-square law of ||h^ - h||^2 with the *full* covariance:
    h^ - h ~ N(0, cov / N) gives sum_i (mu_i / N) Z_i^2, mu_i the eigenvalues of ``cov``.
    Returns the positive ``mu_i / N`` (negative rounding errors clipped to 0, then dropped)."""
    cov = _np.asarray(cov, dtype=float)
    if cov.ndim != 2 or cov.shape[0] != cov.shape[1] or not _np.all(_np.isfinite(cov)):
        raise ValueError(f"cov must be a finite square matrix, got shape {cov.shape}")
    n_samples = _count("n_samples", n_samples, 1)
    w = _np.clip(_np.linalg.eigvalsh(cov), 0.0, None) / n_samples
    return w[w > 0]

"""Center smoothing (Kumar & Goldstein, ICML 2021) for attribution maps, as 002 (App. C.3)
applies it to compare with uniform ball smoothing.

Center smoothing certifies a function ``f`` with outputs in a (pseudo)metric space. For an
input ``x`` and Gaussian noise ``N(0, sigma^2 I)`` it outputs the *center* ``z`` of the
smallest ball (in the output distance) that holds at least half of the probability mass of
``f(x + noise)``; in practice the candidate (one of a few sampled outputs) whose median
distance to fresh samples is least (a ``beta = 2`` approximation of that ball; Kumar &
Goldstein's high-dimensional procedure). With ``Delta`` the slack of the half-mass ball and
``p = Phi(Phi^-1(1/2 + Delta) + eps / sigma)``, every ``x'`` with ``||x' - x||_2 <= eps``
has its own center within

    dist(z(x), z(x')) <= gamma (1 + beta) R_p,

where ``R_p`` is the ``p``-quantile (raised by a Hoeffding margin for the Monte-Carlo
estimate) of ``dist(f(x + noise), z(x))``. ``gamma = 1`` for a metric; a distance with the
relaxed triangle inequality ``d(a, c) <= gamma (d(a, b) + d(b, c))`` multiplies the bound by
``gamma`` (Kumar & Goldstein, Sec. 4). The cosine distance ``1 - cos`` is half the squared
l2 distance of the unit vectors, so ``gamma = 2`` (and 2 is the smallest constant that works:
see :func:`cosine_relaxation_ratio`). 002 reports this bound for SmoothSM on MNIST; it
exceeds 1 for every eps in {0.1, ..., 0.5}, i.e. it allows the maps to be orthogonal.
"""
from __future__ import annotations

import math as _math

import numpy as _np
from scipy import stats as _stats

__all__ = [
    "center_smoothing_quantile", "cosine_relaxation_ratio", "center_smoothing_certificate",
    "CENTER_DISTANCES",
]

#: output distances understood by :func:`center_smoothing_certificate`, with their gamma
CENTER_DISTANCES = {"cosine": 2.0, "l2": 1.0}


def _prob(name, v, low=0.0, high=1.0):
    try:
        v = float(v)
    except (TypeError, ValueError):
        raise ValueError(f"{name} must be a number in ({low}, {high}), got {v!r}") from None
    if not (low < v < high):
        raise ValueError(f"{name} must be in ({low}, {high}), got {v!r}")
    return v


def _count(name, v, low=1):
    if isinstance(v, bool) or not isinstance(v, (int, _np.integer)) or v < low:
        raise ValueError(f"{name} must be an integer >= {low}, got {v!r}")
    return int(v)


def center_smoothing_quantile(eps, sigma, *, delta: float = 0.05, n_cert: int | None = None,
                              alpha: float = 0.005):
    """The probability level of the certified radius: ``Phi(Phi^-1(1/2 + delta) + eps/sigma)``,
    plus the Hoeffding margin ``sqrt(ln(1/alpha) / (2 n_cert))`` when ``n_cert`` is given
    (the empirical quantile of ``n_cert`` draws is then an upper bound with probability
    ``1 - alpha``). ``eps`` may be an array; values > 1 mean "cannot certify this eps"."""
    e = _np.asarray(eps, dtype=float)
    if e.size == 0 or not _np.all(_np.isfinite(e)) or _np.any(e < 0):
        raise ValueError(f"eps must be finite numbers >= 0, got {eps!r}")
    try:
        sigma = float(sigma)
    except (TypeError, ValueError):
        raise ValueError(f"sigma must be a number > 0, got {sigma!r}") from None
    if not (sigma > 0 and _math.isfinite(sigma)):
        raise ValueError(f"sigma must be a finite number > 0, got {sigma!r}")
    delta = _prob("delta", delta, 0.0, 0.5)
    q = _stats.norm.cdf(_stats.norm.ppf(0.5 + delta) + e / sigma)
    if n_cert is not None:
        q = q + _math.sqrt(_math.log(1.0 / _prob("alpha", alpha)) / (2.0 * _count("n_cert", n_cert)))
    return q if q.ndim else float(q)


def cosine_relaxation_ratio(a, b, c):
    """``(1 - cos(a, c)) / ((1 - cos(a, b)) + (1 - cos(b, c)))`` for rows of 2-d arrays: the
    factor by which the cosine distance breaks the triangle inequality. It never exceeds 2
    (``1 - cos`` is half a squared l2 distance on the sphere) and tends to 2 for three
    directions on a great circle at angles 0, t, 2t as t -> 0."""
    a, b, c = (_np.atleast_2d(_np.asarray(v, dtype=float)) for v in (a, b, c))
    if not (a.shape == b.shape == c.shape):
        raise ValueError(f"a, b, c must have the same shape, got {a.shape}, {b.shape}, {c.shape}")

    def d(u, v):
        nu, nv = _np.linalg.norm(u, axis=1), _np.linalg.norm(v, axis=1)
        if _np.any(nu == 0) or _np.any(nv == 0):
            raise ValueError("cosine distance needs non-zero vectors")
        return 1.0 - _np.sum(u * v, axis=1) / (nu * nv)

    den = d(a, b) + d(b, c)
    with _np.errstate(divide="ignore", invalid="ignore"):
        return _np.where(den > 0, d(a, c) / den, 0.0)


def _dist(kind, u, center):
    import torch
    u = u.flatten(1)
    z = center.flatten().unsqueeze(0)
    if kind == "l2":
        return (u - z).norm(dim=1)
    return 1.0 - torch.nn.functional.cosine_similarity(u, z, dim=1, eps=1e-30)


def center_smoothing_certificate(f, x, eps, *, sigma: float, distance: str = "cosine",
                                 n_centers: int = 30, n_pred: int = 2000, n_cert: int = 2000,
                                 delta: float = 0.05, alpha_1: float = 0.005,
                                 alpha_2: float = 0.005, beta: float = 2.0, gamma=None,
                                 batch_size: int = 500, generator=None, seed=None):
    """Center smoothing of ``f`` at one input ``x`` and its certified output radius for each
    budget in ``eps`` (Kumar & Goldstein 2021, the high-dimensional procedure).

    ``f`` maps a batch of inputs ``(n, *x.shape)`` to outputs ``(n, ...)`` (e.g. a saliency
    map); ``distance`` is ``"cosine"`` (``1 - cos``, gamma 2) or ``"l2"`` (gamma 1).
    Steps: ``n_centers`` noisy outputs are the candidate centers; ``n_pred`` fresh ones pick
    the candidate with the least median distance (the half-mass radius ``r_half``); the
    center is *accepted* if the fraction of yet other ``n_pred`` samples inside ``r_half``,
    less its Hoeffding margin, is at least ``1/2 - delta`` and that margin is at most
    ``delta``; ``n_cert`` draws give the distance quantile ``R_p`` at
    :func:`center_smoothing_quantile` and the bound ``gamma (1 + beta) R_p``.

    Returns a dict: ``center`` (tensor), ``accepted`` (bool), ``r_half``, ``quantile``
    (per eps), ``radius`` (``R_p`` per eps, NaN where the level exceeds 1) and ``bound``
    (the certified distance per eps). Holds with probability >= 1 - alpha_1 - alpha_2.
    """
    import torch

    if not callable(f):
        raise ValueError(f"f must be a callable mapping a batch of inputs to outputs, got {f!r}")
    if not isinstance(x, torch.Tensor):
        raise ValueError(f"x must be a torch.Tensor (one input, no batch dimension), got {x!r}")
    if distance not in CENTER_DISTANCES:
        raise ValueError(f"distance must be one of {list(CENTER_DISTANCES)}, got {distance!r}")
    gamma = CENTER_DISTANCES[distance] if gamma is None else float(gamma)
    if not gamma >= 1.0:
        raise ValueError(f"gamma must be >= 1, got {gamma!r}")
    if not (float(beta) >= 1.0):
        raise ValueError(f"beta must be >= 1, got {beta!r}")
    n_centers, n_pred, n_cert = (_count(n, v) for n, v in
                                 (("n_centers", n_centers), ("n_pred", n_pred), ("n_cert", n_cert)))
    batch_size = _count("batch_size", batch_size)
    q = _np.atleast_1d(center_smoothing_quantile(eps, sigma, delta=delta, n_cert=n_cert,
                                                 alpha=alpha_2))
    alpha_1 = _prob("alpha_1", alpha_1)
    if generator is None:
        generator = torch.Generator(device=x.device)
        generator.manual_seed(0 if seed is None else int(seed))

    def draw(n):
        outs = []
        for s in range(0, n, batch_size):
            m = min(batch_size, n - s)
            noise = torch.randn((m,) + tuple(x.shape), generator=generator,
                                device=generator.device, dtype=x.dtype).to(x.device) * sigma
            outs.append(f(x.unsqueeze(0) + noise).detach())
        return torch.cat(outs)

    with torch.no_grad():
        cands = draw(n_centers)
        pred = draw(n_pred)
        med = torch.stack([_dist(distance, pred, c).median() for c in cands])
        i = int(med.argmin())
        center, r_half = cands[i], float(med[i])
        inside = float((_dist(distance, draw(n_pred), center) <= r_half).double().mean())
        d1 = _math.sqrt(_math.log(2.0 / alpha_1) / (2.0 * n_pred))
        accepted = max(d1, 0.5 - (inside - d1)) <= delta
        dist = _dist(distance, draw(n_cert), center).double().cpu().numpy()
    radius = _np.array([_np.quantile(dist, qq) if qq <= 1.0 else _np.nan for qq in q])
    return {"center": center, "accepted": bool(accepted), "r_half": r_half, "quantile": q,
            "radius": radius, "bound": gamma * (1.0 + float(beta)) * radius}

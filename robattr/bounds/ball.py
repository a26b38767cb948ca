"""002 (wangkong2025): uniform l2-ball smoothing, the crescent bound and the cosine certificate.

h(x) = mean of g over the l2 ball B(x; r). Moving the centre by eps swaps the two
crescents of the symmetric difference, so ||h(x~) - h(x)|| <= a := M V_U / V_S when
||g|| <= M everywhere. V_U / V_S (two caps of height r - eps/2) in closed form:
    V_U / V_S = 2 (1 - I_{1 - (eps/2r)^2}((d+1)/2, 1/2)) = 2 I_{(eps/2r)^2}(1/2, (d+1)/2),
the second form (symmetry of the regularised incomplete beta) is the one computed: it
has no cancellation for small eps / r. Thm 1 as printed minimises the cosine over the
angle theta of the shift at cos(theta) = 0; the minimum is at cos(theta) = -a/c, which
gives sqrt(1 - a^2/c^2) (the corrected bound). Cor 1 inverts the bound with betaincinv.
"""
from __future__ import annotations

import numpy as _np
from scipy import special as _sp

from robattr.bounds._checks import _arr, _dim, _out

__all__ = [
    "ball_volume_ratio", "shift_cosine_bound", "ball_smoothing_cosine_bound",
    "ball_smoothing_max_eps", "ball_smoothing_min_radius", "ball_smoothing_stats",
    "min_cosine_over_directions", "extremal_crescent_field", "crescent_field",
    "random_crescent_fields", "first_crossing_radius", "smoothed_cosine_tolerance",
]


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


def ball_smoothing_stats(model, x, target=None, *, r: float, n_samples: int, base=None,
                         seed=None, generator=None, batch_size: int = 512) -> dict:
    """Monte-Carlo estimate of the smoothed map h(x) = E_{eta ~ U(B(0; r))} g(x + eta), with
    what the certificate needs, from one set of ``n_samples`` draws ``g_j = g(x + eta_j)``.

    Returns a dict of tensors: ``h`` (shaped like ``x``), the mean of the draws; ``h_unit``,
    the mean of the unit-normalised draws ``g_j / ||g_j||`` (for that attribution
    ``||g|| <= 1 = M`` holds everywhere, so its certificate is a proof); ``g_max`` (``(N,)``),
    the largest ``||g_j||_2`` (an *empirical* stand-in for M: a bound only on the draws);
    ``g_linf`` (``(N,)``), the largest absolute entry of any draw; ``var`` and ``var_unit``
    (shaped like ``x``), the per-coordinate sample variances of the draws (for the
    Monte-Carlo error radii of :mod:`robattr.bounds.montecarlo`). ``base`` is an attribution
    method with the standard call shape (default :func:`robattr.attributions.grad`).
    """
    import torch

    from robattr.attributions import ball_noise, grad, resolve_target
    from robattr.attributions._core import check_input, check_model, chunks

    check_model(model)
    x = check_input(x).detach()
    r = float(_arr("r", r, low=0.0, strict=True))
    if isinstance(n_samples, bool) or not isinstance(n_samples, (int, _np.integer)) \
            or n_samples < 2:
        raise ValueError(f"n_samples must be an integer >= 2, got {n_samples!r}")
    base = grad if base is None else base
    if not callable(base):
        raise ValueError(f"base must be an attribution method, got {base!r}")
    target = resolve_target(model, x, target)
    noise = ball_noise(x, int(n_samples), r=r, generator=generator, seed=seed)
    z = torch.zeros_like(x)
    s1, s2, u1, u2 = z.clone(), z.clone(), z.clone(), z.clone()
    gmax = torch.zeros(x.shape[0], dtype=x.dtype, device=x.device)
    ginf = torch.zeros_like(gmax)
    view = (-1,) + (1,) * (x.ndim - 1)
    for s, ks in chunks(batch_size, model, x, int(n_samples), kind=f"ball:{base!r}"):
        eta = noise[s:s + ks]
        xs = (x.unsqueeze(0) + eta).reshape((ks * x.shape[0],) + x.shape[1:])
        g = base(model, xs, target.repeat(ks)).detach().reshape((ks,) + x.shape)
        nrm = g.flatten(2).norm(dim=2)                      # (ks, N)
        u = g / nrm.clamp_min(1e-30).reshape((ks,) + view)
        gmax = torch.maximum(gmax, nrm.max(0).values)
        ginf = torch.maximum(ginf, g.flatten(2).abs().amax(dim=(0, 2)))
        s1, s2 = s1 + g.sum(0), s2 + (g * g).sum(0)
        u1, u2 = u1 + u.sum(0), u2 + (u * u).sum(0)
    n = float(n_samples)
    h, hu = s1 / n, u1 / n
    return {"h": h, "h_unit": hu, "g_max": gmax, "g_linf": ginf,
            "var": ((s2 - n * h * h) / (n - 1.0)).clamp_min(0.0),
            "var_unit": ((u2 - n * hu * hu) / (n - 1.0)).clamp_min(0.0)}


# ---- the checks of the 002 notebooks: extremal and random bounded g, grid minima, radii ----

def min_cosine_over_directions(c, a, n_grid: int = 20001, chunk: int = 250):
    """Dense-grid minimum over the angle theta in [0, pi] of the cosine between h and h + s,
    ``f = (c + a cos theta) / sqrt((c + a cos theta)^2 + (a sin theta)^2)``, for each pair
    (``c`` = ||h||, ``a`` = ||s||; arrays of one length). ``chunk`` pairs at a time bound the
    memory (``chunk * n_grid`` floats). The exact minimum is :func:`shift_cosine_bound`."""
    c = _np.atleast_1d(_arr("c", c, low=0.0, strict=True))
    a = _np.atleast_1d(_arr("a", a, low=0.0))
    if c.shape != a.shape or c.ndim != 1:
        raise ValueError(f"c and a must be 1-D arrays of one length, got {c.shape} and {a.shape}")
    for name, v in (("n_grid", n_grid), ("chunk", chunk)):
        if isinstance(v, bool) or not isinstance(v, (int, _np.integer)) or v < 2:
            raise ValueError(f"{name} must be an integer >= 2, got {v!r}")
    theta = _np.linspace(0, _np.pi, n_grid)
    out = _np.empty(len(c))
    for i in range(0, len(c), chunk):
        cc, aa = c[i:i + chunk, None], a[i:i + chunk, None]
        num = cc + aa * _np.cos(theta)
        out[i:i + chunk] = (num / _np.hypot(num, aa * _np.sin(theta))).min(1)
    return out


def extremal_crescent_field(c, M, d, r, eps):
    """The piecewise-constant bounded g (values in R^2) that attains the corrected Theorem 1:
    ``-M v`` on the crescent of x, ``+M v`` on that of x~, ``w`` on the lens, with
    ``v = (-a/c, sqrt(1 - a^2/c^2))`` and ``w`` chosen so that ``h(x) = (c, 0)``.

    Returns a dict with ``v``, ``w``, ``a`` (= M V_U / V_S) and the exact smoothed maps
    ``h_x``, ``h_xt`` (volume-weighted sums), or None where no such g exists (``a >= c``
    or ``||w|| > M``)."""
    c = float(_arr("c", c, low=0.0, strict=True))
    M = float(_arr("M", M, low=0.0, strict=True))
    ratio = ball_volume_ratio(d, r, eps)           # V_U / V_S; each crescent is half of it
    a = M * ratio
    if a >= c:
        return None
    v = _np.array([-a / c, _np.sqrt(1 - (a / c) ** 2)])
    hx = _np.array([c, 0.0])
    lens = 1 - ratio / 2                           # vol L / V_S
    w = (hx + a / 2 * v) / lens
    if _np.linalg.norm(w) > M * (1 + 1e-12):
        return None
    h_x = -M * v * ratio / 2 + w * lens
    h_xt = M * v * ratio / 2 + w * lens
    return dict(v=v, w=w, a=a, h_x=h_x, h_xt=h_xt)


def crescent_field(z, x, x_tilde, r, minus, lens, plus):
    """Values at the points ``z`` (rows) of the g that is ``minus`` on B(x; r) \\ B(x~; r),
    ``plus`` on B(x~; r) \\ B(x; r), ``lens`` on the intersection and 0 elsewhere."""
    z = _np.asarray(z, dtype=float)
    if z.ndim != 2:
        raise ValueError(f"z must be a 2-D array of points (rows), got shape {z.shape}")
    r = float(_arr("r", r, low=0.0, strict=True))
    in_x = _np.linalg.norm(z - x, axis=1) <= r
    in_xt = _np.linalg.norm(z - x_tilde, axis=1) <= r
    out = _np.zeros((len(z), len(_np.atleast_1d(lens))))
    out[in_x & ~in_xt] = minus
    out[in_xt & ~in_x] = plus
    out[in_x & in_xt] = lens
    return out


def random_crescent_fields(n: int, M, r, rng, d_range=(2, 784), rho_range=(1e-4, 2.0)):
    """``n`` random piecewise-constant g with values in the disc of radius M of R^2 (one
    uniform value each on C-, the lens and C+), with d and eps/r log-uniform in the given
    ranges (d rounded to an integer). h is a volume-weighted sum of the three values, so it is
    exact. Draws from ``rng`` in this order: d, eps/r, then the three values.

    Returns a dict of arrays: ``d``, ``rho`` (eps/r), ``ratio`` (V_U / V_S), ``h_x``, ``h_xt``
    (``(n, 2)``)."""
    from robattr.attributions.noise import ball_noise_numpy

    if isinstance(n, bool) or not isinstance(n, (int, _np.integer)) or n < 1:
        raise ValueError(f"n must be an integer >= 1, got {n!r}")
    M = float(_arr("M", M, low=0.0, strict=True))
    r = float(_arr("r", r, low=0.0, strict=True))
    if not (1 <= d_range[0] <= d_range[1]) or not (0 < rho_range[0] <= rho_range[1]):
        raise ValueError(f"need 1 <= d_range[0] <= d_range[1] and 0 < rho_range[0] <= "
                         f"rho_range[1], got {d_range} and {rho_range}")
    dims = _np.round(_np.exp(rng.uniform(_np.log(d_range[0]), _np.log(d_range[1]), n))).astype(int)
    rhos = _np.exp(rng.uniform(_np.log(rho_range[0]), _np.log(rho_range[1]), n))
    g1, g2, g3 = (ball_noise_numpy(n, 2, M, rng) for _ in range(3))
    ratio = ball_volume_ratio(dims, r, rhos * r)
    h_x = g1 * ratio[:, None] / 2 + g2 * (1 - ratio[:, None] / 2)
    h_xt = g3 * ratio[:, None] / 2 + g2 * (1 - ratio[:, None] / 2)
    return dict(d=dims, rho=rhos, ratio=ratio, h_x=h_x, h_xt=h_xt)


def first_crossing_radius(eps_max, radii, eps):
    """Per row of ``eps_max`` (inputs x radii, the certified budget at each radius of the
    increasing grid ``radii``), the smallest radius where the budget reaches ``eps``: the
    first grid point with ``eps_max >= eps``, interpolated linearly from the point before;
    ``radii[0]`` when the first point already reaches it; inf when no point does (beyond
    the grid). The budget need not be monotone in r: the first crossing is taken."""
    v = _np.atleast_2d(_np.asarray(eps_max, dtype=float))
    radii = _np.asarray(radii, dtype=float)
    if radii.ndim != 1 or v.shape[1] != len(radii) or _np.any(_np.diff(radii) <= 0):
        raise ValueError("radii must be an increasing 1-D grid with one value per column of "
                         f"eps_max, got {radii!r} for eps_max of shape {v.shape}")
    out = _np.empty(len(v))
    for i, row in enumerate(v):
        hit = _np.nonzero(row >= eps)[0]
        if len(hit) == 0:
            out[i] = _np.inf
        elif hit[0] == 0:
            out[i] = radii[0]
        else:
            j = hit[0]
            out[i] = _np.interp(eps, [row[j - 1], row[j]], [radii[j - 1], radii[j]])
    return out


def smoothed_cosine_tolerance(stats0: dict, stats1: dict, n_samples: int, k: float = 3.0):
    """About ``k`` standard errors on the cosine of two Monte-Carlo smoothed maps (the dicts
    of :func:`ball_smoothing_stats`), per input: ``k * err / min(||h0||, ||h1||)``, capped
    at 2, where ``err = sqrt((sum var0 + sum var1) / N)`` is the scale of the two maps'
    error norms. A tensor of length N."""
    if isinstance(n_samples, bool) or not isinstance(n_samples, (int, _np.integer)) \
            or n_samples < 1:
        raise ValueError(f"n_samples must be an integer >= 1, got {n_samples!r}")
    if not k > 0:
        raise ValueError(f"k must be > 0, got {k!r}")
    err = ((stats0["var"].flatten(1).sum(1) + stats1["var"].flatten(1).sum(1)) / n_samples).sqrt()
    hn = stats0["h"].flatten(1).norm(dim=1).minimum(stats1["h"].flatten(1).norm(dim=1))
    return (k * err / hn).clamp(max=2)

"""The theory_ball_smoothing notebook's steps: Monte-Carlo checks of the crescent bound and of
the volume ratio, the minimum of the cosine over shift directions, and Corollary 1's tables.

* :func:`cosine`: the cosine of two vectors;
* :func:`random_field_shifts`: ``||h(x~) - h(x)||`` of random smooth fields of norm M;
* :func:`volume_ratio_check`, :func:`plot_volume_ratio`: ``V_U / V_S`` by Monte Carlo beside
  the closed form;
* :func:`bounded_search_min_cosine`: the smallest cosine of ``h`` and ``h + s`` over the
  directions of ``s``, by a bounded scalar search;
* :func:`plot_extremal_sweep`: the two bounds over eps beside the extremal field's cosines;
* :func:`print_corollary_table`, :func:`corollary_round_trip_errors`: Corollary 1's budgets
  and radii, printed and corrected, and a round trip through the bound;
* :func:`print_dimension_table`: the volume ratio, both bounds and both budgets against d;
* :func:`antiparallel_crescent_field`: the exercise's field with ``cos = -1`` when ``a > c``.
"""
from __future__ import annotations

import math
from typing import Sequence

import numpy as np

__all__ = ["cosine", "random_field_shifts", "volume_ratio_check", "plot_volume_ratio",
           "bounded_search_min_cosine", "plot_extremal_sweep", "print_corollary_table",
           "corollary_round_trip_errors", "print_dimension_table", "antiparallel_crescent_field"]


def cosine(p: np.ndarray, q: np.ndarray) -> float:
    """The cosine of the vectors ``p`` and ``q`` (:func:`robattr.metrics.cosine_similarity`
    in float64; 0 where either is zero)."""
    import torch

    from robattr.metrics import cosine_similarity

    a, b = (torch.as_tensor(np.asarray(v, dtype=np.float64)).reshape(1, -1) for v in (p, q))
    return float(cosine_similarity(a, b)[0])


def random_field_shifts(M: float, d: int, r: float, eps: float, *, n_fields: int, n_mc: int,
                        rng: np.random.Generator) -> np.ndarray:
    """For ``n_fields`` random fields ``g(z) = M (cos(w.z + b), sin(w.z + b))`` (``||g|| = M``,
    ``w`` Gaussian times a scale in [0.5, 20], ``b`` uniform): ``||h(x~) - h(x)||`` for
    ``x = 0`` and ``x~ = eps e_1``, each ``h`` the mean over ``n_mc`` points of the ball of
    radius ``r`` (the same points for both balls), all draws from ``rng``."""
    from robattr.attributions.noise import ball_noise_numpy

    x0, shift = np.zeros(d), eps * np.eye(d)[0]
    shifts = []
    for _ in range(n_fields):
        w = rng.standard_normal(d) * rng.uniform(0.5, 20.0)
        b = rng.uniform(0, 2 * np.pi)

        def field(z, w=w, b=b):
            return M * np.stack([np.cos(z @ w + b), np.sin(z @ w + b)], axis=1)

        z = ball_noise_numpy(n_mc, d, r, rng)         # common random numbers for both balls
        shifts.append(np.linalg.norm(field(z + x0 + shift).mean(0) - field(z + x0).mean(0)))
    return np.array(shifts)


def volume_ratio_check(dims: Sequence[int], rhos: Sequence[float], r: float, n_mc: int,
                       rng: np.random.Generator) -> list[tuple]:
    """Per dimension of ``dims`` and ``eps / r`` of ``rhos``: ``(d, eps/r, closed form,
    Monte Carlo, standard error, z)``, the Monte Carlo estimate of ``V_U / V_S`` being twice
    the share of ``n_mc`` uniform points of ``B(0; r)`` outside ``B(eps e_1; r)``."""
    from robattr.attributions.noise import ball_noise_numpy
    from robattr.bounds import ball_volume_ratio

    rows = []
    for dim in dims:
        for rho in rhos:
            e = rho * r
            z = ball_noise_numpy(n_mc, dim, r, rng)
            sh = np.zeros(dim)
            sh[0] = e
            p = np.mean(np.linalg.norm(z - sh, axis=1) > r)
            est, se = 2 * p, 2 * math.sqrt(max(p * (1 - p), 1e-300) / n_mc)
            exact = ball_volume_ratio(dim, r, e)
            rows.append((dim, rho, exact, est, se, (est - exact) / se if se > 0 else 0.0))
    return rows


def plot_volume_ratio(rows: list[tuple]) -> None:
    """``V_U / V_S`` over ``eps / r`` in closed form (lines, a few d) and the Monte-Carlo
    estimates of :func:`volume_ratio_check` (dots)."""
    import matplotlib.pyplot as plt

    from robattr.bounds import ball_volume_ratio

    rho_grid = np.linspace(0, 2.2, 221)
    fig, ax = plt.subplots(figsize=(5.5, 3.5))
    for dim in (1, 2, 3, 10, 64, 784):
        ax.plot(rho_grid, ball_volume_ratio(dim, 1.0, rho_grid), label=f"d = {dim}")
    for dim, rho, exact, est, se, zs in rows:
        ax.plot(rho, est, "k.", ms=5)
    ax.set_xlabel(r"$\varepsilon / r$")
    ax.set_ylabel(r"$V_U / V_S$")
    ax.set_title("closed form (lines) and Monte Carlo (dots)")
    ax.legend(fontsize=8)
    plt.show()


def bounded_search_min_cosine(c: np.ndarray, a: np.ndarray) -> np.ndarray:
    """Per pair: the smallest ``cos(h, h + s)`` over the angle ``theta`` in [0, pi] between
    ``h`` (norm ``c``) and ``s`` (norm ``a``), by a bounded scalar search (``xatol`` 1e-12)."""
    from scipy import optimize

    def cos_at(t, c, a):
        return (c + a * np.cos(t)) / math.hypot(c + a * np.cos(t), a * math.sin(t))

    return np.array([optimize.minimize_scalar(lambda t, c=c, a=a: cos_at(t, c, a),
                                              bounds=(0, np.pi), method="bounded",
                                              options={"xatol": 1e-12}).fun
                     for c, a in zip(c, a)])


def plot_extremal_sweep(h_norm: float, M: float, d: int, r: float, eps: float,
                        e_ok: np.ndarray, cos_sw: np.ndarray) -> None:
    """The printed and corrected cosine bounds over eps, with the extremal field's exact
    cosines ``cos_sw`` at the admissible ``e_ok`` and the notebook's ``eps`` marked."""
    import matplotlib.pyplot as plt

    from robattr.bounds import ball_smoothing_cosine_bound

    fig, ax = plt.subplots(figsize=(5.5, 3.5))
    ee = np.linspace(0, e_ok.max(), 300)
    ax.plot(ee, ball_smoothing_cosine_bound(h_norm, M, d, r, ee, corrected=False),
            label="printed bound")
    ax.plot(ee, ball_smoothing_cosine_bound(h_norm, M, d, r, ee), label="corrected bound")
    ax.plot(e_ok, cos_sw, "k.", ms=3, label="extremal bounded g (exact)")
    ax.axvline(eps, color="grey", lw=0.5)
    ax.set_xlabel(r"$\varepsilon$")
    ax.set_ylabel(r"$\cos(h(x), h(\tilde x))$")
    ax.set_title(f"d = {d}, M = {M}, r = {r}, ||h(x)|| = {h_norm}")
    ax.legend(fontsize=8)
    plt.show()


def print_corollary_table(h_norm: float, M: float, dims: Sequence[int],
                          r_grid: Sequence[float]) -> None:
    """Print, per d of ``dims``, Corollary 1's ``eps_max`` per radius of ``r_grid`` and
    ``r_min`` for eps 0.5 and 1.0, at T 0.9 and 0.8, printed and corrected, with
    ``||h(x)|| = h_norm`` held fixed across r."""
    from robattr.bounds import ball_smoothing_max_eps, ball_smoothing_min_radius

    for dim in dims:
        print(f"eps_max, d = {dim}, M = {M}, ||h(x)|| = {h_norm} (held fixed across r):")
        print(f"{'r':>5} | {'T=0.9 printed':>14} {'corrected':>10} {'ratio':>6} | "
              f"{'T=0.8 printed':>14} {'corrected':>10} {'ratio':>6}")
        for rr in r_grid:
            line = f"{rr:>5.1f} |"
            for T in (0.9, 0.8):
                p = ball_smoothing_max_eps(h_norm, M, dim, rr, T, corrected=False)
                c = ball_smoothing_max_eps(h_norm, M, dim, rr, T)
                line += f" {p:>14.4f} {c:>10.4f} {c / p:>6.3f} |"
            print(line)
        for e in (0.5, 1.0):
            for T in (0.9, 0.8):
                p = ball_smoothing_min_radius(h_norm, M, dim, e, T, corrected=False)
                c = ball_smoothing_min_radius(h_norm, M, dim, e, T)
                print(f"  r_min(eps = {e}, T = {T}): printed {p:.3f}, corrected {c:.3f}")


def corollary_round_trip_errors(h_norm: float, M: float, dim: int,
                                r_grid: Sequence[float]) -> np.ndarray:
    """``|bound - T|`` at ``eps_max`` (each radius of ``r_grid``) and at ``r_min`` (eps 0.5
    and 1.0), for T 0.9 and 0.8 and both forms: zero up to rounding when the inverse
    incomplete-beta formulas invert their own bound."""
    from robattr.bounds import (ball_smoothing_cosine_bound, ball_smoothing_max_eps,
                                ball_smoothing_min_radius)

    errs = [abs(ball_smoothing_cosine_bound(
        h_norm, M, dim, rr, ball_smoothing_max_eps(h_norm, M, dim, rr, T, cr), cr) - T)
        for rr in r_grid for T in (0.9, 0.8) for cr in (True, False)]
    errs += [abs(ball_smoothing_cosine_bound(
        h_norm, M, dim, ball_smoothing_min_radius(h_norm, M, dim, e, T, cr), e, cr) - T)
        for e in (0.5, 1.0) for T in (0.9, 0.8) for cr in (True, False)]
    return np.array(errs)


def antiparallel_crescent_field(c: float, M: float, d: int, r: float) -> dict:
    """For ``||h(x)|| = c < M``: the piecewise-constant field of the exercise, ``g = -Mv`` on
    ``C_-``, ``+Mv`` on ``C_+`` and ``w`` on the lens with ``v = -h(x)/c``, at the eps where
    ``a = (c + M) / 2``; returns ``eps``, ``a``, ``w`` and the exact ``h_x``, ``h_xt``."""
    from scipy.special import betaincinv

    from robattr.bounds import ball_volume_ratio

    if not 0 < c < M:
        raise ValueError(f"need 0 < c < M, got c = {c}, M = {M}")
    target = (c + M) / 2 / M                     # wanted V_U / V_S, so that c < a <= M + c
    e = 2 * r * np.sqrt(betaincinv(0.5, (d + 1) / 2, target / 2))
    ratio = ball_volume_ratio(d, r, e)
    a = M * ratio
    hx = np.array([c, 0.0])
    v = -hx / c
    w = (hx + a / 2 * v) / (1 - ratio / 2)
    return {"eps": e, "a": a, "w": w, "h_x": -M * v * ratio / 2 + w * (1 - ratio / 2),
            "h_xt": M * v * ratio / 2 + w * (1 - ratio / 2)}


def print_dimension_table(h_norm: float, M: float, r: float, eps: float,
                          dims: Sequence[int] = (2, 10, 64, 784, 3072)) -> None:
    """Print, per d of ``dims``: ``V_U / V_S`` at ``eps``, the printed and corrected cosine
    bounds there, and the largest certified ``eps / r`` at T = 0.9 in both forms."""
    from robattr.bounds import (ball_smoothing_cosine_bound, ball_smoothing_max_eps,
                                ball_volume_ratio)

    print(f"eps/r = {eps / r:.3f}, M = {M}, ||h(x)|| = {h_norm}")
    print(f"{'d':>5} {'V_U/V_S':>9} {'printed':>9} {'corrected':>10} "
          f"{'eps_max/r printed':>18} {'corrected':>10}")
    for dim in dims:
        print(f"{dim:>5} {ball_volume_ratio(dim, r, eps):>9.4f} "
              f"{ball_smoothing_cosine_bound(h_norm, M, dim, r, eps, corrected=False):>9.4f} "
              f"{ball_smoothing_cosine_bound(h_norm, M, dim, r, eps):>10.4f} "
              f"{ball_smoothing_max_eps(h_norm, M, dim, 1.0, 0.9, corrected=False):>18.5f} "
              f"{ball_smoothing_max_eps(h_norm, M, dim, 1.0, 0.9):>10.5f}")

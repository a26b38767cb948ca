"""The montecarlo notebook's steps: the law of the Monte-Carlo estimate of the smoothed map
(002's App. C.1) against repeated simulation.

* :func:`imhof_closed_form_errors`: Imhof's CDF against the closed forms of chi-square laws;
* :func:`norm_laws`: the generalised chi-square laws of ``||h^||^2`` from the diagonal and
  from the full covariance;
* :func:`runs_inside_interval`: how many runs fall in each law's central interval;
* :func:`plot_error_cdf`: the simulated law of ``||h^ - h||^2`` beside the two laws;
* :func:`spread_around_mean`, :func:`bootstrap_rms_ratio`: the exercise's ``1/sqrt(N)``
  scaling of the error, without a reference ``h``.
"""
from __future__ import annotations

from typing import Callable, Sequence

import numpy as np

__all__ = ["imhof_closed_form_errors", "norm_laws", "runs_inside_interval", "plot_error_cdf", "spread_around_mean",
           "bootstrap_rms_ratio"]


def norm_laws(h: np.ndarray, cov: np.ndarray, n_samples: int) -> dict:
    """The laws of ``||h^||^2`` for the mean ``h^`` of ``n_samples`` draws of mean ``h`` and
    covariance ``cov`` (Gaussian approximation), as ``{name: (weights, noncentralities)}``:
    ``"diagonal"`` keeps the variances only (weights ``s_j^2 / N``, ``N h_j^2 / s_j^2``),
    ``"full"`` the eigenvalues ``mu_i`` of ``cov`` above 1e-12 of the largest (``mu_i / N``,
    ``N (U^T h)_i^2 / mu_i``)."""
    if n_samples < 1:
        raise ValueError(f"n_samples must be at least 1, got {n_samples}")
    var = np.diag(cov).copy()
    mu, U = np.linalg.eigh(cov)
    keep = mu > 1e-12 * mu.max()
    return {"diagonal": (var / n_samples, n_samples * h ** 2 / var),
            "full": (mu[keep] / n_samples, n_samples * (U.T @ h)[keep] ** 2 / mu[keep])}


def runs_inside_interval(values: np.ndarray, laws: dict, alpha: float) -> dict[str, int]:
    """Per law of :func:`norm_laws`: how many of ``values`` (simulated ``||h^||^2``) lie in
    its central ``1 - alpha`` interval."""
    from robattr.bounds import generalized_chi2_ppf

    inside = {}
    for name, (ww, ll) in laws.items():
        t1, t2 = generalized_chi2_ppf([alpha / 2, 1 - alpha / 2], ww, noncentrality=ll)
        inside[name] = int(((values >= t1) & (values <= t2)).sum())
    return inside


def plot_error_cdf(errs: np.ndarray, w_diag: np.ndarray, w_full: np.ndarray,
                   t_gauss: float) -> None:
    """The empirical CDF of ``||h^ - h||^2`` over the runs (``errs``: the error norms) beside
    the generalised chi-square CDFs with weights ``w_diag`` and ``w_full`` (Imhof), and the
    ``1 - alpha`` radius ``t_gauss`` squared."""
    import matplotlib.pyplot as plt

    from robattr.bounds import generalized_chi2_cdf

    n = len(errs)
    grid = np.linspace(0.0, 1.3 * np.max(errs ** 2), 30)
    fig, ax = plt.subplots(figsize=(6, 3.8))
    ax.step(np.sort(errs ** 2), np.arange(1, n + 1) / n, where="post",
            label=f"empirical ({n} runs)")
    ax.plot(grid, generalized_chi2_cdf(grid, w_diag), "--", label="diagonal covariance (Imhof)")
    ax.plot(grid, generalized_chi2_cdf(grid, w_full), ":", label="full covariance (Imhof)")
    ax.axvline(t_gauss ** 2, color="k", lw=0.8, label=r"$t^2$ at $1-\alpha$")
    ax.set_xlabel(r"$\|\hat h - h\|^2$")
    ax.set_ylabel("CDF")
    ax.legend()
    fig.tight_layout()
    plt.show()


def spread_around_mean(g: Callable, draw: Callable, n_draws: int, n_ex: int) -> np.ndarray:
    """``n_ex`` estimates ``mean(g(draw(n_draws)))``: each one's squared distance to their
    common mean, scaled by ``n_ex / (n_ex - 1)`` so that its mean estimates ``tr(Sigma) / N``."""
    if n_ex < 2:
        raise ValueError(f"n_ex must be at least 2, got {n_ex}")
    est = np.stack([g(draw(n_draws)).mean(0) for _ in range(n_ex)])
    return ((est - est.mean(0)) ** 2).sum(1) * n_ex / (n_ex - 1)


def bootstrap_rms_ratio(small: np.ndarray, large: np.ndarray, seed: int,
                        n_boot: int = 2000) -> tuple[float, float, float]:
    """``(ratio, lo, hi)``: ``sqrt(mean(small) / mean(large))`` (the factor by which the RMS
    error shrinks) and its 95 % bootstrap interval over the runs (``n_boot`` resamples of
    each, generator seeded by ``seed``)."""
    rng = np.random.default_rng(seed)
    boot = [np.sqrt(rng.choice(small, len(small)).mean() / rng.choice(large, len(large)).mean())
            for _ in range(n_boot)]
    lo, hi = np.quantile(boot, [0.025, 0.975])
    return float(np.sqrt(small.mean() / large.mean())), float(lo), float(hi)


def imhof_closed_form_errors(xs: np.ndarray, dofs: Sequence[int] = (1, 4, 20),
                             noncentrality: float = 3.0) -> list[tuple[int, float, float]]:
    """Per degrees of freedom ``k`` of ``dofs``: ``(k, err_c, err_nc)``, the largest distance
    over ``xs`` between Imhof's CDF (:func:`robattr.bounds.generalized_chi2_cdf`) and the
    closed forms of ``2 chi2_k`` and of the non-central ``chi2_k(noncentrality)``."""
    from scipy import stats

    from robattr.bounds import generalized_chi2_cdf

    xs = np.asarray(xs, dtype=float)
    rows = []
    for k in dofs:
        err_c = np.max(np.abs(generalized_chi2_cdf(2.0 * xs, [2.0], dofs=k)
                              - stats.chi2.cdf(xs, k)))
        err_nc = np.max(np.abs(generalized_chi2_cdf(xs, [1.0], dofs=k, noncentrality=noncentrality)
                               - stats.ncx2.cdf(xs, k, noncentrality)))
        rows.append((k, err_c, err_nc))
    return rows

"""The figures of the wang2020 chapter's two theory notebooks (the numbers behind them come from
:mod:`.theory`). Each function draws one figure and shows it (``plt.show()``).

* :func:`eigen_timing_figure`: B1's three times against the input size (log-log);
* :func:`second_order_figure`: B2's two terms and PGD's loss change against the radius;
* :func:`saliency_bound_figure`: Thm 1's ratio against its bound;
* :func:`lambda_against_lipschitz_figure`: Thm 1's λ against L;
* :func:`stein_figure`: Prop 1's distance between the estimators against the sample count;
* :func:`smoothed_hessian_figure`: Thm 2's bounds with the trained model and the 2-D cases;
* :func:`sigma_threshold_figure`: Prop 2's two Lipschitz bounds on one point against σ;
* :func:`gradient_change_figure`: Thm 3's ratio against the radius, per case.
"""
from __future__ import annotations

from typing import Sequence

import numpy as np
import pandas as pd

__all__ = ["eigen_timing_figure", "second_order_figure", "saliency_bound_figure",
           "lambda_against_lipschitz_figure", "stein_figure", "smoothed_hessian_figure", "sigma_threshold_figure",
           "gradient_change_figure"]


def eigen_timing_figure(timing: pd.DataFrame) -> None:
    """B1 (:func:`robattr.chapters.wang2020.eigen_solve_timing`'s table): the median ms of the
    dense eigen-solve, the ``C × C`` one and the shared Jacobian against ``d``, log-log."""
    import matplotlib.pyplot as plt

    from robattr.report.viz import readable_log_ticks

    fig, ax = plt.subplots(figsize=(5.5, 3.5))
    ax.loglog(timing.d, timing.dense_eig_ms, "o-", label=r"dense $d\times d$ eigvalsh")
    ax.loglog(timing.d, timing.small_eig_ms, "s-", label=r"$C\times C$ eigvalsh")
    ax.loglog(timing.d, timing.jacobian_ms, "^--", label=r"Jacobian $W$ (shared)")
    ax.set_xlabel("input dimension d")
    ax.set_ylabel("ms (median)")
    ax.legend(fontsize=8)
    readable_log_ticks(ax)
    plt.show()


#: B2's curves and their labels
SECOND_ORDER_TERMS = {"first": r"$\varepsilon\Vert\nabla\mathcal{L}\Vert$",
                      "second": r"$\frac{\varepsilon^2}{2}\lambda_{\max}$",
                      "actual": "loss change found by PGD"}


def second_order_figure(table: pd.DataFrame) -> None:
    """B2 (:func:`robattr.chapters.wang2020.second_order_terms`'s table): the median of each
    term and of PGD's loss change (floored at 1e-6 for the log axis) against the radius."""
    import matplotlib.pyplot as plt

    from robattr.report import viz

    terms = (table.assign(actual=table.actual.clip(lower=1e-6))
             .melt(id_vars="delta", value_vars=list(SECOND_ORDER_TERMS), var_name="term",
                   value_name="median")
             .replace({"term": SECOND_ORDER_TERMS}))
    viz.metric_curves(terms, x="delta", y="median", hue="term", style="term", col=None,
                      x_spacing="log", logy=True, xlabel=r"$\varepsilon$",
                      x_units=r"$\ell_2$, pixel units", ylabel="median over points",
                      y_units="loss, nats", height=3.2, aspect=1.3)
    plt.show()


def saliency_bound_figure(cases: pd.DataFrame, bound) -> None:
    """Thm 1 (:func:`robattr.chapters.wang2020.saliency_cases`): the measured ratio λ against
    its bound ``bound`` (one per case, ``2L / ‖x − x*‖``), per model, on log axes."""
    import matplotlib.pyplot as plt

    from robattr.report import viz
    from robattr.report.viz import readable_log_ticks

    thm1 = pd.DataFrame({"model": cases.model.to_numpy(), "lambda": cases.lam.to_numpy(),
                         "bound": bound})
    g = viz.measured_vs_bound(thm1, measured="lambda", bound="bound", hue="model", log=True,
                              quantity=r"ratio $\lambda$ (search)",
                              units=r"logit / pixel unit$^2$", height=4, aspect=1.25,
                              title=r"Thm 1, bound $2\hat L/\Vert x-x^*\Vert$")
    for a in g.axes.flat:
        readable_log_ticks(a)                     # no minor labels running into each other
    plt.show()


def lambda_against_lipschitz_figure(cases: pd.DataFrame) -> None:
    """Thm 1's cases (:func:`robattr.chapters.wang2020.saliency_cases`): λ against the
    largest gradient norm L̂ found in the ball, one colour per model."""
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(5, 3.8))
    for name in dict.fromkeys(cases.model):
        sel = (cases.model == name).to_numpy()
        ax.plot(cases.L.to_numpy()[sel], cases.lam.to_numpy()[sel], "o", ms=4, label=name)
    ax.set_xlabel(r"$\hat L$ = largest gradient norm in the ball (logit / pixel unit)")
    ax.set_ylabel(r"$\lambda$ (logit / pixel unit$^2$)")
    ax.set_title(r"$\lambda$ against $L$")
    ax.legend(fontsize=7)
    plt.tight_layout()
    plt.show()


def stein_figure(ns: Sequence[float], conv: dict, slopes: dict, reference) -> None:
    """Prop 1: per (model, control variate) of ``conv`` (the median relative distance per
    sample count of ``ns``), its curve labelled with its slope (``slopes``, same keys), and
    a ``1/√n`` line through ``reference`` (the first distance of one curve), log-log."""
    import matplotlib.pyplot as plt

    from robattr.report.viz import readable_log_ticks

    ns = np.asarray(ns, dtype=float)
    fig, ax = plt.subplots(figsize=(5.5, 3.6))
    for (name, cv), errs in conv.items():
        ax.loglog(ns, errs, "o-", label=f"{name}, {'with' if cv else 'no'} control variate "
                                        f"(slope {slopes[(name, cv)]:.2f})")
    ax.loglog(ns, reference * np.sqrt(ns[0] / ns), "k--", lw=1, label=r"$1/\sqrt{n}$")
    ax.set_xlabel("samples n")
    ax.set_ylabel(r"median $\Vert$pathwise $-$ Stein$\Vert$ / $\Vert$pathwise$\Vert$")
    readable_log_ticks(ax)
    ax.legend(fontsize=7)
    plt.show()


def smoothed_hessian_figure(hess: dict, quad: np.ndarray, ok: np.ndarray, *, title: str) -> None:
    """Thm 2: ``hess`` (σ -> ‖H̃ₓ‖₂ per point of the trained model) as dots, the printed and
    the sharper bound (F = 1) as lines, and the converged (``ok``) exact 2-D cases of
    ``quad`` (:func:`robattr.chapters.wang2020.random_2d_quadrature`)."""
    import matplotlib.pyplot as plt

    from robattr.bounds import smoothgrad_lipschitz_bound
    from robattr.report.viz import readable_log_ticks

    sig_arr = np.array(list(hess), dtype=float)
    fig, ax = plt.subplots(figsize=(5.8, 3.8))
    for s, v in hess.items():
        ax.plot([s] * len(v), v, "o", color="C0", ms=4, alpha=0.7)
    grid = np.geomspace(sig_arr.min(), sig_arr.max(), 100)
    ax.loglog(grid, smoothgrad_lipschitz_bound(1.0, grid), "C3-",
              label=r"Thm 2 as printed, $2F/\sigma^2$")
    ax.loglog(grid, smoothgrad_lipschitz_bound(1.0, grid, tight=True), "C2--",
              label=r"sharper, $0.968F/\sigma^2$")
    ax.loglog(quad[ok, 0], quad[ok, 1], "k.", ms=3, label="random 2-D nets (quadrature)")
    ax.set_xlabel(r"$\sigma$")
    ax.set_ylabel(r"$\Vert\tilde H_x\Vert_2$")
    ax.set_title(title)
    readable_log_ticks(ax)
    ax.legend(fontsize=7)
    plt.show()


def sigma_threshold_figure(grid, i0: int, *, big_l: float, lam: float, eps: float, hess: dict,
                           s_star: float, s_star_tight: float) -> None:
    """Prop 2 on point ``i0``: SmoothGrad's two bounds (F = 1) against σ of ``grid``, the
    saliency map's bound ``2L/ε`` (``big_l``) and its measured λ (``lam``), the measured
    ``‖H̃ₓ‖₂`` (``hess``: σ -> per point), and the thresholds σ* (printed and sharper)."""
    import matplotlib.pyplot as plt

    from robattr.bounds import smoothgrad_lipschitz_bound
    from robattr.report.viz import readable_log_ticks

    fig, ax = plt.subplots(figsize=(6, 3.8))
    ax.loglog(grid, smoothgrad_lipschitz_bound(1.0, grid), "C3-", label=r"SG bound $2F/\sigma^2$")
    ax.loglog(grid, smoothgrad_lipschitz_bound(1.0, grid, tight=True), "C2--",
              label=r"SG bound $0.968F/\sigma^2$")
    ax.axhline(2 * big_l / eps, color="C0", label=rf"SM bound $2L/\varepsilon$ (point {i0})")
    ax.axhline(lam, color="C0", ls=":", label=r"SM measured $\lambda$")
    ax.plot(np.array(list(hess), dtype=float), [v[i0] for v in hess.values()], "ko-", ms=4,
            label=r"SG measured $\Vert\tilde H_x\Vert_2$")
    ax.axvline(s_star, color="C3", lw=0.8)
    ax.axvline(s_star_tight, color="C2", lw=0.8, ls="--")
    ax.set_xlabel(r"$\sigma$")
    ax.set_ylabel("Lipschitz constant of the map")
    readable_log_ticks(ax)
    ax.legend(fontsize=7)
    plt.show()


def gradient_change_figure(study: pd.DataFrame) -> None:
    """Thm 3 (:func:`robattr.chapters.wang2020.gradient_change_study`): per case, the ratio of
    the gradient change to its bound against the radius; the random MLPs beside the trained
    model."""
    import matplotlib.pyplot as plt

    from robattr.report.viz import readable_log_ticks

    fig, axes = plt.subplots(1, 2, figsize=(9, 3.4), sharey=True)
    for ax, (trained, g) in zip(axes, study.groupby("trained")):
        for _, c in g.groupby(["model", "point"]):
            ax.plot(c.eps, c.ratio, "o-", ms=3, lw=0.8, alpha=0.7, color="C1" if trained else "C0")
        ax.axhline(1, color="k", lw=0.8)
        ax.set_xscale("log")
        readable_log_ticks(ax)
        ax.set(xlabel=r"radius $\varepsilon$",
               title="trained model" if trained else "random Softplus MLPs")
    axes[0].set_ylabel(r"$\max\Vert\nabla f(x)-\nabla f(x')\Vert \,/\, \varepsilon\Vert H_x\Vert_2$")
    plt.tight_layout()
    plt.show()

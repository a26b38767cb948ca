"""The figures of the wangkong2023 notebooks that :mod:`robattr.report.viz` has no function for.

``ig_gradient``: the off-diagonal share against the IG step count (:func:`plot_steps_study`) and
against the softplus β (:func:`plot_beta_study`), the B.1 residual sweep
(:func:`plot_linearity_residuals`) and the linearization ratios along a direction
(:func:`plot_linearization_ratios`). ``theory_bounds``: each image's remainder against how far
the direct attack passed ``T_e`` (:func:`plot_remainder_vs_crossing`). ``tables_bounds``: CE's
bound against AT's, image by image (:func:`plot_paired_bounds`). Each draws and shows its figure.
"""
from __future__ import annotations

import pandas as pd

__all__ = ["plot_steps_study", "plot_beta_study", "plot_linearity_residuals",
           "plot_linearization_ratios", "plot_remainder_vs_crossing", "plot_paired_bounds"]


def plot_steps_study(steps_table: pd.DataFrame, share_limit: float, limit_steps: int, arch: str) -> None:
    """Left, the off-diagonal share of ``J_IG`` against the step count m for the right and
    midpoint rules (table of :func:`~robattr.chapters.wangkong2023.steps_study`) with the
    midpoint share at ``limit_steps`` dashed; right, the Hessian term's weight against m."""
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(1, 2, figsize=(10, 3.4))
    for rule, c in (("right", "C0"), ("midpoint", "C1")):
        s = steps_table[steps_table.rule == rule]
        axes[0].plot(s.m, s["off-diagonal share"], "o-", color=c, label=f"{rule} rule")
        axes[1].plot(s.m, s["Hessian weight"], "o-", color=c, label=f"{rule} rule")
    axes[0].axhline(share_limit, color="k", ls="--", lw=0.8, label=f"midpoint, m = {limit_steps}")
    axes[0].set_ylim(0, 1)
    axes[0].set_ylabel("off-diagonal share of |J_IG|")
    axes[0].set_title(f"trained {arch}: off-diagonal share against m")
    axes[1].axhline(0.5, color="k", ls="--", lw=0.8)
    axes[1].set_ylabel(r"$\sum_k w_k \alpha_k$")
    axes[1].set_title("weight of the Hessian term")
    for ax in axes:
        ax.set_xscale("log")
        ax.set_xlabel("IG steps m")
        ax.legend(fontsize=8)
    plt.tight_layout()
    plt.show()


def plot_beta_study(rows: pd.DataFrame, trained_beta: float) -> None:
    """The off-diagonal share against the softplus β, one curve per step count (the rows of
    :func:`~robattr.chapters.wangkong2023.beta_study`), the trained β dotted."""
    import matplotlib.pyplot as plt

    from robattr.report import viz

    fig_rows = rows.assign(steps=lambda t: [f"m = {m} (midpoint)" for m in t.m])
    g = viz.metric_curves(fig_rows, x="beta", y="off-diagonal share", hue="steps", col=None,
                          xlabel=r"softplus $\beta$ (same weights)", x_units=None, x_spacing="log",
                          ylabel="off-diagonal share of |J_IG|", errorbar=None, height=3.2, aspect=1.4)
    g.ax.axvline(trained_beta, color="grey", lw=0.8, ls=":")
    g.ax.set_ylim(0, 1)
    plt.show()


def plot_linearity_residuals(lin: pd.DataFrame, model_names, norms) -> None:
    """B.1's sweep (table of :func:`~robattr.chapters.wangkong2023.linearity_study`): left, the
    relative residual (median, interquartile range) with a slope-1 guide; right, the median
    residual over the mean attribution norm (the paper's scale). Log-log; one colour per model."""
    import matplotlib.pyplot as plt

    colour = {k: f"C{i}" for i, k in enumerate(model_names)}
    fig, axes = plt.subplots(1, 2, figsize=(11, 3.6))
    for (mname, attr), s in lin.groupby(["model", "attribution"], sort=False):
        ls, c = "-" if attr == "SM" else "--", colour[mname]
        axes[0].plot(s["||delta||"], s["median eta/||dg||"], ls, marker="o", ms=3, color=c,
                     label=f"{mname}, {attr}")
        axes[0].fill_between(s["||delta||"], s.q25, s.q75, color=c, alpha=0.1)
        axes[1].plot(s["||delta||"], s["median eta"] / s["mean ||g||"], ls, marker="o", ms=3, color=c)
    axes[0].plot(norms, norms / norms[-1] * 0.5, color="grey", lw=0.8, ls=":", label="slope 1")
    axes[0].set_ylabel(r"$\eta \,/\, \|g(x+\delta)-g(x)\|$ (median, IQR)")
    axes[1].set_ylabel(r"$\eta \,/\,$ mean $\|g(x)\|$ (paper's scale)")
    for ax in axes:
        ax.set_xscale("log"), ax.set_yscale("log")
        ax.set_xlabel(r"$\|\delta\|_2$")
    axes[0].legend(fontsize=7)
    plt.tight_layout()
    plt.show()


def plot_linearization_ratios(ratios: dict, ts) -> None:
    """One line per image and model (``ratios``: name → (N, len(ts)), from
    :func:`~robattr.chapters.wangkong2023.linearization_ratios`) of the true change over the
    linear prediction against ``t``, log-log, with 1 (a differentiable map's limit) marked."""
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(6, 3.6))
    for (mname, ratio), c in zip(ratios.items(), ("C0", "C1")):
        for i, r in enumerate(ratio):
            ax.plot(ts, r.cpu().numpy(), color=c, lw=0.7, alpha=0.6, label=mname if i == 0 else None)
    ax.axhline(1, color="k", lw=0.8)
    ax.set_xscale("log"), ax.set_yscale("log")
    ax.set_xlabel(r"$t$  ($x + t v$, $\|v\|_2 = 1$)")
    ax.set_ylabel(r"$\|g(x+tv)-g(x)\| \,/\, (t \|Jv\|)$  (SM)")
    ax.legend(fontsize=8)
    plt.show()


def plot_remainder_vs_crossing(thm1: dict, tol: float) -> None:
    """Per image and attribution (``thm1``: name → dict with per-image ``lin``, the remainder at
    ±ε v_max, and ``att``, the attacked deviation over ``T_e``), the remainder (x) against how
    far the direct attack went past ``T_e`` (y), with the diagonal and the tolerance ``tol``."""
    import matplotlib.pyplot as plt

    lin_fig = pd.DataFrame([{"attribution": name, "remainder at ±eps v_max": float(l),
                             "attack: dev / T_e - 1": float(a) - 1}
                            for name, v in thm1.items() for l, a in zip(v["lin"], v["att"])])
    fig, ax = plt.subplots(figsize=(6, 3.6))
    for (name, s), c in zip(lin_fig.groupby("attribution", sort=False), ("C0", "C1", "C2")):
        ax.scatter(s["remainder at ±eps v_max"], s["attack: dev / T_e - 1"], s=14, color=c, label=name)
    top = float(max(lin_fig["remainder at ±eps v_max"].max(), lin_fig["attack: dev / T_e - 1"].max(),
                    tol))
    ax.plot([0, top], [0, top], color="grey", lw=0.8, label="crossing = remainder")
    ax.axvline(tol, color="k", ls="--", lw=0.8, label=f"LINEARITY_TOL = {tol:g}")
    ax.axhline(0, color="k", lw=0.5)
    ax.set_xlabel(r"remainder $\|g(x+\delta)-g(x)-J\delta\| / \|J\delta\|$ at $\pm\varepsilon v_{\max}$")
    ax.set_ylabel(r"direct attack: dev / $T_e$ − 1")
    ax.legend(fontsize=7)
    plt.show()


def plot_paired_bounds(runs: dict, a: str = "at", b: str = "ce", labels=("AT", "CE")) -> None:
    """Per norm, each image's ``T_e`` under model ``b`` (y) against model ``a`` (x), from runs
    keyed (model, norm) on the same images, with the diagonal; the title gives the share of
    images where ``a``'s bound is the smaller."""
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(1, 2, figsize=(9, 3.4))
    for ax, norm in zip(axes, ("l2", "linf")):
        ta, tb = runs[(a, norm)]["T_e"].numpy(), runs[(b, norm)]["T_e"].numpy()
        ax.scatter(ta, tb, s=12)
        lim = [0, 1.05 * max(ta.max(), tb.max())]
        ax.plot(lim, lim, "k", lw=0.8)
        ax.set_xlabel(f"$T_e$, {labels[0]}")
        ax.set_ylabel(f"$T_e$, {labels[1]}")
        ax.set_title(f"{norm}: {100 * (ta < tb).mean():.0f} % of images have {labels[0]} < {labels[1]}")
    plt.tight_layout()
    plt.show()


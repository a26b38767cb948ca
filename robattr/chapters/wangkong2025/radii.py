"""The certified_eps notebook's steps for §3-5: Table 9's smallest radii, the certificate as
the input dimension grows, and the blocks after the first.

* :func:`min_radii`: per ``(T, form, model, eps)`` the mean smallest radius, with ``h`` fixed
  and self-consistent (first crossing on a grid of radii), and each input's radius;
* :func:`show_table9`, :func:`show_radius_ratios`: Table 9 beside the paper's, and the ratio
  of our two budgets' radii;
* :func:`radius_trend_violations`: whether a larger eps or a stricter T ever needs a smaller
  self-consistent radius;
* :func:`vacuity_table`, :func:`budget_vs_dimension`, :func:`plot_dimension_curves`: the
  certificate against d;
* :func:`data_name`, :func:`set_block_scale`: a block's data as a name, and its scale line.
"""
from __future__ import annotations

from typing import Sequence

import numpy as np
import pandas as pd

from robattr.chapters.wangkong2025.reports import NO_REF, kept_runs_note, reference_columns
from robattr.chapters.wangkong2025.tables import k_T

__all__ = ["min_radii", "show_table9", "show_radius_ratios", "radius_trend_violations",
           "vacuity_table", "budget_vs_dimension", "plot_dimension_curves", "data_name",
           "set_block_scale"]


def min_radii(eps_df: pd.DataFrame, stats_df: pd.DataFrame, *, r_grid: Sequence[float],
              r_fixed: float, eps_rmin: Sequence[float], d: int):
    """``(rmin, per_input)`` from the budgets (``eps_df``, rows with ``M_kind`` "empirical M"
    used) and the statistics (``stats_df``) of :mod:`.certified`. ``rmin``: per ``(T, form,
    model, eps)`` the mean radius with ``h`` held at radius ``r_fixed`` (``fixed_h``,
    :func:`robattr.bounds.ball_smoothing_min_radius`), the mean self-consistent radius (the
    first crossing of ``eps`` on ``r_grid``; inf when an input's lies beyond the grid) and
    ``n_beyond_grid``. ``per_input``: each input's self-consistent radius ``r_sc``."""
    from robattr.bounds import ball_smoothing_min_radius
    from robattr.bounds.ball import first_crossing_radius

    r_grid = list(r_grid)
    emp = eps_df[(eps_df.M_kind == "empirical M")]
    rmin_rows, sc_rows = [], []
    for (T, form, mk), g in emp.groupby(["T", "form", "model"]):
        piv = g.pivot(index="sample", columns="r", values="eps_max")[r_grid]
        ref = stats_df[(stats_df.model == mk) & (stats_df.r == r_fixed)].sort_values("sample")
        for e in eps_rmin:
            fixed = ball_smoothing_min_radius(np.minimum(ref.c, ref.M), ref.M, d, e, float(T),
                                              corrected=(form == "corrected"))
            sc = first_crossing_radius(piv.values, r_grid, e)
            sc_rows += [dict(T=T, form=form, model=mk, eps=float(e), sample=s, r_sc=v)
                        for s, v in zip(piv.index, sc)]
            rmin_rows.append(dict(T=T, form=form, model=mk, eps=f"{e:.1f}",
                                  fixed_h=float(np.mean(fixed)),
                                  self_consistent=(float(np.mean(sc)) if np.all(np.isfinite(sc))
                                                   else np.inf),
                                  n_beyond_grid=int(np.isinf(sc).sum())))
    return pd.DataFrame(rmin_rows), pd.DataFrame(sc_rows)


def show_table9(rmin: pd.DataFrame, *, block: str, name: str) -> pd.DataFrame:
    """Show Table 9 for ``block``: our self-consistent radius (corrected, then printed form)
    and the radius with ``h`` fixed, ours on ``name`` beside the paper's and the kept
    reference runs'. Returns our corrected rows, the radius as ``value``."""
    from robattr.report import papers, viz

    keys = ["T", "model", "eps"]
    cor, pri = rmin[rmin.form == "corrected"], rmin[rmin.form == "printed"]
    ours9 = cor.rename(columns={"self_consistent": "value"})
    ours_label = "ours self-consistent (corrected)"
    cmp9 = papers.compare(ours9, "wangkong2025_table9", on=keys, where={"dataset": block},
                          ours_label=ours_label, paper_label=f"paper ({block})")
    cmp9 = cmp9.merge(cor[keys + ["fixed_h", "n_beyond_grid"]], on=keys).rename(
        columns={"fixed_h": "ours fixed h (corrected)"})
    cmp9 = cmp9.merge(pri[keys + ["self_consistent"]].rename(
        columns={"self_consistent": "ours self-consistent (printed)"}), on=keys)
    refs9 = reference_columns(cmp9.columns)
    t9 = (cmp9.drop(columns="note")
          .rename(columns={**refs9, "n_beyond_grid": "inputs beyond the grid"})
          .set_index(keys))
    why9 = {**{s: NO_REF for s in refs9.values()}, f"paper ({block})": viz.NOT_IN_PAPER}
    why9.update({row: viz.NOT_RUN for row in t9.index[t9[ours_label].isna()]})
    viz.show_table(t9.round(3), why=why9,
                   caption=f"Table 9, the {block} block: the smallest certified radius, ours on "
                           f"{name} beside the paper's; inf: beyond our grid of radii"
                           + kept_runs_note(refs9))
    return ours9


def show_radius_ratios(rmin: pd.DataFrame, eps_rmin: Sequence[float]) -> None:
    """Show, per ``(T, model)``, our radius for the last budget of ``eps_rmin`` over the
    radius for the first (corrected form), with ``h`` fixed and self-consistent."""
    from robattr.report import viz

    ours_ratio = rmin[rmin.form == "corrected"].pivot_table(
        index=["T", "model"], columns="eps", values=["fixed_h", "self_consistent"])
    lo, hi = eps_rmin[0], eps_rmin[-1]
    our_dbl = (ours_ratio.xs(f"{hi:.1f}", level=1, axis=1)
               / ours_ratio.xs(f"{lo:.1f}", level=1, axis=1))
    sc_col = f"ours self-consistent: r({hi}) / r({lo})"
    viz.show_table(our_dbl.round(4).rename(columns={"fixed_h": f"ours fixed h: r({hi}) / r({lo})",
                                                    "self_consistent": sc_col}),
                   why={sc_col: "both radii lie beyond our grid of radii, so their ratio is "
                                "undefined"},
                   caption="Our radii: the ratio of the two budgets' radii (inf: only the larger "
                           "budget's radius lies beyond the grid)")


def radius_trend_violations(per_input: pd.DataFrame) -> tuple[int, int]:
    """``(violations, comparisons)`` over the corrected self-consistent radii of
    :func:`min_radii`, per input and model: each pair of consecutive budgets (per ``T``) and
    of consecutive thresholds (per ``eps``), where a violation is a smaller radius for the
    larger budget or the stricter threshold; radii beyond the grid (inf) count as largest,
    and pairs with both beyond are left out."""
    sc_in = per_input[per_input.form == "corrected"]
    n_cmp = n_bad = 0
    for keys, other in ((["T", "model", "sample"], "eps"), (["eps", "model", "sample"], "T")):
        piv = sc_in.pivot_table(index=keys, columns=other, values="r_sc", aggfunc="first")
        cols = sorted(piv.columns, key=float)
        for c0, c1 in zip(cols[:-1], cols[1:]):
            both_off = np.isinf(piv[c0]) & np.isinf(piv[c1])
            n_cmp += int((~both_off).sum())
            n_bad += int((piv[c1] < piv[c0]).sum())
    return n_bad, n_cmp


def vacuity_table(dims: Sequence[int]) -> pd.DataFrame:
    """Per ``||h||/M`` in (0.25, 0.5, 1) and ``eps/r`` in (0.01, 0.05, 0.1): the corrected
    cosine bound at each d of ``dims`` (r = 1, M = 1, rounded to 3 decimals) and the large-d
    approximation of the d from which it is vacuous."""
    from scipy import stats

    from robattr.bounds import ball_smoothing_cosine_bound

    dims = np.asarray(dims)
    rows = []
    for cM in (0.25, 0.5, 1.0):
        for er in (0.01, 0.05, 0.1):
            bound = ball_smoothing_cosine_bound(cM, 1.0, dims, 1.0, er)
            d_star = (2 / er * stats.norm.ppf((1 + cM / 2) / 2)) ** 2 - 1
            rows.append({"||h||/M": cM, "eps/r": er, "d where vacuous (approx.)": round(d_star),
                         **{f"d={k}": v for k, v in zip(dims, np.round(bound, 3))}})
    return pd.DataFrame(rows)


def budget_vs_dimension(dims: Sequence[int], T: float = 0.9, h_over_M: float = 0.5):
    """Per d of ``dims``: the corrected certified budget ``eps_max / r`` at ``T`` for
    ``||h|| / M = h_over_M``, and its large-d approximation
    ``2 / sqrt(d + 1) Phi^{-1}((1 + q/2) / 2)``."""
    from scipy import stats

    from robattr.bounds import ball_smoothing_max_eps

    dims = np.asarray(dims)
    emax = np.array([ball_smoothing_max_eps(h_over_M, 1.0, k, 1.0, T) for k in dims])
    approx = 2 / np.sqrt(dims + 1) * stats.norm.ppf((1 + h_over_M * k_T(T, True) / 2) / 2)
    return pd.DataFrame({"d": dims, f"eps_max / r (T={T}, ||h||/M={h_over_M})": emax,
                         "large-d approximation": approx})


def plot_dimension_curves() -> None:
    """Two panels over d: the crescent fraction ``V_U / V_S`` at three ``eps / r``, and the
    certified budget ``eps_max / r`` (T = 0.9) at three ``||h|| / M`` beside ``1/sqrt(d)``."""
    import matplotlib.pyplot as plt

    from robattr.bounds import ball_smoothing_max_eps, ball_volume_ratio

    fig, ax = plt.subplots(1, 2, figsize=(10, 3.5))
    dd = np.unique(np.logspace(0, 5.3, 120).astype(int))
    for er in (0.01, 0.05, 0.1):
        ax[0].semilogx(dd, ball_volume_ratio(dd, 1.0, er), label=f"eps/r = {er}")
    ax[0].axhline(2, color="k", lw=0.5)
    ax[0].set(xlabel="d", ylabel="V_U / V_S", title="crescent fraction")
    ax[0].legend()
    for cM in (0.25, 0.5, 1.0):
        ax[1].loglog(dd, ball_smoothing_max_eps(cM, 1.0, dd, 1.0, 0.9), label=f"||h||/M = {cM}")
    ax[1].loglog(dd, 1 / np.sqrt(dd), "k:", label=r"$\propto 1/\sqrt{d}$")
    ax[1].set(xlabel="d", ylabel="eps_max / r (T = 0.9)", title="certified budget")
    ax[1].legend(fontsize=8)
    plt.tight_layout()
    plt.show()


def data_name(run: dict) -> str:
    """The name of a block's data (:func:`~robattr.chapters.wangkong2025.blocks.table567_runs` run): its
    data set, or the last part of its folder."""
    return str(run["dataset"]).rstrip("/").split("/")[-1]


def set_block_scale(run: dict, *, arch: str, n_eval: int, models: list):
    """Set the scale line of a block's claims (:func:`robattr.report.verdicts.set_scale`): its data,
    the pretrained ResNet-50 or our Softplus ``arch``, ``n_eval`` inputs."""
    from robattr.report import verdicts

    return verdicts.set_scale(data_name(run),
                              "ResNet-50 (pretrained)" if run["weights"]
                              else f"Softplus {arch.upper()}", n_eval, models=models)

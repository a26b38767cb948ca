"""The certified_eps notebook's steps for §1-2: the paper's Tables 5-7 read backwards, and our
certified budgets beside them.

* :data:`PAPER_DIMS`, :func:`paper_budget_tables`: Tables 5-7 with each block's input size;
* :func:`threshold_ratios`, :func:`ratio_inequality_failures`: Corollary 1's ratio test on
  the printed pairs, and a check of the inequality itself on random ``(d, q)``;
* :func:`smoothing_stats`, :func:`budgets_by_M`, :func:`mean_budgets_by_kind`: per input,
  model and radius ``||h||``, the empirical M and the certified budgets, and their means;
* :func:`budgets_beside_paper`, :func:`budget_curves`, :func:`budget_spreads`: ours beside
  the paper's, as a table, as curves, and in a few numbers;
* :func:`growth_gaps`: the paired per-input growth of the budget with the radius.
"""
from __future__ import annotations

from typing import Sequence

import numpy as np
import pandas as pd
import torch

from robattr.chapters.wangkong2025.tables import MODEL_LABELS

__all__ = ["PAPER_DIMS", "paper_budget_tables", "threshold_ratios", "ratio_inequality_failures",
           "smoothing_stats", "budgets_by_M", "mean_budgets_by_kind", "budgets_beside_paper",
           "budget_curves", "budget_spreads", "growth_gaps"]

#: The input size d of the paper's blocks.
PAPER_DIMS = {"MNIST": 784, "CIFAR-10": 3072, "ImageNet": 3 * 224 * 224}


def paper_budget_tables() -> pd.DataFrame:
    """The printed Tables 5-7 in one frame, with the block's input size ``d`` and ``T`` and
    ``r`` as floats (``Tf``, ``rf``)."""
    from robattr.report import papers

    paper = pd.concat([papers.table(f"wangkong2025_table{i}") for i in (5, 6, 7)],
                      ignore_index=True)
    paper["d"] = paper["dataset"].map(PAPER_DIMS)
    paper["Tf"], paper["rf"] = paper["T"].astype(float), paper["r"].astype(float)
    return paper


def threshold_ratios(paper: pd.DataFrame) -> pd.DataFrame:
    """Per ``(dataset, model, r)`` of :func:`paper_budget_tables`: the budgets at each ``T``
    and their ratio ``"ratio 0.8/0.9"``."""
    wide = paper.pivot_table(index=["dataset", "model", "r"], columns="T", values="value")
    wide["ratio 0.8/0.9"] = wide["0.8"] / wide["0.9"]
    return wide


def ratio_inequality_failures(lam: float, seed: int, n: int = 2000) -> int:
    """How many of ``n`` random ``(d, q)`` (d in [1, 200000), q below ``1 / lam``) break
    ``e(lam q) >= lam e(q)`` with ``e(q) = sqrt(I^{-1}_{q/2}(1/2, (d+1)/2))`` (beyond 1e-9):
    the convexity behind Corollary 1's ratio test."""
    from scipy import special

    if lam <= 0:
        raise ValueError(f"lam must be positive, got {lam}")
    rng = np.random.default_rng(seed)
    d_r = rng.integers(1, 200000, n)
    q9 = rng.uniform(1e-4, 1 / lam, n)

    def e(q, d):
        return np.sqrt(special.betaincinv(0.5, (d + 1) / 2, q / 2))

    return int((e(lam * q9, d_r) < lam * e(q9, d_r) * (1 - 1e-9)).sum())


def smoothing_stats(models: dict, x: torch.Tensor, y: torch.Tensor, *, radii: Sequence[float],
                    n_samples: int, base, seed: int) -> pd.DataFrame:
    """One row per model, radius and input: ``c = ||h||_2`` of the smoothed ``base`` map from
    ``n_samples`` draws (:func:`robattr.bounds.ball_smoothing_stats`), the empirical M (largest
    ``||g||_2``), the largest absolute entry ``M_inf`` and the norm of the smoothed
    unit-normalised map ``c_unit``; ``model`` holds the paper's row names."""
    from robattr.bounds import ball_smoothing_stats

    rows = []
    for m, model in models.items():
        for r in radii:
            st = ball_smoothing_stats(model, x, y, r=r, n_samples=n_samples, base=base, seed=seed)
            c = st["h"].flatten(1).norm(dim=1).cpu().numpy()
            cu = st["h_unit"].flatten(1).norm(dim=1).cpu().numpy()
            for i in range(len(c)):
                rows.append(dict(model=MODEL_LABELS[m], r=r, sample=i, c=c[i],
                                 M=float(st["g_max"][i]), M_inf=float(st["g_linf"][i]),
                                 c_unit=cu[i]))
    return pd.DataFrame(rows)


def budgets_by_M(stats_df: pd.DataFrame, thresholds: Sequence[float], d: int) -> pd.DataFrame:
    """Per row of :func:`smoothing_stats`, threshold ``T`` (a string), form (corrected,
    printed) and ``M_kind`` (the empirical M, or M = 1 for the unit-normalised map): the
    certified budget ``eps_max`` (``||h||`` capped at M)."""
    from robattr.bounds import ball_smoothing_max_eps

    res = []
    for T in thresholds:
        for corrected in (True, False):
            for kind, cc, MM in (("empirical M", stats_df.c, stats_df.M),
                                 ("unit-normalised", stats_df.c_unit, 1.0)):
                e = ball_smoothing_max_eps(np.minimum(cc, MM), MM, d, stats_df.r, T,
                                           corrected=corrected)
                res.append(stats_df[["model", "r", "sample"]].assign(
                    T=str(T), form="corrected" if corrected else "printed", M_kind=kind,
                    eps_max=e))
    return pd.concat(res, ignore_index=True)


def mean_budgets_by_kind(eps_df: pd.DataFrame) -> pd.DataFrame:
    """The mean over the inputs of :func:`budgets_by_M` per ``M_kind``, form, ``T``, model
    and ``r`` (a string, ``"0.5"``)."""
    mean_eps = eps_df.groupby(["M_kind", "form", "T", "model", "r"],
                              as_index=False)["eps_max"].mean()
    mean_eps["r"] = mean_eps["r"].map(lambda v: f"{v:.1f}")
    return mean_eps


def _pick(mean_eps: pd.DataFrame, kind: str, form: str) -> pd.DataFrame:
    return mean_eps[(mean_eps.M_kind == kind) & (mean_eps.form == form)]


def budgets_beside_paper(mean_eps: pd.DataFrame, table: str, *, block: str,
                         name: str) -> tuple[pd.DataFrame, pd.DataFrame]:
    """``(ours, compared)``: our corrected mean budgets with the empirical M (``value``), and
    :func:`robattr.report.papers.compare` of them with the paper's ``table`` for ``block`` (we ran
    on ``name``), with our printed budgets and the unit-normalised corrected ones beside."""
    from robattr.report import papers

    keys = ["T", "model", "r"]
    ours = _pick(mean_eps, "empirical M", "corrected").rename(columns={"eps_max": "value"})
    cmp = papers.compare(ours, table, on=keys, where={"dataset": block},
                         ours_label=f"ours ({name}, corrected)", paper_label=f"paper ({block})")
    printed = f"ours ({name}, printed)"
    cmp = cmp.merge(_pick(mean_eps, "empirical M", "printed").rename(
        columns={"eps_max": printed})[keys + [printed]], on=keys)
    unit = "ours (unit-normalised, corrected)"
    cmp = cmp.merge(_pick(mean_eps, "unit-normalised", "corrected").rename(
        columns={"eps_max": unit})[keys + [unit]], on=keys)
    return ours, cmp


def budget_curves(mean_eps: pd.DataFrame, paper: pd.DataFrame, thresholds: Sequence[float],
                  block: str) -> pd.DataFrame:
    """Long frame for :func:`robattr.report.viz.metric_curves`: per ``T`` (``"T = 0.9"``), model and
    ``form`` (corrected, printed, the paper's ``block``), ``eps_max`` over ``r``; infinite
    budgets (q >= 2) become NaN (not drawn)."""
    parts = []
    for T in thresholds:
        for mk in MODEL_LABELS.values():
            sub = mean_eps[(mean_eps["T"] == str(T)) & (mean_eps.model == mk)
                           & (mean_eps.M_kind == "empirical M")]
            if sub.empty:
                continue
            for form in ("corrected", "printed"):
                s = sub[sub.form == form]
                parts.append(pd.DataFrame({"T": f"T = {T}", "model": mk, "form": form,
                                           "r": s.r.astype(float), "eps_max": s.eps_max}))
            pp = paper[(paper.dataset == block) & (paper["T"] == str(T)) & (paper.model == mk)]
            parts.append(pd.DataFrame({"T": f"T = {T}", "model": mk, "form": f"paper ({block})",
                                       "r": pp.rf, "eps_max": pp.value}))
    return pd.concat(parts, ignore_index=True).replace([np.inf, -np.inf], np.nan)


def budget_spreads(mean_eps: pd.DataFrame, paper_block: pd.DataFrame, compared: pd.DataFrame,
                   *, ours_col: str, paper_col: str) -> dict[str, float]:
    """A few numbers on our budgets (empirical M) and the paper's (``paper_block``: its rows
    of the block): ``gap_pct``, the median % the corrected form certifies less than the
    printed; ``spread_ours`` and ``spread_paper``, the median % by which the models' mean
    budgets differ (per ``T`` and ``r``); ``vs_paper``, the median paper / ours ratio in
    ``compared``."""
    emp_m = mean_eps[mean_eps.M_kind == "empirical M"].replace([np.inf, -np.inf], np.nan)
    by_form = emp_m.pivot_table(index=["T", "model", "r"], columns="form", values="eps_max")
    gap_pct = 100 * float((1 - by_form["corrected"] / by_form["printed"]).median())
    spreads = [100 * float((s["max"] / s["min"] - 1).median()) for s in (
        emp_m[emp_m.form == "corrected"].groupby(["T", "r"])["eps_max"].agg(["min", "max"]),
        paper_block.groupby(["T", "r"])["value"].agg(["min", "max"]))]
    vs_paper = (compared[paper_col] / compared[ours_col]).replace([np.inf, -np.inf], np.nan)
    return {"gap_pct": gap_pct, "spread_ours": spreads[0], "spread_paper": spreads[1],
            "vs_paper": vs_paper.median()}


def growth_gaps(budgets: pd.DataFrame, radii: Sequence[float]) -> list:
    """Per ``(T, model)`` and consecutive radii of ``radii``: the paired per-input verdict
    (:func:`robattr.report.verdicts.gap`) that ``eps_max`` grows from one radius to the next, over
    the inputs with both budgets finite; ``budgets`` holds one form and one M."""
    from robattr.report import verdicts

    r_sorted = sorted(set(radii))
    cells = []
    for _, g in budgets[budgets.r.isin(r_sorted)].groupby(["T", "model"]):
        piv = g.pivot(index="sample", columns="r", values="eps_max")
        for r0, r1 in zip(r_sorted[:-1], r_sorted[1:]):
            ok = np.isfinite(piv[r0]) & np.isfinite(piv[r1])  # q >= 2: no finite budget
            if ok.any():
                cells.append(verdicts.gap(piv[r1][ok], piv[r0][ok],
                                          what=f"eps_max(r = {r1:g}) − eps_max(r = {r0:g})"))
    return cells

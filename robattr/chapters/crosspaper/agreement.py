"""Do the five notions of robust attribution agree? Spearman's ρ between the headline
evaluations of the cross-paper matrix, the pairs' verdicts, Kendall's τ beside them, and each
paper's defenses against standard training on per-image values.

* :func:`oriented_headlines`, :func:`spearman_between`, :func:`plot_agreement`,
  :func:`headline_pairs`: ρ between every two headlines, signed so that ρ > 0 is agreement;
* :func:`agreement_counts`, :func:`agreement_report`, :func:`most_robust_rows`,
  :func:`pair_verdicts`: what the pairs say, in numbers, in words and as verdicts;
* :func:`kendall_against_spearman`: the same pairs under Kendall's τ;
* :func:`defense_gaps`, :func:`defense_evidence`: each paper's defenses against CE.
"""
from __future__ import annotations

from typing import Sequence

import matplotlib.pyplot as plt
import numpy as np
import pandas as pd
import torch
from scipy import stats

from robattr.report import verdicts, viz
from robattr.chapters.crosspaper.matrix import headline_per_image, higher_is_better

__all__ = ["CONSTANT", "oriented_headlines", "spearman_between", "plot_agreement",
           "headline_pairs", "agreement_counts", "agreement_report", "most_robust_rows",
           "pair_verdicts", "kendall_against_spearman", "defense_gaps", "defense_evidence"]

#: why a pair has no ρ
CONSTANT = ("no rank correlation: one of the two evaluations gives every training method the "
            "same value")


def oriented_headlines(matrix: pd.DataFrame, head: dict) -> pd.DataFrame:
    """The headline columns ``head`` (``{(paper, key): label}``) of the matrix, as floats
    named by their labels, each multiplied by -1 where lower is more robust: larger is more
    robust in every column."""
    values = matrix[list(head)].astype(float)
    signs = np.array([1.0 if higher_is_better(m) else -1.0 for _, m in head])
    return pd.DataFrame(values.values * signs, index=values.index, columns=list(head.values()))


def spearman_between(oriented: pd.DataFrame) -> tuple[pd.DataFrame, pd.DataFrame]:
    """``(rho, p)``: Spearman's ρ and its p-value between every two columns of ``oriented``
    (NaN where either column is constant across the rows)."""
    names = list(oriented.columns)
    rho = pd.DataFrame(np.nan, index=names, columns=names)
    pval = rho.copy()
    for a in names:
        for b in names:
            if oriented[a].nunique() > 1 and oriented[b].nunique() > 1:
                r, p = stats.spearmanr(oriented[a], oriented[b])
                rho.loc[a, b], pval.loc[a, b] = r, p
    return rho, pval


def plot_agreement(rho: pd.DataFrame, n_rows: int):
    """The heatmap of ρ between the evaluations (``n_rows`` training methods). Returns the
    figure."""
    n = len(rho)
    fig, ax = plt.subplots(figsize=(max(7.5, 0.6 * n + 2), max(6, 0.5 * n + 1)),
                           layout="constrained")
    viz.rank_heatmap(rho, label="Spearman rho", units="> 0: agree", center=0, vmin=-1, vmax=1,
                     fmt=".2f", ax=ax,
                     title=f"Agreement between evaluations ({n_rows} training methods)")
    return fig


def headline_pairs(rho: pd.DataFrame, pval: pd.DataFrame, names: Sequence[str]) -> pd.DataFrame:
    """Every pair of ``names`` (in order, each once): ``evaluation A``, ``evaluation B``,
    ``rho`` and ``p``, sorted by ρ (strongest disagreement first)."""
    names = list(names)
    pairs = [(a, b, rho.loc[a, b], pval.loc[a, b]) for i, a in enumerate(names)
             for b in names[i + 1:]]
    return pd.DataFrame(pairs, columns=["evaluation A", "evaluation B", "rho", "p"]
                        ).sort_values("rho")


def agreement_counts(valid: pd.DataFrame) -> dict:
    """From the pairs with a ρ: how many agree (``n_pos``) and disagree (``n_neg``), how
    many of each at p < 0.05 (``n_sig_pos``, ``n_sig_neg``), and ``mean_rho`` (NaN without
    pairs)."""
    return {"n_pos": int((valid.rho > 0).sum()),
            "n_sig_pos": int(((valid.rho > 0) & (valid.p < 0.05)).sum()),
            "n_neg": int((valid.rho < 0).sum()),
            "n_sig_neg": int(((valid.rho < 0) & (valid.p < 0.05)).sum()),
            "mean_rho": float(valid.rho.mean()) if len(valid) else float("nan")}


def agreement_report(valid: pd.DataFrame, rho: pd.DataFrame, n_rows: int,
                     names: Sequence[str]) -> str:
    """The lines that read the pairs of :func:`headline_pairs` with a ρ (``valid``): the
    |ρ| significant at 5 % with ``n_rows`` rows, the counts of :func:`agreement_counts`, the
    strongest disagreement and agreement, and per evaluation of ``names`` those it agrees
    with (ρ ≥ 0.5) and ranks against (ρ ≤ -0.5)."""
    c = agreement_counts(valid)
    lines = []
    if n_rows > 2:   # spearmanr's p-value: t = rho sqrt((n - 2) / (1 - rho^2)), n - 2 dof
        t_crit = stats.t.ppf(0.975, n_rows - 2)
        lines.append(f"with {n_rows} rows, |rho| > {t_crit / np.sqrt(n_rows - 2 + t_crit ** 2):.3f}"
                     " is significant at the 5 % level")
    lines.append(f"{len(valid)} pairs of the five headline evaluations: {c['n_pos']} agree "
                 f"(rho > 0; {c['n_sig_pos']} significant), {c['n_neg']} disagree (rho < 0; "
                 f"{c['n_sig_neg']} significant); mean rho {c['mean_rho']:.2f}")
    if len(valid):
        worst, best = valid.iloc[0], valid.iloc[-1]
        lines.append(f"strongest disagreement: {worst['evaluation A']} vs "
                     f"{worst['evaluation B']} (rho {worst.rho:.2f})")
        lines.append(f"strongest agreement:    {best['evaluation A']} vs "
                     f"{best['evaluation B']} (rho {best.rho:.2f})")
    lines.append("\nIn plain words, per evaluation (|rho| >= 0.5):")
    for a in names:
        agree = [b.split(":")[0] for b in names if b != a and rho.loc[a, b] >= 0.5]
        against = [b.split(":")[0] for b in names if b != a and rho.loc[a, b] <= -0.5]
        lines.append(f"  {a}: agrees with {', '.join(agree) or 'none'}; ranks the rows against "
                     f"{', '.join(against) or 'none'}")
    return "\n".join(lines)


def most_robust_rows(oriented: pd.DataFrame, names: Sequence[str]) -> dict:
    """``{headline: row}``: the most robust row under each headline of ``names`` that varies
    across the rows."""
    return {c: oriented[c].idxmax() for c in names if oriented[c].nunique() > 1}


def pair_verdicts(valid: pd.DataFrame, oriented: pd.DataFrame) -> list:
    """One ``robattr.report.verdicts.rank_agreement`` verdict per pair of ``valid`` (a bootstrap
    over the rows that recomputes ρ), in its order."""
    out = []
    for p in valid.itertuples():
        out.append(verdicts.rank_agreement(
            oriented[p[1]].to_numpy(), oriented[p[2]].to_numpy(),
            what=f"{p[1].split(':')[0]}, {p[2].split(':')[0]}", unit="training methods"))
    return out


def kendall_against_spearman(oriented: pd.DataFrame, rho: pd.DataFrame, names: Sequence[str],
                             valid: pd.DataFrame, judged: Sequence) -> pd.DataFrame:
    """Kendall's τ beside Spearman's ρ for every pair of ``names`` that both vary: ``a``,
    ``b``, ``tau``, ``rho``, ``same_sign``, the pair's verdict of :func:`pair_verdicts`
    (``judged``, one per pair of ``valid``; "not judged" for a pair without one) and
    whether that verdict decided it (held or failed)."""
    names = list(names)
    rows = []
    for i, a in enumerate(names):
        for b in names[i + 1:]:
            if oriented[a].nunique() > 1 and oriented[b].nunique() > 1:
                tau = stats.kendalltau(oriented[a], oriented[b]).statistic
                rows.append(dict(a=a, b=b, tau=tau, rho=rho.loc[a, b],
                                 same_sign=np.sign(tau) == np.sign(rho.loc[a, b])))
    kt = pd.DataFrame(rows, columns=["a", "b", "tau", "rho", "same_sign"])
    decided = {(p[1], p[2]): v for p, v in zip(valid.itertuples(), judged)}
    kt["verdict in §5"] = [decided[(a, b)].verdict if (a, b) in decided else "not judged"
                          for a, b in zip(kt.a, kt.b)]
    kt["decided in §5"] = [(a, b) in decided and (decided[(a, b)].holds or decided[(a, b)].fails)
                           for a, b in zip(kt.a, kt.b)]
    return kt


def defense_gaps(paper: str, models: dict, rows: Sequence[str], x: torch.Tensor,
                 y: torch.Tensor, kwargs: dict, matrix: pd.DataFrame, column: tuple,
                 label: str) -> list:
    """Each defense of ``rows[1:]`` against the reference ``rows[0]`` (standard training) on
    ``paper``'s headline, per image (:func:`~robattr.chapters.crosspaper.headline_per_image`
    with ``kwargs``): one ``robattr.report.verdicts.gap`` each, paired by image. Raises
    AssertionError when a row's per-image mean is not its ``column`` cell of the matrix."""
    if len(rows) < 2:
        raise ValueError(f"rows must name the reference and at least one defense, got {rows}")
    per_img = {row: headline_per_image(paper, models[row], x, y, **kwargs) for row in rows}
    for row, v in per_img.items():
        if not np.isclose(v.mean(), float(matrix.loc[row, column]), rtol=1e-4, atol=1e-6):
            raise AssertionError((paper, row, v.mean()))
    ref = rows[0]
    return [verdicts.gap(per_img[d], per_img[ref], higher_is_better=higher_is_better(column[1]),
                         what=f"{d} − {ref} {label}") for d in rows[1:]]


def defense_evidence(table: pd.DataFrame) -> str:
    """The evidence of a paper's claim against CE from its rows of
    :func:`~robattr.chapters.crosspaper.defenses_against_reference`: each defense's headline
    beside CE's, and on how many of the other papers' headlines it beats CE."""
    return "; ".join(f"{r.defense} {r.defense_value:.3f} vs CE {r.CE:.3f}, and better than CE "
                     f"on {r.beats_CE_on_other_headlines} of the other papers' headlines"
                     for r in table.itertuples()) + "."

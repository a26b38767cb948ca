"""The cross-paper matrix as tables and figures: assembled from the evaluations, shown block
by block, ranked, checked, and set against the cost of training.

* :func:`quantus_available`, :func:`matrix_row`, :func:`matrix_frame`,
  :func:`split_clean_references`: one model's row (the five evaluations, wangkong2025's
  attack at the certified budget, Quantus's metrics, the cost), the matrix;
* :func:`arrow`, :func:`show_matrix_blocks`, :func:`headline_columns`: the tables;
* :func:`informative_ranks`, :func:`plot_rank_heatmap`, :func:`mean_rank_by_paper`: the ranks;
* :func:`certificate_line`, :func:`first_order_table`, :func:`plot_first_order`,
  :func:`first_order_evidence`: the checks of section 6;
* :func:`cost_efficiency_table`, :func:`plot_pareto`: robustness per unit of cost;
* :func:`zoo_trainings`: the zoo's log for this notebook's models;
* :func:`rescore_cheapest`, :func:`rank_change_lines`: the ranks on other test images.
"""
from __future__ import annotations

import os
import time
from typing import Sequence

import matplotlib.pyplot as plt
import numpy as np
import pandas as pd
import torch
from torch import nn

from robattr import zoo
from robattr.report import viz
from robattr.chapters.crosspaper.evaluations import (certified_eps_wangkong2025,
                                                     interpretation_joo2023, retrieval_lim2021)
from robattr.chapters.crosspaper.matrix import evaluate_all, higher_is_better
from robattr.chapters.crosspaper.rows import NOT_RECORDED

__all__ = ["quantus_available", "COST_COLUMNS", "matrix_row", "matrix_frame",
           "split_clean_references", "arrow", "show_matrix_blocks", "headline_columns",
           "informative_ranks", "plot_rank_heatmap", "mean_rank_by_paper", "certificate_line",
           "certificate_evidence",
           "first_order_table", "plot_first_order", "first_order_evidence",
           "cost_efficiency_table", "plot_pareto", "zoo_trainings", "rescore_cheapest",
           "rank_change_lines"]

#: the cost block of the matrix: the columns of the cost table each row carries
COST_COLUMNS = ("test_acc", "seconds_per_epoch", "step_seconds", "peak_memory_mb")


def quantus_available(report: bool = True) -> bool:
    """Whether Quantus, robattr's optional extra, is installed; when it is not and
    ``report``, print that the matrix's four Quantus columns are left out."""
    from robattr.metrics import quantus_adapter as QA

    try:
        QA.require_quantus()
        return True
    except ImportError:
        if report:
            print(f"The four Quantus columns ({', '.join(QA.ROBUSTNESS_METRICS)}) need Quantus, "
                  f"robattr's optional extra (`{QA.INSTALL}`), which is not installed here, so "
                  "this build leaves them out.")
        return False


def matrix_row(model: nn.Module, x: torch.Tensor, y: torch.Tensor, kwargs: dict,
               cost: pd.Series, *, quantus_samples: int | None = None,
               seed: int = 0) -> tuple[dict, dict]:
    """One row of the matrix: :func:`~robattr.chapters.crosspaper.evaluate_all` (``kwargs``
    by paper), then wangkong2025's attack inside each input's certified budget (the batch's
    smallest: ``cos_at_own_budget_min``, ``cert_violations``), then, when
    ``quantus_samples`` is given, Quantus's four robustness metrics of Grad (mean over the
    images, those without a value skipped), then the cost block (:data:`COST_COLUMNS` of
    ``cost``, the model's row of the cost table). Returns ``(cells, seconds)`` as
    ``evaluate_all`` does, the extra work timed under its paper (and ``"Quantus"``)."""
    row, seconds = evaluate_all(model, x, y, kwargs)
    t0 = time.perf_counter()
    cert = certified_eps_wangkong2025(model, x, y,
                                      **{**kwargs.get("wangkong2025", {}), "attack_eps": None})
    seconds["wangkong2025"] += time.perf_counter() - t0
    row[("wangkong2025", "cos_at_own_budget_min")] = cert["cos_attack_min"]
    row[("wangkong2025", "cert_violations")] = cert["cert_violations"]
    if quantus_samples is not None:
        from robattr.metrics import quantus_adapter as QA

        t0 = time.perf_counter()
        q = QA.robustness(model.eval(), x, y, "grad", nr_samples=quantus_samples, seed=seed)
        seconds["Quantus"] = time.perf_counter() - t0
        row.update({("Quantus", c): float(q[c].mean()) for c in q.columns})
    row.update({("cost", kk): float(cost[kk]) for kk in COST_COLUMNS})
    return row, seconds


def matrix_frame(cells: dict) -> pd.DataFrame:
    """The matrix from ``{row: cells of matrix_row}``: one row per model, ``(paper, metric)``
    columns, without wangkong2025's echo of its attack budget."""
    if not cells:
        raise ValueError("cells must not be empty")
    matrix = pd.DataFrame(cells).T
    matrix.columns = pd.MultiIndex.from_tuples(matrix.columns, names=["paper", "metric"])
    return matrix.drop(columns=[("wangkong2025", "attack_eps")], errors="ignore")


def split_clean_references(matrix: pd.DataFrame) -> tuple[pd.DataFrame, pd.DataFrame]:
    """``(matrix, references)``: wang2020's no-attack references ``kin_auc_clean_*`` (not
    robustness scores, so not ranked) taken out of the matrix, as floats."""
    clean = [c for c in matrix.columns if c[0] == "wang2020" and c[1].startswith("kin_auc_clean_")]
    return matrix.drop(columns=clean), matrix[clean].astype(float)


def arrow(metric: str) -> str:
    """"↑" when a larger value of ``metric`` is more robust (or better), else "↓"."""
    return "↑" if higher_is_better(metric) else "↓"


#: why a cell of a block other than a paper's is empty
_NO_VALUE = {"cost": NOT_RECORDED,
             "Quantus": "no value: Quantus returned none for any image of this model (Relative "
                        "Input Stability has none where every perturbation changed the "
                        "predicted class)"}
_CAPTION = {"cost": "accuracy and training cost", "Quantus": "Quantus's robustness metrics (Grad)"}


def show_matrix_blocks(matrix: pd.DataFrame, not_run: dict) -> None:
    """Show the matrix one block (paper, Quantus, cost) at a time, each column's name with
    its :func:`arrow`, values to 3 decimals (Quantus: 3 significant digits); the rows of
    ``not_run`` (baselines not trained) are added as rows of "—" with their reason."""
    for paper in dict.fromkeys(p for p, _ in matrix.columns):
        block = matrix[paper].astype(float)
        block = (block.round(3) if paper != "Quantus"
                 else block.map(lambda v: float(f"{v:.3g}")))
        block.columns = [f"{m} {arrow(m)}" for m in block.columns]
        empty = _NO_VALUE.get(paper, "no value: the evaluation returned none for this model")
        viz.show_table(block.reindex([*block.index, *not_run]),
                       why={**not_run, **{c: empty for c in block.columns
                                          if block[c].isna().any()}},
                       caption=_CAPTION.get(paper, f"{paper}'s evaluation"))


def headline_columns(quantus_metrics: Sequence[str] = ()) -> dict:
    """``{(paper, key): label}`` of the headlines: the five papers' first (in the papers'
    order), then Quantus's metrics given (of Grad), then clean accuracy and step time."""
    head = {
        ("wang2020", "kin_auc_SM"): "wang2020: top-k k-in AUC (SM)",
        ("wangkong2023", "T_c_deg_l2"): "wangkong2023: angle bound T_c (l2, deg)",
        ("wangkong2025", "eps_cert_mean"): "wangkong2025: certified eps (T=0.8)",
        ("joo2023", "rps_Grad"): "joo2023: RPS (Grad)",
        ("lim2021", "retrieval_SimGrad"): "lim2021: class retrieval (SimGrad)",
    }
    head.update({("Quantus", q): f"Quantus: {q} (Grad)" for q in quantus_metrics})
    head.update({("cost", "test_acc"): "clean accuracy",
                 ("cost", "step_seconds"): "training step (s)"})
    return head


def informative_ranks(matrix: pd.DataFrame) -> pd.DataFrame:
    """Each column's ranks of the rows, 1 = most robust (directions by
    :func:`~robattr.chapters.crosspaper.higher_is_better`, ties share the mean rank), for the
    columns that vary across the rows (``cert_violations``, a check, left out)."""
    vals = matrix.astype(float)
    signs = np.array([1.0 if higher_is_better(m) else -1.0 for _, m in vals.columns])
    ranks = (-vals * signs).rank(axis=0, method="average")
    return ranks[[c for c in vals.columns if vals[c].nunique() > 1 and c[1] != "cert_violations"]]


def plot_rank_heatmap(ranks: pd.DataFrame):
    """The heatmap of :func:`informative_ranks`, its columns grouped by paper. Returns the
    figure."""
    cols = list(ranks.columns)
    groups = list(dict.fromkeys(p for p, _ in cols))
    by_paper = sorted(cols, key=lambda c: groups.index(c[0]))
    fig, ax = plt.subplots(figsize=(max(8, 0.34 * len(cols) + 2.5), 0.45 * len(ranks) + 3.2),
                           layout="constrained")
    viz.rank_heatmap(ranks[by_paper], label="rank", units="1 = most robust / best",
                     center=(1 + len(ranks)) / 2, vmin=1, vmax=len(ranks), fmt=".3g",
                     xlabel="evaluation (paper · metric)", ylabel="training method", ax=ax,
                     title="Rank of each training method under each evaluation")
    return fig


def mean_rank_by_paper(ranks: pd.DataFrame) -> pd.DataFrame:
    """Each row's mean rank over each paper's columns (and Quantus's, cost's), plus
    ``overall``: the mean over the papers' means (not cost, not Quantus), sorted by it."""
    cols = list(ranks.columns)
    mean_rank = pd.DataFrame({p: ranks[[c for c in cols if c[0] == p]].mean(axis=1)
                              for p in dict.fromkeys(c[0] for c in cols)})
    overall = mean_rank.drop(columns=["cost", "Quantus"], errors="ignore").mean(axis=1)
    return mean_rank.round(2).assign(overall=overall).sort_values("overall")


def certificate_line(violations: pd.Series, own_cos: pd.Series, n_attacked: int,
                     T: float) -> str:
    """The line that reports wangkong2025's certificate check: violations per row and in
    all, and the smallest cosine at the certified budget against ``T``."""
    per_row = ", ".join(f"{r} {int(v)}" for r, v in violations.items())
    return (f"wangkong2025 certificate: violations per row: {per_row}; "
            f"total {int(violations.sum())} of {n_attacked} attacked inputs; smallest cosine at "
            f"the own budget {own_cos.min():.4f} (T = {T})")


def certificate_evidence(matrix: pd.DataFrame, T: float, r: float) -> str:
    """The evidence of wangkong2025's certificate check from the matrix: the smallest cosine
    at the certified budget against ``T``, and the mean certified ℓ2 budget at radius ``r``."""
    own_cos = matrix[("wangkong2025", "cos_at_own_budget_min")].astype(float)
    eps_cert = matrix[("wangkong2025", "eps_cert_mean")].astype(float).mean()
    return (f"Smallest cosine {own_cos.min():.3f}, T = {T}. The certified budgets are small "
            f"(mean {eps_cert:.3f} in l2 at r = {r}); "
            "each batch is attacked at its smallest certified budget.")


def first_order_table(matrix: pd.DataFrame) -> pd.DataFrame:
    """wangkong2023's first-order check per row: ``frac_above_Te_l2``, ``frac_above_Te_linf``
    (how often the attacks exceeded T_e), ``dev_over_Te_l2``, ``dev_over_Te_linf`` (the mean
    ratio of the attacked deviation to T_e), as floats."""
    return matrix[[("wangkong2023", f"frac_above_Te_{n}") for n in ("l2", "linf")]
                  + [("wangkong2023", f"dev_over_Te_{n}") for n in ("l2", "linf")]].astype(float)


def plot_first_order(fo: pd.DataFrame):
    """Bars of the mean ratio of the attacked deviation to T_e per row (ℓ2 and ℓ∞) from
    :func:`first_order_table`, with the bound at 1. Returns the figure."""
    fig, ax = plt.subplots(figsize=(7, 3.2))
    xs = np.arange(len(fo))
    ax.bar(xs - 0.2, fo.iloc[:, 2], 0.4, label="l2: attacked deviation / T_e")
    ax.bar(xs + 0.2, fo.iloc[:, 3], 0.4, label="l-inf: attacked deviation / T_e")
    ax.axhline(1, color="k", lw=1)
    ax.set_xticks(xs, fo.index, rotation=45, ha="right")
    ax.set_ylabel("mean ratio")
    ax.legend(fontsize=8)
    ax.set_title("wangkong2023: how far attacks go past the first-order bound")
    fig.tight_layout()
    return fig


def first_order_evidence(fo: pd.DataFrame, arch_label: str, broken: str | None) -> str:
    """The evidence line of wangkong2023's first-order claim: the mean ratio of the attacked
    ℓ2 deviation to T_e, and why the bound is not exact (``broken``: what makes the model
    not twice differentiable, if anything)."""
    return (f"Mean ratio of the attacked deviation to T_e {fo.iloc[:, 2].mean():.2f}; the bound "
            "is exact only where the map is linear on the ball"
            + (f", and a {arch_label} with {broken} is not twice differentiable: the chapter on "
               "wangkong2023 tests the bound on smooth models." if broken else "."))


def cost_efficiency_table(score: pd.Series, cost: pd.DataFrame, front: Sequence) -> pd.DataFrame:
    """Per row: its mean headline rank ``score``, its step time (seconds and relative to CE),
    test accuracy, whether it is on the Pareto ``front``, and (when CE is a row) the gain in
    mean rank over CE per extra second of training step (NaN where the step is no slower)."""
    step = cost.loc[score.index, "step_seconds"]
    table = pd.DataFrame({"mean headline rank": score, "step seconds": step,
                          "x CE time": cost.loc[score.index, "step_vs_CE"],
                          "test acc": cost.loc[score.index, "test_acc"],
                          "Pareto": [r in front for r in score.index]})
    if "CE" in score.index:
        extra = (step - step["CE"]).where(lambda s: s > 0)
        table["rank gain over CE per extra step-second"] = (score["CE"] - score) / extra
    return table


def plot_pareto(step: pd.Series, score: pd.Series, front: Sequence):
    """Robustness (mean rank, most robust at the top) against the step time (log scale), the
    Pareto ``front`` in red and joined by a dashed line. Returns ``(figure, front ordered by
    step time)``."""
    fig, ax = plt.subplots(figsize=(6.5, 4))
    ax.scatter(step, score, c=["C3" if r in front else "C0" for r in score.index])
    for r in score.index:
        ax.annotate(r, (step[r], score[r]), fontsize=8, xytext=(3, 3), textcoords="offset points")
    ordered = sorted(front, key=lambda r: step[r])
    ax.plot([step[r] for r in ordered], [score[r] for r in ordered], "C3--", lw=1,
            label="Pareto front")
    ax.set(xscale="log", xlabel="seconds per training step (64 digits, log scale)",
           ylabel="mean rank over the 5 papers' headlines (lower = more robust)")
    ax.invert_yaxis()
    ax.legend()
    fig.tight_layout()
    return fig, ordered


def zoo_trainings(log_before: int, models: Sequence[nn.Module]) -> tuple:
    """The zoo's training log read for this notebook: ``(new, mine, keys)``, the trainings
    logged by this process since the log had ``log_before`` entries, the log's entries for
    the ``models``' zoo keys, and those keys (in order, each once)."""
    log = zoo.training_log()
    new = log.iloc[log_before:]
    new = new[new.pid == os.getpid()]        # this process only (other builds may share the cache)
    keys = list(dict.fromkeys(m.zoo_meta["key"] for m in models))
    return new, log[log.key.isin(keys)], keys


def rescore_cheapest(models: dict, rows: Sequence[str], x: torch.Tensor, y: torch.Tensor,
                     matrix: pd.DataFrame, *, rps_eps: float, rps_samples: int,
                     attack_eps: float, attack_steps: int, pgd_eps: float, pgd_steps: int,
                     seed: int) -> pd.DataFrame:
    """The two cheapest headlines, joo2023's RPS of Grad and lim2021's SimGrad retrieval, of
    the ``rows`` on other test images ``(x, y)``, beside their cells of the ``matrix``."""
    again = {}
    for name in rows:
        a = interpretation_joo2023(models[name], x, y, methods=("Grad",), rps_eps=rps_eps,
                                   rps_samples=rps_samples, attack_eps=attack_eps,
                                   attack_steps=attack_steps, seed=seed)
        b = retrieval_lim2021(models[name], x, y, methods=("SimGrad",), eps=pgd_eps,
                              pgd_steps=pgd_steps, seed=seed)
        again[name] = {
            "rps_Grad (new inputs)": a["rps_Grad"],
            "rps_Grad (above)": float(matrix.loc[name, ("joo2023", "rps_Grad")]),
            "retrieval (new inputs)": b["retrieval_SimGrad"],
            "retrieval (above)": float(matrix.loc[name, ("lim2021", "retrieval_SimGrad")])}
    return pd.DataFrame(again).T


def rank_change_lines(again: pd.DataFrame) -> str:
    """Per headline of :func:`rescore_cheapest`, the ranks (1 = most robust; ties share a
    rank) on the matrix's images and on the new ones, and whether they change."""
    lines = []
    for what in ("rps_Grad", "retrieval"):
        r = {s: again[f"{what} ({s})"].rank(ascending=False).to_dict()
             for s in ("above", "new inputs")}
        text = {s: ", ".join(f"{row} {rank:g}" for row, rank in ranks.items())
                for s, ranks in r.items()}
        lines.append(f"{what} ranks (1 = most robust; tied values share a rank): above "
                     f"{text['above']}; new inputs {text['new inputs']}: "
                     f"{'the same' if r['above'] == r['new inputs'] else 'they change'}")
    return "\n".join(lines)

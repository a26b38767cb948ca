"""The wang2020 chapter's comparisons of training methods (Tables 3-5, Figs. 7-8): what each
model cost, which is more robust, how the SSR models differ.

* :func:`cost_table`: Table 3's cost and accuracy per model, beside the paper's
  (:data:`COST_COLUMNS` names its columns for the page; :data:`TABLE3_PAPER_ROWS` says where
  the paper's AUCs of each training are);
* :func:`more_robust_training`: one training against another, the guarded and seeded cell
  verdicts of every (attack, method, metric), combined;
* :func:`better_share`: the share of cells of a table of mean AUCs where one training is better;
* :func:`rank_trends`: per curve, the rank correlation between a training knob and robustness;
* :func:`correct_on_training_images`: per training image a model saw, whether it is correct;
* :func:`training_accuracy_seeded`: one setting more accurate on its training images than
  another, with the seed rule against natural training's seed-to-seed spread;
* :func:`hessian_top_eigenvalues`: the Gauss-Newton input Hessian's top eigenvalue per image.
"""
from __future__ import annotations

from typing import Mapping, Sequence

import numpy as np
import pandas as pd
import torch
from torch import nn

from robattr.attack_protocol import ROBUST_DIRECTION_WANG2020

__all__ = ["COST_COLUMNS", "TABLE3_PAPER_ROWS", "cost_table", "more_robust_training", "better_share", "rank_trends",
           "correct_on_training_images", "training_accuracy_seeded", "hessian_top_eigenvalues"]

#: How Table 3's cost table names its columns on the page.
COST_COLUMNS = {"seconds_per_epoch": "s per epoch (ours, zoo)", "train_acc_pct": "train acc % (ours)",
                "test_acc_pct": "test acc % (ours)", "paper_h_per_epoch": "h per epoch (paper, GPU)",
                "paper_train_acc_pct": "train acc % (paper)",
                "cost_vs_SSR": "cost / SSR's (ours, zoo)", "paper_cost_vs_SSR": "cost / SSR's (paper)"}


#: Where the paper's AUCs of each training of Table 3 are: ``training -> (table, where, name)``,
#: the table of :func:`robattr.report.papers.table`, the rows to keep and how a caption names them
#: (Table 3 for each robust training, Table 2's CIFAR-10 block for natural training).
TABLE3_PAPER_ROWS = {"Natural": ("wang2020_table2", {"dataset": "CIFAR-10"}, "Table 2, CIFAR-10"),
                     **{n: ("wang2020_table3", {"training": n}, "Table 3, CIFAR-10")
                        for n in ("SSR", "Madry", "IG-NORM")}}


def cost_table(models: Mapping[str, nn.Module], paper: pd.DataFrame,
               paper_rows: Sequence[str] = ("SSR", "Madry", "IG-NORM")) -> pd.DataFrame:
    """Table 3's cost: per model (its zoo record ``zoo_meta``), seconds per epoch and training
    and test accuracy in %; for the trainings of ``paper_rows``, the paper's hours per epoch and
    training accuracy (``paper``: the ``wang2020_table3`` table); both costs over SSR's. One
    row per model, indexed by ``training``."""
    if "SSR" not in models:
        raise ValueError(f"models must hold an 'SSR' model, the cost's unit; got {list(models)}")
    cost = []
    for name, m in models.items():
        meta = m.zoo_meta
        row = dict(training=name, seconds_per_epoch=meta["seconds_per_epoch"],
                   train_acc_pct=100 * meta["train_acc"], test_acc_pct=100 * meta["test_acc"])
        if name in paper_rows:
            p = paper[(paper.training == name)]
            row["paper_h_per_epoch"] = p[p.metric == "time_per_epoch_h"].value.item()
            row["paper_train_acc_pct"] = p[p.metric == "train_acc_pct"].value.item()
        cost.append(row)
    cost = pd.DataFrame(cost).set_index("training")
    cost["cost_vs_SSR"] = cost.seconds_per_epoch / cost.loc["SSR", "seconds_per_epoch"]
    cost["paper_cost_vs_SSR"] = cost.paper_h_per_epoch / cost.loc["SSR", "paper_h_per_epoch"]
    return cost


def more_robust_training(img_auc: pd.DataFrame, a: str, b: str, spread: dict | None,
                         n_seeds: int, methods: Sequence[str], *, what: str | None = None,
                         attacks: Sequence[str] = ("TopK", "Manipulate")):
    """Training ``a`` more robust than training ``b`` (values of column ``training`` of the
    per-image AUCs ``img_auc``): one :func:`robattr.chapters.wang2020.seeded_cell_verdict`
    per (attack, method, metric), against the seed-to-seed ``spread`` of ``n_seeds`` seeds,
    labelled ``what`` (default ``"a − b"``), combined by :func:`robattr.report.verdicts.combine`.
    Returns ``(verdict, cells)``, ``cells`` keyed by (attack, method, metric) in that order."""
    from robattr.report import verdicts
    from robattr.attack_protocol import METRICS_WANG2020
    from robattr.chapters.wang2020.evaluate import seeded_cell_verdict

    what = f"{a} − {b}" if what is None else what
    cells = {(at, me, mt): seeded_cell_verdict(img_auc, "training", a, b, what, spread, n_seeds,
                                               attack=at, method=me, metric=mt)
             for at in attacks for me in methods for mt in METRICS_WANG2020}
    return verdicts.combine(list(cells.values()), what="(attack, method, metric) cells"), cells


def better_share(table: pd.DataFrame, a: str, b: str) -> float:
    """The share of (attack, method, metric) cells of ``table`` (mean AUCs, a ``training``
    column) where training ``a`` has the better value than ``b`` in the metric's robust
    direction (a cell ``b`` lacks counts as not better)."""
    on = ["attack", "method", "metric"]
    fa = table[table.training == a].set_index(on).value
    fb = table[table.training == b].set_index(on).value
    if fa.empty:
        raise ValueError(f"table has no row of training {a!r}")
    sign = np.array([ROBUST_DIRECTION_WANG2020[mt] for *_, mt in fa.index])
    return float(np.mean(sign * (fa - fb.reindex(fa.index)).values > 0))


def rank_trends(auc: pd.DataFrame, knob: str, by: Sequence[str] = ("attack", "metric")) -> np.ndarray:
    """Per curve (group of ``by``) of a table of mean AUCs: Spearman's rank correlation between
    the column ``knob`` and robustness (the value in its metric's robust direction); 0 where
    it is undefined. 1: robustness rises with the knob at every step."""
    from scipy.stats import spearmanr

    return np.nan_to_num(np.array([
        spearmanr(g[knob], g.value * ROBUST_DIRECTION_WANG2020[key[list(by).index("metric")]])
        .statistic for key, g in auc.groupby(list(by))]))


def correct_on_training_images(model: nn.Module, x_train: torch.Tensor,
                               y_train: torch.Tensor) -> np.ndarray:
    """Per image the model trained on (the first ``zoo_meta["train_images"]`` of the split, all
    of ``x_train`` when it does not say), 1.0 where it classifies it correctly, else 0.0."""
    from robattr.models import predict

    seen = int((getattr(model, "zoo_meta", None) or {}).get("train_images") or len(x_train))
    return (predict(model, x_train[:seen]) == y_train[:seen]).float().cpu().numpy()


def training_accuracy_seeded(correct_a: np.ndarray, correct_b: np.ndarray, seeds: Sequence[nn.Module],
                             x_train: torch.Tensor, y_train: torch.Tensor, *, what: str):
    """Setting ``a`` more accurate on its training images than setting ``b`` (one model each):
    :func:`robattr.report.verdicts.gap` on the per-image correctness ``correct_a`` and
    ``correct_b`` (:func:`correct_on_training_images`, the same images), then the seed rule
    (:func:`robattr.report.verdicts.beyond_seeds`) against the spread of the same accuracy
    over ``seeds``: models trained alike but for the seed (natural training, at least
    :data:`robattr.report.verdicts.MIN_SEEDS`), each read on the images it trained on."""
    from robattr.report import verdicts

    correct_a, correct_b = np.asarray(correct_a, float), np.asarray(correct_b, float)
    if correct_a.shape != correct_b.shape:
        raise ValueError(f"correct_a and correct_b must be read on the same images, got "
                         f"{correct_a.shape} and {correct_b.shape}")
    spread = verdicts.seed_spread([correct_on_training_images(m, x_train, y_train).mean()
                                   for m in seeds])
    v = verdicts.gap(correct_a, correct_b, what=what)
    return verdicts.beyond_seeds(v, float(correct_a.mean() - correct_b.mean()), spread,
                                 n_seeds=len(seeds), what=what)


def hessian_top_eigenvalues(model: nn.Module, x: torch.Tensor) -> np.ndarray:
    """Per image of ``x``: the top eigenvalue of the Gauss-Newton input Hessian ``W A Wᵀ``
    (:func:`robattr.bounds.gauss_newton_top_eigenvalue`), floored at 1e-30 (for a log)."""
    from robattr.bounds import gauss_newton_top_eigenvalue

    return gauss_newton_top_eigenvalue(model, x).detach().clamp_min(1e-30).cpu().numpy()

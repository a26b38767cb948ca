"""The wang2020 chapter's (paper 000, Wang et al., NeurIPS 2020) shared table steps.

The chapter's tables run 000's attack protocol (:mod:`robattr.attack_protocol`'s ``*_000``
functions) per image, beside random noise of the same size, and judge every claim cell by
cell. What its notebooks repeat, in one place:

* :func:`protocol_methods`: :data:`robattr.attack_protocol.METHODS_WANG2020` with the run's sample
  counts;
* :func:`attack_curves`: attacks x attacked methods, one long per-image frame;
* :func:`no_attack_kin`: k-in of each clean map with itself, where k-in starts from;
* :func:`mean_curves` and :func:`image_auc`: the mean curve over images, the AUC per image;
* :func:`cell_values` and :func:`cell_verdict`: one cell's per-image AUCs, and the guarded
  "a is more robust than b" verdict of one cell;
* :func:`smoothed_vs_gradient`: the (SG, UG) against (SM, IG) claim over a list of cells,
  and :func:`pairs_evidence`, the sentence that says how its verdict is built;
* :func:`more_robust_wang2020`: two tables of 000's numbers compared cell by cell, and
  :func:`pair_wins`, :func:`smoothed_wins`, :func:`win_share`: the same per (smoothed,
  gradient) pair of one table;
* :func:`attack_metric_cells` and :func:`mean_auc`: the cells a claim runs over, and the mean
  per-image AUC, the tables' number;
* :func:`normalised_kin` and :func:`raw_and_normalised`: k-in divided by its no-attack value,
  and one cell's verdict on raw and on normalised k-in.

The runs themselves (Table 2's blocks, models, images; Tables 5-6; Table 3's cost) are in
:mod:`.setup`.
"""
from __future__ import annotations

from typing import Sequence

import numpy as np
import pandas as pd
import torch
from torch import nn

from robattr.report import verdicts
from robattr.attack_protocol import ROBUST_DIRECTION_WANG2020

__all__ = ["ATTACK_LABELS", "protocol_methods", "attack_curves", "mean_curves", "image_auc",
           "cell_values", "cell_verdict", "seeded_cell_verdict", "seed_spreads",
           "smoothed_vs_gradient", "pairs_evidence", "COMBINE_RULE", "no_attack_kin",
           "more_robust_wang2020", "SMOOTHED_PAIRS", "attack_metric_cells", "mean_auc",
           "pair_wins", "smoothed_wins", "win_share", "normalised_kin", "raw_and_normalised"]

#: The attacks' names in the tables.
ATTACK_LABELS = {"topk": "TopK", "manipulate": "Manipulate", "mass_center": "Mass center (on SM)"}


def protocol_methods(n_samples: int, ig_steps: int, sg_noise: float | None = None,
                     ug_radius: float | None = None) -> dict:
    """000's four attributions (:data:`robattr.attack_protocol.METHODS_WANG2020`) with ``n_samples``
    noise draws for SG and UG and ``ig_steps`` path points for IG; ``sg_noise`` (SmoothGrad's
    noise ratio) and ``ug_radius`` (UG's cube radius, pixel units) replace the CIFAR-10 and
    Flower values of METHODS_WANG2020 (0.1 and 4/255) when given, e.g. ImageNet's (App. C1)."""
    from robattr.attack_protocol import METHODS_WANG2020

    for name, v in (("n_samples", n_samples), ("ig_steps", ig_steps)):
        if isinstance(v, bool) or int(v) != v or v < 1:
            raise ValueError(f"{name} must be an integer >= 1, got {v!r}")
    for name, v in (("sg_noise", sg_noise), ("ug_radius", ug_radius)):
        if v is not None and (isinstance(v, bool) or not float(v) > 0 or float(v) == float("inf")):
            raise ValueError(f"{name} must be a finite number > 0, got {v!r}")
    extra = {"SG": {} if sg_noise is None else {"noise_ratio": float(sg_noise)},
             "UG": {} if ug_radius is None else {"radius": float(ug_radius)}}
    return {name: (fn, {**opts, **({"n_samples": n_samples} if "n_samples" in opts else {}),
                        **({"steps": ig_steps} if name == "IG" else {}), **extra.get(name, {})})
            for name, (fn, opts) in METHODS_WANG2020.items()}


def attack_curves(model: nn.Module, x: torch.Tensor, *, methods: dict,
                  attacks: Sequence[str] = ("topk", "manipulate"), attacked=None,
                  eval_methods=None, labels: dict | None = None, **protocol) -> pd.DataFrame:
    """:func:`robattr.attack_protocol.attack_eval_wang2020` with ``per_image=True`` and
    ``random_baseline=True`` for every attack of ``attacks`` and every attacked method of
    ``attacked`` (default: all of ``methods``), in that order, concatenated; column
    ``attack`` holds ``labels[attack]`` (default :data:`ATTACK_LABELS`). ``protocol``:
    the remaining arguments of ``attack_eval_wang2020`` (``eps_list``, ``k``, ``steps``,
    ``surrogate_beta``, ``seed``)."""
    from robattr.attack_protocol import attack_eval_wang2020

    labels = ATTACK_LABELS if labels is None else labels
    unknown = [a for a in attacks if a not in labels]
    if unknown:
        raise ValueError(f"no label for the attacks {unknown}; labels: {sorted(labels)}")
    frames = [attack_eval_wang2020(model, x, attack=attack, method=method, methods=methods,
                              per_image=True, random_baseline=True, eval_methods=eval_methods,
                              **protocol).assign(attack=labels[attack])
              for attack in attacks for method in (attacked or list(methods))]
    return pd.concat(frames, ignore_index=True)


def no_attack_kin(model: nn.Module, x: torch.Tensor, methods: dict, *, k: int, seed: int,
                  names=None) -> dict[str, np.ndarray]:
    """Per image, k-in (:func:`robattr.attack_protocol.metrics_wang2020`) of each clean map with itself:
    the value k-in starts from without an attack (the map's own top-``k`` mass share, not 1;
    its AUC over four budgets would be 3x). The maps explain the model's prediction, with
    ``methods`` (as :func:`protocol_methods`) and ``seed``; ``names``: which methods
    (default all), in that order."""
    from robattr.attack_protocol import attribution_map_wang2020, metrics_wang2020

    names = list(methods) if names is None else list(names)
    unknown = [m for m in names if m not in methods]
    if unknown:
        raise ValueError(f"unknown methods {unknown}; methods: {list(methods)}")
    pred = model(x).argmax(1)
    out = {}
    for m in names:
        clean = attribution_map_wang2020(*methods[m], model, x, pred, seed)
        out[m] = metrics_wang2020(clean, clean, k)["k-in"].detach().cpu().numpy()
    return out


def mean_curves(frame: pd.DataFrame, by: Sequence[str]) -> pd.DataFrame:
    """The attacked rows' (``source == "attack"``) mean over images per ``by`` and eps."""
    return (frame[frame.source == "attack"]
            .groupby(list(by) + ["eps"], as_index=False)["value"].mean())


def image_auc(frame: pd.DataFrame, by: Sequence[str]) -> pd.DataFrame:
    """Per image, source and group of ``by``: the AUC over eps (unit spacing,
    :func:`robattr.metrics.auc_over_eps`). Its mean over images is the AUC of the mean
    curve, the tables' number."""
    from robattr.metrics import auc_over_eps

    missing = [c for c in list(by) + ["eps", "source", "image", "value"] if c not in frame]
    if missing:
        raise ValueError(f"frame lacks the columns {missing}")
    return (frame.sort_values("eps").groupby(list(by) + ["source", "image"])["value"]
            .apply(lambda v: auc_over_eps(torch.tensor(v.values)).item()).reset_index())


def cell_values(frame: pd.DataFrame, source: str = "attack", **cell) -> np.ndarray:
    """The per-image values of one cell (rows of ``source`` whose columns equal ``cell``),
    in image order."""
    sel = frame[frame.source == source]
    for col, val in cell.items():
        if col not in sel:
            raise ValueError(f"frame has no column {col!r}")
        sel = sel[sel[col] == val]
    return sel.sort_values("image").value.to_numpy()


def cell_verdict(frame: pd.DataFrame, key: str, a, b, what: str, **cell):
    """``a`` more robust than ``b`` (values of column ``key``) in one cell of per-image
    AUCs (``cell`` must name the ``metric``).

    The attack guard comes first (:func:`robattr.report.verdicts.attack_effective`): the attack
    must move ``b``'s maps more than random noise of the same size (``source ==
    "random"``), or the cell is not tested (not comparable; combining sets it aside).
    Then :func:`robattr.report.verdicts.gap` on the
    same images, in the metric's robust direction
    (:data:`robattr.attack_protocol.ROBUST_DIRECTION_WANG2020`), labelled ``"{what} {metric} AUC"``.
    """
    from robattr.report import verdicts

    better = ROBUST_DIRECTION_WANG2020
    metric = cell.get("metric")
    if metric not in better:
        raise ValueError(f"cell must name a metric of {sorted(better)}, got {metric!r}")

    def moved(source):
        return -better[metric] * cell_values(frame, source, **{key: b}, **cell)

    guard = verdicts.attack_effective(moved("attack"), moved("random"))
    if guard is not None:
        return guard
    return verdicts.gap(cell_values(frame, **{key: a}, **cell),
                        cell_values(frame, **{key: b}, **cell),
                        higher_is_better=better[metric] > 0, what=f"{what} {metric} AUC")


def smoothed_vs_gradient(frame: pd.DataFrame, cells: Sequence[dict]):
    """The smoothed maps (SG, UG) against the gradient maps (SM, IG): per pair, one
    :func:`cell_verdict` (column ``method``) per cell of ``cells`` (dicts of column
    values), combined; then the four pairs combined (:func:`pairs_evidence` says how, in
    words, with the cell counts).

    Returns ``(verdict, table)``: the table has one row per pair (its verdict, how many of
    its cells hold, go the other way or stay in the noise, how many the attack guard set
    aside because the attack moved the gradient map no more than random noise, and its
    rule)."""
    from robattr.report import verdicts

    if not cells:
        raise ValueError("cells must name at least one cell")
    pairs, rows = [], []
    for s in ("SG", "UG"):
        for g in ("SM", "IG"):
            vs = [cell_verdict(frame, "method", s, g, f"{s} − {g}", **c) for c in cells]
            v = verdicts.combine(vs, what="cells")
            pairs.append(v)
            rows.append(dict(pair=f"{s} vs {g}", verdict=v.verdict,
                             cells_hold=sum(c.verdict == "holds" for c in vs),
                             cells_against=sum(c.verdict == "does not hold" for c in vs),
                             cells_in_noise=sum(c.verdict == "inconclusive" for c in vs),
                             attack_ineffective=sum("ineffective" in c.rule for c in vs),
                             rule=v.rule))
    table = pd.DataFrame(rows).set_index("pair")
    return verdicts.combine(pairs, what="(smoothed, gradient) pairs"), table


#: How :func:`robattr.report.verdicts.combine` turns parts (cells, pairs, images) into one verdict,
#: in the words a claim's evidence uses.
def seeded_cell_verdict(frame: pd.DataFrame, key: str, a, b, what: str, spread: dict | None,
                        n_seeds: int, **cell):
    """:func:`cell_verdict` for a comparison of two **training methods** (one model each),
    then the seed rule (:func:`robattr.report.verdicts.beyond_seeds`) against the cell's
    seed-to-seed spread ``spread[(attack, method, metric)]`` (:func:`seed_spreads`; keyed by
    the cell's values in that order, the ones it names). Without a spread for the cell, the
    cell verdict as it is."""
    v = cell_verdict(frame, key, a, b, what, **cell)
    name = tuple(cell[c] for c in ("attack", "method", "metric") if c in cell)
    if not spread or name not in spread:
        return v
    sign = ROBUST_DIRECTION_WANG2020[cell["metric"]]
    diff = sign * (cell_values(frame, **{key: a}, **cell).mean()
                   - cell_values(frame, **{key: b}, **cell).mean())
    return verdicts.beyond_seeds(v, float(diff), spread[name], n_seeds=n_seeds,
                                 what=f"{what} {cell['metric']} AUC")


def seed_spreads(frames: Sequence[pd.DataFrame], on: Sequence[str] = ("attack", "method",
                                                                       "metric")) -> dict:
    """The seed-to-seed spread of each cell's mean attacked AUC: ``frames`` are the per-image
    AUC frames (:func:`image_auc`) of one model trained at several seeds; the result maps
    each cell (its values of ``on``) to the standard deviation of its mean over the seeds."""
    from robattr.seeds import spreads

    means = [f[f.source == "attack"].groupby(list(on))["value"].mean() for f in frames]
    cells = sorted(set.intersection(*(set(m.index) for m in means)))
    return spreads({c: [float(m[c]) for m in means] for c in cells})


#: verdicts.combine's rule in words (one rule for cells into pairs and pairs into a claim)
COMBINE_RULE = verdicts.COMBINE_RULE


def pairs_evidence(table: pd.DataFrame, cells: str) -> str:
    """The sentence a (SG, UG) against (SM, IG) claim carries: how its verdict is built from
    the cells of ``table`` (as :func:`smoothed_vs_gradient` returns it), and what the cells
    found, summed over the pairs. ``cells`` names one pair's cells, e.g. ``"2 attacks × 4
    metrics"``."""
    need = {"verdict", "cells_hold", "cells_against", "cells_in_noise", "attack_ineffective"}
    if not need <= set(table.columns):
        raise ValueError(f"table lacks the columns {sorted(need - set(table.columns))}")
    n_pairs = len(table)
    per_pair = int(table[["cells_hold", "cells_against", "cells_in_noise",
                          "attack_ineffective"]].sum(1).max())
    held = int((table.verdict == "holds").sum())
    return (f"How the verdict is built: each of the {n_pairs} (smoothed, gradient) pairs is judged "
            f"on its {per_pair} cells ({cells}). A cell holds when the attack moves the gradient "
            "map more than random noise of the same size does and the smoothed map's per-image "
            "AUC is better, with a bootstrap interval over the images. Cells combine into a pair's "
            f"verdict, and pairs into the claim's, by one rule (verdicts.combine): {COMBINE_RULE}. "
            "Here "
            f"{held} of {n_pairs} pairs hold in full; over the pairs' {n_pairs * per_pair} cells, "
            f"{int(table.cells_hold.sum())} hold, {int(table.cells_against.sum())} go the other "
            f"way, {int(table.cells_in_noise.sum())} are within the noise, and "
            f"{int(table.attack_ineffective.sum())} are set aside because the attack moved the "
            "gradient map no more than random noise (nothing to resist).")


def more_robust_wang2020(a, b, on=("attack", "method", "metric")):
    """Compare two tables of 000's numbers (DataFrames with the columns ``on``, one of
    them ``metric``, and ``value``) cell by cell: ``a`` is more robust than ``b`` in a
    cell when its value is strictly better in the metric's robust direction
    (:data:`ROBUST_DIRECTION_WANG2020`). Cells are matched on ``on``; those in only one table
    are ignored. Returns ``(wins, ties, total)``: cells where ``a`` is more robust, equal
    cells, and the number of matched cells (``b`` wins ``total - wins - ties``)."""
    on = [on] if isinstance(on, str) else list(on)
    if "metric" not in on:
        raise ValueError(f"on must include 'metric', got {on!r}")
    for name, t in (("a", a), ("b", b)):
        if not isinstance(t, pd.DataFrame) or not set(on) | {"value"} <= set(t.columns):
            raise ValueError(f"{name} must be a DataFrame with the columns {on + ['value']}")
        if t.duplicated(on).any():
            raise ValueError(f"{name} has more than one row for some cell {on!r}")
        bad = set(t.metric) - set(ROBUST_DIRECTION_WANG2020)
        if bad:
            raise ValueError(f"{name} has metrics without a robust direction: {sorted(bad)}")
    m = a[on + ["value"]].merge(b[on + ["value"]], on=on, suffixes=("_a", "_b"))
    sign = m.metric.map(ROBUST_DIRECTION_WANG2020).astype(float)
    diff = sign * (m.value_a.astype(float) - m.value_b.astype(float))
    return int((diff > 0).sum()), int((diff == 0).sum()), int(len(m))


# --------------------------------------------------------------------------- the tables' cells
#: The (smoothed, gradient) pairs of 000's comparison, in the order the pages list them.
SMOOTHED_PAIRS = tuple((s, g) for s in ("SG", "UG") for g in ("SM", "IG"))


def attack_metric_cells(attacks: Sequence[str] = ("TopK", "Manipulate"),
                        metrics: Sequence[str] | None = None) -> list[dict]:
    """One cell per (attack, metric), attacks outermost: the ``cells`` argument of
    :func:`smoothed_vs_gradient`. ``metrics`` defaults to
    :data:`robattr.attack_protocol.METRICS_WANG2020`."""
    from robattr.attack_protocol import METRICS_WANG2020

    metrics = list(METRICS_WANG2020) if metrics is None else list(metrics)
    if not len(attacks) or not metrics:
        raise ValueError("attacks and metrics must name at least one each")
    return [dict(attack=a, metric=mt) for a in attacks for mt in metrics]


def mean_auc(img_auc: pd.DataFrame, by: Sequence[str]) -> pd.DataFrame:
    """The attacked rows' (``source == "attack"``) mean per-image AUC (:func:`image_auc`) per
    group of ``by``: the AUC of the mean curve, the tables' number. Columns ``by`` and
    ``value``."""
    missing = [c for c in list(by) + ["source", "value"] if c not in img_auc]
    if missing:
        raise ValueError(f"img_auc lacks the columns {missing}")
    return img_auc[img_auc.source == "attack"].groupby(list(by), as_index=False)["value"].mean()


def pair_wins(table: pd.DataFrame, on: Sequence[str] = ("attack", "metric")) -> dict:
    """Per (smoothed, gradient) pair of :data:`SMOOTHED_PAIRS`: :func:`more_robust_wang2020` of
    the smoothed method's rows of ``table`` (a table of mean AUCs with a ``method`` column)
    against the gradient method's, cells matched on ``on``: ``{(s, g): (wins, ties, total)}``."""
    if "method" not in table:
        raise ValueError("table has no column 'method'")
    return {(s, g): more_robust_wang2020(table[table.method == s].drop(columns="method"),
                                         table[table.method == g].drop(columns="method"),
                                         on=list(on))
            for s, g in SMOOTHED_PAIRS}


def smoothed_wins(table: pd.DataFrame, on: Sequence[str] = ("attack", "metric")):
    """``(wins, total)``: the cells of ``table`` where SG or UG has the better mean AUC than SM
    or IG, summed over the four pairs (:func:`pair_wins`), and the number of cells compared."""
    ws = pair_wins(table, on).values()
    return sum(w[0] for w in ws), sum(w[2] for w in ws)


def win_share(wins) -> float:
    """The share of cells won: ``wins[0] / wins[-1]`` of a ``(wins, ties, total)`` triple
    (:func:`more_robust_wang2020`) or a ``(wins, total)`` pair (:func:`smoothed_wins`)."""
    if wins[-1] <= 0:
        raise ValueError(f"no cell was compared: {wins!r}")
    return wins[0] / wins[-1]


def normalised_kin(curves: pd.DataFrame, refs: dict, key: str) -> pd.DataFrame:
    """The k-in rows of a per-image frame (:func:`attack_curves`), each divided by its map's
    no-attack k-in (:func:`no_attack_kin`): ``refs[row[key]][row.method][row.image]``
    (floored at 1e-12). The share of the map's own top-k mass the attack leaves."""
    missing = [c for c in (key, "method", "image", "metric", "value") if c not in curves]
    if missing:
        raise ValueError(f"curves lacks the columns {missing}")
    kin = curves[curves.metric == "k-in"].copy()
    start = np.array([refs[r][m][i] for r, m, i in zip(kin[key], kin.method, kin.image)])
    kin["value"] = kin.value / np.clip(start, 1e-12, None)
    return kin


def raw_and_normalised(raw: pd.DataFrame, normalised: pd.DataFrame, key: str, a, b, what: str,
                       **cell) -> dict:
    """One cell's :func:`cell_verdict` (``a`` against ``b`` of column ``key``) on the raw
    per-image AUCs and on those of normalised k-in (:func:`normalised_kin`): the two
    verdicts, whether they differ, and the normalised verdict's rule."""
    v = {name: cell_verdict(f, key, a, b, what, **cell)
         for name, f in (("raw", raw), ("normalised", normalised))}
    return dict(raw=v["raw"].verdict, normalised=v["normalised"].verdict,
                changed=v["raw"].verdict != v["normalised"].verdict,
                rule_normalised=v["normalised"].rule)

"""What the wang2020 chapter's notebooks show: its attack curves and its tables of our numbers
beside the paper's.

* :func:`curve_bands`: per attack, method, metric and budget, the mean over images with the
  bootstrap interval the verdicts use (:func:`robattr.report.verdicts.bootstrap_interval`, the
  images resampled), for the attacked maps and for random noise of the same size;
* :func:`attack_curves_figure`: those curves, one panel per (attack, metric), the attack as
  a line with its interval as a band and random noise as a dashed baseline;
* :func:`beside_paper`: a :func:`robattr.report.papers.compare` frame as a whole, narrow table for
  :func:`robattr.report.viz.show_table` (each source, ours, the kept references and the paper's,
  one column beside the other), with a reason for every value it lacks;
* :func:`references_note` and :func:`show_beside_paper`: that table shown, its caption naming
  the kept reference runs;
* :func:`accuracy_by_radius_figure`: test accuracy against the training radius (Fig. 7);
* :func:`readable_log_ticks`: labels on a log axis that never run into each other.
"""
from __future__ import annotations

from typing import Sequence

import numpy as np
import pandas as pd

from robattr.report.viz import readable_log_ticks  # noqa: F401 (re-exported for the notebooks)

__all__ = ["curve_bands", "attack_curves_figure", "beside_paper", "readable_log_ticks",
           "NO_REFERENCE_VALUE", "references_note", "show_beside_paper", "accuracy_by_radius_figure"]

#: Why a kept reference run's column lacks a value: it ran other blocks, or an older notebook.
NO_REFERENCE_VALUE = ("the kept reference run recorded no value for this cell (it ran other "
                      "blocks or an older version of the notebook)")

#: Why a cell of ours lacks a value, unless the caller gives its own reason (``why_ours``).
NOT_MEASURED = "not measured in this run"


# --------------------------------------------------------------------------- attack curves
def curve_bands(per_image: pd.DataFrame, by: Sequence[str], *, level: float = 0.95,
                n_boot: int = 4000, seed: int = 0) -> pd.DataFrame:
    """Per group of ``by``, ``source`` ("attack" or "random") and ``eps`` of a per-image
    frame (:func:`robattr.chapters.wang2020.attack_curves`): the number of images ``n``, the
    mean ``value`` over them, and ``lo``, ``hi``, the percentile bootstrap interval of that
    mean (:func:`robattr.report.verdicts.bootstrap_interval` at ``level``: whole images resampled,
    as the verdicts' :func:`robattr.report.verdicts.gap` does)."""
    from robattr.report.verdicts import bootstrap_interval

    keys = list(by) + ["source", "eps"]
    missing = [c for c in keys + ["image", "value"] if c not in per_image]
    if missing:
        raise ValueError(f"per_image lacks the columns {missing}")
    if per_image.empty:
        raise ValueError("per_image is empty")
    rows = []
    for key, g in per_image.groupby(keys, sort=True, observed=True):
        v = g["value"].to_numpy(dtype=float)
        lo, hi = bootstrap_interval(v, level=level, n_boot=n_boot, seed=seed)
        rows.append({**dict(zip(keys, key)), "n": len(v), "value": float(v.mean()),
                     "lo": lo, "hi": hi})
    return pd.DataFrame(rows)


def attack_curves_figure(bands: pd.DataFrame, *, methods: Sequence[str],
                         metrics: Sequence[str], attacks: Sequence[str], x_factor: float = 255,
                         x_units: str = "/255", ylabels: dict | None = None,
                         title: str | None = None, level: float = 0.95,
                         blocks: dict | None = None):
    """The attack curves of :func:`curve_bands`: one row of panels per attack of ``attacks``,
    one column per metric of ``metrics``, one colour per method of ``methods``. With
    ``blocks`` (``{value of bands.dataset: its name}``, e.g. Table 2's data blocks), one such
    group of rows per block, in that order, each panel's title starting with the block's
    name: several blocks in one figure (one figure label on the page). Each method's attacked
    maps are a solid line with markers and its bootstrap interval as a band; random noise of
    the same size is a dashed line in the same colour (the baseline the attack guard compares
    with). The budgets sit at equal spacing, labelled ``eps * x_factor``;
    ``ylabels`` names a metric's y axis (default: the metric). Returns the Figure."""
    import matplotlib.pyplot as plt
    from matplotlib.lines import Line2D
    from matplotlib.patches import Patch

    from robattr.report import viz

    for name, vals in (("methods", methods), ("metrics", metrics), ("attacks", attacks)):
        if not len(vals):
            raise ValueError(f"{name} must name at least one")
    need = {"attack", "method", "metric", "source", "eps", "value", "lo", "hi"}
    if not need <= set(bands.columns):
        raise ValueError(f"bands lacks the columns {sorted(need - set(bands.columns))}")
    if blocks is not None and (not blocks or "dataset" not in bands.columns):
        raise ValueError("blocks must name at least one block, and bands need a dataset column")
    eps = np.sort(bands["eps"].astype(float).unique())
    pos = {e: i for i, e in enumerate(eps)}
    ylabels = dict(ylabels or {})
    rows = ([(None, None, a) for a in attacks] if blocks is None
            else [(b, name, a) for b, name in blocks.items() for a in attacks])
    with viz.theme():
        colors = plt.rcParams["axes.prop_cycle"].by_key()["color"]
        fig, axes = plt.subplots(len(rows), len(metrics), squeeze=False,
                                 figsize=(2.7 * len(metrics), 2.3 * len(rows) + 0.6))
        for i, (block, name, attack) in enumerate(rows):
            rows_of = bands if block is None else bands[bands.dataset == block]
            for j, metric in enumerate(metrics):
                ax = axes[i, j]
                for c, method in enumerate(methods):
                    color = colors[c % len(colors)]
                    sel = rows_of[(rows_of.attack == attack) & (rows_of.method == method)
                                  & (rows_of.metric == metric)]
                    for source, style in (("attack", dict(ls="-", marker="o", ms=3.5)),
                                          ("random", dict(ls="--", lw=1.0))):
                        s = sel[sel.source == source].sort_values("eps")
                        if s.empty:
                            continue
                        xs = [pos[float(e)] for e in s.eps]
                        ax.plot(xs, s.value, color=color, **style)
                        if source == "attack":
                            ax.fill_between(xs, s.lo, s.hi, color=color, alpha=0.18, lw=0)
                ax.set_xticks(range(len(eps)), [f"{e * x_factor:g}" for e in eps])
                ax.set_title(f"{attack} · {metric}" if name is None
                             else f"{name} · {attack} · {metric}")
                if i == len(rows) - 1:
                    ax.set_xlabel(f"ε ({x_units})" if x_units else "ε")
                ax.set_ylabel(ylabels.get(metric, metric))
        handles = [Line2D([], [], color=colors[c % len(colors)], lw=2, label=m)
                   for c, m in enumerate(methods)]
        handles += [Line2D([], [], color="0.3", marker="o", ms=3.5, label="attack: mean over images"),
                    Patch(color="0.3", alpha=0.25,
                          label=f"{int(round(100 * level))} % bootstrap interval (images resampled)"),
                    Line2D([], [], color="0.3", ls="--", lw=1.0,
                           label="random ±ε noise of the same size")]
        fig.legend(handles=handles, loc="upper center", ncol=4, fontsize="small",
                   bbox_to_anchor=(0.5, 0.0), frameon=False)
        if title:
            fig.suptitle(title)
        fig.tight_layout()
    return fig


# --------------------------------------------------------------------------- tables
def beside_paper(compared: pd.DataFrame, *, index: Sequence[str], columns: Sequence[str],
                 orders: dict | None = None, why_ours: str | None = None,
                 why_paper: str | None = None):
    """A :func:`robattr.report.papers.compare` frame as a whole table: rows ``index``, columns
    ``columns`` (may be empty) and under each, side by side, the value columns in their order (``ours``,
    each kept reference, ``paper``; :func:`robattr.report.references.value_columns`). A reference
    column is named by its profile (``medium ref``); ``sources`` maps each column's name to
    what it holds, for a caption (a reference: its data set, commit and ``stale`` flag). ``orders`` maps a key column to the order of
    its values (values not listed are dropped). Returns ``(table, why, sources)``: ``why``
    gives :func:`robattr.report.viz.show_table` a reason for every missing cell, by column (ours:
    ``why_ours``, default :data:`NOT_MEASURED`; a reference: :data:`NO_REFERENCE_VALUE`;
    the paper: ``why_paper``, default :data:`robattr.report.viz.NOT_IN_PAPER`), one string when
    a single reason covers them all."""
    from robattr.report import viz
    from robattr.report.references import value_columns

    index, columns = list(index), list(columns)
    if not index:
        raise ValueError("index must name at least one key column")
    missing = [c for c in index + columns if c not in compared.columns]
    if missing:
        raise ValueError(f"compared lacks the key columns {missing}")
    vals = value_columns(compared)
    if not vals:
        raise ValueError("compared has no value column (ours, a reference, paper)")
    short = {c: c.split(" (")[0] if c.endswith(")") and " ref" in c else c for c in vals}
    long = compared.melt(id_vars=index + columns, value_vars=vals, var_name="source",
                         value_name="value")
    long["source"] = long["source"].map(short)
    if long.duplicated(index + columns + ["source"]).any():
        raise ValueError(f"the keys {index + columns} do not identify one row of compared")
    table = long.set_index(index + columns + ["source"])["value"].unstack(columns + ["source"])
    orders = dict(orders or {})
    orders.setdefault("source", [short[c] for c in vals])

    def ordered(names, present):
        levels = []
        for n in names:
            seen = list(dict.fromkeys(present.get_level_values(n)))
            want = [v for v in orders.get(n, seen) if v in seen]
            levels.append(want)
        if len(names) == 1:
            return pd.Index(levels[0], name=names[0])
        full = pd.MultiIndex.from_product(levels, names=names)
        return full[full.isin(present)]

    table = table.reindex(index=ordered(index, table.index),
                          columns=ordered(columns + ["source"], table.columns))
    paper_short, ours_short = short.get("paper", "paper"), short.get("ours", "ours")
    reasons = {}
    for col in table.columns[table.isna().any()]:
        src = col[-1] if isinstance(col, tuple) else col
        reasons[col] = (why_paper or viz.NOT_IN_PAPER if src == paper_short
                        else why_ours or NOT_MEASURED if src == ours_short
                        else NO_REFERENCE_VALUE)
    why = next(iter(reasons.values())) if len(set(reasons.values())) == 1 else reasons
    sources = {short[c]: _describe(c) if short[c] != c else c for c in vals}
    return table, why, sources


def _describe(label: str) -> str:
    """``medium ref (cifar10, 1a2b3c4, stale)`` -> ``a kept run of the medium profile
    (cifar10; commit 1a2b3c4; made before this notebook last changed)``: how a caption names a
    reference column (:func:`robattr.report.tables.reference_text`)."""
    from robattr.report.tables import reference_text

    profile, _, rest = label.partition(" ref")
    inner = rest.strip()[1:-1] if rest.strip().startswith("(") else ""
    return reference_text(profile, inner)


def references_note(sources: dict) -> str:
    """The end of a caption: ``"; <column>: <what it holds>"`` for each kept reference column
    of ``sources`` (as :func:`beside_paper` returns it; ``ours`` and ``paper`` left out)."""
    return "".join(f"; {s}: {what}" for s, what in sources.items() if s not in ("ours", "paper"))


def show_beside_paper(compared: pd.DataFrame, *, caption: str, digits: int = 2,
                      extra: pd.DataFrame | None = None, **kwargs) -> None:
    """Show :func:`beside_paper`'s table of ``compared`` (``kwargs``: its ``index``,
    ``columns``, ``orders``, ``why_ours``, ``why_paper``), with the columns of ``extra`` joined
    on the rows, rounded to ``digits``, with its reasons for missing cells and ``caption``
    followed by :func:`references_note`. A row of ``extra`` that this run did not measure (a
    row only the paper or a reference has) is missing for the reason of ``ours``."""
    from robattr.report import viz

    table, why, sources = beside_paper(compared, **kwargs)
    if extra is not None:
        table = table.join(extra)
        gaps = [c for c in extra.columns if table[c].isna().any()]
        if gaps and isinstance(why, dict):     # one string already covers every gap
            why = {**why, **{c: kwargs.get("why_ours") or NOT_MEASURED for c in gaps}}
    viz.show_table(table.round(digits), why=why, caption=caption + references_note(sources))


def accuracy_by_radius_figure(accuracy: dict) -> None:
    """Fig. 7's side panel: test accuracy (``accuracy``: training ℓ2 radius on the 0-255 scale
    -> accuracy) against the radius, at equal spacing."""
    import matplotlib.pyplot as plt

    labels = list(accuracy)
    fig, ax = plt.subplots(figsize=(3.3, 2.6))
    ax.plot(range(len(labels)), [accuracy[e] for e in labels], "ko-")
    ax.set_xticks(range(len(labels)), [f"{e:g}" for e in labels])
    ax.set(title="test accuracy", xlabel=r"training $\ell_2$ radius (/255)", ylabel="test accuracy")
    plt.tight_layout()
    plt.show()


# --------------------------------------------------------------------------- log axes

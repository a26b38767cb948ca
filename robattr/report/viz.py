"""Figures for the book: one figure style, attribution heatmaps, and seaborn helpers.

Style
    :func:`set_theme` applies the book's style (seaborn ``whitegrid``, the ``colorblind``
    palette, slightly smaller fonts) to every matplotlib figure drawn after it; call it once
    in a notebook's imports cell so that hand-drawn figures match the helpers'. Importing
    this module changes no setting. Every function below draws inside :func:`theme`, a
    context manager with the same settings, so its figures look the same whether or not
    :func:`set_theme` was called.

Helpers
    ``heatmap_grid``       images and their attribution maps, one column per image
    ``rank_heatmap``       a numeric table (ranks, correlations, scores) as annotated cells
    ``verdict_heatmap``    a table of claim verdicts (:data:`robattr.report.papers.VERDICTS`)
    ``bound_ratio``        the distribution of measured / bound, with a line at 1
    ``measured_vs_bound``  measured against bound, one point per case, with the line y = x
    ``metric_curves``      metric against epsilon from a tidy table, one facet per metric

The seaborn helpers take a pandas DataFrame and column names (``bound_ratio`` and
``measured_vs_bound`` also take arrays or tensors), label their axes with the quantity and
its units, and return what they drew: an ``Axes`` for the heatmaps, a seaborn
``FacetGrid`` (its figure is ``.figure``) for the others.
"""
from __future__ import annotations

import contextlib
import math
import warnings
from typing import Any, Sequence

import numpy as np
import torch

from robattr.report.tables import (  # noqa: F401 (re-exported: notebooks reach them as viz.*)
    MISSING, MISSING_NOTE, NOT_BUILT, NOT_IN_PAPER, NOT_RUN, show_table, show_whole_tables,
    table_html)

__all__ = ["THEME", "set_theme", "theme", "to_image", "heatmap_grid", "rank_heatmap",
           "verdict_heatmap", "VERDICT_COLORS", "bound_ratio", "measured_vs_bound",
           "metric_curves", "matrix_heatmap", "readable_log_ticks", "scaled_map", "show_map",
           "map_colorbar", "show_whole_tables",
           "table_html", "MISSING", "MISSING_NOTE", "show_table", "NOT_BUILT", "NOT_IN_PAPER", "NOT_RUN"]

#: The book's figure style, as arguments of ``seaborn.set_theme``.
THEME: dict[str, Any] = {
    "context": "notebook",
    "style": "whitegrid",
    "palette": "colorblind",
    "font_scale": 0.85,
    "rc": {
        "axes.titlesize": "medium",
        "legend.fontsize": "small",
        "legend.title_fontsize": "small",
        "grid.linewidth": 0.6,
        "lines.linewidth": 1.5,
        "lines.markersize": 5,
        "image.cmap": "viridis",
        "savefig.bbox": "tight",
    },
}

#: Cell colours of :func:`verdict_heatmap`, one per verdict of ``robattr.report.papers.VERDICTS``.
VERDICT_COLORS = {
    "holds": "#4a9c5d",
    "holds partly": "#e3b23c",
    "does not hold": "#c8553d",
    "inconclusive": "#7fa7c9",
    "not comparable": "#b8b8b8",
}
#: The short cell labels of :func:`verdict_heatmap` (the legend gives the full verdicts).
_VERDICT_SHORT = {"holds": "holds", "holds partly": "partly", "does not hold": "fails",
                  "inconclusive": "noise", "not comparable": "n/c"}


def set_theme() -> None:
    """Apply the book's figure style (:data:`THEME`) to all later matplotlib figures."""
    import seaborn as sns

    sns.set_theme(**THEME)


def _theme_rc() -> dict[str, Any]:
    import seaborn as sns
    from matplotlib import cycler

    rc: dict[str, Any] = {}
    rc.update(sns.axes_style(THEME["style"]))
    rc.update(sns.plotting_context(THEME["context"], font_scale=THEME["font_scale"]))
    rc["axes.prop_cycle"] = cycler(color=sns.color_palette(THEME["palette"]))
    rc.update(THEME["rc"])
    return rc


@contextlib.contextmanager
def _quiet_seaborn():
    """seaborn 0.13.2's heatmap calls ``Colormap.set_bad``, which matplotlib 3.11 marks as
    pending deprecation; the warning is about seaborn, not about the caller."""
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", category=PendingDeprecationWarning,
                                module=r"seaborn(\.|$)")
        yield


@contextlib.contextmanager
def theme():
    """The book's figure style for the figures drawn inside the ``with`` block only."""
    import matplotlib as mpl

    with mpl.rc_context(_theme_rc()):
        yield


def _label(name: str, units: str | None) -> str:
    return f"{name} ({units})" if units else name


def readable_log_ticks(ax, subs: Sequence[float] = (2, 3, 5), max_decades: float = 1.0) -> None:
    """Label the log-scaled axes of ``ax`` so that no two labels run into each other: plain
    numbers (0.2, 5, 1000) at the decades, and at the minor ticks only when the axis spans
    at most ``max_decades`` decades, and then only at ``subs`` times a power of ten (2, 3
    and 5: 20, 30, 50, never 60 70 80 90). Decided when the figure is drawn, from the axis's
    limits at that time."""
    from matplotlib import ticker

    def major(x, pos):
        return f"{x:g}" if x > 0 else ""

    def minor_for(axis):
        def minor(x, pos):
            lo, hi = sorted(axis.get_view_interval())
            if lo <= 0 or x <= 0 or math.log10(hi / lo) > max_decades:
                return ""
            mant = x / 10 ** math.floor(math.log10(x) + 1e-9)
            return f"{x:g}" if any(abs(mant - s) < 1e-6 * s for s in subs) else ""
        return minor

    for axis in (ax.xaxis, ax.yaxis):
        if axis.get_scale() == "log":
            axis.set_major_formatter(ticker.FuncFormatter(major))
            axis.set_minor_formatter(ticker.FuncFormatter(minor_for(axis)))


# --------------------------------------------------------------------------- attribution maps
def to_image(x: torch.Tensor) -> np.ndarray:
    """One C×H×W tensor in [0, 1] as an H×W (grey) or H×W×3 array for imshow."""
    arr = x.detach().cpu().float().numpy()
    return arr[0] if arr.shape[0] == 1 else np.transpose(arr, (1, 2, 0)).clip(0, 1)


def _saliency(a: torch.Tensor, signed: bool) -> np.ndarray:
    """Sum over channels; signed maps keep their sign, others take the absolute value."""
    a = a.detach().cpu().float()
    a = a.sum(0) if signed else a.abs().sum(0)
    return a.numpy()


def heatmap_grid(images: torch.Tensor, maps: dict[str, torch.Tensor] | torch.Tensor,
                 titles: Sequence[str] | None = None, *, signed: bool = True,
                 cmap: str | None = None, size: float = 1.6):
    """A grid: one column per image, the image on top and one row per attribution map.

    ``maps`` is a tensor shaped like ``images`` or a dict ``{row label: tensor}``.
    Signed maps use a diverging colour map centred at zero (red positive, blue
    negative); unsigned ones show the absolute value summed over channels. Each map is
    scaled to its own largest absolute value (:func:`show_map`), and one colour bar says
    so. Returns the matplotlib figure.
    """
    import matplotlib.pyplot as plt

    if isinstance(maps, torch.Tensor):
        maps = {"attribution": maps}
    n = images.shape[0]
    rows = 1 + len(maps)
    with theme():
        fig, axes = plt.subplots(rows, n, figsize=(size * n, size * rows), squeeze=False)
        for j in range(n):
            img = to_image(images[j])
            axes[0, j].imshow(img, cmap="gray" if img.ndim == 2 else None, vmin=0, vmax=1)
            if titles is not None:
                axes[0, j].set_title(titles[j], fontsize=9)
            for i, (label, m) in enumerate(maps.items(), start=1):
                image = show_map(axes[i, j], _saliency(m[j], signed), signed=signed, cmap=cmap)
                if j == 0:
                    axes[i, j].set_ylabel(label, fontsize=9)
        for ax in axes.flat:
            ax.set_xticks([]), ax.set_yticks([])
            ax.grid(False)
        fig.tight_layout()
        if maps:
            map_colorbar(fig, image, axes[1:], signed=signed)
    return fig


def scaled_map(a, *, signed: bool = False) -> np.ndarray:
    """A 2-D map divided by its largest absolute value, for :func:`show_map`: in [0, 1]
    (``signed=False``: the map's absolute value) or in [-1, 1] (``signed=True``). An all-zero
    map stays zero."""
    a = a.detach().cpu().float().numpy() if torch.is_tensor(a) else np.asarray(a, dtype=float)
    if a.ndim != 2:
        raise ValueError(f"a map must be 2-D (H x W), got shape {a.shape}")
    a = a if signed else np.abs(a)
    top = float(np.abs(a).max())
    return a / top if top > 0 else a


def show_map(ax, a, *, signed: bool = False, cmap: str | None = None):
    """Draw a 2-D attribution map on ``ax`` scaled to its largest absolute value
    (:func:`scaled_map`): ``hot`` on [0, 1], or ``bwr`` on [-1, 1] when ``signed``, so that
    every map of a figure shares the colour bar of :func:`map_colorbar`. Returns the image."""
    lo = -1.0 if signed else 0.0
    return ax.imshow(scaled_map(a, signed=signed), cmap=cmap or ("bwr" if signed else "hot"),
                     vmin=lo, vmax=1.0)


def map_colorbar(fig, image, axes, *, signed: bool = False, label: str | None = None):
    """One colour bar for the maps of ``axes`` drawn by :func:`show_map` (``image``: one of
    them). Call it after ``tight_layout``: the bar takes its room from ``axes``."""
    default = ("attribution / its largest |value| in the map" if signed
               else "|attribution| / its largest value in the map")
    axes = list(np.ravel(axes))
    bar = fig.colorbar(image, ax=axes, fraction=0.025, pad=0.02)
    bar.set_label(label or default, fontsize=8)
    bar.ax.tick_params(labelsize=7)
    return bar


# --------------------------------------------------------------------------- tables as heatmaps
def _heatmap_axes(shape: tuple[int, int], ax):
    import matplotlib.pyplot as plt

    if ax is not None:
        return ax
    rows, cols = shape
    _, ax = plt.subplots(figsize=(max(4.0, 0.6 * cols + 2.5), max(2.5, 0.4 * rows + 1.5)),
                         layout="constrained")
    return ax


def _column_labels(columns) -> tuple[list[str], list[int]]:
    """Tick labels of (possibly two-level) columns and the positions where the first level
    changes (where :func:`rank_heatmap` draws a separator)."""
    import pandas as pd

    if not isinstance(columns, pd.MultiIndex):
        return [str(c) for c in columns], []
    labels = [" · ".join(str(part) for part in col) for col in columns]
    first = list(columns.get_level_values(0))
    cuts = [i for i in range(1, len(first)) if first[i] != first[i - 1]]
    return labels, cuts


def rank_heatmap(data, *, label: str = "rank (1 = best)", units: str | None = None,
                 fmt: str = ".3g", cmap: str = "vlag", center: float | None = None,
                 vmin: float | None = None, vmax: float | None = None,
                 xlabel: str | None = None, ylabel: str | None = None,
                 title: str | None = None, annot: bool = True, ax=None):
    """A numeric DataFrame (rows × columns: ranks, correlations, scores) as a heatmap with
    one annotated cell per value; NaN cells are left blank.

    The colour map is diverging (``vlag``: blue low, red high) and centred at ``center``,
    by default the middle of the values' range (for ranks 1..n: the middle rank, so the
    better half is blue). ``label`` and ``units`` name the colour bar. Columns with two
    levels (``pd.MultiIndex``, e.g. (paper, metric)) are labelled ``paper · metric`` and a
    line separates the groups of the first level. Returns the Axes.
    """
    import pandas as pd
    import seaborn as sns

    if not isinstance(data, pd.DataFrame):
        raise TypeError(f"data must be a pandas DataFrame, got {type(data).__name__}")
    values = data.astype(float)
    if center is None:
        finite = values.to_numpy()[np.isfinite(values.to_numpy())]
        center = float(finite.min() + finite.max()) / 2 if finite.size else 0.0
    labels, cuts = _column_labels(values.columns)
    with theme(), _quiet_seaborn():
        ax = _heatmap_axes(values.shape, ax)
        sns.heatmap(values, ax=ax, cmap=cmap, center=center, vmin=vmin, vmax=vmax,
                    annot=annot, fmt=fmt, annot_kws={"fontsize": 8}, linewidths=0.5,
                    linecolor="white", xticklabels=labels, yticklabels=[str(i) for i in values.index],
                    cbar_kws={"label": _label(label, units)})
        _finish_heatmap(ax, len(labels), cuts, xlabel, ylabel, title)
    return ax


def _finish_heatmap(ax, n_columns: int, cuts, xlabel, ylabel, title) -> None:
    """What both heatmaps do after drawing: no grid over blank cells, a line between
    column groups, labels and readable tick labels."""
    ax.grid(False)                         # no grid lines across blank (NaN) cells
    for cut in cuts:
        ax.axvline(cut, color="black", lw=1.2)
    ax.set_xlabel(xlabel or "")
    ax.set_ylabel(ylabel or "")
    if title:
        ax.set_title(title)
    ax.tick_params(axis="x", labelrotation=90 if n_columns > 6 else 30)
    ax.tick_params(axis="y", labelrotation=0)


def verdict_heatmap(data, *, xlabel: str | None = None, ylabel: str | None = None,
                    title: str | None = None, legend: bool = True, ax=None):
    """A DataFrame of claim verdicts (each cell one of ``robattr.report.papers.VERDICTS``: holds,
    holds partly, does not hold, not comparable; empty or NaN for no claim) as a heatmap with
    one colour per verdict (:data:`VERDICT_COLORS`), a short label in every cell (holds,
    partly, fails, n/c) and a legend with the full verdicts. Returns the Axes.
    """
    import pandas as pd
    import seaborn as sns
    from matplotlib.colors import ListedColormap
    from matplotlib.patches import Patch

    if not isinstance(data, pd.DataFrame):
        raise TypeError(f"data must be a pandas DataFrame, got {type(data).__name__}")
    order = list(VERDICT_COLORS)

    def code(v):
        if v is None or (isinstance(v, float) and np.isnan(v)) or v == "":
            return np.nan
        if v not in VERDICT_COLORS:
            raise ValueError(f"unknown verdict {v!r}: expected one of {order}")
        return float(order.index(v))

    codes = data.map(code).astype(float)
    text = data.map(lambda v: _VERDICT_SHORT.get(v, "") if isinstance(v, str) else "")
    labels, cuts = _column_labels(data.columns)
    with theme(), _quiet_seaborn():
        ax = _heatmap_axes(data.shape, ax)
        sns.heatmap(codes, ax=ax, cmap=ListedColormap([VERDICT_COLORS[v] for v in order]),
                    vmin=-0.5, vmax=len(order) - 0.5, annot=text.to_numpy(), fmt="",
                    annot_kws={"fontsize": 8}, cbar=False, linewidths=1, linecolor="white",
                    xticklabels=labels, yticklabels=[str(i) for i in data.index])
        _finish_heatmap(ax, len(labels), cuts, xlabel, ylabel, title)
        if legend:
            ax.legend(handles=[Patch(color=VERDICT_COLORS[v], label=v) for v in order],
                      title="verdict", loc="upper left", bbox_to_anchor=(1.01, 1), frameon=False)
    return ax


# --------------------------------------------------------------------------- measured vs bound
def _as_column(v) -> np.ndarray:
    if isinstance(v, torch.Tensor):
        v = v.detach().cpu().double().numpy()
    return np.asarray(v).reshape(-1)


def _tidy(data, columns: dict[str, Any]) -> tuple[Any, dict[str, str | None]]:
    """``(frame, names)``: ``data`` with the given columns when it is a DataFrame (the values
    of ``columns`` are column names), else a DataFrame built from the arrays in
    ``columns`` (keys become the column names)."""
    import pandas as pd

    if data is not None:
        if not isinstance(data, pd.DataFrame):
            raise TypeError(f"data must be a pandas DataFrame or None, got {type(data).__name__}")
        for role, name in columns.items():
            if name is not None and name not in data.columns:
                raise ValueError(f"{role}={name!r} is not a column of data "
                                 f"(columns: {', '.join(map(str, data.columns))})")
        return data.copy(), dict(columns)
    frame = pd.DataFrame({role: _as_column(v) for role, v in columns.items() if v is not None})
    return frame, {role: (role if v is not None else None) for role, v in columns.items()}


def _beyond(frame, measured: str, bound: str, rtol: float, lower: bool):
    """True where the measured value breaks the bound: above an upper bound (by more than
    ``rtol`` of it), below a lower bound."""
    if lower:
        return frame[measured] < frame[bound] * (1 - rtol)
    return frame[measured] > frame[bound] * (1 + rtol)


def _side(lower: bool) -> str:
    return "below" if lower else "above"


def _facet_titles(g, frame, col: str | None, broken: str, lower: bool,
                  title: str | None) -> None:
    """Each facet's title: its column value (if any) and how many cases break the bound."""
    def count(part):
        return f"{int(part[broken].sum())} of {len(part)} {_side(lower)} the bound"

    if col is None:
        g.ax.set_title(f"{title + ': ' if title else ''}{count(frame)}")
        return
    for value, ax in g.axes_dict.items():
        ax.set_title(f"{value}: {count(frame[frame[col] == value])}")
    if title:
        g.figure.suptitle(title, y=1.03)


def bound_ratio(data=None, *, measured, bound, hue=None, col=None, kind: str = "ecdf",
                quantity: str = "deviation", lower: bool = False, log: bool = False,
                rtol: float = 0.0, col_wrap: int | None = None, height: float = 3.0,
                aspect: float = 1.3, title: str | None = None):
    """The distribution of ``measured / bound`` over cases, with a vertical line at 1: an
    upper bound that holds keeps every case at or left of the line (a lower bound,
    ``lower=True``: at or right of it).

    ``measured`` and ``bound`` are column names of ``data``, or (with ``data=None``) arrays or
    tensors of the same length; so are ``hue`` (one line or histogram per group) and ``col``
    (one facet per value). ``kind`` is ``"ecdf"`` (the fraction of cases at or below each
    ratio) or ``"hist"`` (counts). ``quantity`` names what was measured in the x label.
    Each facet's title counts the cases that break the bound: ``measured > bound · (1 +
    rtol)``, or ``measured < bound · (1 - rtol)`` for a lower bound. Bounds must be > 0;
    rows with a NaN are dropped. Returns the seaborn FacetGrid.
    """
    import seaborn as sns

    if kind not in ("ecdf", "hist"):
        raise ValueError(f"kind must be 'ecdf' or 'hist', got {kind!r}")
    frame, names = _tidy(data, {"measured": measured, "bound": bound, "hue": hue, "col": col})
    m, b = names["measured"], names["bound"]
    frame = frame.dropna(subset=[m, b])
    if (frame[b] <= 0).any():
        raise ValueError(f"bound must be > 0 for a ratio; {int((frame[b] <= 0).sum())} "
                         f"of {len(frame)} bounds are <= 0")
    ratio = f"{quantity} / bound"
    frame[ratio] = frame[m] / frame[b]
    broken = _beyond(frame, m, b, rtol, lower)
    extra = {"element": "step", "common_norm": False} if kind == "hist" else {}
    with theme():
        g = sns.displot(data=frame, x=ratio, hue=names["hue"], col=names["col"], kind=kind,
                        log_scale=(10 if log else None), col_wrap=col_wrap, height=height,
                        aspect=aspect, facet_kws={"sharex": False}, **extra)
        for ax in g.axes.flat:
            ax.axvline(1.0, color="black", lw=1, ls="--", label="bound")
            readable_log_ticks(ax)
        g.set_axis_labels(f"measured {ratio} (1 = at the bound)",
                          "fraction of cases" if kind == "ecdf" else "cases")
        _facet_titles(g, frame.assign(_broken=broken), names["col"], "_broken", lower, title)
    return g


def measured_vs_bound(data=None, *, measured, bound, hue=None, col=None,
                      quantity: str = "deviation", units: str | None = None,
                      lower: bool = False, log: bool = False, rtol: float = 0.0,
                      col_wrap: int | None = None, height: float = 3.0, aspect: float = 1.2,
                      title: str | None = None, palette=None):
    """One point per case: the bound (x) against the measured value (y), with the line
    y = x; an upper bound that holds keeps every point on or below it (a lower bound,
    ``lower=True``: on or above it).

    Arguments as in :func:`bound_ratio`; ``units`` is shown on both axes (``log`` puts both
    on a log scale). Without ``hue`` the points are coloured by whether they are within or
    beyond the bound; with ``hue`` that is shown by the marker instead. ``palette`` colours
    the ``hue`` groups (as in seaborn: a palette name, a list, or a dict {group: colour}, to
    keep a colour that the text refers to); it is ignored without ``hue``. Returns the
    seaborn FacetGrid.
    """
    import seaborn as sns

    frame, names = _tidy(data, {"measured": measured, "bound": bound, "hue": hue, "col": col})
    m, b = names["measured"], names["bound"]
    frame = frame.dropna(subset=[m, b])
    status = "case"
    while status in frame.columns:
        status = f"_{status}"
    beyond = f"{_side(lower)} the bound"
    levels = ["within the bound", beyond]
    broken = _beyond(frame, m, b, rtol, lower)
    frame[status] = np.where(broken, beyond, "within the bound")
    hue_order = None
    if names["hue"] is None:
        hue_, style_ = status, None
        hue_order = levels
    else:
        hue_, style_ = names["hue"], status
    with theme():
        g = sns.relplot(data=frame, x=b, y=m, hue=hue_, hue_order=hue_order, style=style_,
                        style_order=(levels if style_ else None),
                        palette=(palette if names["hue"] is not None else None),
                        col=names["col"], kind="scatter", col_wrap=col_wrap, height=height,
                        aspect=aspect, s=18, facet_kws={"sharex": False, "sharey": False})
        for value, ax in zip(g.col_names or [None], g.axes.flat):
            part = frame if value is None else frame[frame[names["col"]] == value]
            ends = np.concatenate([part[m].to_numpy(float), part[b].to_numpy(float)])
            if log:
                ax.set_xscale("log"), ax.set_yscale("log")
                readable_log_ticks(ax)
                ends = ends[ends > 0]
            if ends.size:
                line = (np.geomspace if log else np.linspace)(ends.min(), ends.max(), 50)
                ax.plot(line, line, color="black", lw=1, ls="--", label="y = x")
        g.set_axis_labels(_label(f"{'lower' if lower else 'upper'} bound on the {quantity}",
                                 units),
                          _label(f"measured {quantity}", units))
        _facet_titles(g, frame.assign(_broken=broken), names["col"], "_broken", lower, title)
    return g


# --------------------------------------------------------------------------- curves over epsilon
def metric_curves(data, *, x: str = "eps", y: str = "value", hue: str | None = "method",
                  col: str | None = "metric", row: str | None = None, style: str | None = None,
                  xlabel: str = "ε", x_units: str | None = "pixel units",
                  ylabel: str | None = None, y_units: str | None = None,
                  x_factor: float = 1.0, x_spacing: str = "linear", logy: bool = False,
                  sharey: bool = False, col_wrap: int | None = None, height: float = 2.6,
                  aspect: float = 1.25,
                  errorbar: Any = "sd", title: str | None = None):
    """Metric-vs-ε curves from a tidy DataFrame (one row per measured value): one facet per
    value of ``col`` (and ``row``), one line with markers per value of ``hue``.

    ``x_factor`` multiplies x before plotting (255 shows ε in grey levels: pass
    ``x_units="/255"``); ``x_spacing`` is ``"linear"``, ``"log"``, or ``"even"`` (the x
    values at equal spacing, labelled with their values, for budget lists such as
    2, 4, 8, 16/255); ``logy`` puts y on a log scale. Several rows for one x are averaged
    and their standard deviation drawn as a band (``errorbar``, as in
    ``seaborn.lineplot``; None for none). The axes are labelled ``xlabel (x_units)`` and
    ``ylabel (y_units)`` (``ylabel`` defaults to ``y``); facet titles show the facet's
    values. Returns the seaborn FacetGrid.
    """
    import pandas as pd
    import seaborn as sns

    if not isinstance(data, pd.DataFrame):
        raise TypeError(f"data must be a pandas DataFrame, got {type(data).__name__}")
    if x_spacing not in ("linear", "log", "even"):
        raise ValueError(f"x_spacing must be 'linear', 'log' or 'even', got {x_spacing!r}")
    for role, name in (("x", x), ("y", y), ("hue", hue), ("col", col), ("row", row),
                       ("style", style)):
        if name is not None and name not in data.columns:
            raise ValueError(f"{role}={name!r} is not a column of data "
                             f"(columns: {', '.join(map(str, data.columns))})")
    frame = data.copy()
    xs = frame[x].astype(float) * x_factor
    levels = np.sort(xs.unique())
    plot_x = x
    if x_spacing == "even":
        plot_x = "_position"
        while plot_x in frame.columns:
            plot_x = f"_{plot_x}"
        frame[plot_x] = np.searchsorted(levels, xs)
    else:
        frame[x] = xs
    import matplotlib as mpl

    # with ``style``, legend handles long enough to show the dashes around the marker
    handles = {"legend.handlelength": 3.5} if style is not None else {}
    with theme(), mpl.rc_context(handles):
        g = sns.relplot(data=frame, x=plot_x, y=y, hue=hue, style=style, col=col, row=row,
                        kind="line", marker="o", dashes=True, errorbar=errorbar,
                        col_wrap=col_wrap, height=height, aspect=aspect,
                        facet_kws={"sharey": sharey, "sharex": True})
        for ax in g.axes.flat:
            if x_spacing == "log":
                ax.set_xscale("log")
            elif x_spacing == "even":
                ax.set_xticks(range(len(levels)), [f"{v:g}" for v in levels])
            if logy:
                ax.set_yscale("log")
            readable_log_ticks(ax)
        g.set_axis_labels(_label(xlabel, x_units), _label(ylabel or y, y_units))
        parts = [f"{{{name}}}" for name, var in (("row_name", row), ("col_name", col)) if var]
        if parts:
            g.set_titles(template=" · ".join(parts))
        if title:
            g.figure.suptitle(title, y=1.03)
    return g


def matrix_heatmap(ax, M: torch.Tensor, title: str, *, quantile: float = 0.995):
    """Draw ``|M|`` of a 2-D matrix (a Jacobian) on ``ax`` as an image, with the colour scale
    clipped at its ``quantile`` so that a few large entries do not wash out the rest; no ticks
    (rows and columns are input dimensions). Returns the ``AxesImage`` (for a colour bar)."""
    if not torch.is_tensor(M) or M.ndim != 2:
        raise ValueError(f"M must be a 2-D tensor, got {getattr(M, 'shape', type(M).__name__)}")
    if not 0 < quantile <= 1:
        raise ValueError(f"quantile must be in (0, 1], got {quantile}")
    A = M.detach().abs().cpu().numpy()
    im = ax.imshow(A, cmap="viridis", vmax=np.quantile(A, quantile) + 1e-30, interpolation="nearest")
    ax.set_title(title, fontsize=9)
    ax.set_xticks([]), ax.set_yticks([])
    return im

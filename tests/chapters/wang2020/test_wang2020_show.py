"""robattr.chapters.wang2020.show: the chapter's attack curves carry the verdicts' bootstrap
band and the random baseline, its tables keep every number with a reason for each gap, its
log axes never label two minor ticks that run into each other; and data_label names the
data a Table 2 run ran on."""
from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from robattr.report import verdicts, viz
from robattr.chapters import wang2020

matplotlib = pytest.importorskip("matplotlib")


@pytest.fixture(autouse=True)
def agg():
    import matplotlib.pyplot as plt

    backend = matplotlib.get_backend()
    matplotlib.use("Agg", force=True)
    yield
    plt.close("all")
    matplotlib.use(backend, force=True)


def per_image_frame(n_images=5, seed=0):
    rng = np.random.default_rng(seed)
    rows = []
    for attack in ("TopK", "Manipulate"):
        for method in ("SM", "UG"):
            for metric in ("k-in", "cdl"):
                for source in ("attack", "random"):
                    for eps in (2 / 255, 4 / 255, 8 / 255):
                        for i in range(n_images):
                            rows.append(dict(attack=attack, method=method, metric=metric,
                                             source=source, eps=eps, image=i,
                                             value=float(rng.uniform())))
    return pd.DataFrame(rows)


# --------------------------------------------------------------------------- curves
def test_curve_bands_are_the_mean_and_the_verdicts_bootstrap_interval():
    frame = per_image_frame()
    bands = wang2020.curve_bands(frame, ["attack", "method", "metric"])
    assert len(bands) == 2 * 2 * 2 * 2 * 3 and set(bands.n) == {5}
    row = bands.iloc[7]
    sel = frame[(frame.attack == row.attack) & (frame.method == row.method)
                & (frame.metric == row.metric) & (frame.source == row.source) & (frame.eps == row.eps)]
    assert row.value == pytest.approx(sel.value.mean())
    assert (row.lo, row.hi) == pytest.approx(verdicts.bootstrap_interval(sel.value.to_numpy()))
    assert (bands.lo <= bands.value + 1e-12).all() and (bands.value <= bands.hi + 1e-12).all()
    with pytest.raises(ValueError, match="lacks the columns"):
        wang2020.curve_bands(frame.drop(columns="image"), ["attack"])


def test_attack_curves_figure_draws_a_band_and_a_dashed_random_line_per_method():
    bands = wang2020.curve_bands(per_image_frame(), ["attack", "method", "metric"])
    fig = wang2020.attack_curves_figure(bands, methods=["SM", "UG"], metrics=["k-in", "cdl"],
                                        attacks=["TopK", "Manipulate"], title="ours on digits")
    axes = fig.axes
    assert len(axes) == 4
    for ax in axes:
        solid = [ln for ln in ax.lines if ln.get_linestyle() == "-"]
        dashed = [ln for ln in ax.lines if ln.get_linestyle() == "--"]
        assert len(solid) == 2 and len(dashed) == 2
        assert len(ax.collections) == 2                     # one band per method
        assert [t.get_text() for t in ax.get_xticklabels()] == ["2", "4", "8"]
    texts = [t.get_text() for t in fig.legends[0].get_texts()]
    assert "random ±ε noise of the same size" in texts and any("bootstrap" in t for t in texts)
    with pytest.raises(ValueError, match="at least one"):
        wang2020.attack_curves_figure(bands, methods=[], metrics=["k-in"], attacks=["TopK"])


def test_attack_curves_figure_puts_several_blocks_in_one_figure_each_panel_named():
    frame = pd.concat([per_image_frame(seed=0).assign(dataset="CIFAR-10"),
                       per_image_frame(seed=1).assign(dataset="Flower")], ignore_index=True)
    bands = wang2020.curve_bands(frame, ["dataset", "attack", "method", "metric"])
    fig = wang2020.attack_curves_figure(bands, methods=["SM", "UG"], metrics=["k-in", "cdl"],
                                        attacks=["TopK", "Manipulate"],
                                        blocks={"Flower": "flowers", "CIFAR-10": "cifar"})
    assert [ax.get_title() for ax in fig.axes] == [
        f"{b} · {a} · {m}" for b in ("flowers", "cifar") for a in ("TopK", "Manipulate")
        for m in ("k-in", "cdl")]
    first = bands[(bands.dataset == "Flower") & (bands.attack == "TopK") & (bands.method == "SM")
                  & (bands.metric == "k-in") & (bands.source == "attack")].sort_values("eps")
    assert list(fig.axes[0].lines[0].get_ydata()) == pytest.approx(first.value.tolist())
    assert [ax.get_xlabel() != "" for ax in fig.axes] == [False] * 6 + [True] * 2
    with pytest.raises(ValueError, match="dataset column"):
        wang2020.attack_curves_figure(bands.drop(columns="dataset"), methods=["SM"],
                                      metrics=["k-in"], attacks=["TopK"], blocks={"x": "x"})


# --------------------------------------------------------------------------- tables
def compared_frame(with_ref=True):
    rows = []
    for attack in ("TopK", "Manipulate"):
        for method in ("SM", "IG"):
            for metric in ("k-in", "cor"):
                rows.append(dict(attack=attack, method=method, metric=metric,
                                 ours=np.random.default_rng(len(rows)).uniform(), paper=1.5, note=""))
    df = pd.DataFrame(rows)
    if with_ref:
        df.insert(4, "medium ref (cifar10, abc1234, stale)", np.where(df.method == "IG", np.nan, 0.7))
    return df


def test_beside_paper_keeps_every_value_and_explains_each_gap():
    df = compared_frame()
    table, why, sources = wang2020.beside_paper(
        df, index=["metric", "method"], columns=["attack"],
        orders={"metric": ["cor", "k-in"], "attack": ["TopK", "Manipulate"]})
    assert table.shape == (4, 6)                        # 2 metrics x 2 methods, 2 attacks x 3 sources
    assert list(table.columns) == [(a, s) for a in ("TopK", "Manipulate")
                                   for s in ("ours", "medium ref", "paper")]
    assert list(table.index.get_level_values("metric")) == ["cor", "cor", "k-in", "k-in"]
    assert sources["medium ref"] == ("a kept run of the medium profile (cifar10; commit abc1234; "
                                     "made before this notebook last changed)")
    assert sources["ours"] == "ours" and sources["paper"] == "paper"
    assert why == wang2020.NO_REFERENCE_VALUE           # one reason covers every gap
    assert table.isna().sum().sum() == 4
    ours = df.set_index(["metric", "method", "attack"]).ours
    for (metric, method), r in table.iterrows():
        for attack in ("TopK", "Manipulate"):
            assert r[(attack, "ours")] == ours[(metric, method, attack)]
    html = str(getattr(viz.show_table(table, why=why), "data", ""))
    assert "NaN" not in html and "<td>—</td>" in html


def test_beside_paper_without_gaps_and_with_a_gap_of_the_paper():
    table, why, _ = wang2020.beside_paper(compared_frame(False), index=["metric", "method"],
                                          columns=["attack"])
    assert table.shape == (4, 4) and not table.isna().any().any() and why == {}
    df = compared_frame()
    df.loc[0, "paper"] = np.nan
    table, why, _ = wang2020.beside_paper(df, index=["metric", "method"], columns=["attack"],
                                          why_paper="the paper's row is Table 2")
    assert set(why.values()) == {"the paper's row is Table 2", wang2020.NO_REFERENCE_VALUE}
    viz.show_table(table, why=why)                      # every gap has its reason
    flat, why, _ = wang2020.beside_paper(df[df.attack == "TopK"], index=["metric", "method"], columns=[],
                                         why_paper="the paper's row is Table 2")
    assert list(flat.columns) == ["ours", "medium ref", "paper"] and len(flat) == 4
    assert set(why.values()) == {"the paper's row is Table 2", wang2020.NO_REFERENCE_VALUE}
    with pytest.raises(ValueError, match="index must name"):
        wang2020.beside_paper(df, index=[], columns=["attack"])
    with pytest.raises(ValueError, match="key columns"):
        wang2020.beside_paper(df, index=["block"], columns=["attack"])
    with pytest.raises(ValueError, match="identify one row"):
        wang2020.beside_paper(df, index=["metric"], columns=["attack"])


def test_show_beside_paper_gives_extra_columns_the_reason_of_ours():
    """Table 4 in a run with fewer betas than the paper, beside a reference with fewer still:
    ours and the reference miss different rows (two reasons), and the columns joined from
    ``extra`` miss the rows this run did not measure; each gap needs its reason."""
    compared = pd.DataFrame(dict(beta=["0.3", "0.5", "0.7", "0.9"],
                                 ours=[0.6, np.nan, np.nan, 0.5],
                                 **{"medium ref (cifar10, abc1234)": [0.61, np.nan, np.nan, 0.49]},
                                 paper=[0.81, 0.75, 0.7, 0.62], note=""))
    compared.loc[1, "medium ref (cifar10, abc1234)"] = 0.7        # the reference has 0.5
    extra = pd.DataFrame({"test acc (ours)": [0.63, 0.49]}, index=pd.Index(["0.3", "0.9"], name="beta"))
    _, why, _ = wang2020.beside_paper(compared, index=["beta"], columns=[], why_ours="not trained")
    assert isinstance(why, dict) and "test acc (ours)" not in why     # two reasons, by column
    wang2020.show_beside_paper(compared, index=["beta"], columns=[], extra=extra,
                               why_ours="not trained", caption="Table 4")


# --------------------------------------------------------------------------- log axes
def labels_drawn(fig, axis):
    fig.canvas.draw()
    ticks = axis.get_major_ticks() + axis.get_minor_ticks()
    lo, hi = sorted(axis.get_view_interval())
    return [t.label1.get_text() for t in ticks if t.label1.get_visible() and t.label1.get_text()
            and lo <= t.get_loc() <= hi]


def test_readable_log_ticks_thin_the_minor_labels_of_a_short_axis():
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots()
    ax.loglog([25, 85], [7, 200])
    ax.set_xlim(25, 85)
    ax.set_ylim(7, 210)
    wang2020.readable_log_ticks(ax)
    x = labels_drawn(fig, ax.xaxis)
    y = labels_drawn(fig, ax.yaxis)
    assert x == ["30", "50"]                            # under one decade: 2, 3, 5 only
    assert y == ["10", "100"]                           # over one decade: the decades only
    fig2, ax2 = plt.subplots()
    ax2.plot([1, 2], [1, 2])
    wang2020.readable_log_ticks(ax2)                    # linear axes are left alone
    assert ax2.xaxis.get_scale() == "linear"


# --------------------------------------------------------------------------- data labels
def test_data_label_names_the_data_a_run_ran_on():
    fallback = wang2020.table2_runs([], dataset="digits", k=4)[0]
    assert fallback["label"] == "CIFAR-10" and wang2020.data_label(fallback) == "digits"
    block = dict(label="CIFAR-10", dataset="cifar10", size=32, k=20)
    assert wang2020.data_label(block) == "CIFAR-10"
    assert wang2020.data_label(dict(label="ImageNet", dataset="/data/imagenet/", size=224)) == "ImageNet"
    assert wang2020.data_label(dict(label="CIFAR-10", dataset="/tmp/mnist/", size=None)) == "mnist"

"""robattr.report.viz: the book's figure style and its seaborn helpers draw what they say."""
from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
import torch

matplotlib = pytest.importorskip("matplotlib")


@pytest.fixture(autouse=True)
def agg():
    """Draw off screen, and close every figure a test opened."""
    import matplotlib.pyplot as plt

    backend = matplotlib.get_backend()
    matplotlib.use("Agg", force=True)
    yield
    plt.close("all")
    matplotlib.use(backend, force=True)


def data_lines(ax):
    """The lines of an Axes that carry data (seaborn adds empty ones for legend entries)."""
    return [ln for ln in ax.lines if len(ln.get_xdata()) > 0]


def vertical_lines_at(ax, x):
    return [ln for ln in ax.lines
            if len(set(np.atleast_1d(ln.get_xdata()))) == 1 and np.atleast_1d(ln.get_xdata())[0] == x]


# --------------------------------------------------------------------------- style
def test_set_theme_sets_the_book_style_and_theme_restores_it():
    import seaborn as sns
    from robattr.report import viz

    with matplotlib.rc_context():
        matplotlib.rcdefaults()
        assert not matplotlib.rcParams["axes.grid"]
        with viz.theme():
            assert matplotlib.rcParams["axes.grid"]
        assert not matplotlib.rcParams["axes.grid"]
        viz.set_theme()
        assert matplotlib.rcParams["axes.grid"]
        colors = matplotlib.rcParams["axes.prop_cycle"].by_key()["color"]
        expected = [matplotlib.colors.to_hex(c) for c in sns.color_palette("colorblind")]
        assert [matplotlib.colors.to_hex(c) for c in colors] == expected


def test_importing_viz_changes_no_setting():
    import importlib

    from robattr.report import viz

    with matplotlib.rc_context():
        matplotlib.rcdefaults()
        before = dict(matplotlib.rcParams)
        importlib.reload(viz)
        assert dict(matplotlib.rcParams) == before


def test_heatmap_grid_still_draws_one_column_per_image():
    from robattr.report import viz

    gen = torch.Generator().manual_seed(0)
    x = torch.rand(3, 1, 8, 8, generator=gen)
    g = torch.randn(3, 1, 8, 8, generator=gen)
    fig = viz.heatmap_grid(x, {"Grad": g, "|Grad|": g.abs()}, ["a", "b", "c"])
    assert len(fig.axes) == 3 * 3 + 1                  # and one colour bar for the maps
    assert [fig.axes[j].get_title() for j in range(3)] == ["a", "b", "c"]
    assert fig.axes[3].get_ylabel() == "Grad" and fig.axes[6].get_ylabel() == "|Grad|"


# --------------------------------------------------------------------------- heatmaps
def test_rank_heatmap_annotates_every_value_and_separates_column_groups():
    from robattr.report import viz

    cols = pd.MultiIndex.from_tuples([("wang2020", "topk"), ("wang2020", "spearman"),
                                      ("joo2023", "rps")])
    ranks = pd.DataFrame([[1.0, 2.0, np.nan], [2.0, 1.0, 1.0], [3.0, 3.0, 2.0]],
                         index=["CE", "SSR", "l2+cosd"], columns=cols)
    ax = viz.rank_heatmap(ranks, label="rank", units="1 = most robust", xlabel="evaluation",
                          ylabel="training method", fmt=".0f")
    texts = [t.get_text() for t in ax.texts]
    assert len(texts) == 8                     # 9 cells, one NaN left blank
    assert texts[:2] == ["1", "2"]
    assert [t.get_text() for t in ax.get_yticklabels()] == ["CE", "SSR", "l2+cosd"]
    assert [t.get_text() for t in ax.get_xticklabels()] == [
        "wang2020 · topk", "wang2020 · spearman", "joo2023 · rps"]
    assert ax.get_xlabel() == "evaluation" and ax.get_ylabel() == "training method"
    assert ax.figure.axes[-1].get_ylabel() == "rank (1 = most robust)"     # the colour bar
    assert len(vertical_lines_at(ax, 2)) == 1  # one separator, between the two papers
    # the colour map is diverging and centred at the middle rank: the cells of rank 2 are
    # the palest, ranks 1 and 3 sit on opposite sides (blue vs red)
    face = ax.collections[0].get_facecolors()[:, :3]
    values = ranks.to_numpy().ravel()                  # row-major, like the mesh's cells
    assert len(face) == len(values)
    face, values = face[~np.isnan(values)], values[~np.isnan(values)]
    lightness = face.sum(axis=1)
    assert lightness[values == 2].min() > lightness[values != 2].max()
    blue, red = face[values == 1][0], face[values == 3][0]
    assert blue[2] > blue[0] and red[0] > red[2]


def test_rank_heatmap_refuses_what_is_not_a_dataframe():
    from robattr.report import viz

    with pytest.raises(TypeError, match="DataFrame"):
        viz.rank_heatmap(np.eye(3))


def test_verdict_heatmap_colours_each_verdict_and_refuses_unknown_ones():
    from robattr.report import viz

    verdicts = pd.DataFrame({"Table 1": ["holds", "does not hold"],
                             "Table 2": ["holds partly", None]}, index=["claim A", "claim B"])
    ax = viz.verdict_heatmap(verdicts, title="claims")
    assert [t.get_text() for t in ax.texts] == ["holds", "partly", "fails"]
    assert [t.get_text() for t in ax.get_legend().get_texts()] == list(viz.VERDICT_COLORS)
    assert ax.get_title() == "claims"
    # the cell colours are the verdicts' colours (row-major, NaN masked)
    face = ax.collections[0].get_facecolors()
    assert matplotlib.colors.to_hex(face[0]) == viz.VERDICT_COLORS["holds"]
    assert matplotlib.colors.to_hex(face[1]) == viz.VERDICT_COLORS["holds partly"]
    assert matplotlib.colors.to_hex(face[2]) == viz.VERDICT_COLORS["does not hold"]
    with pytest.raises(ValueError, match="unknown verdict 'maybe'"):
        viz.verdict_heatmap(pd.DataFrame({"T": ["maybe"]}))


def test_verdicts_are_the_papers_verdicts():
    from robattr.report import papers, viz

    assert list(viz.VERDICT_COLORS) == list(papers.VERDICTS)


# --------------------------------------------------------------------------- measured vs bound
def deviations():
    """40 cases, 2 attacks x 2 norms; exactly 3 measured deviations exceed their bound."""
    rng = np.random.default_rng(0)
    bound = rng.uniform(0.5, 2.0, 40)
    measured = bound * rng.uniform(0.1, 0.95, 40)
    measured[[0, 5, 21]] = bound[[0, 5, 21]] * 1.5
    return pd.DataFrame({"dev": measured, "T_e": bound,
                         "attack": ["paper", "direct"] * 20,
                         "norm": ["l2"] * 20 + ["linf"] * 20})


def test_bound_ratio_ecdf_one_line_per_group_and_a_line_at_one():
    from robattr.report import viz

    df = deviations()
    g = viz.bound_ratio(df, measured="dev", bound="T_e", hue="attack", quantity="deviation")
    ax = g.ax
    assert len(vertical_lines_at(ax, 1.0)) == 1
    ecdfs = [ln for ln in data_lines(ax) if ln not in vertical_lines_at(ax, 1.0)]
    assert len(ecdfs) == 2                                  # paper, direct
    # each ECDF ends at 1 and reaches past x = 1 only through the 3 violations
    assert all(np.nanmax(ln.get_ydata()) == pytest.approx(1.0) for ln in ecdfs)
    assert ax.get_xlabel() == "measured deviation / bound (1 = at the bound)"
    assert ax.get_ylabel() == "fraction of cases"
    assert ax.get_title() == "3 of 40 above the bound"


def test_bound_ratio_histogram_facets_and_arrays():
    from robattr.report import viz

    df = deviations()
    g = viz.bound_ratio(df, measured="dev", bound="T_e", col="norm", kind="hist")
    titles = [ax.get_title() for ax in g.axes.flat]
    assert titles == ["l2: 2 of 20 above the bound", "linf: 1 of 20 above the bound"]
    assert all(ax.get_ylabel() in ("cases", "") for ax in g.axes.flat)
    assert g.axes.flat[0].get_ylabel() == "cases"
    assert all(len(ax.patches) + len(ax.collections) > 0 for ax in g.axes.flat)
    # arrays and tensors instead of a DataFrame
    g = viz.bound_ratio(measured=torch.tensor(df.dev.values), bound=df.T_e.values)
    assert g.ax.get_title() == "3 of 40 above the bound"


def test_bound_ratio_refuses_nonpositive_bounds_and_unknown_columns():
    from robattr.report import viz

    with pytest.raises(ValueError, match="bound must be > 0"):
        viz.bound_ratio(measured=[1.0, 2.0], bound=[1.0, 0.0])
    with pytest.raises(ValueError, match="'T' is not a column"):
        viz.bound_ratio(deviations(), measured="dev", bound="T")
    with pytest.raises(ValueError, match="kind"):
        viz.bound_ratio(deviations(), measured="dev", bound="T_e", kind="kde")


def test_measured_vs_bound_scatter_with_identity_line_and_units():
    from robattr.report import viz

    df = deviations()
    g = viz.measured_vs_bound(df, measured="dev", bound="T_e", col="norm", units="pixel units")
    assert len(g.axes.flat) == 2
    for ax, (norm, part) in zip(g.axes.flat, df.groupby("norm", sort=False)):
        assert len(ax.collections[0].get_offsets()) == len(part)            # one point per case
        (identity,) = data_lines(ax)
        assert np.allclose(identity.get_xdata(), identity.get_ydata())        # y = x
    assert g.axes.flat[0].get_xlabel() == "upper bound on the deviation (pixel units)"
    assert g.axes.flat[0].get_ylabel() == "measured deviation (pixel units)"
    assert [ax.get_title() for ax in g.axes.flat] == ["l2: 2 of 20 above the bound",
                                                      "linf: 1 of 20 above the bound"]
    legend = [t.get_text() for t in g.legend.get_texts()]
    assert "above the bound" in legend and "within the bound" in legend


def test_measured_vs_bound_log_scale():
    from robattr.report import viz

    g = viz.measured_vs_bound(deviations(), measured="dev", bound="T_e", hue="attack", log=True)
    assert g.ax.get_xscale() == "log" and g.ax.get_yscale() == "log"
    assert len(g.ax.collections[0].get_offsets()) == 40


def test_measured_vs_bound_palette_colours_the_hue_groups():
    """A fixed colour per group (one the text refers to, say); without hue it is ignored."""
    from robattr.report import viz

    df = deviations()
    red, blue = "#d55e00", "#0173b2"
    g = viz.measured_vs_bound(df, measured="dev", bound="T_e", hue="attack",
                              palette={"paper": red, "direct": blue})
    face = [matplotlib.colors.to_hex(c) for c in g.ax.collections[0].get_facecolors()]
    assert face == [red if a == "paper" else blue for a in df.attack]
    g = viz.measured_vs_bound(df, measured="dev", bound="T_e", palette={"paper": red})
    assert g.ax.get_title() == "3 of 40 above the bound"


def test_lower_bounds_count_the_cases_below():
    """A lower bound (a certified radius, say) is broken by values under it."""
    from robattr.report import viz

    df = deviations()                # 37 of 40 measured values lie under their bound
    g = viz.measured_vs_bound(df, measured="dev", bound="T_e", lower=True, quantity="radius")
    assert g.ax.get_title() == "37 of 40 below the bound"
    assert g.ax.get_xlabel() == "lower bound on the radius"
    g = viz.bound_ratio(df, measured="dev", bound="T_e", lower=True, rtol=0.6)
    ratio = df.dev / df.T_e
    assert g.ax.get_title() == f"{int((ratio < 0.4).sum())} of 40 below the bound"


# --------------------------------------------------------------------------- curves over epsilon
def curves():
    rng = np.random.default_rng(1)
    return pd.DataFrame([dict(attack=a, metric=m, method=me, eps=e / 255, value=rng.random())
                         for a in ("topk", "manipulate")
                         for m in ("top-k intersection", "Spearman")
                         for me in ("SM", "IG", "SG")
                         for e in (2, 4, 8, 16)])


def test_metric_curves_one_facet_per_metric_and_one_line_per_method():
    from robattr.report import viz

    df = curves()
    g = viz.metric_curves(df[df.attack == "topk"], x_units="pixel units", ylabel="similarity")
    assert len(g.axes.flat) == 2
    assert [ax.get_title() for ax in g.axes.flat] == ["top-k intersection", "Spearman"]
    for ax in g.axes.flat:
        lines = data_lines(ax)
        assert len(lines) == 3
        assert all(len(ln.get_xdata()) == 4 and ln.get_marker() == "o" for ln in lines)
        assert np.allclose(sorted(lines[0].get_xdata()), np.array([2, 4, 8, 16]) / 255)
    assert g.axes.flat[0].get_xlabel() == "ε (pixel units)"
    assert g.axes.flat[0].get_ylabel() == "similarity"
    assert [t.get_text() for t in g.legend.get_texts()] == ["SM", "IG", "SG"]


def test_metric_curves_rows_grey_levels_and_even_spacing():
    from robattr.report import viz

    g = viz.metric_curves(curves(), row="attack", x_factor=255, x_units="/255",
                          x_spacing="even")
    assert g.axes.shape == (2, 2)
    assert [ax.get_title() for ax in g.axes.flat] == [
        "topk · top-k intersection", "topk · Spearman",
        "manipulate · top-k intersection", "manipulate · Spearman"]
    bottom = g.axes[-1, 0]
    assert [t.get_text() for t in bottom.get_xticklabels()] == ["2", "4", "8", "16"]
    assert bottom.get_xlabel() == "ε (/255)"
    assert all(len(data_lines(ax)) == 3 for ax in g.axes.flat)
    assert np.allclose(sorted(data_lines(bottom)[0].get_xdata()), [0, 1, 2, 3])


def test_metric_curves_log_spacing_and_bad_arguments():
    from robattr.report import viz

    df = curves()
    g = viz.metric_curves(df[df.attack == "topk"], x_spacing="log", logy=True)
    assert all(ax.get_xscale() == "log" and ax.get_yscale() == "log" for ax in g.axes.flat)
    with pytest.raises(ValueError, match="x_spacing"):
        viz.metric_curves(df, x_spacing="sqrt")
    with pytest.raises(ValueError, match="hue='model' is not a column"):
        viz.metric_curves(df, hue="model")


def test_metric_curves_style_gets_legend_handles_long_enough_for_dashes():
    from robattr.report import viz

    df = curves()
    g = viz.metric_curves(df, col="metric", style="attack")
    assert g.legend.handlelength >= 3
    dashes = {ln.get_linestyle() for ln in data_lines(g.axes.flat[0])}
    assert len(dashes) == 2                                   # one per attack
    default = matplotlib.rcParams["legend.handlelength"]
    g = viz.metric_curves(df[df.attack == "topk"])
    assert g.legend.handlelength == default


def test_log_axes_are_labelled_with_plain_numbers():
    """Over less than a decade matplotlib labels the minor ticks as 2 × 10⁻¹ etc., which run
    into each other; the helpers label log axes 0.2, 0.3, ... instead."""
    from robattr.report import viz

    df = pd.DataFrame({"eps": [0.1, 0.2, 0.3, 0.5], "value": [1e-4, 3e-4, 1e-3, 2e-3]})
    g = viz.metric_curves(df, hue=None, col=None, x_spacing="log", logy=True)
    g.figure.canvas.draw()
    ax = g.ax
    labels = [t.get_text() for t in ax.get_xticklabels() + ax.get_xticklabels(minor=True)
              + ax.get_yticklabels() + ax.get_yticklabels(minor=True) if t.get_text()]
    assert labels and not any("times" in s or "^" in s or "$" in s for s in labels)
    assert {"0.2", "0.3"} <= set(labels)
    g = viz.bound_ratio(deviations(), measured="dev", bound="T_e", log=True)
    g.figure.canvas.draw()
    labels = [t.get_text() for t in g.ax.get_xticklabels(minor=True) if t.get_text()]
    assert not any("$" in s for s in labels)
    g = viz.measured_vs_bound(deviations(), measured="dev", bound="T_e", log=True)
    g.figure.canvas.draw()
    labels = [t.get_text() for a in (g.ax.xaxis, g.ax.yaxis)
              for t in a.get_ticklabels() + a.get_ticklabels(minor=True) if t.get_text()]
    assert labels and not any("$" in s for s in labels)


def test_notebooks_show_whole_tables():
    """robattr.start() (every notebook's prologue) lifts pandas' 20-column cut, which hid
    the paper's numbers beside ours behind a "…"."""
    import pandas as pd

    from robattr.report.viz import show_whole_tables

    wide = pd.DataFrame([range(30)], columns=[f"c{i}" for i in range(30)])
    with pd.option_context("display.max_columns", 20):
        assert "..." in wide.to_html(max_cols=pd.get_option("display.max_columns"))
        show_whole_tables()
        assert pd.get_option("display.max_columns") is None
        assert "..." not in wide._repr_html_() and "c29" in wide._repr_html_()


def test_tables_show_a_dash_where_a_value_is_missing():
    import numpy as np
    import pandas as pd

    from robattr.report.viz import MISSING_NOTE, table_html

    html = table_html(pd.DataFrame({"ours": [0.5, np.nan], "paper": [0.4, 0.3]}))
    assert "NaN" not in html and "<td>—</td>" in html and MISSING_NOTE in html
    full = table_html(pd.DataFrame({"a": [1.0]}))
    assert MISSING_NOTE not in full and "<td>1.0</td>" in full


def test_show_table_explains_every_missing_cell():
    import pandas as pd
    from robattr.report import viz

    df = pd.DataFrame({"ours": [0.5, np.nan, 0.2], "paper": [0.4, 0.3, np.nan]},
                      index=["Grad", "RT-Sal", "IG"])
    html = viz.show_table(df, why={"RT-Sal": viz.NOT_BUILT, "paper": viz.NOT_IN_PAPER})
    html = getattr(html, "data", html)
    assert "NaN" not in html and html.count("<td>—</td>") == 2
    assert "— (RT-Sal): not built" in html and "— (paper): not in the paper" in html
    # one reason for the whole table
    one = str(getattr(viz.show_table(df, why=viz.NOT_RUN), "data", ""))
    assert "— : not run at this tier" not in one and "—: not run at this tier" in one
    # an unexplained "—" is refused, and so is a reason for a label the table lacks
    with pytest.raises(ValueError, match=r"\(IG, paper\)"):
        viz.show_table(df, why={"RT-Sal": viz.NOT_BUILT})
    with pytest.raises(ValueError, match="names no row or column"):
        viz.show_table(df, why={"LRP": viz.NOT_BUILT, "ours": "x", "paper": "y"})
    with pytest.raises(TypeError):
        viz.show_table([[1, 2]])


def test_show_table_transposes_a_wide_table_and_keeps_it_whole():
    import pandas as pd
    from robattr.report import viz

    wide = pd.DataFrame([np.arange(30.0), np.arange(30.0) + 1], index=["ours", "paper"],
                        columns=[f"c{i}" for i in range(30)])
    html = str(getattr(viz.show_table(wide, max_columns=12), "data", ""))
    assert "…" not in html and "..." not in html
    assert html.count("<tr>") >= 30          # one row per former column
    full = pd.DataFrame({"a": [1.0]})
    assert "robattr-missing" not in str(getattr(viz.show_table(full), "data", ""))


def test_show_table_names_multiindex_labels_as_a_reader_reads_them():
    import pandas as pd
    from robattr.report import viz

    cols = pd.MultiIndex.from_tuples([("Grad", "ours"), ("Grad", "paper")])
    df = pd.DataFrame([[0.5, np.nan]], columns=cols, index=["MNIST"])
    html = str(getattr(viz.show_table(df, why={("Grad", "paper"): viz.NOT_IN_PAPER}), "data", ""))
    assert "— (Grad · paper): not in the paper" in html and "('Grad'" not in html


def test_maps_are_scaled_to_their_largest_value_and_share_one_colour_bar():
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    import numpy as np

    from robattr.report.viz import heatmap_grid, map_colorbar, scaled_map, show_map

    a = torch.tensor([[0.0, -2.0], [1.0, 4.0]])
    assert np.allclose(scaled_map(a), [[0, 0.5], [0.25, 1]])
    assert np.allclose(scaled_map(a, signed=True), [[0, -0.5], [0.25, 1]])
    assert np.all(scaled_map(torch.zeros(2, 2)) == 0)
    with pytest.raises(ValueError, match="2-D"):
        scaled_map(torch.zeros(1, 2, 2))
    fig, axes = plt.subplots(1, 2)
    image = show_map(axes[0], a, signed=True)
    assert image.get_clim() == (-1.0, 1.0) and image.get_cmap().name == "bwr"
    bar = map_colorbar(fig, image, axes, signed=True)
    assert "largest" in bar.ax.get_ylabel() and len(fig.axes) == 3
    plt.close(fig)
    fig = heatmap_grid(torch.rand(2, 1, 4, 4), {"a": torch.randn(2, 1, 4, 4),
                                                "b": torch.randn(2, 1, 4, 4)})
    assert len(fig.axes) == 3 * 2 + 1                  # the grid and one colour bar
    plt.close(fig)


def test_a_reference_column_keeps_its_provenance_out_of_its_header():
    import pandas as pd
    from robattr.report import viz
    from robattr.report.tables import table_html

    cols = pd.MultiIndex.from_tuples([("RPS", "ours"), ("RPS", "medium ref (mnist, 4595cea, stale)"),
                                      ("RPS", "deletion (medium ref (mnist, 4595cea, stale))")])
    df = pd.DataFrame([[0.5, np.nan, 0.1]], columns=cols, index=["CE"])
    why = {("RPS", "medium ref (mnist, 4595cea, stale)"): "not in that run"}
    for html in (str(getattr(viz.show_table(df, why=why), "data", "")), table_html(df)):
        assert "4595cea</th>" not in html and "stale)" not in html.split("robattr-provenance")[0]
        assert ">medium ref</th>" in html and ">deletion (medium ref)</th>" in html
        note = html.split('class="robattr-provenance">')[1]
        assert note.startswith("medium ref: a kept run of the medium profile (mnist; commit "
                               "4595cea; made before this notebook last changed)")
    assert "— (RPS · medium ref): not in that run" in str(viz.show_table(df, why=why).data)
    plain = pd.DataFrame({"medium ref": [1.0]})
    assert "robattr-provenance" not in table_html(plain)
    from robattr.report.tables import reference_note

    assert reference_note("medium ref (cifar10, abc1234+dirty)") == \
        "medium ref: a kept run of the medium profile (cifar10; commit abc1234+dirty)"
    assert reference_note("paper ref") == "paper ref: a kept run of the paper profile"


def test_a_default_row_number_column_is_left_out_and_row_labels_kept():
    import pandas as pd
    from robattr.report import viz
    from robattr.report.tables import table_html

    numbered = pd.DataFrame({"method": ["Grad", "IG"], "value": [0.5, 0.25]})
    for html in (table_html(numbered), str(viz.show_table(numbered).data)):
        assert "<th>0</th>" not in html and "<th>1</th>" not in html and "<td>Grad</td>" in html
    labelled = numbered.set_index("method")
    assert "<th>Grad</th>" in table_html(labelled)
    named = numbered.rename_axis("image")          # a named index is data: kept
    assert "<th>0</th>" in table_html(named) and "<th>0</th>" in str(viz.show_table(named).data)

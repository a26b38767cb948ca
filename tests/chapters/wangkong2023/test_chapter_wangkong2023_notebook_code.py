"""The wangkong2023 notebooks' code that moved into the chapter package (issue 40): the synthetic
checks, the trained-model checks on a tiny network, the tables' bookkeeping and the figures."""
from __future__ import annotations

import matplotlib

matplotlib.use("Agg")

import numpy as np  # noqa: E402
import pandas as pd  # noqa: E402
import pytest  # noqa: E402
import torch  # noqa: E402
from torch import nn  # noqa: E402

from robattr.chapters import wangkong2023 as wk  # noqa: E402


def tiny_net(seed: int = 0) -> nn.Module:
    torch.manual_seed(seed)
    return nn.Sequential(nn.Flatten(), nn.Linear(4, 6), nn.Softplus(3.0), nn.Linear(6, 3)).double().eval()


def tiny_images(n: int = 3, seed: int = 1) -> torch.Tensor:
    return torch.rand((n, 1, 2, 2), generator=torch.Generator().manual_seed(seed), dtype=torch.float64)


# --------------------------------------------------------------------------- ig_jacobian
def test_random_softplus_checks_agree_with_autograd_and_follow_the_generator():
    a = wk.random_softplus_checks(np.random.default_rng(0), 2, seed=0)
    b = wk.random_softplus_checks(np.random.default_rng(0), 2, seed=0)
    assert a == b
    assert a["worst_rel"] < 1e-8 and a["zero_row_violations"] == 0 and a["zero_rows"] > 0


def test_quadratic_weight_is_exact():
    assert wk.quadratic_weight_check(np.random.default_rng(3), 2, steps=(1, 3)) == (0, 4)


def test_unit_directions_have_norm_one_and_depend_on_the_seed():
    d = wk.unit_directions((5, 1, 3, 3), seed=2)
    assert torch.allclose(d.flatten(1).norm(dim=1), torch.ones(5))
    assert torch.equal(d, wk.unit_directions((5, 1, 3, 3), seed=2))
    assert not torch.equal(d, wk.unit_directions((5, 1, 3, 3), seed=3))


def test_tiny_softplus_cnn_shape_and_bad_side():
    torch.manual_seed(0)
    assert wk.tiny_softplus_cnn(8, 3.0)(torch.zeros(2, 1, 8, 8)).shape == (2, 10)
    with pytest.raises(ValueError):
        wk.tiny_softplus_cnn(10, 3.0)


def test_maxpool_jumps_counts_ties_and_jumps():
    gap = torch.tensor([[[[0.0, 0.5]]], [[[0.005, 1.0]]]])          # (N=2, C=1, 1, 2)
    cnn = torch.tensor([[3.0, 1.0], [1.0, 2.5]])
    smooth = torch.tensor([[1.0, 1.0], [2.5, 1.0]])
    out = wk.maxpool_jumps(gap, cnn, smooth, i_small=0, i_mid=1)
    assert out == {"tied_windows": 25.0, "tied_images": 1, "near": 50.0, "jumps_small": 1,
                   "jumps_mid": 1, "jumps_smooth": 1}


def test_residual_at_and_b1_cells():
    lin = pd.DataFrame({"model": ["a", "a"], "attribution": ["SM", "SM"], "||delta||": [0.1, 0.2],
                        "median eta/||dg||": [0.3, 0.4]})
    assert float(wk.residual_at(lin, 0.2)[("a", "SM")]) == 0.4
    eta = {(m, a, 0.1): np.full(8, 0.01) for m in ("soft", "relu net") for a in ("SM", "IG")}
    g_mean = {(m, a): 1.0 for m in ("soft", "relu net") for a in ("SM", "IG")}
    cells = wk.b1_cells(eta, g_mean, ["soft", "relu net"], 0.1, 0.1)
    assert len(cells) == 2                                          # the ReLU control is left out


def test_along_text_says_where_the_change_passes_the_bound():
    text = wk.along_text([1e-3, 1e-1], [1e-3, 0.5], xi=1.0, T_e=0.1, eps=0.1)
    assert "1.0000 times" in text and "already at $r = 0.1$" in text
    assert "stays within $T_e$" in wk.along_text([1e-3, 1e-1], [1e-3, 0.05], 1.0, 0.1, 0.1)


def test_dense_refusal_is_none_when_the_dense_path_runs():
    assert wk.dense_refusal(tiny_net().float(), tiny_images().float()) is None


# --------------------------------------------------------------------------- exact_checks
def test_exact_checks_find_no_violation():
    t1 = wk.thm1_linear_check(np.random.default_rng(0), 4)
    assert t1["violations"] == 0 and t1["eq_violations"] == 0 and t1["eq_err"] < 1e-6
    lp = wk.lemma1_cor1_check(np.random.default_rng(0), 4)
    assert lp["lemma1"] == 0 and lp["cor1"] == 0 and lp["worst_gap"] < 1e-9
    c2 = wk.cor2_check(np.random.default_rng(0), 3, n_shift=10)
    assert c2["violations"] == 0 and c2["att_err"] < 1e-6 and c2["q"].shape == c2["angle"].shape == (30,)


def test_thm2_vertex_study_attainment_matches_the_sign_condition():
    t = wk.thm2_vertex_study(np.random.default_rng(0), 9, max_dim=5, n_cube=20)
    assert len(t) == 9 and not t.above_bound.any() and not t.cube_above_vertex.any()
    assert (t.attained == t.sign_ok).all()
    assert t[t["rank"] == 1].attained.all()


def test_lp_norm_values_and_errors():
    v = np.array([[3.0, -4.0]])
    assert np.allclose(wk.lp_norm(v, 2), 5.0) and np.allclose(wk.lp_norm(v, np.inf), 4.0)
    assert np.allclose(wk.lp_norm(v, 0.5), (3 ** 0.5 + 2) ** 2)
    with pytest.raises(ValueError):
        wk.lp_norm(v, 0)


def test_eq39_counterexample_breaks_the_estimate():
    ce = wk.eq39_counterexample()
    assert ce["xi"] == pytest.approx(2.0) and ce["c"] == pytest.approx(1.0)
    assert ce["T_prime"] == pytest.approx(2.0) and ce["dev"] == pytest.approx(3.0)
    assert wk.curved_saliency(torch.tensor([[1.0, 1.0]])).tolist() == [[2.0, 3.0]]


# --------------------------------------------------------------------------- model_checks
@pytest.fixture(scope="module")
def tiny_case():
    model, x = tiny_net(), tiny_images()
    y = model(x).argmax(1)
    fns = wk.attribution_maps(model, y, ig_steps=4)
    table, spec = wk.spectral_norms(fns, x, max_iter=20)
    return model, x, y, fns, table, spec


def test_spectral_norms_agree_with_the_dense_path(tiny_case):
    _, _, _, fns, table, spec = tiny_case
    assert list(fns) == ["SM", "Input*gradient", "IG"] and set(spec) == set(fns)
    assert set(table.method) == {"lanczos", "power"}
    assert (table[table.method == "lanczos"]["max rel. diff. to dense"] < 1e-6).all()


def test_thm1_thm3_and_pooled_on_a_tiny_network(tiny_case):
    _, x, _, fns, _, spec = tiny_case
    thm1 = {n: wk.thm1_on_model(fn, x, spec[n], 1e-3, 3, seed=0, n_random=2) for n, fn in fns.items()}
    assert thm1["SM"]["rand"].shape == (2, len(x))
    assert torch.all(thm1["SM"]["vdir"] <= 1 + 1e-3)               # along v_max the map is ~linear
    summary = wk.thm1_summary(thm1)
    assert list(summary.index) == list(fns) and (summary["random: % > T_e"] == 0).all()
    assert wk.pooled(thm1, "att").shape == (3 * len(x),)
    row, ratio = wk.thm3_on_model(fns["SM"], x, spec["SM"], 1e-3, 0, thm1["SM"], n_delta=2)
    assert row["Thm 3 violations (exact c)"] == 0 and ratio.shape == (len(x),)


def test_thm2_prop1_and_section_e_on_a_tiny_network(tiny_case):
    model, x, y, fns, _, spec = tiny_case
    row, ratio, lin = wk.thm2_on_model(fns["SM"], x, spec["SM"], 1e-3, 3)
    assert ratio.shape == lin.shape == (len(x),) and row["mean T_e (Thm 2)"] > 0
    table = wk.prop1_table(model, x, y, (1e-4,), seed=0, steps=4)
    assert table.loc[1e-4, "agreement (%)"] == 100.0
    sec_e, bad, _, n = wk.section_e(fns, spec, x, omegas=(0.05,))
    assert bad == 0 and n == 3 * len(x) and len(sec_e) == 3


def test_relative_residuals_and_text(tiny_case):
    model, x, y, *_ = tiny_case
    resid = wk.relative_residuals({"mlp": model}, x, y, (1e-3, 1e-2), seed=0)
    assert resid.shape == (1, 2) and (resid.values < 0.5).all()
    assert wk.residual_text(resid).startswith("Median relative residual in this run: mlp: ")


# --------------------------------------------------------------------------- table_runs
def fake_run(dev, te, linearity=0.0):
    """A run as :meth:`Attacks.run` returns it: paper deviations ``dev``, the direct attack's twice
    those, bound ``te`` (``T′_e`` 1.5 times it), angles 5° / 20° against ``T_c`` = 10°."""
    dev = torch.as_tensor(dev, dtype=torch.float64)
    n = len(dev)
    te = torch.full((n,), float(te), dtype=torch.float64)
    return {"dev_paper": dev, "dev_direct": 2 * dev, "T_e": te, "T_prime_e": 1.5 * te,
            "T_c_deg": torch.full((n,), 10.0, dtype=torch.float64),
            "angle_paper": torch.full((n,), 5.0, dtype=torch.float64),
            "angle_direct": torch.full((n,), 20.0, dtype=torch.float64),
            "linearity": torch.full((n,), linearity, dtype=torch.float64),
            "linearity_paper": torch.zeros(n, dtype=torch.float64),
            "linearity_direct": torch.zeros(n, dtype=torch.float64),
            "dev_random": torch.full((n,), 1e-3, dtype=torch.float64), "image": np.arange(n)}


def test_crossings_tables():
    runs = {("at", "l2"): fake_run([0.5, 1.2], 1.0), ("ce", "linf"): fake_run([0.5, 0.5], 1.0)}
    t = wk.crossings_t910(runs)
    assert list(t.columns[:3]) == ["norm", "model", "attack"] and len(t) == 4
    paper_at = t[(t.model == "AT") & (t.attack == "paper")].iloc[0]
    assert paper_at["> T_e (%)"] == 50.0 and paper_at["max dev / T_e"] == pytest.approx(1.2)
    t6 = wk.crossings_t6({("at", "ig", "l2"): fake_run([0.5], 1.0)})
    assert set(t6.attribution) == {"IG"}
    t78 = wk.crossings_t78({("MNIST", "at", "l2", 0.1): fake_run([0.5], 1.0, linearity=0.05)})
    assert t78.filter(like="locally linear").iloc[0, 0] == 100.0


def test_table_frames():
    runs = {("at", "l2"): fake_run([0.5, 1.5], 1.0), ("at", "linf"): fake_run([0.5], 1.0)}
    t = wk.table910_frame(runs, 0.1, 8 / 255)
    assert set(t[t.norm == "linf"].eps) == {"8/255"}
    assert "T_prime_e" not in set(t[t.norm == "linf"].quantity)
    assert float(t[(t.norm == "l2") & (t.quantity == "pct_outside_T_e")].value.iloc[0]) == 50.0
    t6 = wk.table6_frame({("at", "sm", "linf"): fake_run([0.5], 1.0)})
    assert set(t6.quantity) == {"T_hat_e", "T_e", "T_hat_c_deg", "T_c_deg"}


def test_n_images_and_judged_bounds():
    runs = [fake_run([0.5, 0.5], 1.0), fake_run([0.5, 0.5], 1.0)]
    assert wk.n_images(runs) == {"n": 2, "unit": "distinct images (4 cases)"}
    v = wk.judged_bounds(runs, "paper", ("T_e",), "±ε v_max", 0.5, "cases", None)
    assert v.verdict in {"holds", "inconclusive"}


def test_table_claims_are_judged_on_every_case_whatever_the_local_linearity():
    """The tables' claims are the paper's empirical ones, over every attacked image: cases far
    from local linearity are judged (both ways), not withheld, and the rule says how many met it."""
    def runs(dev, linearity):
        return [fake_run(dev, 1.0, linearity) for _ in range(1)]

    n = 400
    bent = runs([0.5] * n, 0.9)                        # no case locally linear, every one within
    v = wk.judged_bounds(bent, "paper", ("T_e",), "±ε sign(v_max)", 0.94, "cases", None)
    assert v.verdict == "holds"
    assert "met by 0 of 400 cases" in v.rule and "every case judged" in v.rule
    out = runs([1.5] * n, 0.9)                         # every case above T_e
    assert wk.judged_bounds(out, "paper", ("T_e",), "±ε sign(v_max)", 0.94, "cases",
                            None).verdict == "does not hold"
    assert wk.judged_bounds(runs([0.5] * n, 0.0), "paper", ("T_e",), "±ε v_max", 0.94, "cases",
                            None).verdict == "holds"
    broken = wk.judged_bounds(bent, "paper", ("T_e",), "±ε v_max", 0.94, "cases", "max-pooling")
    assert broken.verdict == "not comparable"          # the architecture's hypothesis still guards
    # the theorems' own guard (theory_bounds) stays: outside the hypothesis, not comparable
    from robattr.chapters.wangkong2023 import tables as T
    r = bent[0]
    assert T.linear_share(r["dev_paper"] <= r["T_e"], r["linearity"], r["image"],
                          at_least=0.94).verdict == "not comparable"


def test_images_helpers():
    model = tiny_net().float()
    xs = tiny_images(6).float()
    ys = model(xs).argmax(1)
    ys[1] = (ys[1] + 1) % 3                                          # one wrong label
    x, y, ids = wk.first_correct(model, 3, xs, ys, "cpu")
    assert ids.tolist() == [0, 2, 3] and torch.equal(y, ys[[0, 2, 3]])
    assert wk.common_correct({"a": model, "b": model}, xs, ys, 10, "cpu").tolist() == [0, 2, 3, 4, 5]
    with pytest.raises(ValueError):
        wk.objective_term("ce", None, xs, ys)


def test_at_vs_ce_table():
    runs = {("at", nm): {"T_e": torch.full((4,), 1.0), "T_c_deg": torch.full((4,), 5.0)}
            for nm in ("l2", "linf")}
    runs.update({("ce", nm): {"T_e": torch.full((4,), 2.0), "T_c_deg": torch.full((4,), 9.0)}
                 for nm in ("l2", "linf")})
    spread = {(nm, q): 0.01 for nm in ("l2", "linf") for q in ("T_e", "T_c_deg")}
    paper = pd.Series({(nm, m, q): (1.0 if m == "AT" else 2.0) for nm in ("l2", "linf")
                       for m in ("AT", "CE") for q in ("T_e", "T_c_deg")})
    cells, table = wk.at_vs_ce(runs, spread, 3, paper)
    assert len(cells) == 4 and (table["images with AT < CE (%)"] == 100.0).all()
    assert table["paper AT < CE"].all()


# --------------------------------------------------------------------------- figures
def test_figures_draw():
    import matplotlib.pyplot as plt

    steps = pd.DataFrame({"rule": ["right", "midpoint"], "m": [1, 1], "off-diagonal share": [0.3, 0.4],
                          "Hessian weight": [1.0, 0.5]})
    wk.plot_steps_study(steps, 0.4, 8, "mlp")
    wk.plot_linearization_ratios({"a": torch.ones(2, 3)}, np.array([1e-3, 1e-2, 1e-1]))
    wk.plot_paired_bounds({(m, nm): {"T_e": torch.rand(4)} for m in ("at", "ce")
                           for nm in ("l2", "linf")})
    thm1 = {"SM": {"lin": torch.tensor([0.01, 0.2]), "att": torch.tensor([1.0, 1.3])}}
    wk.plot_remainder_vs_crossing(thm1, 0.1)
    plt.close("all")

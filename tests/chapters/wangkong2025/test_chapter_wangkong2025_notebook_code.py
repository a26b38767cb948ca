"""The wangkong2025 notebooks' code that moved into the chapter package (issue 40): the
synthetic checks of the theory and Monte-Carlo notebooks, the bookkeeping of the certified
budgets and radii, the tables' columns, and the small steps on a tiny network."""
from __future__ import annotations

import matplotlib

matplotlib.use("Agg")

import numpy as np  # noqa: E402
import pandas as pd  # noqa: E402
import pytest  # noqa: E402
import torch  # noqa: E402
from torch import nn  # noqa: E402

from robattr.bounds import (ball_smoothing_max_eps, ball_volume_ratio,  # noqa: E402
                            generalized_chi2_ppf)
from robattr.chapters import wangkong2025 as wk  # noqa: E402


def tiny_net(seed: int = 0) -> nn.Module:
    torch.manual_seed(seed)
    return nn.Sequential(nn.Flatten(), nn.Linear(4, 6), nn.Softplus(3.0), nn.Linear(6, 3)).eval()


def tiny_images(n: int = 3, seed: int = 1) -> torch.Tensor:
    return torch.rand((n, 1, 2, 2), generator=torch.Generator().manual_seed(seed))


# --------------------------------------------------------------------------- reports
def test_reference_columns_and_their_caption_note():
    cols = ["ours (digits)", "medium ref (digits, abc123)", "paper (MNIST)", "note"]
    refs = wk.reference_columns(cols)
    assert refs == {"medium ref (digits, abc123)": "medium ref"}
    assert wk.kept_runs_note(refs) == "; medium ref: a kept run of the medium profile (digits; abc123)"
    assert wk.kept_runs_note({}) == ""


# --------------------------------------------------------------------------- theory
def test_cosine_of_vectors():
    assert wk.cosine(np.array([1.0, 0.0]), np.array([2.0, 0.0])) == pytest.approx(1.0)
    assert wk.cosine(np.array([1.0, 0.0]), np.array([0.0, 3.0])) == pytest.approx(0.0)
    assert wk.cosine(np.array([1.0, 1.0]), np.array([-1.0, -1.0])) == pytest.approx(-1.0)


def test_random_field_shifts_stay_below_the_crescent_bound_and_follow_the_generator():
    d, r, eps, M = 2, 1.0, 0.3, 1.0
    a = wk.random_field_shifts(M, d, r, eps, n_fields=3, n_mc=4000, rng=np.random.default_rng(0))
    b = wk.random_field_shifts(M, d, r, eps, n_fields=3, n_mc=4000, rng=np.random.default_rng(0))
    assert a.shape == (3,) and np.array_equal(a, b)
    assert np.all(a >= 0)
    assert np.all(a / (M * ball_volume_ratio(d, r, eps)) < 1 + 6 * 2 / np.sqrt(4000) / 0.3)


def test_volume_ratio_check_matches_the_closed_form():
    rows = wk.volume_ratio_check((1, 3), (0.5, 1.0), 1.0, 20000, np.random.default_rng(0))
    assert [(d, rho) for d, rho, *_ in rows] == [(1, 0.5), (1, 1.0), (3, 0.5), (3, 1.0)]
    for d, rho, exact, est, se, z in rows:
        assert exact == pytest.approx(ball_volume_ratio(d, 1.0, rho))
        assert se > 0 and abs(z) < 5
    # in 1-d the ratio is eps / r exactly
    assert rows[0][2] == pytest.approx(0.5)


def test_bounded_search_finds_the_corrected_minimum():
    c = np.array([1.0, 0.5, 0.2])
    a = np.array([0.5, 0.1, 0.19])
    got = wk.bounded_search_min_cosine(c, a)
    assert np.allclose(got, np.sqrt(1 - a**2 / c**2), atol=1e-8)
    assert len(wk.bounded_search_min_cosine(np.array([]), np.array([]))) == 0


def test_corollary_round_trip_is_exact_and_the_tables_print(capsys):
    errs = wk.corollary_round_trip_errors(0.5, 1.0, 784, [0.5, 3.5])
    assert errs.shape == (2 * 2 * 2 + 2 * 2 * 2,)
    assert errs.max() < 1e-9
    wk.print_corollary_table(0.5, 1.0, (64,), [1.0])
    wk.print_dimension_table(0.5, 1.0, 1.0, 0.3, dims=(2, 784))
    out = capsys.readouterr().out
    assert "eps_max, d = 64" in out and "r_min(eps = 1.0, T = 0.8)" in out
    assert "eps/r = 0.300" in out and out.count("\n") == (1 + 1 + 1 + 4) + (1 + 1 + 2)


def test_antiparallel_crescent_field_reaches_minus_one():
    ex = wk.antiparallel_crescent_field(0.1, 1.0, 2, 1.0)
    assert ex["a"] == pytest.approx((0.1 + 1.0) / 2)
    assert np.linalg.norm(ex["w"]) <= 1.0
    assert wk.cosine(ex["h_x"], ex["h_xt"]) == pytest.approx(-1.0)
    assert np.linalg.norm(ex["h_x"]) == pytest.approx(0.1)
    with pytest.raises(ValueError):
        wk.antiparallel_crescent_field(1.5, 1.0, 2, 1.0)


# --------------------------------------------------------------------------- montecarlo
def test_imhof_agrees_with_the_closed_forms():
    rows = wk.imhof_closed_form_errors(np.array([0.5, 2.0, 8.0]), dofs=(1, 4))
    assert [k for k, *_ in rows] == [1, 4]
    assert max(max(a, b) for _, a, b in rows) < 1e-6


def test_norm_laws_diagonal_and_full_agree_for_a_diagonal_covariance():
    h, cov = np.array([0.5, -0.2, 0.1]), np.diag([0.04, 0.01, 0.09])
    laws = wk.norm_laws(h, cov, 100)
    (wd, ld), (wf, lf) = laws["diagonal"], laws["full"]
    assert np.allclose(wd, [4e-4, 1e-4, 9e-4]) and np.allclose(ld, 100 * h**2 / np.diag(cov))
    order_d, order_f = np.argsort(wd), np.argsort(wf)
    assert np.allclose(wd[order_d], wf[order_f]) and np.allclose(ld[order_d], lf[order_f])
    with pytest.raises(ValueError):
        wk.norm_laws(h, cov, 0)


def test_runs_inside_interval_counts_the_central_interval():
    laws = {"one": (np.array([1.0]), np.array([0.0]))}       # chi2_1
    lo, hi = generalized_chi2_ppf([0.05, 0.95], laws["one"][0], noncentrality=laws["one"][1])
    values = np.array([lo / 2, (lo + hi) / 2, hi * 2, lo * 1.01])
    assert wk.runs_inside_interval(values, laws, 0.1) == {"one": 2}


def test_spread_and_bootstrap_ratio():
    rng = np.random.default_rng(0)

    def g(z):
        return z

    def draw(n):
        return rng.standard_normal((n, 3))

    small = wk.spread_around_mean(g, draw, 10, 400)
    large = wk.spread_around_mean(g, draw, 40, 400)
    assert small.shape == (400,)
    assert small.mean() == pytest.approx(3 / 10, rel=0.2)      # tr(Sigma) / N
    ratio, lo, hi = wk.bootstrap_rms_ratio(small, large, seed=1, n_boot=200)
    assert lo <= ratio <= hi and ratio == pytest.approx(2.0, rel=0.15)
    assert wk.bootstrap_rms_ratio(small, small, seed=0, n_boot=10)[0] == pytest.approx(1.0)
    with pytest.raises(ValueError):
        wk.spread_around_mean(g, draw, 10, 1)


# --------------------------------------------------------------------------- certified
def test_ratio_inequality_holds_on_random_d_and_q():
    lam = float(wk.k_T(0.8, False) / wk.k_T(0.9, False))
    assert wk.ratio_inequality_failures(lam, seed=0, n=300) == 0
    with pytest.raises(ValueError):
        wk.ratio_inequality_failures(0.0, seed=0)


def test_paper_tables_and_their_threshold_ratios():
    paper = wk.paper_budget_tables()
    assert set(paper["dataset"]) <= set(wk.PAPER_DIMS)
    assert (paper["d"] == paper["dataset"].map(wk.PAPER_DIMS)).all()
    wide = wk.threshold_ratios(paper)
    assert np.allclose(wide["ratio 0.8/0.9"], wide["0.8"] / wide["0.9"], equal_nan=True)


def synthetic_stats() -> pd.DataFrame:
    rows = [dict(model=m, r=r, sample=i, c=0.2 + 0.1 * i, M=1.0, M_inf=0.5, c_unit=0.3)
            for m in ("Standard", "IGR") for r in (0.5, 1.0, 2.0) for i in range(2)]
    return pd.DataFrame(rows)


def test_budgets_by_M_and_their_means():
    stats_df = synthetic_stats()
    eps_df = wk.budgets_by_M(stats_df, [0.9, 0.8], 64)
    assert len(eps_df) == len(stats_df) * 2 * 2 * 2
    row = eps_df[(eps_df["T"] == "0.9") & (eps_df.form == "corrected") & (eps_df.r == 1.0)
                 & (eps_df.M_kind == "empirical M") & (eps_df["sample"] == 1)].iloc[0]
    assert row.eps_max == pytest.approx(ball_smoothing_max_eps(0.3, 1.0, 64, 1.0, 0.9))
    mean_eps = wk.mean_budgets_by_kind(eps_df)
    assert set(mean_eps["r"]) == {"0.5", "1.0", "2.0"}
    assert len(mean_eps) == 2 * 2 * 2 * 2 * 3
    curves = wk.budget_curves(mean_eps, wk.paper_budget_tables(), [0.9], "MNIST")
    assert set(curves.form) >= {"corrected", "printed", "paper (MNIST)"}
    assert set(curves.model) <= set(wk.MODEL_LABELS.values())


def test_growth_gaps_one_verdict_per_model_and_step():
    stats_df = synthetic_stats()
    eps_df = wk.budgets_by_M(stats_df, [0.9], 64)
    cor = eps_df[(eps_df.M_kind == "empirical M") & (eps_df.form == "corrected")]
    assert len(wk.growth_gaps(cor, [0.5, 1.0, 2.0])) == 2 * 2
    assert wk.growth_gaps(cor, [1.0]) == []


# --------------------------------------------------------------------------- radii
def test_min_radii_fixed_and_self_consistent():
    stats_df = synthetic_stats()
    eps_df = wk.budgets_by_M(stats_df, [0.9], 64)
    rmin, per_input = wk.min_radii(eps_df, stats_df, r_grid=[0.5, 1.0, 2.0], r_fixed=2.0,
                                   eps_rmin=[0.01, 100.0], d=64)
    assert len(rmin) == 2 * 2 * 2 and len(per_input) == 2 * 2 * 2 * 2
    far = rmin[rmin.eps == "100.0"]
    assert np.isinf(far.self_consistent).all() and (far.n_beyond_grid == 2).all()
    near = per_input[per_input.eps == 0.01]
    assert ((near.r_sc >= 0) & (near.r_sc <= 2.0)).all()
    n_bad, n_cmp = wk.radius_trend_violations(per_input)
    assert n_bad == 0 and n_cmp == 2 * 2 * 1    # (model, sample) pairs; both-inf pairs left out


def test_radius_trend_violation_is_counted():
    per_input = pd.DataFrame([dict(T="0.9", form="corrected", model="m", eps=e, sample=0, r_sc=v)
                              for e, v in ((0.5, 2.0), (1.0, 1.0))])
    assert wk.radius_trend_violations(per_input) == (1, 1)


def test_the_certificate_against_d():
    dims = [2, 784, 150528]
    vac = wk.vacuity_table(dims)
    assert len(vac) == 9 and {"d=2", "d=784", "d=150528"} <= set(vac.columns)
    by_d = wk.budget_vs_dimension(dims, T=0.9, h_over_M=0.5)
    exact, approx = by_d.iloc[:, 1].to_numpy(), by_d["large-d approximation"].to_numpy()
    assert exact[1] == pytest.approx(ball_smoothing_max_eps(0.5, 1.0, 784, 1.0, 0.9))
    assert approx[-1] == pytest.approx(exact[-1], rel=1e-3)


def test_data_name():
    assert wk.data_name({"dataset": "digits"}) == "digits"
    assert wk.data_name({"dataset": "/data/imagenet/val/"}) == "val"


# --------------------------------------------------------------------------- attack, center
def test_table8_summary_per_model_and_radius():
    att = pd.DataFrame(dict(model=["A", "A", "B"], r=["0.5", "0.5", "0.5"], eps=[0.1, 0.1, 0.2],
                            cos=[0.9, 0.7, 0.95], topk=[1.0, 0.5, 0.75],
                            below_T=[False, True, False], below_T_beyond_mc=[False, True, False]))
    s = wk.table8_summary(att).set_index("model")
    assert s.loc["A", "cos_min"] == 0.7 and s.loc["A", "cos_mean"] == pytest.approx(0.8)
    assert s.loc["A", "n_below_T"] == 1 and s.loc["B", "n_below_beyond_mc"] == 0


def test_saliency_maps_and_their_unit_version():
    model, x = tiny_net(), tiny_images()
    label = torch.tensor([1])
    sm = wk.saliency_map(model, x, label)
    assert sm.shape == x.shape
    xr = x.clone().requires_grad_(True)
    model(xr)[:, 1].sum().backward()                 # the class-1 logit's gradient, input by input
    assert torch.allclose(sm, xr.grad, atol=1e-6)
    unit = wk.unit_saliency(model, label)(x)
    assert torch.allclose(unit.flatten(1).norm(dim=1), torch.ones(len(x)), atol=1e-6)


def test_map_agreement_of_identical_and_opposite_maps():
    m = torch.randn(2, 1, 3, 3, generator=torch.Generator().manual_seed(0))
    table = wk.map_agreement({"IG": m, "same": m.clone(), "negated": -m}, 3)
    assert list(table.pair) == ["IG vs same", "IG vs negated"]
    assert table.cosine.tolist() == pytest.approx([1.0, -1.0])
    assert table["Kendall tau_b"].tolist() == pytest.approx([1.0, -1.0])


def test_test_inputs_are_a_seeded_permutation():
    x, y = wk.test_inputs("digits", 3, seed=0)
    x2, y2 = wk.test_inputs("digits", 3, seed=0)
    assert x.shape == (3, 1, 8, 8) and torch.equal(x, x2) and torch.equal(y, y2)
    with pytest.raises(ValueError):
        wk.test_inputs("digits", 0, seed=0)

"""The joo2023 chapter's functions that its notebooks call (issue 40: the notebooks' code
moved into robattr.chapters.joo2023). Small models and synthetic tables: seconds."""
from __future__ import annotations

import math

import numpy as np
import pandas as pd
import pytest
import torch
from torch import nn

from robattr.chapters import joo2023
from robattr.chapters.joo2023 import cost, models, specs, table1, theory, toy

PARAMS = dict(beta=3.0, epochs=2, lr=1e-3, batch_size=64, optimizer="adam", weight_decay=0.0,
              milestones=[], lam=0.1, lam_cos=1.0, train_eps=4 / 255, hessian_lam=1e-3,
              reg_units="normalized")


# --------------------------------------------------------------------------- models
def test_model_names():
    assert models.arch_name("cnn") == "CNN"
    assert models.arch_name("resnet18_cifar") == "resnet18_cifar"
    assert models.model_name("lenet", 3.0) == "LeNet with Softplus(3)"
    assert models.model_name("mlp", 0.5) == "MLP with Softplus(0.5)"


def test_train_options_from_the_parameters():
    opts = specs.train_options(PARAMS)
    assert opts == dict(activation="softplus", beta=3.0, epochs=2, lr=1e-3, batch_size=64,
                        optimizer="adam", weight_decay=0.0, milestones=[])
    relu = specs.train_options(PARAMS, softplus=False)
    assert "activation" not in relu and "beta" not in relu and relu["epochs"] == 2
    with pytest.raises(KeyError, match="lr"):
        specs.train_options({k: v for k, v in PARAMS.items() if k != "lr"})


def test_regularizers_in_the_tables_order():
    regs = specs.regularizers(lam=0.1, lam_cos=1.0, train_eps=4 / 255, hessian_lam=1e-3)
    assert list(regs) == ["CE only", "Hessian", "l2", "l2+Cosd"]
    assert regs["Hessian"][1]["lam"] == 1e-3
    assert regs["l2+Cosd"] == ("l2_cosd", dict(lam=0.1, lam_cos=1.0, eps=4 / 255,
                                               units="normalized"))


def test_block_and_seed_models_pick_a_notebooks_models_by_label():
    zoo_models = {"l2": "a", "CE only": "b", "ATEX": "c", "lenet CE only": "d",
                  "CE only, seed 1": "e", "CE only, seed 2": "f"}
    assert models.block(zoo_models) == {"CE only": "b", "ATEX": "c", "l2": "a"}   # row order
    assert models.block(zoo_models, prefix="lenet ") == {"CE only": "d"}
    assert models.seed_models(zoo_models, "CE only", 3) == ["b", "e", "f"]
    with pytest.raises(KeyError):
        models.seed_models(zoo_models, "l2", 2)


# --------------------------------------------------------------------------- table1
def _Linear() -> nn.Sequential:
    """A small Softplus MLP on 1 x 8 x 8 images, 3 classes, with a zoo record (test accuracy
    50 %), for the cell functions."""
    torch.manual_seed(0)
    net = nn.Sequential(nn.Flatten(), nn.Linear(64, 16), nn.Softplus(beta=3.0), nn.Linear(16, 3))
    net.zoo_meta = {"test_acc": 0.5}
    return net


@pytest.fixture(scope="module")
def images():
    g = torch.Generator().manual_seed(1)
    X = torch.rand(3, 1, 8, 8, generator=g)
    Y = torch.tensor([0, 1, 2])
    return X, Y


def _settings(X, **kw):
    from robattr.attacks import frame_target

    params = dict(rps_eps=16 / 255, rps_samples=2, seed=0, attack_eps=4 / 255,
                  attack_gamma=0.5, attack_steps=1, protocol="robattr", **kw)
    return table1.cell_settings(params, frame_target(tuple(X.shape[-2:]), 1))


def test_cell_settings(images):
    from robattr.metrics import PROTOCOLS

    X, _ = images
    s = _settings(X)
    assert s["clamp"] == PROTOCOLS["robattr"]["rps_clamp"] and s["attack_steps"] == 1
    assert s["target_map"].shape == (8, 8)
    with pytest.raises(ValueError, match="unknown protocol"):
        table1.cell_settings({**s, "protocol": "nope"}, s["target_map"])


def test_evaluate_and_the_single_cells_agree(images):
    X, Y = images
    m, s = _Linear().eval(), _settings(X)
    rows, per_img, curves, adv_x = table1.evaluate({"CE only": m}, X, Y, s)
    assert len(rows) == 3 * len(table1.METHODS)
    assert per_img["CE only", "Grad", "RPS"].shape == (3,)
    assert np.all(per_img["CE only", "Grad", "RPS"] <= 1 + 1e-6)
    assert adv_x["CE only", "Grad", 4 / 255].shape == X.shape
    assert (adv_x["CE only", "Grad", 4 / 255] - X).abs().max() <= 4 / 255 + 1e-6
    rps_row = [r for r in rows if r["attribution"] == "Grad" and r["metric"] == "RPS"][0]
    assert math.isclose(rps_row["value"], per_img["CE only", "Grad", "RPS"].mean(), rel_tol=1e-6)
    # the same noise draws: the exercise's, the broken-maps' and the table's Grad RPS agree
    again = table1.rps_at({"CE only": m}, ["CE only"], X, Y, 16 / 255, s)["CE only"]
    np.testing.assert_allclose(again, per_img["CE only", "Grad", "RPS"])
    brk, brk_img = table1.broken_maps({"CE only": m}, X, Y, s)
    np.testing.assert_allclose(brk_img["CE only"][0], per_img["CE only", "Grad", "RPS"])
    np.testing.assert_allclose(brk_img["CE only"][1], per_img["CE only", "Grad", "Ins"])
    assert brk.loc["CE only", "accuracy"] == 50.0
    attacked, random = table1.attack_change(m, X, Y, adv_x["CE only", "Grad", 4 / 255], s)
    assert attacked.shape == random.shape == (3,)
    # Table 4 reuses an attack already run and runs the missing budgets
    rows4 = table1.table4_rows({"CE only": m}, ["Grad"], [4 / 255, 2 / 255], adv_x, X, Y, s)
    assert [r["eps"] for r in rows4] == ["4", "2"] and ("CE only", "Grad", 2 / 255) in adv_x
    a_ins = [r for r in rows if r["attribution"] == "Grad" and r["metric"] == "A-Ins"][0]
    assert math.isclose(rows4[0]["value"], a_ins["value"], rel_tol=1e-6)


def test_accuracy_rows_print_and_record():
    printed = []
    rows = table1.accuracy_rows({"CE only": _Linear()}, log=printed.append, prefix="cnn ")
    assert rows == [dict(regularizer="CE only", attribution="", metric="accuracy", value=50.0)]
    assert printed == ["cnn CE only  test accuracy 50.0 %"]


def _compared():
    return pd.DataFrame([
        dict(regularizer="l2", attribution="Grad", metric="RPS", ours=0.91234, paper=0.95),
        dict(regularizer="CE only", attribution="Grad", metric="RPS", ours=0.8, paper=0.9),
        dict(regularizer="CE only", attribution="Grad", metric="Ins", ours=12.34, paper=np.nan),
        dict(regularizer="CE only", attribution="", metric="accuracy", ours=65.04, paper=70.0)])


def test_metric_table_is_ours_beside_the_paper_in_row_order():
    wide = table1.metric_table(_compared(), "Grad", list(models.REGULARIZERS))
    assert list(wide.columns) == ["RPS · ours", "RPS · paper", "Ins · ours", "Ins · paper"]
    assert list(wide.index) == list(models.REGULARIZERS)
    assert wide.loc["l2", "RPS · ours"] == 0.912 and wide.loc["CE only", "Ins · ours"] == 12.3
    assert wide.loc["ATEX"].isna().all()
    acc = table1.metric_table(_compared(), "", ["CE only"], numeric=True)
    assert list(acc.columns) == ["accuracy · ours", "accuracy · paper"]
    assert acc.loc["CE only", "accuracy · ours"] == 65.0


def test_gap_reasons():
    from robattr.report import viz

    wide = pd.DataFrame({"RPS · ours": [1.0, np.nan, np.nan], "RPS · paper": [np.nan, 1.0, 2.0]},
                        index=["CE only", "l2", "ATEX"])
    not_run = {"ATEX": viz.NOT_RUN}
    assert table1.gap_reasons(wide, not_run) == {"ATEX": viz.NOT_RUN, "RPS · ours": viz.NOT_RUN,
                                                 "RPS · paper": viz.NOT_IN_PAPER}
    only_not_run = wide.copy()
    only_not_run.loc["l2", "RPS · ours"] = 2.0
    only_not_run.loc["CE only", "RPS · paper"] = 3.0
    only_not_run.loc["ATEX", "RPS · paper"] = np.nan
    assert table1.gap_reasons(only_not_run, not_run) == not_run
    assert table1.gap_reasons(only_not_run, not_run, paper_anywhere=True) == {
        **not_run, "RPS · paper": viz.NOT_IN_PAPER}


def test_cell_value_and_paper_values():
    cmp = _compared()
    ours = cmp.rename(columns={"ours": "value"})
    assert table1.cell_value(ours, "CE only", "", "accuracy") == 65.04
    with pytest.raises(IndexError):
        table1.cell_value(ours, "IGA", "", "accuracy")
    assert table1.paper_values(cmp, ["CE only", "l2"], "Grad", "RPS") == "l2 0.95, CE only 0.9"
    assert table1.paper_values(cmp, ["CE only"], "Grad", "Ins") == ""


def test_seed_tables():
    t = table1.seed_table({("Grad", "RPS"): [0.9, 0.8, 0.7], ("", "accuracy"): [60, 61, 62]},
                          {("Grad", "RPS"): 0.1, ("", "accuracy"): 1.0})
    assert list(t.index) == ["Grad RPS", "accuracy"]
    assert list(t.columns) == ["seed 0", "seed 1", "seed 2", "spread (sd)"]
    assert t.loc["accuracy", "seed 2"] == 62
    per_seed = {("l2", "Grad", "RPS"): np.array([[1.0, 0.0], [0.5, 0.5]]),
                ("l2", "", "accuracy"): np.array([[100.0, 0.0], [100.0, 100.0]])}
    s = table1.seeded_table(per_seed, 2)
    assert list(s.index) == ["l2 Grad RPS", "l2 accuracy"]
    assert s.loc["l2 accuracy", "seed 1"] == 100.0 and s.loc["l2 Grad RPS", "seed 0"] == 0.5


def test_appendix_rps_columns(images):
    X, Y = images
    app = table1.appendix_rps({"CE only": _Linear().eval()}, X, Y, [16 / 255], _settings(X))
    assert list(app.columns.names) == ["similarity", "eps (/255)"]
    assert {c[0] for c in app.columns} == {"cosine", "PCC", "SSIM"}
    assert list(app.index) == [("Grad", "CE only"), ("xGrad", "CE only")]


# --------------------------------------------------------------------------- cost
META = {"CE only": {"seconds_per_epoch": [1.0, 3.0], "peak_memory_bytes": 2**20},
        "l2+Cosd": {"seconds_per_epoch": 6.0, "peak_memory_bytes": 3 * 2**20}}


def test_cost_rows_and_recorded_ratios():
    assert cost.seconds_per_epoch(META["CE only"]) == 2.0
    assert cost.recorded_time_ratios(META) == {"CE only": 1.0, "l2+Cosd": 3.0}
    rows = cost.cost_rows({"CE only": [0.01, 0.03, 0.02], "l2+Cosd": [0.05, 0.04, 0.07]}, META)
    got = rows.set_index(["regularizer", "resource"])
    assert got.loc[("l2+Cosd", "time"), "value"] == pytest.approx(2.5)
    assert got.loc[("l2+Cosd", "memory"), "value"] == 3.0
    assert got.loc[("CE only", "time"), "absolute"] == "20.0 ms/step"
    assert got.loc[("l2+Cosd", "memory"), "absolute"] == "3.0 MiB"


def test_cost_table_order_and_reasons():
    from robattr.report import viz

    cmp = pd.DataFrame([dict(regularizer=r, resource=res, ours=v, paper=p, absolute="x")
                        for r, p in (("l2+Cosd", 2.0), ("IGA", 9.0), ("CE only", 1.0),
                                     ("extra", np.nan))
                        for res, v in (("time", 1.5), ("memory", 1.2))])
    wide = cost.cost_table(cmp)
    assert list(wide.index) == ["CE only", "IGA", "l2+Cosd", "extra"]
    assert list(wide.columns)[:3] == ["time · ours (absolute)", "time · ours (x CE)",
                                      "time · paper (x CE)"]
    assert cost.cost_reasons(wide) == {"IGA": viz.NOT_BUILT, "time · paper (x CE)": viz.NOT_IN_PAPER,
                                       "memory · paper (x CE)": viz.NOT_IN_PAPER}


def test_grid_leads():
    one = pd.DataFrame([dict(lam=0.1, lam_cos=1.0, grad_RPS=0.9)])
    assert cost.grid_leads(one, {}) == (None, [])
    grid = pd.DataFrame([dict(lam=0.1, lam_cos=1.0, grad_RPS=0.5),
                         dict(lam=1.0, lam_cos=1.0, grad_RPS=0.9)])
    per_image = {(0.1, 1.0): np.linspace(0.4, 0.6, 20), (1.0, 1.0): np.linspace(0.8, 1.0, 20)}
    best, leads = cost.grid_leads(grid, per_image)
    assert best == (1.0, 1.0) and len(leads) == 1 and leads[0].holds


# --------------------------------------------------------------------------- theory
def test_uniform_noise_is_the_notebooks_draw():
    X = torch.zeros(2, 1, 4, 4, dtype=torch.float64)
    d = theory.uniform_noise(X, seed=3)
    u = torch.rand(X.shape, generator=torch.Generator().manual_seed(3), dtype=torch.float64)
    assert torch.equal(d, (2 * u - 1) * 16 / 255)
    assert d.abs().max() <= 16 / 255 and d.dtype == torch.float64


def test_exp_logit_keeps_the_cosine_criterion():
    torch.manual_seed(0)
    net = nn.Sequential(nn.Linear(5, 8), nn.Softplus(beta=2.0), nn.Linear(8, 3)).double()
    x = torch.randn(4, 5, dtype=torch.float64)
    assert torch.allclose(theory.ExpLogit(net)(x), torch.exp(net(x) - 5.0))
    delta = 0.01 * torch.randn(4, 5, dtype=torch.float64)
    cos_change, l2_factor = theory.exp_logit_change({"a": net}, x, delta, torch.zeros(4).long())
    assert cos_change[0] < 1e-9 and l2_factor.shape == (4,) and np.all(l2_factor > 0)
    assert theory.equal_norm_gap(net, x, delta, torch.zeros(4).long()).max() < 1e-12


def test_random_checks_are_drawn_from_the_generator():
    rng = np.random.default_rng(0)
    checks = theory.random_scaling_checks(rng, 3, [0.5, 2.0])
    assert checks and all(c.kind.iloc[0].startswith("random ") for c in checks)
    lemma = pd.concat(checks, ignore_index=True)
    summary = theory.scaling_summary(lemma)
    assert (summary.max_cosd_change < 1e-9).all() and (summary.prediction_changed == 0).all()
    frames = theory.random_homogeneity_checks(np.random.default_rng(0), 2)
    assert len(frames) == 2 and (frames[0].model == "random ReLU MLP").all()
    rand = theory.random_theorem6_cases(np.random.default_rng(0), 2, [0.01, 0.1],
                                        torch.Generator().manual_seed(0), power_iters=2)
    assert set(rand.net) == {0, 1} and set(rand.eps_l2) == {0.01, 0.1}
    by_eps = theory.tally_by_eps(rand)
    assert list(by_eps.index) == [0.01, 0.1] and by_eps.index.name == "eps_l2"
    assert (by_eps.viol_exact == 0).all() and by_eps.cases.sum() == len(rand)


def _cases(flip, cosd, term):
    return pd.DataFrame({"pool_flip": flip, "cosd": cosd, "first_order": term,
                         "example": range(len(cosd)), "eps_l2": 0.1})


def test_pool_switch_split_and_totals():
    t6 = {"l2": _cases([False, False, True], [0.1, 0.5, 0.9], [0.2, 0.4, 0.3]),
          "ReLU CE (outside the hypothesis)": _cases([True], [1.0], [0.0])}
    split = theory.pool_switch_split(t6)
    assert list(split.index) == [("l2", False), ("l2", True)]
    assert split.loc[("l2", False), "failures"] == 1
    assert split.loc[("l2", True), "worst_cosd_over_term"] == pytest.approx(3.0)
    assert theory.switch_total(split, "cases", False) == 2
    no_switch = theory.pool_switch_split({"l2": _cases([False], [0.1], [0.2])})
    assert theory.switch_total(no_switch, "failures", True) == 0


def test_homogeneity_table_and_eps_tables():
    homog = pd.DataFrame({"model": "m", "last": [False, False, True], "form": "printed",
                          "err": [0.0, 1e-3, 1e-12]})
    tab = theory.homogeneity_table(homog)
    assert list(homog.fails) == [False, True, False]
    assert tab.loc[("m", False, "printed"), "failures"] == 1
    assert tab.loc[("m", True, "printed"), "cases"] == 1
    cases = pd.DataFrame({"eps_l2": [0.1, 0.1, 1.0], "pool_flip": [False, True, False],
                          "cosd": [1.0, 3.0, 5.0]})
    means, smooth = theory.eps_means({"l2": cases})
    assert means["l2"].loc[0.1, "cosd"] == 2.0 and smooth["l2"].loc[0.1, "cosd"] == 1.0
    assert means["l2"].loc[1.0, "cosd"] == 5.0


def test_failure_rates_and_smallest_eps():
    rand = pd.DataFrame({"eps_l2": [0.01, 0.01, 0.1, 0.1], "beta": [1.0, 10.0, 1.0, 10.0],
                         "cosd": [0.1, 0.3, np.nan, 0.2], "first_order": [0.2, 0.2, 0.1, 0.1],
                         "grad_norm": [1.0, 0.0, 1.0, 1.0], "grad_norm_pert": 1.0})
    rate = theory.failure_rates(rand)
    assert list(rate.columns) == ["β in (0.5, 2.0]", "β in (5.0, 20.0]"]   # no β in (2, 5]
    assert rate.loc[0.01, "β in (5.0, 20.0]"] == 1.0 and rate.loc[0.01, "β in (0.5, 2.0]"] == 0.0
    assert list(rand.fails) == [False, True, False, True]
    small = theory.smallest_eps_cases(rand, 0.01)
    assert len(small) == 1 and small.cosd.iloc[0] == 0.1


def test_order_agreement_and_slopes():
    eps = [0.01, 0.1, 1.0]
    a = pd.DataFrame({"example": [0, 0, 0, 1, 1, 1], "eps_l2": eps * 2,
                      "first_order": [2, 2, 2, 2, 2, 2], "cosd": [2, 2, 2, 0, 0, 0]})
    b = a.assign(first_order=1, cosd=1)
    agree = theory.order_agreement(a, b)
    assert list(agree) == [1.0, -1.0]
    g = pd.DataFrame({"cosd": [1e-4, 1e-2, 1.0], "first_order": [1e-2, 1e-1, 1.0]},
                     index=pd.Index(eps, name="eps_l2"))
    slopes = theory.bound_slopes({"l2": g}, {"l2": g}, ["l2"])
    assert slopes.loc["l2", "slope cosd (all)"] == pytest.approx(2.0)
    assert slopes.loc["l2", "slope bound term"] == pytest.approx(1.0)
    assert slopes.loc["l2", "bound / cosd, smallest eps"] == pytest.approx(100.0)
    g = g.assign(exact=1.0, second_order=1.0)
    curves = theory.fig3b_curves({"l2": g}, {"l2": g}, ["l2"], "digits", "cnn")
    assert len(curves) == 3 * len(theory.FIG3B_TERMS)
    assert set(curves.model) == {"l2 model (digits cnn)"}


# --------------------------------------------------------------------------- toy
def test_maxent_is_bce_minus_entropy():
    net = toy.toy_net(4, "softplus", 3.0, seed=0)
    x, y = torch.randn(10, 2), torch.randint(0, 2, (10,))
    plain, logs = toy.MaxEnt(lam=0.0)(net, x, y)
    assert torch.allclose(plain, nn.functional.cross_entropy(net(x), y))
    strong, logs = toy.MaxEnt(lam=2.0)(net, x, y)
    assert torch.allclose(strong, plain - 2.0 * logs["entropy"])
    with pytest.raises(ValueError):
        toy.MaxEnt(beta=1.0)


def test_score_gradient_and_nets():
    a, b = toy.toy_net(8, "relu", 3.0, seed=1), toy.toy_net(8, "relu", 3.0, seed=1)
    x = torch.randn(5, 2)
    assert torch.equal(toy.score(a, x), toy.score(b, x))
    g, dg = toy.score_and_grad(a, x)
    assert torch.allclose(g, a(x)[:, 1] * 2) and dg.shape == (5, 2)
    eps = 1e-3
    num = (toy.score(a, x + torch.tensor([eps, 0.0])) - toy.score(a, x - torch.tensor([eps, 0.0])))
    assert torch.allclose(num / (2 * eps), dg[:, 0], atol=1e-2)


def test_boundary_pair_and_grid():
    net = toy.toy_net(8, "softplus", 3.0, seed=0)
    X = torch.randn(30, 2)
    pair = toy.boundary_pair(net, X, 0.1)
    g, _ = toy.score_and_grad(net, X)
    assert torch.equal(pair[0], X[int(g.abs().argmin())])
    assert (pair[1] - pair[0]).norm() == pytest.approx(0.1, rel=1e-5)
    xs, ys, grid = toy.plane_grid(np.array([[0.0, 0.0], [1.0, 2.0]]), nx=5, ny=4)
    assert xs[0] == -0.5 and ys[-1] == 2.5 and grid.shape == (20, 2)


def test_near_boundary_pairs_and_summary():
    net = toy.toy_net(8, "softplus", 3.0, seed=0)
    _, _, grid = toy.plane_grid(np.array([[-2.0, -2.0], [2.0, 2.0]]), nx=20, ny=20)
    gen = torch.Generator().manual_seed(0)
    x, delta = toy.near_boundary_pairs(net, grid, 50, 0.1, gen)
    assert x.shape == delta.shape == (50, 2)
    assert torch.allclose(delta.norm(dim=1), torch.full((50,), 0.1))
    far = torch.full((3, 2), 1e4)
    x_far, _ = toy.near_boundary_pairs(toy.toy_net(8, "relu", 3.0, seed=0), far, 4, 0.1, gen)
    assert x_far.shape == (4, 2)          # no point near the boundary: the whole grid
    row, per_pair = toy.pair_summary(net, x, delta)
    assert row["mean l2 (raw)"] == pytest.approx(float(per_pair["l2"].mean()), rel=1e-5)
    assert set(per_pair) == {"l2", "grad", "cosd"} and len(per_pair["cosd"]) == 50


def test_smaller_compares_means_over_pairs():
    per_pair = {"(a) x": {"l2": np.linspace(1.0, 2.0, 30)},
                "(b) y": {"l2": np.r_[np.linspace(0.0, 0.5, 29), np.nan]}}
    v = toy.smaller(per_pair, "(b) y", "(a) x", "l2", "l2 distance")
    assert v.holds and "(a) − (b) l2 distance" in v.rule


def test_the_package_reexports_the_moved_functions():
    for name in ("evaluate", "metric_table", "cost_rows", "random_theorem6_cases", "MaxEnt",
                 "plot_insertion_curves", "block", "train_options", "table1_robustness"):
        assert callable(getattr(joo2023, name))

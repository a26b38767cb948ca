"""The functions the wang2020 notebooks call (issue 40 moved them out of the notebooks): values on
small cases, edge cases, errors for bad input."""
from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
import torch
from torch import nn

from robattr.chapters import wang2020


def relu_net(d=5, c=3, seed=0):
    torch.manual_seed(seed)
    return nn.Sequential(nn.Linear(d, 8), nn.ReLU(), nn.Linear(8, c)).double()


# --------------------------------------------------------------------------- theory
def test_closed_form_is_the_hessian_of_a_relu_net_and_psd():
    net, x = relu_net(), torch.randn(4, 5, dtype=torch.float64)
    y = net(x).argmax(1)
    rel, ev = wang2020.closed_form_gap(net, x, y)
    assert rel.shape == (4,) and float(rel.max()) < 1e-8
    assert ev.shape == (4, 5)
    assert float(wang2020.psd_ratio(ev).min()) > -1e-10


def test_psd_ratio_values_and_shape_check():
    ev = torch.tensor([[-1.0, 0.0, 2.0], [0.0, 1.0, 4.0]])
    assert torch.allclose(wang2020.psd_ratio(ev), torch.tensor([-0.5, 0.0]))
    with pytest.raises(ValueError, match="N×d"):
        wang2020.psd_ratio(torch.ones(3))


def test_small_matrix_has_the_dense_top_eigenvalues_and_rank_at_most_c_minus_1():
    net, x = relu_net(d=6, c=3), torch.randn(3, 6, dtype=torch.float64)
    _, ev = wang2020.closed_form_gap(net, x, net(x).argmax(1))
    err, rank, c = wang2020.small_matrix_agreement(net, x, ev)
    assert c == 3
    assert float(err.max()) < 1e-8
    assert int(rank.max()) <= c - 1


def test_timed_median_returns_the_output_and_every_time():
    med, out, ts = wang2020.timed_median(lambda: 7, 3)
    assert out == 7 and ts.shape == (3,) and (ts >= 0).all()
    assert med == pytest.approx(float(np.median(ts)))
    for bad in (0, 1.5, True):
        with pytest.raises(ValueError, match="repeats"):
            wang2020.timed_median(lambda: 0, bad)


def test_eigen_solve_timing_paths_agree():
    table, dense, small = wang2020.eigen_solve_timing([4, 8], 3, repeats=2, seed=0, device="cpu",
                                                      progress=False)
    assert list(table.d) == [4, 8] and (table.C == 3).all()
    assert (table.rel_diff < 1e-4).all()
    assert [len(t) for t in dense] == [2, 2] and [len(t) for t in small] == [2, 2]
    cells = wang2020.timing_gaps(table.d, dense, small)
    assert len(cells) == 2
    with pytest.raises(ValueError, match="one entry per size"):
        wang2020.timing_gaps([4], dense, small)


def test_second_order_terms_one_row_and_one_verdict_per_radius():
    net = relu_net().float()
    x = torch.rand(6, 5)                                   # pixels in [0, 1], as PGD needs
    y = net(x).argmax(1)
    table, cells = wang2020.second_order_terms(net, x, y, [0.1, 0.5], steps=3,
                                               generator=torch.Generator().manual_seed(0))
    assert list(table.delta) == [0.1, 0.5] and len(cells) == 2
    assert (table["first"] > 0).all() and (table["second"] >= 0).all()
    # both terms scale with the radius (eps and eps^2): their ratio grows linearly
    assert table.ratio.iloc[1] == pytest.approx(5 * table.ratio.iloc[0], rel=1e-5)


def test_random_softplus_mlp_is_seeded():
    a = wang2020.random_softplus_mlp(1, 4, 3, seed=2, device="cpu")
    b = wang2020.random_softplus_mlp(1, 4, 3, seed=2, device="cpu")
    c = wang2020.random_softplus_mlp(2, 4, 3, seed=2, device="cpu")
    x = torch.randn(2, 1, 2, 2)
    assert torch.equal(a(x), b(x)) and not torch.equal(a(x), c(x))
    assert a(x).shape == (2, 3)


def test_loglog_slope_of_a_power_law():
    ns = [10, 100, 1000]
    assert wang2020.loglog_slope(ns, [1 / np.sqrt(n) for n in ns]) == pytest.approx(-0.5)
    cols = np.array([[1 / n, 2.0] for n in ns])          # one slope per column
    assert np.allclose(wang2020.loglog_slope(ns, cols), [-1.0, 0.0])
    with pytest.raises(ValueError, match="at least 2"):
        wang2020.loglog_slope([10], [1.0])


def test_extreme_ratio_rises_to_the_tight_constant():
    from robattr.bounds import E_ABS_Z2_MINUS_1

    ext = wang2020.extreme_curvature_ratio([1, 10, 1000], 0.7)
    assert (np.diff(ext) > 0).all()
    assert ext[-1] <= E_ABS_Z2_MINUS_1 + 1e-9 and ext[-1] > 0.95 * E_ABS_Z2_MINUS_1
    with pytest.raises(ValueError, match="sigma"):
        wang2020.extreme_curvature_ratio([1], 0.0)


def test_random_2d_quadrature_rows_and_bound():
    quad = wang2020.random_2d_quadrature(2, 0, nodes=30, progress=False)
    assert quad.shape == (2, 3)
    assert ((quad[:, 0] >= 0.1) & (quad[:, 0] <= 1.5)).all()
    assert (quad[:, 1] * quad[:, 0] ** 2 <= 2).all()        # Thm 2 with F = 1
    assert wang2020.random_2d_quadrature(0, 0, progress=False).shape == (0, 3)


def test_gradient_change_summary_and_first_order_cases():
    rows = [dict(model=m, trained=m == "zoo", point=p, eps=e, change=r * e, bound=e,
                 converged=not (m == "mlp" and p == 1 and e == 0.01), rounds=2)
            for m in ("zoo", "mlp") for p in range(2) for e, r in ((0.01, 1.0), (0.1, 1.2))]
    study = pd.DataFrame(rows).assign(ratio=lambda t: t.change / t.bound)
    summary = wang2020.gradient_change_summary(study)
    assert summary.loc[(False, 0.01), "converged"] == 1
    assert summary.loc[(True, 0.1), "median_ratio"] == pytest.approx(1.2)
    wide, both, passed = wang2020.first_order_cases(study, 0.01, 0.1, tol=1e-3)
    assert list(both) == [True, False]
    assert list(passed) == [True]


# --------------------------------------------------------------------------- tables
def mean_table():
    """Mean AUCs of one attack and metric: SG and UG beat SM, IG beats them all (k-in: higher)."""
    vals = {"SM": 0.2, "IG": 0.9, "SG": 0.5, "UG": 0.5}
    return pd.DataFrame([dict(attack="TopK", method=m, metric="k-in", value=v)
                         for m, v in vals.items()])


def test_pair_wins_smoothed_wins_and_share():
    wins = wang2020.pair_wins(mean_table())
    assert list(wins) == list(wang2020.SMOOTHED_PAIRS)
    assert wins[("SG", "SM")] == (1, 0, 1) and wins[("UG", "IG")] == (0, 0, 1)
    assert wang2020.smoothed_wins(mean_table()) == (2, 4)
    assert wang2020.win_share((2, 4)) == 0.5 and wang2020.win_share((1, 0, 4)) == 0.25
    with pytest.raises(ValueError, match="no cell"):
        wang2020.win_share((0, 0))
    with pytest.raises(ValueError, match="method"):
        wang2020.pair_wins(mean_table().drop(columns="method"))


def test_attack_metric_cells_and_mean_auc():
    cells = wang2020.attack_metric_cells(["A"], ["k-in", "cor"])
    assert cells == [dict(attack="A", metric="k-in"), dict(attack="A", metric="cor")]
    assert len(wang2020.attack_metric_cells()) == 8
    with pytest.raises(ValueError):
        wang2020.attack_metric_cells([])
    img = pd.DataFrame(dict(method=["SM"] * 4, source=["attack", "attack", "random", "attack"],
                            value=[1.0, 3.0, 100.0, 5.0]))
    out = wang2020.mean_auc(img, ["method"])
    assert out.value.item() == 3.0
    with pytest.raises(ValueError, match="lacks"):
        wang2020.mean_auc(img.drop(columns="source"), ["method"])


def test_normalised_kin_divides_by_the_clean_value():
    curves = pd.DataFrame(dict(run=["a", "a", "a"], method=["SM", "SM", "SM"], image=[0, 1, 0],
                               metric=["k-in", "k-in", "cdl"], value=[0.2, 0.3, 5.0]))
    refs = {"a": {"SM": np.array([0.5, 0.0])}}
    out = wang2020.normalised_kin(curves, refs, "run")
    assert len(out) == 2
    assert out.value.iloc[0] == pytest.approx(0.4)
    assert out.value.iloc[1] == pytest.approx(0.3 / 1e-12)        # a zero start is floored
    assert curves.value.iloc[0] == 0.2                              # the input is untouched
    with pytest.raises(ValueError, match="lacks"):
        wang2020.normalised_kin(curves.drop(columns="image"), refs, "run")


def test_pick_images_takes_the_first_correct_ones_in_a_seeded_order():
    x = torch.eye(6)
    y = torch.tensor([0, 1, 2, 3, 4, 0])                # image 5 is wrong for the identity model
    ident = nn.Identity()
    got = wang2020.pick_images([ident], x, y, 5, seed=3)
    assert len(got) == 5 and not any(torch.equal(r, x[5]) for r in got)
    assert torch.equal(got, wang2020.pick_images([ident], x, y, 5, seed=3))
    with pytest.raises(RuntimeError, match="only 5"):
        wang2020.pick_images([ident], x, y, 6, seed=3)
    with pytest.raises(ValueError):
        wang2020.pick_images([], x, y, 1, seed=0)


def test_block_place_and_references_note():
    assert wang2020.block_place(dict(label="Flower", size=64, dataset="flowers102")) == "Flower block"
    assert wang2020.block_place(dict(label="CIFAR-10", size=None, dataset="digits")) == \
        "digits (beside the paper's CIFAR-10 block)"
    note = wang2020.references_note({"ours": "x", "medium ref": "a kept run", "paper": "y"})
    assert note == "; medium ref: a kept run"
    assert wang2020.references_note({"ours": "x"}) == ""


# --------------------------------------------------------------------------- training
class Fake(nn.Module):
    def __init__(self, meta):
        super().__init__()
        self.zoo_meta = meta
        self.lin = nn.Linear(2, 2)

    def forward(self, x):
        return x


def test_cost_table_against_ssr_and_the_paper():
    meta = dict(seconds_per_epoch=2.0, train_acc=0.9, test_acc=0.8)
    models = {"SSR": Fake(meta), "Madry": Fake({**meta, "seconds_per_epoch": 6.0})}
    paper = pd.DataFrame(dict(training=["SSR", "SSR", "Madry", "Madry"],
                              metric=["time_per_epoch_h", "train_acc_pct"] * 2,
                              value=[1.0, 90.0, 3.0, 80.0]))
    cost = wang2020.cost_table(models, paper, paper_rows=("SSR", "Madry"))
    assert cost.loc["Madry", "cost_vs_SSR"] == 3.0
    assert cost.loc["Madry", "paper_cost_vs_SSR"] == 3.0
    assert cost.loc["SSR", "train_acc_pct"] == pytest.approx(90.0)
    with pytest.raises(ValueError, match="SSR"):
        wang2020.cost_table({"Madry": models["Madry"]}, paper)


def test_better_share_in_the_robust_direction():
    rows = [dict(training=t, attack="TopK", method="SM", metric=m, value=v)
            for t, m, v in (("a", "k-in", 0.5), ("b", "k-in", 0.4),      # higher is better
                            ("a", "cdl", 2.0), ("b", "cdl", 1.0))]       # lower is better
    table = pd.DataFrame(rows)
    assert wang2020.better_share(table, "a", "b") == 0.5
    assert wang2020.better_share(table, "b", "a") == 0.5
    with pytest.raises(ValueError, match="no row"):
        wang2020.better_share(table, "c", "a")


def test_rank_trends_per_curve():
    auc = pd.DataFrame(dict(knob=[0, 1, 2, 0, 1, 2], attack="TopK",
                            metric=["k-in"] * 3 + ["cdl"] * 3,
                            value=[0.1, 0.2, 0.3, 3.0, 2.0, 1.0]))
    trend = wang2020.rank_trends(auc, "knob")
    assert np.allclose(trend, [1.0, 1.0])                 # both more robust as the knob rises
    flat = auc.assign(value=1.0)
    with pytest.warns(Warning):                           # scipy: a constant input
        assert np.allclose(wang2020.rank_trends(flat, "knob"), [0.0, 0.0])   # undefined -> 0


def test_correct_on_training_images_reads_only_the_images_trained_on():
    x, y = torch.eye(4), torch.tensor([0, 1, 0, 3])
    m = Fake(dict(train_images=3))
    assert wang2020.correct_on_training_images(m, x, y).tolist() == [1.0, 1.0, 0.0]
    m.zoo_meta = {}
    assert wang2020.correct_on_training_images(m, x, y).tolist() == [1.0, 1.0, 0.0, 1.0]


def _seeds_of_spread():
    """Three 'natural' models whose training accuracies are 0.5, 0.625 and 0.833 (spread 0.168):
    identity models that read the first 10, 8 and 6 of 10 images, the first 5 labelled right."""
    x, y = torch.eye(10), torch.tensor([0, 1, 2, 3, 4, 0, 0, 0, 0, 0])
    return [Fake(dict(train_images=n)) for n in (10, 8, 6)], x, y


def test_training_accuracy_seeded_keeps_a_difference_beyond_the_seed_spread():
    seeds, x, y = _seeds_of_spread()
    a, b = np.r_[np.ones(500), np.ones(500)], np.r_[np.ones(500), np.zeros(500)]   # 1.0 vs 0.5
    v = wang2020.training_accuracy_seeded(a, b, seeds, x, y, what="accuracy")
    assert v.verdict == "holds"
    assert "one model per method" in v.rule and "0.168" in v.rule
    assert wang2020.training_accuracy_seeded(b, a, seeds, x, y, what="accuracy").verdict == "does not hold"


def test_training_accuracy_seeded_calls_a_difference_within_the_seed_spread_inconclusive():
    seeds, x, y = _seeds_of_spread()
    a, b = np.r_[np.ones(600), np.zeros(400)], np.r_[np.ones(500), np.zeros(500)]   # 0.6 vs 0.5
    from robattr.report import verdicts
    assert verdicts.gap(a, b).verdict == "holds"                  # significant over the images
    v = wang2020.training_accuracy_seeded(a, b, seeds, x, y, what="accuracy")
    assert v.verdict == "inconclusive" and "cannot be told from the seed" in v.rule


def test_training_accuracy_seeded_rejects_other_images_and_too_few_seeds():
    seeds, x, y = _seeds_of_spread()
    with pytest.raises(ValueError, match="same images"):
        wang2020.training_accuracy_seeded(np.ones(3), np.ones(4), seeds, x, y, what="accuracy")
    with pytest.raises(ValueError, match="at least 3 seeds"):
        wang2020.training_accuracy_seeded(np.ones(3), np.ones(3), seeds[:2], x, y, what="accuracy")


def test_hessian_top_eigenvalues_are_positive_numpy():
    net = relu_net().float()
    ev = wang2020.hessian_top_eigenvalues(net, torch.randn(3, 5))
    assert isinstance(ev, np.ndarray) and ev.shape == (3,) and (ev >= 1e-30).all()


# --------------------------------------------------------------------------- Fig. 10
def test_roughness_of_flat_and_striped_maps():
    assert wang2020.roughness(torch.ones(4, 4)) == 0.0
    stripes = torch.tensor([[1.0, 0.0], [1.0, 0.0]])
    assert wang2020.roughness(stripes) == pytest.approx(1.0)       # tv 2, mass 2
    assert wang2020.roughness(torch.zeros(2, 2)) == 0.0
    with pytest.raises(ValueError, match="H×W"):
        wang2020.roughness(torch.ones(1, 2, 2))


def test_roughness_table_and_verdicts():
    maps = {"img": (None, None, [0.5, 0.3], 0.6, [0.9, 0.8]),
            "bad": (None, None, [0.3, 0.5], 0.4, [0.9, 0.8])}
    table = wang2020.roughness_table(maps, [2, 4])
    assert list(table.columns) == ["image", "radius_255", "roughness", "cos_to_SM", "roughness_SM"]
    assert len(table) == 4 and table.roughness.tolist() == [0.5, 0.3, 0.3, 0.5]
    v = wang2020.roughness_verdicts(table, [2, 4])
    assert v["img"].verdict == "holds"
    assert v["bad"].verdict == "does not hold"


def test_ug_maps_shapes():
    torch.manual_seed(0)
    net = nn.Sequential(nn.Flatten(), nn.Linear(12, 3))
    x1 = torch.rand(1, 3, 2, 2)
    sm, maps, rough, rough_sm, cos = wang2020.ug_maps(net, x1, [2, 8], n_samples=4, seed=0)
    assert sm.shape == (2, 2) and len(maps) == 2 and maps[0].shape == (2, 2)
    assert len(rough) == 2 and rough_sm >= 0
    assert all(-1 <= c <= 1 + 1e-6 for c in cos)

"""The functions the lim2021 notebooks call (robattr.chapters.lim2021: classes, transfer,
sweep, theory, figures), on tiny models and hand-made inputs."""
import math

import matplotlib
import numpy as np
import pandas as pd
import pytest
import torch
from torch import nn

from robattr.report import results
from robattr.chapters import lim2021 as ch

matplotlib.use("Agg")


def small_cnn(seed=0, classes=3):
    torch.manual_seed(seed)
    return nn.Sequential(nn.Conv2d(1, 4, 3, padding=1), nn.ReLU(), nn.Flatten(),
                         nn.Linear(4 * 8 * 8, classes)).eval()


def recorded(metric):
    return [r for r in results.rows() if r["metric"] == metric]


# ------------------------------------------------------------------ classes (clean_classes)
def test_every_class_repeats_class_major():
    x = torch.arange(2.0).reshape(2, 1, 1, 1)
    xr, cls = ch.every_class(x, 3)
    assert cls.tolist() == [0, 0, 1, 1, 2, 2]
    assert xr.flatten().tolist() == [0, 1, 0, 1, 0, 1]


def test_class_images_takes_the_first_n_and_refuses_a_missing_class():
    x, y = torch.arange(5.0)[:, None], torch.tensor([1, 0, 1, 1, 2])
    imgs, idx = ch.class_images(x, y, 1, 2)
    assert idx.tolist() == [0, 2] and imgs.flatten().tolist() == [0.0, 2.0]
    with pytest.raises(ValueError, match="no test image of class 7"):
        ch.class_images(x, y, 7, 2)


def test_class_score_is_the_softmax_of_the_class_on_the_masked_input():
    model, x = small_cnn(), torch.rand(4, 1, 8, 8)
    cls = torch.tensor([0, 1, 2, 0])
    ones = torch.ones_like(x)
    p = ch.class_score(model, x, ones, cls)
    with torch.no_grad():
        ref = torch.softmax(model(x), 1)[torch.arange(4), cls]
    assert torch.allclose(p, ref)
    zero = ch.class_score(model, x, torch.zeros_like(x), cls)   # every image becomes black
    assert torch.allclose(zero[0], zero[3])


def test_every_class_scores_and_noise_scores_shapes_and_determinism():
    model, x = small_cnn(), torch.rand(2, 1, 8, 8)
    opts = dict(relex_epochs=2, n_noisy=2, seed=0)
    scores, relex = ch.every_class_scores(model, x, 3, sg_samples=2, ig_steps=2, **opts)
    assert list(scores) == ["SimGrad", "SmGrad", "IntGrad", "GradCAM", "RelEx"]
    assert all(s.shape == (3, 2) and (s >= 0).all() and (s <= 1).all() for s in scores.values())
    assert relex.shape == (6, 1, 8, 8)
    a = ch.noise_scores(model, x, 3, **opts)
    assert a.shape == (3, 2) and np.array_equal(a, ch.noise_scores(model, x, 3, **opts))


def test_relex_against_others_and_runner_up():
    s = {"RelEx": {"deletion": np.array([0.1, 0.2, 0.1])},
         "A": {"deletion": np.array([0.5, 0.6, 0.4])},
         "B": {"deletion": np.array([0.3, 0.2, 0.3])}}
    cells = ch.relex_against_others(s, "deletion", higher_is_better=False)
    assert list(cells) == ["A", "B"]
    assert ch.runner_up(s, "deletion", higher_is_better=False) == "B"
    assert ch.runner_up(s, "deletion") == "A"
    with pytest.raises(ValueError, match="no 'RelEx'"):
        ch.relex_against_others({"A": s["A"]}, "deletion")
    with pytest.raises(ValueError, match="no method besides"):
        ch.runner_up({"RelEx": s["RelEx"]}, "deletion")


def test_table_s3_rows_means_and_records():
    s = {"RelEx": {"deletion": np.array([0.1, 0.3]), "preservation": np.array([0.8, 0.6])}}
    df = ch.table_s3_rows(s)
    assert df.to_dict("records") == [
        {"method": "RelEx", "metric": "deletion", "value": pytest.approx(0.2)},
        {"method": "RelEx", "metric": "preservation", "value": pytest.approx(0.7)}]
    assert recorded("tableS3_preservation")[-1]["value"] == pytest.approx(0.7)


def test_flip_note_and_fig6_cells():
    assert "none of the attacked images is adversarial" in ch.flip_note(0, 3)
    assert ch.flip_note(1, 3).endswith("the others keep their class.")
    assert ch.flip_note(1, 1) == "The PGD attack changed the predicted class of 1 of 1 image."
    with pytest.raises(ValueError, match="n_flip"):
        ch.flip_note(4, 3)
    rng = np.random.default_rng(0)
    scores = {("clean", m): rng.random((5, 4)) for m in ch.FIG6_OTHERS}
    scores[("clean", "RelEx")] = np.full((5, 4), 0.95)
    cells = ch.fig6_cells(scores, "clean")
    assert list(cells) == ["close to 1"] + [f"above {m}" for m in ch.FIG6_OTHERS]
    assert cells["close to 1"].holds


def test_moved_from_clean_is_zero_for_the_clean_masks():
    m = torch.rand(3, 1, 4, 4)
    moved = ch.moved_from_clean({"clean": m, "same": m.clone()}, ("same",))
    assert np.allclose(moved["same"], 0, atol=1e-6)


# ------------------------------------------------------------------ transfer (targeted)
def test_target_map_images_pick_the_next_image_of_another_class():
    model = nn.Sequential(nn.Flatten(), nn.Linear(64, 3, bias=False))
    with torch.no_grad():
        model[1].weight.zero_()
        model[1].weight[torch.arange(3), torch.arange(3)] = 1.0   # class c: pixel (0, c) is lit
    pool = torch.zeros(9, 1, 8, 8)
    pool[torch.arange(9), 0, 0, torch.arange(9) % 3] = 1.0       # image i is of class i % 3
    c0, x_t, c_t = ch.target_map_images(model, pool, 3)
    assert c0.tolist() == [0, 1, 2]
    assert c_t.tolist() == [1, 2, 0]   # image i starts its search at pool image 3 + i: 4, 5, 6
    assert torch.equal(x_t[0], pool[4])
    with pytest.raises(ValueError, match="n must be"):
        ch.target_map_images(model, pool, 9)
    with pytest.raises(ValueError, match="no image of the pool"):
        ch.target_map_images(model, torch.zeros(4, 1, 8, 8), 2)


def test_masked_model_multiplies_its_input():
    net, x, m = small_cnn(), torch.rand(2, 1, 8, 8), torch.rand(2, 1, 8, 8)
    with torch.no_grad():
        assert torch.allclose(ch.MaskedModel(net, m)(x), net(m * x))


def fake_runs():
    """Two attacks on one method, with scores of 4 images."""
    runs = {}
    for attack, shift in (("structured", 0.0), ("unstructured", 0.1)):
        row = {"l2": torch.tensor([1.0, 2.0, 3.0, 4.0])}
        for ex, base in (("SimGrad", 0.2), ("RelEx(2)", 0.9)):
            row[("spearman", "adv", ex)] = torch.full((4,), base - shift)
            row[("spearman", "rand", ex)] = torch.full((4,), 0.95)
            row[("topk", "adv", ex)] = torch.full((4,), base)
            row[("retrieval", "adv", ex)] = torch.tensor([1.0, 1.0, 0.0, 1.0])
        runs[(attack, "SimGrad")] = row
    return runs


def test_run_mean_moves_table_and_transfer_cells():
    runs = fake_runs()
    assert ch.run_mean(runs, "unstructured", "SimGrad", "spearman", "adv", "SimGrad") == \
        pytest.approx(0.1)
    moves = ch.moves_table(runs, ["SimGrad"], "RelEx(2)", 8)
    assert list(moves["attack"]) == list(ch.ATTACKS)
    assert moves["spearman RelEx"].tolist() == pytest.approx([0.9, 0.8])
    assert "top-8 RelEx" in moves.columns
    hit, guards, transfer = ch.transfer_cells(runs, "RelEx(2)")
    assert list(hit) == ["structured/SimGrad", "unstructured/SimGrad"]
    assert all(g is None for g in guards.values())            # the attack moved its map
    assert all(v.holds for v in transfer.values())             # RelEx moved less


def test_retrieval_table_and_pgd_cells():
    runs = fake_runs()
    ret = ch.retrieval_table(runs, ["SimGrad", "RelEx(2)"], {"SimGrad": 1.0, "RelEx(2)": 1.0})
    assert ret.loc["RelEx(2)", ("structured", "SimGrad")] == pytest.approx(0.75)
    assert ret[("clean", "-")].tolist() == [1.0, 1.0]
    cells = ch.pgd_cells(runs, {"SimGrad": np.zeros(4)}, ["SimGrad"])
    assert list(cells) == ["SimGrad"]


def test_noise_floor_of_identical_masks_is_one():
    m = torch.rand(3, 1, 5, 5)
    sp, tk = ch.noise_floor(m, m.clone(), 4)
    assert sp == pytest.approx(1.0) and tk == pytest.approx(1.0)


def test_table_s2_rows_and_size_lines():
    df = ch.table_s2_rows(fake_runs(), 2.0)
    first = df[df["attack"] == "structured"].set_index("statistic")["value"]
    assert first.to_dict() == {"min": 0.5, "avg": 1.25, "max": 2.0}
    assert set(df["target_method"]) == {"SimGrad"}
    with pytest.raises(ValueError, match="eps_scale"):
        ch.table_s2_rows(fake_runs(), 0.0)
    avg = pd.DataFrame({"ours": [4.0, 2.0, 1.0], "paper": [8.0, 2.0, np.nan]},
                       index=pd.MultiIndex.from_tuples([("structured", "A"), ("unstructured", "A"),
                                                        ("structured", "B")]))
    assert ch.by_size(avg, "structured", "ours") == "B 1.0, A 4.0"
    assert ch.size_ratios(avg, ["A"]) == "A ours 2.0, the paper's 4.0"


def test_direct_attack_note():
    note = ch.direct_attack_note(0.5, 0.7, 0.6)
    assert "moved more under the direct attack" in note and note.endswith("the direct attack.")
    assert ch.direct_attack_note(0.9, 0.9, 0.5).endswith("neither.")


# ------------------------------------------------------------------ sweep (untargeted)
def fake_sweep(eps=(0.1, 1.0)):
    res = {}
    for mname in ("natural", "robust"):
        for e in eps:
            res[(mname, e)] = {
                "fooled": torch.tensor([True, True, True, False] if mname == "natural"
                                       else [False] * 4),
                "fooled_rand": torch.zeros(4, dtype=torch.bool),
                ("retrieval", "RelEx(2)"): torch.ones(4),
                ("retrieval", "SimGrad"): torch.tensor([0.0, 1.0, 0.0, 0.0]),
                ("clean", "RelEx(2)"): torch.tensor([1.0, 1.0, 0.0, 1.0]),
                ("R", "RelEx(2)"): torch.full((4,), 0.6), ("R", "SimGrad"): torch.full((4,), e)}
    return res


def test_success_rates_guards_and_pooled():
    res, eps = fake_sweep(), [0.1, 1.0]
    assert ch.success_rates(res, "natural", eps) == [0.75, 0.75]
    assert ch.success_rates(res, "robust", eps, "fooled_rand") == [0.0, 0.0]
    guard = ch.attack_guards(res, ["natural", "robust"], eps)
    assert guard[("robust", 0.1)] is not None                 # PGD flips nothing there
    vals, eff = ch.pooled(res, guard, "robust", "clean", "RelEx(2)", eps)
    assert vals is None and eff == []
    g = {k: None for k in guard}
    vals, eff = ch.pooled(res, g, "natural", "clean", "RelEx(2)", eps)
    assert eff == eps and vals.tolist() == [1, 1, 0, 1] * 2


def test_eps_curve_and_curve_frame():
    res, eps = fake_sweep(), [0.1, 1.0]
    assert ch.eps_curve(res, "natural", "R", "SimGrad", eps).tolist() == pytest.approx(eps)
    df = ch.curve_frame(res, ["natural"], ["SimGrad", "RelEx(2)"], eps, {"R": "relevance"}, "q")
    assert len(df) == 4 and list(df["family"].cat.categories) == ["RelEx", "other methods"]
    assert set(df["q"]) == {"relevance"}


def test_retrieval_verdicts_m0_and_relevance_cells():
    res, eps = fake_sweep(), [0.1, 1.0]
    guard = {k: None for k in ch.attack_guards(res, ["natural"], eps)}
    per_model, grids = ch.retrieval_verdicts(res, guard, ["natural"], eps, "RelEx(2)", ["SimGrad"])
    assert grids["natural"].shape == (2, 1) and list(grids["natural"].index) == ["0.1", "1"]
    cells = ch.m0_cells(res, guard, ["natural"], eps, "RelEx(2)")
    assert list(cells) == ["natural"] and "2 of" not in cells["natural"].rule
    bad = {k: "ineffective" for k in guard}                   # no budget left: the guard
    assert ch.m0_cells(res, bad, ["natural"], eps, "RelEx(2)") == {"natural": "ineffective"}
    cells, runner = ch.relevance_cells(res, "natural", eps, "RelEx(2)", ["SimGrad"])
    assert runner == "SimGrad" and list(cells) == ["SimGrad"]


def test_harder_to_attack_and_note():
    v = ch.harder_to_attack(fake_sweep(), [0.1, 1.0])
    assert v.holds
    m = nn.Identity()
    m.zoo_meta = {"test_acc": 0.9}
    note = ch.harder_note({"natural": m, "robust": m}, True)
    assert note.endswith("succeeds less often on the PGD-trained model.")


# ------------------------------------------------------------------ theory
def test_rank_corr():
    assert ch.rank_corr([1, 2, 3], [10, 20, 30]) == pytest.approx(1.0)
    assert ch.rank_corr([1, 2, 3], [3, 2, 1]) == pytest.approx(-1.0)
    from scipy.stats import spearmanr                       # ties take their average rank
    a, b = [0.3, 0.1, 0.1, 0.7, 0.2], [5.0, 1.0, 2.0, 2.0, 9.0]
    assert ch.rank_corr(a, b) == pytest.approx(spearmanr(a, b).statistic, abs=1e-12)
    with pytest.raises(ValueError, match="same length"):
        ch.rank_corr([1], [1])


def test_ramp_net_and_small_net_note():
    x = torch.tensor([[-1.0], [0.5], [2.0]])
    assert ch.RampNet()(x)[:, 1].tolist() == [0.0, 2.0, 4.0]
    assert ch.small_net_note([{"Eq.5 viol.": 0, "rows": 5}]).startswith(
        "Eq. 5 fails on 0 of the 5 rows of this run's random models: these draws")
    assert ch.small_net_note([{"Eq.5 viol.": 1, "rows": 5}]).endswith("models.")


def test_small_net_rows_and_counts():
    gen = torch.Generator().manual_seed(0)
    r = ch.small_net_rows("linear, 2 classes", 2, 2, gen, n_grid=8)
    assert r["alpha"].shape == (16,)
    assert (r["c"] > 0).any()
    n = ch.thm1_counts({"a": r})
    assert n["all"] == 16 and n["crossed"] <= n["safe"] <= n["all"]
    assert n["violations"] == 0          # two classes at tau = log 2: Eq. 5 is exact
    with pytest.raises(ValueError, match="n_random"):
        ch.small_net_rows("relu", 5, 0, gen, n_grid=8)


def test_thm2_summary_counts_violations_and_eq6_note():
    row = lambda model, mask, eq6, lhs, rhs: (model, mask, 0.1, eq6, torch.tensor(lhs),  # noqa
                                              torch.tensor(rhs), torch.tensor([0.5, 0.5]))
    t2 = [row("natural", "RelEx", False, [1.0, 1.0], [1.0, 2.0]),
          row("natural", "RelEx", True, [1.0, 3.0], [1.0, 2.0])]
    summary, pairs, l1, table = ch.thm2_summary(t2)
    assert summary == {("natural", "RelEx", False): 0, ("natural", "RelEx", True): 1}
    assert pairs[("natural", "RelEx", True)] == 2 and len(table) == 2
    lines = ch.eq6_note(summary, pairs, l1, ["natural"], ["RelEx"])
    assert lines == ["  RelEx masks: ||m||_1 from 0.5 to 0.5; Eq. 6's reading fails on 1 of 2 "
                     "pairs"]
    frame = ch.thm2_frame(t2, ["natural"])
    assert len(frame) == 4 and set(frame["g"]) == {"g of Eq. 6", "g of Eq. S8 (the proof)"}
    with pytest.raises(ValueError, match="no Eq. 6 pairs"):
        ch.eq6_note(summary, pairs, l1, ["natural"], ["one pixel"])


def test_sweep_trade_cells_pick_sparsest_and_densest():
    sweep = [{"lam": lam, "m_l1": l1, "rad_grad": np.full(4, r), "rad_rand": np.full(4, r)}
             for lam, l1, r in ((1e-3, 10.0, 1.0), (1e-1, 2.0, 2.0))]
    cells, sparsest, dense = ch.sweep_trade_cells(sweep)
    assert sparsest["lam"] == 1e-1 and dense["lam"] == 1e-3
    assert list(cells) == ["gradient direction", "random directions"]


def test_trained_scale_names_the_models():
    m = nn.Identity()
    m.zoo_meta = {"test_acc": 0.5}
    out = ch.trained_scale({"natural": m, "robust": m}, "natural", dataset="digits", arch="cnn",
                           n=3)
    assert out is not None


# ------------------------------------------------------------------ figures
def test_figures_return_their_figure():
    import matplotlib.pyplot as plt

    scores = {(t, m): np.random.default_rng(0).random((3, 2)) for t in ("clean", "adversarial")
              for m in ("SimGrad", "SmGrad", "IntGrad", "GradCAM", "RelEx")}
    fig = ch.plot_class_scores(scores, 3, 1)
    assert len(fig.axes) == 2
    fig = ch.plot_class_masks(small_cnn(), torch.rand(1, 8, 8), torch.rand(3, 1, 8, 8))
    assert len(fig.axes) == 4
    sweep = [{"lam": 0.1, "m_l1": 1.0, "alpha_rand": 1.0, "alpha_grad": 2.0, "bound": 0.5}]
    assert ch.plot_sweep(sweep) is not None
    plt.close("all")
    assert math.isfinite(ch.noise_floor(torch.rand(2, 1, 3, 3), torch.rand(2, 1, 3, 3), 2)[0])

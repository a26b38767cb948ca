"""The helpers the lim2021 and wang2020 notebooks share (robattr.chapters.lim2021,
robattr.chapters.wang2020, robattr.report.verdicts.print_cells)."""
import numpy as np
import pandas as pd
import pytest
import torch
from torch import nn

from robattr.report import verdicts
from robattr.attack_protocol import METRICS_WANG2020
from robattr.chapters import lim2021, wang2020


def small_cnn(seed=0):
    torch.manual_seed(seed)
    return nn.Sequential(nn.Conv2d(1, 4, 3, padding=1), nn.ReLU(), nn.Flatten(),
                         nn.Linear(4 * 8 * 8, 3)).eval()


# ------------------------------------------------------------------ lim2021
def test_to_mask_kinds():
    a = torch.randn(2, 3, 5, 5)
    g = lim2021.to_mask(a, "grad")
    assert g.shape == a.shape and g.min() >= 0 and g.max() <= 1
    assert torch.equal(g[:, 0], g[:, 1])                     # one value per pixel, repeated
    c = lim2021.to_mask(a, "cam")
    assert torch.isclose(c.flatten(1).max(1).values, torch.ones(2)).all()
    m = lim2021.to_mask(a, "mask")
    assert torch.equal(m, a.clamp(0, 1))
    with pytest.raises(ValueError, match="kind"):
        lim2021.to_mask(a, "bogus")


def test_random_twin_has_the_given_length_and_stays_in_range():
    x = torch.full((3, 1, 8, 8), 0.5)
    l2 = torch.tensor([0.1, 0.5, 1.0])
    twin = lim2021.random_twin(x, l2, torch.Generator().manual_seed(0))
    assert torch.allclose((twin - x).flatten(1).norm(dim=1), l2, atol=1e-5)   # no clipping at 0.5 +- small
    assert twin.min() >= 0 and twin.max() <= 1
    again = lim2021.random_twin(x, l2, torch.Generator().manual_seed(0))
    assert torch.equal(twin, again)
    with pytest.raises(ValueError, match="one length per image"):
        lim2021.random_twin(x, l2[:2], torch.Generator())


def test_all_masks_names_shapes_and_order():
    model, x = small_cnn(), torch.rand(2, 1, 8, 8)
    t = torch.tensor([0, 1])
    opts = dict(sg_samples=2, ig_steps=2, relex_epochs=2, n_noisy=2, seed=0)
    short = lim2021.all_masks(model, x, t, **opts)
    assert list(short) == ["SimGrad", "SmoothGrad", "IntGrad", "DeepLIFT", "GradCAM", "RelEx(2)"]
    full = lim2021.all_masks(model, x, t, relex_epochs_long=3, mask_iterations=2, **opts)
    assert list(full) == ["SimGrad", "SmoothGrad", "IntGrad", "DeepLIFT", "GradCAM", "MASK", "RelEx(2)",
                          "RelEx(3)", "RelEx w/o batch"]
    for v in full.values():
        assert v.shape == x.shape and not v.requires_grad
    assert torch.equal(short["SimGrad"], full["SimGrad"])
    with pytest.raises(ValueError, match="relex_epochs_long"):
        lim2021.all_masks(model, x, t, relex_epochs_long=2, **opts)
    with pytest.raises(ValueError, match="sg_samples"):
        lim2021.all_masks(model, x, t, **{**opts, "sg_samples": 0})


def test_mask_scores_of_the_clean_masks_are_perfect_similarity():
    model, x = small_cnn(), torch.rand(3, 1, 8, 8)
    t = model(x).argmax(1)
    masks = {"a": torch.rand(3, 1, 8, 8), "b": torch.rand(3, 1, 8, 8)}
    s = lim2021.mask_scores(model, x, masks, masks, t, top_k=4, relevance=True, ratios=4)
    assert set(s) == {(k, m) for k in ("retrieval", "clean", "l1", "D", "P", "R", "spearman", "topk")
                      for m in masks}
    for m in masks:
        assert torch.allclose(s[("spearman", m)], torch.ones(3))
        assert torch.allclose(s[("topk", m)], torch.ones(3))
        assert torch.allclose(s[("l1", m)], torch.ones(3))
        assert torch.equal(s[("retrieval", m)], s[("clean", m)])
    plain = lim2021.mask_scores(model, x, masks, masks, t, top_k=4)
    assert set(k for k, _ in plain) == {"retrieval", "spearman", "topk"}
    with pytest.raises(ValueError, match="lacks"):
        lim2021.mask_scores(model, x, masks, {"a": masks["a"]}, t, top_k=4)


def test_per_image():
    runs = {("a", 1): {("x", "m"): torch.tensor([1, 0, 1])}}
    v = lim2021.per_image(runs, ("a", 1), ("x", "m"))
    assert v.dtype == float and v.tolist() == [1.0, 0.0, 1.0]
    with pytest.raises(ValueError, match="no run"):
        lim2021.per_image(runs, ("b", 1), ("x", "m"))
    with pytest.raises(ValueError, match="no entry"):
        lim2021.per_image(runs, ("a", 1), ("y", "m"))


def test_print_cells(capsys):
    v = verdicts.gap(np.ones(5), np.zeros(5), what="a − b")
    verdicts.print_cells("title", {"cell": v})
    out = capsys.readouterr().out.splitlines()
    assert out[0] == "title" and out[1].startswith("  cell: holds (")
    with pytest.raises(ValueError, match="Verdict"):
        verdicts.print_cells("t", {"cell": 1.0})
    with pytest.raises(ValueError, match="mapping"):
        verdicts.print_cells("t", [v])


# ------------------------------------------------------------------ wang2020
def test_protocol_methods():
    m = wang2020.protocol_methods(3, 5)
    assert list(m) == ["SM", "IG", "SG", "UG"]
    assert m["IG"][1]["steps"] == 5
    assert m["SG"][1]["n_samples"] == 3 and m["UG"][1]["n_samples"] == 3
    assert "n_samples" not in m["SM"][1]
    with pytest.raises(ValueError, match="n_samples"):
        wang2020.protocol_methods(0, 5)


def per_image_frame(n=6, seed=0):
    """A synthetic per-image frame: method SG's attack moves it less than
    random noise does, SM's far more."""
    rng = np.random.default_rng(seed)
    rows = []
    for source in ("attack", "random"):
        for method, drop in (("SG", 0.02 if source == "attack" else 0.05),
                             ("SM", 0.3 if source == "attack" else 0.01)):
            for eps in (1, 2, 3):
                for image in range(n):
                    rows.append(dict(source=source, method=method, metric="cor", eps=eps, image=image,
                                     value=1 - drop * eps + 0.001 * rng.standard_normal()))
    return pd.DataFrame(rows)


def test_image_auc_and_mean_curves():
    f = per_image_frame()
    auc = wang2020.image_auc(f, ["method", "metric"])
    assert len(auc) == 2 * 2 * 6
    mean = auc[auc.source == "attack"].groupby("method").value.mean()
    curves = wang2020.mean_curves(f, ["method", "metric"])
    # the mean of the per-image AUCs is the AUC of the mean curve (unit spacing, trapezoid)
    for m in ("SG", "SM"):
        c = curves[curves.method == m].sort_values("eps").value.to_numpy()
        assert mean[m] == pytest.approx((c[:-1] + c[1:]).sum() / 2)
    with pytest.raises(ValueError, match="lacks"):
        wang2020.image_auc(f.drop(columns="image"), ["method"])


def test_cell_values_and_verdict():
    auc = wang2020.image_auc(per_image_frame(), ["method", "metric"])
    v = wang2020.cell_values(auc, method="SM", metric="cor")
    assert v.shape == (6,)
    verdict = wang2020.cell_verdict(auc, "method", "SG", "SM", "SG − SM", metric="cor")
    assert verdict.verdict == "holds" and "SG − SM cor AUC" in verdict.rule
    # SG's attack moves it less than noise does: the guard on SG leaves the reverse comparison
    # untested (not comparable, set aside when cells are combined)
    rev = wang2020.cell_verdict(auc, "method", "SM", "SG", "SM − SG", metric="cor")
    assert rev.verdict == "not comparable" and "ineffective" in rev.rule
    with pytest.raises(ValueError, match="metric"):
        wang2020.cell_verdict(auc, "method", "SG", "SM", "x")
    with pytest.raises(ValueError, match="column"):
        wang2020.cell_values(auc, nope=1)


def test_smoothed_vs_gradient_returns_the_pair_table():
    f = per_image_frame()
    g = f[f.method == "SM"]
    f = pd.concat([f, f[f.method == "SG"].assign(method="UG"), g.assign(method="IG")], ignore_index=True)
    auc = wang2020.image_auc(f, ["method", "metric"])
    v, table = wang2020.smoothed_vs_gradient(auc, [dict(metric="cor")])
    assert list(table.index) == ["SG vs SM", "SG vs IG", "UG vs SM", "UG vs IG"]
    assert (table.verdict == "holds").all() and v.verdict == "holds"
    with pytest.raises(ValueError, match="at least one"):
        wang2020.smoothed_vs_gradient(auc, [])


def test_attack_curves_and_no_attack_kin_on_a_tiny_model():
    model, x = small_cnn(), torch.rand(2, 1, 8, 8)
    methods = wang2020.protocol_methods(2, 2)
    f = wang2020.attack_curves(model, x, methods=methods, attacks=("topk",), attacked=["SM"],
                               eps_list=[1 / 255, 2 / 255], k=4, steps=1, surrogate_beta=10.0, seed=0)
    assert set(f.attack) == {"TopK"} and set(f.source) == {"attack", "random"}
    assert set(f.metric) == set(METRICS_WANG2020) and set(f.image) == {0, 1}
    kin = wang2020.no_attack_kin(model, x, methods, k=4, seed=0, names=["SM"])
    assert list(kin) == ["SM"] and kin["SM"].shape == (2,) and (kin["SM"] <= 1 + 1e-6).all()
    with pytest.raises(ValueError, match="label"):
        wang2020.attack_curves(model, x, methods=methods, attacks=("nope",), eps_list=[0.01], k=4)
    with pytest.raises(ValueError, match="unknown methods"):
        wang2020.no_attack_kin(model, x, methods, k=4, seed=0, names=["XX"])


# ------------------------------------------------------------------ lim2021 theory helpers
def test_random_small_net_and_rows_are_functions_of_the_generator():
    for kind in ("linear", "linear, 2 classes", "tanh", "relu", "softplus"):
        a = lim2021.random_small_net(kind, 6, 3, torch.Generator().manual_seed(1))
        b = lim2021.random_small_net(kind, 6, 3, torch.Generator().manual_seed(1))
        x = torch.rand(4, 6, dtype=torch.float64)
        assert torch.equal(a(x), b(x)) and a(x).dtype == torch.float64 and not a.training
    with pytest.raises(ValueError, match="kind"):
        lim2021.random_small_net("gelu", 6, 3, torch.Generator())
    net = lim2021.random_small_net("tanh", 6, 3, torch.Generator().manual_seed(0))
    x, m, v, t = lim2021.random_masked_rows(net, 6, 5, torch.Generator().manual_seed(0))
    assert x.shape == m.shape == v.shape == (5, 6) and t.shape == (5,)
    assert (m >= 0).all() and (m <= 1).all() and (x >= 0).all() and (x <= 1).all()
    assert torch.equal(t, net(m * x).argmax(1))


def test_thm1_violations_and_covered_count_by_hand():
    inf = float("inf")
    r = {"alpha": torch.tensor([1.0, 1.0, inf, 1.0, 2.0]),
         "c": torch.tensor([0.5, 0.5, 0.5, -0.1, 0.5]),
         "bound": torch.tensor([0.5, 1.5, 9.0, 9.0, 1.0]),
         "lipschitz": torch.tensor([0.1, 0.1, 0.1, 0.1, 0.1]),
         "trapezoid": torch.tensor([1.0, 1.0, 1.0, 1.0, 0.0])}
    n, bad, ratio = lim2021.thm1_violations(r)
    assert (n, bad) == (3, 1) and torch.allclose(ratio, torch.tensor([0.5, 1.5, 0.5]))
    assert lim2021.thm1_violations(r, "lipschitz")[:2] == (3, 0)
    assert lim2021.thm1_covered(r) == (1, 2)          # rows 0 and 1 cover c; row 1 violates
    with pytest.raises(ValueError, match="no entry"):
        lim2021.thm1_violations(r, "nope")


def test_thm1_along_directions_adds_the_gradient_direction_last():
    model, x = small_cnn(), torch.rand(2, 1, 8, 8)
    y, m = model(x).argmax(1), torch.rand(2, 1, 8, 8)
    r = lim2021.thm1_along_directions(model, x, m, y, n_dirs=3, generator=torch.Generator().manual_seed(0),
                                      tau=3.0, alpha_max=2.0, n_grid=4)
    assert r["alpha"].shape == (8,)                   # (3 random + 1 gradient) directions x 2 images
    assert r["is_grad"].tolist() == [False] * 6 + [True] * 2
    with pytest.raises(ValueError, match="n_dirs"):
        lim2021.thm1_along_directions(model, x, m, y, n_dirs=0, generator=torch.Generator(), tau=1.0,
                                      alpha_max=1.0, n_grid=2)


def test_smoothed_vs_gradient_counts_cells_and_pairs_evidence_states_the_rule():
    f = per_image_frame()
    f = pd.concat([f, f.assign(metric="k-in")], ignore_index=True)     # a second cell, same values
    g = f[f.method == "SM"]
    f = pd.concat([f, f[f.method == "SG"].assign(method="UG"), g.assign(method="IG")], ignore_index=True)
    auc = wang2020.image_auc(f, ["method", "metric"])
    v, table = wang2020.smoothed_vs_gradient(auc, [dict(metric="cor"), dict(metric="k-in")])
    counts = table[["cells_hold", "cells_against", "cells_in_noise", "attack_ineffective"]].sum(1)
    assert (counts == 2).all()                  # every cell counted once, set-aside ones too
    text = wang2020.pairs_evidence(table, "2 metrics")
    assert "each of the 4 (smoothed, gradient) pairs is judged on its 2 cells (2 metrics)" in text
    assert "go both ways" in text and "symmetric" not in text.split(":")[0]
    assert f"{int((table.verdict == 'holds').sum())} of 4 pairs hold in full" in text
    assert f"over the pairs' 8 cells, {int(table.cells_hold.sum())} hold" in text
    with pytest.raises(ValueError, match="lacks"):
        wang2020.pairs_evidence(table.drop(columns="cells_hold"), "2 metrics")


def test_combine_rule_text_says_what_verdicts_combine_does():
    """Each clause of verdicts.COMBINE_RULE (which wang2020 quotes), in order, against
    verdicts.combine."""
    V = verdicts.Verdict
    h, p, n, i = (V("holds", ""), V("holds partly", ""), V("does not hold", ""), V("inconclusive", ""))
    c = V("not comparable", "")
    assert wang2020.COMBINE_RULE == verdicts.COMBINE_RULE
    clauses = wang2020.COMBINE_RULE.split("; ")
    cases = [([c, c], "not comparable"), ([h, h, c], "holds"), ([n, n], "does not hold"), ([i, i, h], "inconclusive"),
             ([h, p, n], "holds partly"), ([h, h, i], "holds")]
    assert len(clauses) == len(cases)
    for clause, (parts, expected) in zip(clauses, cases):
        assert clause.split(": ")[-1].startswith(expected.split()[0]) or expected in clause \
            or clause.endswith("counted")
        assert verdicts.combine(parts).verdict == expected




def _auc_frame(training, attacked, random, metric="k-in"):
    """A per-image AUC frame of one cell: ``attacked`` and ``random`` values per image."""
    rows = [dict(training=training, attack="TopK", method="SM", metric=metric, image=i,
                 source=src, value=float(v))
            for src, vals in (("attack", attacked), ("random", random)) for i, v in enumerate(vals)]
    return pd.DataFrame(rows)


def test_the_seed_rule_on_000s_cells():
    """A cell where the trained model beats the natural one by less than natural training's
    own seed-to-seed spread is inconclusive; by more, it keeps its verdict."""
    rng = np.random.default_rng(0)
    n = 40
    nat = rng.uniform(0.2, 0.4, n)                       # the natural model's attacked k-in
    frame = pd.concat([_auc_frame("Natural", nat, nat + 0.5),     # the attack works on it
                       _auc_frame("AT", nat + 0.05, nat + 0.5)])
    cell = dict(attack="TopK", method="SM", metric="k-in")
    plain = wang2020.cell_verdict(frame, "training", "AT", "Natural", "AT − natural", **cell)
    assert plain.verdict == "holds"
    seeds = [_auc_frame("Natural", nat + d, nat + 0.5) for d in (0.0, 0.1, -0.1)]
    spread = wang2020.seed_spreads(seeds)
    assert spread[("TopK", "SM", "k-in")] == pytest.approx(0.1)
    v = wang2020.seeded_cell_verdict(frame, "training", "AT", "Natural", "AT − natural", spread, 3,
                                     **cell)
    assert v.verdict == "inconclusive" and "one model per method" in v.rule
    small = wang2020.seed_spreads([_auc_frame("Natural", nat + d, nat) for d in (0, .01, -.01)])
    kept = wang2020.seeded_cell_verdict(frame, "training", "AT", "Natural", "AT − natural", small,
                                        3, **cell)
    assert kept.verdict == "holds"
    assert wang2020.seeded_cell_verdict(frame, "training", "AT", "Natural", "AT − natural", None, 3,
                                        **cell) == plain


def test_spreads_are_the_seed_spread_of_each_cell():
    from robattr.seeds import spreads

    assert spreads({"c": [1.0, 2.0, 3.0]}) == {"c": pytest.approx(1.0)}

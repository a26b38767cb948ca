"""000 (Wang et al. 2020): the helpers of Tables 2-6 -- robattr.attack_protocol's attack_eval_wang2020
(the transfer form of Table 6) and auc_wang2020 (the AUC over eps), and the wang2020 chapter's
more_robust_wang2020 (cell counts)."""
from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
import torch
from hypothesis import given, settings, strategies as st
from torch import nn

from robattr.attack_protocol import (METHODS_WANG2020, METRICS_WANG2020, ROBUST_DIRECTION_WANG2020,
                                     attack_eval_wang2020, auc_wang2020)
from robattr.chapters.wang2020 import more_robust_wang2020

FAST = settings(max_examples=40, deadline=None)
CELLS = [(a, m, mt) for a in ("TopK", "Manipulate") for m in ("SM", "IG", "SG", "UG")
         for mt in METRICS_WANG2020]


def frame(values, cells=CELLS):
    return pd.DataFrame([dict(attack=a, method=m, metric=mt, value=v)
                         for (a, m, mt), v in zip(cells, values)])


def curves(values_by_group, eps=(2, 4, 8, 16)):
    rows = []
    for (method, metric), vals in values_by_group.items():
        for e, v in zip(eps, vals):
            rows.append(dict(attack="TopK", method=method, metric=metric, eps=e / 255, value=v))
    return pd.DataFrame(rows)


# --------------------------------------------------------------------------- auc_wang2020
def test_auc_constant_one_is_three():
    out = auc_wang2020(curves({("SM", "k-in"): [1, 1, 1, 1], ("UG", "cor"): [0.5] * 4}))
    assert out.set_index("method").value.to_dict() == pytest.approx({"SM": 3.0, "UG": 1.5})
    assert list(out.columns) == ["attack", "method", "metric", "value"]


@FAST
@given(st.lists(st.floats(-5, 5), min_size=2, max_size=6), st.randoms(use_true_random=False))
def test_auc_is_unit_trapezoid_whatever_the_row_order(vals, rnd):
    eps = list(range(1, len(vals) + 1))
    df = curves({("SM", "cdl"): vals}, eps=eps)
    idx = list(df.index)
    rnd.shuffle(idx)                                   # rows in any order: sorted by eps inside
    got = auc_wang2020(df.loc[idx]).value.item()
    want = sum((vals[i] + vals[i + 1]) / 2 for i in range(len(vals) - 1))
    assert got == pytest.approx(want, abs=1e-9)


def test_auc_refuses_bad_input():
    good = curves({("SM", "k-in"): [1, 1, 1, 1]})
    with pytest.raises(ValueError, match="columns"):
        auc_wang2020(good.drop(columns="eps"))
    with pytest.raises(ValueError, match="empty"):
        auc_wang2020(good.iloc[:0])
    bad = pd.concat([good, curves({("IG", "k-in"): [1, 1, 1]}, eps=(2, 4, 8))])
    with pytest.raises(ValueError, match="another has"):
        auc_wang2020(bad)
    with pytest.raises(ValueError, match="repeats"):
        auc_wang2020(pd.concat([good, good]))
    with pytest.raises(ValueError, match="at least 2"):
        auc_wang2020(curves({("SM", "k-in"): [1]}, eps=(2,)))


# --------------------------------------------------------------------------- more_robust_wang2020
def test_direction_per_metric():
    cells = [("TopK", "SM", mt) for mt in METRICS_WANG2020]
    a = frame([0.9, 0.9, 1.0, 0.1], cells)              # k-in, cor high; cdl, cosd low
    b = frame([0.5, 0.5, 2.0, 0.2], cells)
    assert more_robust_wang2020(a, b) == (4, 0, 4)
    assert more_robust_wang2020(b, a) == (0, 0, 4)
    assert set(ROBUST_DIRECTION_WANG2020) == set(METRICS_WANG2020)


@FAST
@given(st.lists(st.sampled_from([0.0, 0.5, 1.0, 2.0]), min_size=32, max_size=32),
       st.lists(st.sampled_from([0.0, 0.5, 1.0, 2.0]), min_size=32, max_size=32))
def test_wins_losses_and_ties_partition_the_cells(va, vb):
    a, b = frame(va), frame(vb)
    w_ab, t_ab, n_ab = more_robust_wang2020(a, b)
    w_ba, t_ba, n_ba = more_robust_wang2020(b, a)
    assert n_ab == n_ba == 32 and t_ab == t_ba == sum(x == y for x, y in zip(va, vb))
    assert w_ab + w_ba + t_ab == 32
    assert more_robust_wang2020(a, a) == (0, 32, 32)


def test_only_matched_cells_count_and_bad_input():
    a = frame(np.ones(32))
    assert more_robust_wang2020(a, a.iloc[:5]) == (0, 5, 5)
    with pytest.raises(ValueError, match="metric"):
        more_robust_wang2020(a, a, on=["attack", "method"])
    with pytest.raises(ValueError, match="more than one row"):
        more_robust_wang2020(pd.concat([a, a]), a)
    with pytest.raises(ValueError, match="robust direction"):
        more_robust_wang2020(a.iloc[:1].assign(metric="ssim"), a)
    with pytest.raises(ValueError, match="columns"):
        more_robust_wang2020(a.drop(columns="value"), a)


# --------------------------------------------------------------------------- attack_eval_wang2020
def tiny_cnn(seed=0):
    torch.manual_seed(seed)
    return nn.Sequential(nn.Conv2d(1, 4, 3, padding=1), nn.ReLU(), nn.Flatten(),
                         nn.Linear(4 * 64, 10)).eval()


def small_methods():
    return {name: (fn, {**opts, **({"n_samples": 3} if "n_samples" in opts else {}),
                        **({"steps": 3} if name == "IG" else {})})
            for name, (fn, opts) in METHODS_WANG2020.items()}


def test_transfer_frame_shape_and_ranges():
    model = tiny_cnn()
    x = torch.rand(3, 1, 8, 8, generator=torch.Generator().manual_seed(1))
    eps = [4 / 255, 16 / 255]
    df = attack_eval_wang2020(model, x, attack="mass_center", method="SM", eps_list=eps, k=4,
                         steps=2, surrogate_beta=10.0, methods=small_methods(),
                         eval_methods=list(METHODS_WANG2020))
    assert len(df) == 4 * 4 * 2 and set(df.method) == set(METHODS_WANG2020)
    assert sorted(set(df.eps)) == pytest.approx(eps)
    v = df.set_index(["method", "metric", "eps"]).value
    assert ((v.xs("k-in", level="metric") >= 0) & (v.xs("k-in", level="metric") <= 1 + 1e-6)).all()
    assert (v.xs("cor", level="metric").abs() <= 1 + 1e-6).all()
    assert ((v.xs("cosd", level="metric") >= -1e-6) & (v.xs("cosd", level="metric") <= 2)).all()
    assert (v.xs("cdl", level="metric") >= 0).all()


@pytest.mark.parametrize("attack", ["topk", "manipulate", "mass_center"])
def test_a_vanishing_budget_leaves_every_map_in_place(attack):
    # the same noise draws for the clean and attacked maps: with eps -> 0 even SG/UG match
    model = tiny_cnn(2)
    x = torch.rand(2, 1, 8, 8, generator=torch.Generator().manual_seed(3))
    df = attack_eval_wang2020(model, x, attack=attack, method="SM", eps_list=[1e-7], k=4, steps=2,
                         surrogate_beta=10.0, methods=small_methods(),
                         eval_methods=list(METHODS_WANG2020))
    v = df.set_index(["method", "metric"]).value
    assert (v.xs("cosd", level="metric") < 1e-5).all()
    assert (v.xs("cdl", level="metric") < 1e-4).all()
    assert (v.xs("cor", level="metric") > 0.999).all()


def test_default_target_is_the_prediction():
    # target=None is 000's protocol (the predicted class); passing it explicitly changes nothing
    model = tiny_cnn(1)
    x = torch.rand(2, 1, 8, 8, generator=torch.Generator().manual_seed(4))
    kw = dict(attack="topk", method="SG", eps_list=[8 / 255], k=4, steps=2, surrogate_beta=10.0,
              methods=small_methods())
    with torch.no_grad():
        pred = model(x).argmax(1)
    a = attack_eval_wang2020(model, x, **kw)
    assert a.equals(attack_eval_wang2020(model, x, target=pred, **kw))
    assert not a.equals(attack_eval_wang2020(model, x, target=(pred + 1) % 10, **kw))


def test_per_image_rows_average_to_the_table_and_random_noise_sits_on_the_vertices():
    """per_image keeps one row per image whose mean is the default (mean) frame; the random
    baseline evaluates ±eps noise, the same maps as attack_effective compares."""
    model = tiny_cnn(3)
    x = torch.rand(3, 1, 8, 8, generator=torch.Generator().manual_seed(5)) * 0.5 + 0.25
    kw = dict(attack="topk", method="SM", eps_list=[4 / 255, 8 / 255], k=4, steps=2,
              surrogate_beta=10.0, methods=small_methods())
    mean = attack_eval_wang2020(model, x, **kw)
    per = attack_eval_wang2020(model, x, per_image=True, random_baseline=True, **kw)
    assert set(per.source) == {"attack", "random"} and set(per.image) == {0, 1, 2}
    attacked = per[per.source == "attack"].groupby(["method", "metric", "eps"], as_index=False)["value"].mean()
    merged = mean.merge(attacked, on=["method", "metric", "eps"], suffixes=("", "_img"))
    assert len(merged) == len(mean) and np.allclose(merged.value, merged.value_img, atol=1e-6)
    # the random rows: SM of x plus ±eps noise, recomputed here independently
    from robattr.attacks import random_perturbation
    from robattr.attack_protocol import attribution_map_wang2020, metrics_wang2020

    eps = 8 / 255
    xr = random_perturbation(x, eps=eps, norm="linf", linf="vertices", seed=0)
    assert torch.allclose((xr - x).abs(), torch.full_like(x, eps), atol=1e-6)
    with torch.no_grad():
        pred = model(x).argmax(1)
    name, opts = small_methods()["SM"]
    want = metrics_wang2020(attribution_map_wang2020(name, opts, model, x, pred, 0),
                       attribution_map_wang2020(name, opts, model, xr, pred, 0), 4)["cosd"]
    got = per[(per.source == "random") & (per.metric == "cosd") & (per.eps == eps)]
    assert np.allclose(got.sort_values("image").value, want.numpy(), atol=1e-6)


def test_attack_eval_refuses_bad_input():
    model, x = tiny_cnn(), torch.rand(2, 1, 8, 8)
    kw = dict(eps_list=[4 / 255], k=4, steps=1, methods=small_methods())
    with pytest.raises(ValueError, match="method must be"):
        attack_eval_wang2020(model, x, attack="topk", method="GB", **kw)
    with pytest.raises(ValueError, match="attack must be"):
        attack_eval_wang2020(model, x, attack="ifia", method="SM", **kw)
    with pytest.raises(ValueError, match="eval_methods"):
        attack_eval_wang2020(model, x, attack="topk", method="SM", eval_methods=["LRP"], **kw)
    with pytest.raises(ValueError, match="eps_list"):
        attack_eval_wang2020(model, x, attack="topk", method="SM", **{**kw, "eps_list": [0.0]})

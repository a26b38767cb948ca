"""The package functions that the joo2023 and wangkong2023 notebooks call instead of
defining helpers themselves (issue 19): random MLPs, max-pool switches and ties, the
joo2023 checks (Lemma 3 / Prop. 5, Appendix B, Theorem 6), the IG Jacobian and linearity
helpers of wangkong2023, the Tables 6-10 bookkeeping, and the split of bounds.deviation."""
from __future__ import annotations

import math

import matplotlib
import numpy as np
import pandas as pd
import pytest
import torch
from torch import nn

from robattr import models
from robattr.report import verdicts, viz
from robattr.bounds import (FROBENIUS_MAX_D, attribution_function, homogeneity_check, log_slope,
                            pool_gaps, pool_switches, scaling_check, switch_moved, theorem6_cases,
                            theorem6_tally)
from robattr.bounds import deviation as D
from robattr.chapters.wangkong2023 import tables as T
from robattr.bounds import ig_structure as IGJ
from robattr.bounds import linearity as LIN


# --------------------------------------------------------------------------- random MLPs
def _old_joo_random_mlp(rng, act=None):
    """The helper joo2023/theory_alignment defined before it moved into robattr.models."""
    d = int(rng.integers(2, 33))
    depth = int(rng.integers(1, 4))
    width = int(rng.integers(4, 33))
    act = act or ("relu" if rng.random() < 0.3 else "softplus")
    b = float(np.exp(rng.uniform(np.log(0.5), np.log(20.0))))
    layers, w = [], d
    for _ in range(depth):
        layers += [nn.Linear(w, width), nn.ReLU() if act == "relu" else nn.Softplus(beta=b)]
        w = width
    layers.append(nn.Linear(w, int(rng.integers(2, 11))))
    net = nn.Sequential(*layers).double().eval()
    with torch.no_grad():
        for p in net.parameters():
            p.copy_(torch.from_numpy(rng.standard_normal(tuple(p.shape))) / np.sqrt(max(1, p.shape[-1])) * 1.5)
    return net, d, act, b


@pytest.mark.parametrize("act", [None, "relu", "softplus"])
def test_sample_random_mlp_reproduces_the_notebook_helper(act):
    for seed in range(5):
        old = _old_joo_random_mlp(np.random.default_rng(seed), act)
        rng = np.random.default_rng(seed)
        new = models.sample_random_mlp(rng, act)
        assert (new.d, new.activation, new.beta) == old[1:]
        assert str(new.net) == str(old[0])
        for p, q in zip(new.net.parameters(), old[0].parameters()):
            assert torch.equal(p, q)
        # the generator is left in the same state
        old_rng = np.random.default_rng(seed)
        _old_joo_random_mlp(old_rng, act)
        assert rng.random() == old_rng.random()


def test_random_mlp_shapes_and_rules():
    net = models.random_mlp([5, 7, 7, 3], "softplus", 2.0, rng=np.random.default_rng(0), weight_gain=2.0,
                            bias_std=0.5)
    assert [type(m).__name__ for m in net] == ["Linear", "Softplus", "Linear", "Softplus", "Linear"]
    assert net[1].beta == 2.0 and not net.training
    assert net(torch.zeros(4, 5, dtype=torch.float64)).shape == (4, 3)
    flat = models.random_mlp([12, 4, 2], "relu", rng=torch.Generator().manual_seed(0), flatten=True,
                             dtype=torch.float32)
    assert isinstance(flat[0], nn.Flatten) and flat[1].weight.dtype == torch.float32
    assert flat(torch.zeros(3, 3, 2, 2)).shape == (3, 2)
    # same generator state, same weights; the weight rule is z / sqrt(fan_in) * gain
    a = models.random_mlp([4, 3], rng=np.random.default_rng(1), beta=1.0, weight_gain=3.0, bias_std=0.0)
    z = np.random.default_rng(1).standard_normal((3, 4))
    assert torch.allclose(a[0].weight, torch.from_numpy(z) / 2.0 * 3.0)
    assert torch.equal(a[0].bias, torch.zeros(3, dtype=torch.float64))


@pytest.mark.parametrize("kwargs, match", [
    (dict(sizes=[4]), "at least two"),
    (dict(sizes=[4, 0]), "at least two"),
    (dict(sizes=[4, 2], activation="tanh"), "activation"),
    (dict(sizes=[4, 2], weight_gain=0.0), "weight_gain"),
    (dict(sizes=[4, 2], bias_std=-1.0), "bias_std"),
    (dict(sizes=[4, 2], rng=42), "rng"),
])
def test_random_mlp_refuses_bad_input(kwargs, match):
    args = dict(activation="softplus", beta=1.0, rng=np.random.default_rng(0)) | kwargs
    with pytest.raises(ValueError, match=match):
        models.random_mlp(**args)


def test_sample_random_mlp_refuses_bad_input():
    with pytest.raises(ValueError, match="rng"):
        models.sample_random_mlp(torch.Generator())
    with pytest.raises(ValueError, match="activation"):
        models.sample_random_mlp(np.random.default_rng(0), "tanh")
    with pytest.raises(ValueError, match="depth"):
        models.sample_random_mlp(np.random.default_rng(0), depth=(3, 1))
    with pytest.raises(ValueError, match="beta"):
        models.sample_random_mlp(np.random.default_rng(0), beta=(0.0, 1.0))


def test_two_layer_scorer_and_pair_logit():
    torch.manual_seed(0)
    net = models.two_layer_scorer(2, 5, "softplus", 3.0)
    x = torch.randn(6, 2)
    out = net(x)
    g = net[:3](x)
    assert torch.allclose(out, torch.cat([-g / 2, g / 2], 1))
    # softmax cross-entropy on the pair is the BCE of g
    y = torch.randint(0, 2, (6,))
    bce = nn.functional.binary_cross_entropy_with_logits(g[:, 0], y.float())
    assert torch.allclose(nn.functional.cross_entropy(out, y), bce, atol=1e-6)
    with pytest.raises(ValueError, match="hidden"):
        models.two_layer_scorer(2, 0)
    with pytest.raises(ValueError, match=r"\(N, 1\)"):
        models.PairLogit()(torch.zeros(3, 2))


# --------------------------------------------------------------------------- max-pooling
def _pool_net():
    return nn.Sequential(nn.Conv2d(1, 1, 1, bias=False), nn.MaxPool2d(2), nn.Flatten(), nn.Linear(4, 2))


def test_pool_switches_gaps_and_moves():
    net = _pool_net()
    with torch.no_grad():
        net[0].weight.fill_(1.0)
    x = torch.arange(16, dtype=torch.float32).reshape(1, 1, 4, 4)
    sw = pool_switches(net, x)
    assert sw.shape == (1, 4)
    assert sw.tolist() == [[5, 7, 13, 15]]                      # the bottom-right of each window
    gaps = pool_gaps(net, x)
    assert len(gaps) == 1 and gaps[0].shape == (1, 1, 2, 2)
    assert torch.equal(gaps[0], torch.ones(1, 1, 2, 2))         # 5 - 4, 7 - 6, ...
    x_tie = torch.zeros(1, 1, 4, 4)
    assert bool((pool_gaps(net, x_tie)[0] == 0).all())
    delta = torch.zeros_like(x)
    delta[0, 0, 0, 0] = 10.0                                    # the top-left input wins its window
    assert switch_moved(net, x, delta).tolist() == [True]
    assert switch_moved(net, x, torch.zeros_like(x)).tolist() == [False]
    assert not net[1]._forward_hooks                           # the hooks are removed


def test_pool_switches_without_pooling_and_bad_input():
    mlp = nn.Sequential(nn.Flatten(), nn.Linear(4, 2))
    assert pool_switches(mlp, torch.zeros(3, 1, 2, 2)).shape == (3, 0)
    assert pool_gaps(mlp, torch.zeros(3, 1, 2, 2)) == []
    with pytest.raises(ValueError, match="Module"):
        pool_switches("net", torch.zeros(1, 4))
    with pytest.raises(ValueError, match="kernel_size == stride"):
        pool_gaps(nn.Sequential(nn.MaxPool2d(3, stride=1)), torch.zeros(1, 1, 4, 4))
    with pytest.raises(ValueError, match="delta"):
        switch_moved(_pool_net(), torch.zeros(1, 1, 4, 4), torch.zeros(1, 4))


# --------------------------------------------------------------------------- joo2023 checks
def _net(seed=0, act=None):
    return models.sample_random_mlp(np.random.default_rng(seed), act)


def test_scaling_check_lemma3_and_prop5():
    net, d, _, _ = _net(1, "softplus")
    g = torch.Generator().manual_seed(0)
    x = torch.randn(6, d, generator=g, dtype=torch.float64)
    delta = 0.05 * torch.randn(6, d, generator=g, dtype=torch.float64)
    t = net(x).argmax(1)
    out = scaling_check(net, x, delta, t, [0.01, 3.0], skip_small=1e-6)
    assert list(out.alpha) == [0.01, 3.0]
    assert (out.l2_err < 1e-9).all() and (out.cos_err < 1e-9).all() and out.pred_same.all()
    base = scaling_check(net, x, delta, t, [1.0])
    assert base.l2_err.iloc[0] < 1e-12


def test_scaling_check_empty_for_a_dead_network_and_bad_alpha():
    net = nn.Sequential(nn.Linear(3, 4), nn.ReLU(), nn.Linear(4, 2)).double()
    with torch.no_grad():
        net[0].weight.zero_()
        net[0].bias.fill_(-1.0)
    x = torch.randn(4, 3, dtype=torch.float64)
    out = scaling_check(net, x, 0.1 * x, torch.zeros(4, dtype=torch.long), [2.0], skip_small=1e-6)
    assert out.empty
    with pytest.raises(ValueError, match="alpha"):
        scaling_check(net, x, 0.1 * x, None, [0.0])


def test_homogeneity_check_printed_fails_corrected_holds():
    net, d, _, _ = _net(3, "relu")
    x = torch.randn(16, d, dtype=torch.float64, generator=torch.Generator().manual_seed(1))
    h = homogeneity_check(net, x, 3.0)
    n_layers = len([m for m in net if isinstance(m, nn.Linear)])
    assert len(h) == 2 * n_layers and set(h.form) == {"printed", "corrected"}
    assert (h[h.form == "corrected"].err < 1e-9).all()
    assert (h[h["last"]].err < 1e-9).all()
    hidden_printed = h[(~h["last"]) & (h.form == "printed")]
    if len(hidden_printed):
        assert (hidden_printed.err > 1e-9).any()
    with pytest.raises(ValueError, match="alpha"):
        homogeneity_check(net, x, -1.0)


def test_theorem6_cases_and_tally():
    net, d, _, _ = _net(4, "softplus")
    x = torch.randn(3, d, dtype=torch.float64, generator=torch.Generator().manual_seed(2))
    cases = theorem6_cases(net, x, net(x).argmax(1), [1e-3, 1e-2, 1e-1], torch.Generator().manual_seed(0),
                           power_iters=10)
    assert len(cases) == 9 and set(cases.eps_l2) == {1e-3, 1e-2, 1e-1}
    assert {"cosd", "exact", "first_order", "spectral", "frobenius", "pool_flip", "example"} <= set(cases)
    assert not cases.pool_flip.any()                            # an MLP has no max-pool
    tally = theorem6_tally(cases)
    assert tally["cases"] == 9
    assert tally["viol_exact"] == tally["viol_proof_exact"] == tally["viol_exact_sq"] == 0
    assert {"fail_first_order", "worst_ratio_spectral", "fail_frobenius"} <= set(tally)
    no_frob = theorem6_cases(net, x, None, [0.1], torch.Generator().manual_seed(0), spectral=False,
                             frobenius_max_d=d - 1)
    assert "frobenius" not in no_frob and "spectral" not in no_frob
    assert FROBENIUS_MAX_D == 1024
    with pytest.raises(ValueError, match="generator"):
        theorem6_cases(net, x, None, [0.1], 0)
    with pytest.raises(ValueError, match="eps"):
        theorem6_cases(net, x, None, [], torch.Generator())
    with pytest.raises(ValueError, match="tol"):
        theorem6_tally(cases, tol=-1)


def test_log_slope():
    e = np.array([1e-3, 1e-2, 1e-1, 1.0])
    assert log_slope(e, 3 * e ** 2) == pytest.approx(2.0)
    assert log_slope(e, e, n=2) == pytest.approx(1.0)
    assert math.isnan(log_slope(e, np.array([0.0, 0.0, np.nan, 1.0])))
    with pytest.raises(ValueError, match="same shape"):
        log_slope(e, e[:2])


# --------------------------------------------------------------------------- IG Jacobian, linearity
def _softplus_net(seed=0, d=4):
    torch.manual_seed(seed)
    return nn.Sequential(nn.Linear(d, 6), nn.Softplus(3.0), nn.Linear(6, 3)).double().eval()


def test_ig_jacobian_check_and_share():
    net = _softplus_net()
    x = torch.randn(2, 4, dtype=torch.float64)
    x[0, 1] = 0.0
    chk = D.ig_jacobian_check(net, x, 0, steps=5, method="midpoint")
    assert chk.rel_err < 1e-10 and chk.zero_row_violations == 0 and chk.zero_rows == 1
    J = D.ig_jacobian(net, x, 0, steps=5, method="midpoint")
    assert torch.allclose(J, chk.J, atol=1e-12)
    share = D.offdiag_share(J)
    assert share.shape == (2,) and ((share >= 0) & (share <= 1)).all()
    assert torch.equal(D.offdiag_share(torch.diag_embed(torch.ones(1, 3))), torch.zeros(1, dtype=torch.float64))


def test_quadratic_logit_gives_the_exact_hessian_weight():
    A = torch.tensor([[[2.0, -1.0], [-1.0, 3.0]]], dtype=torch.float64)
    q = D.QuadraticLogit(A, torch.tensor([[0.5, 1.0]], dtype=torch.float64))
    z = torch.tensor([[0.5, -2.0]], dtype=torch.float64)
    assert torch.allclose(q(z), 0.5 * z @ A[0] @ z.T + z @ torch.tensor([[0.5], [1.0]], dtype=torch.float64))
    _, B = D.ig_jacobian_parts(q, z, 0, steps=3, method="right")
    assert torch.allclose(B[0], 2 / 3 * z[0, :, None] * A[0])
    with pytest.raises(ValueError, match="A must be"):
        D.QuadraticLogit(torch.zeros(2, 3))
    with pytest.raises(ValueError, match="b must be"):
        D.QuadraticLogit(A, torch.zeros(2))


def test_linearization_ratio_directional_change_and_central_difference():
    W = torch.randn(5, 5, dtype=torch.float64, generator=torch.Generator().manual_seed(0))

    def linear(x):
        return x @ W.T

    x = torch.randn(3, 5, dtype=torch.float64)
    v = torch.randn(3, 5, dtype=torch.float64)
    v = v / v.norm(dim=1, keepdim=True)
    jv = (v @ W.T).norm(dim=1)
    ratio = LIN.linearization_ratio(linear, x, v, [1e-6, 1e-2, 1.0])
    assert ratio.shape == (3, 3) and torch.allclose(ratio, torch.ones(3, 3, dtype=torch.float64), atol=1e-6)
    change = LIN.directional_change(linear, x, v, [0.5, 2.0])
    assert torch.allclose(change, torch.stack([0.5 * jv, 2.0 * jv], 1))
    assert torch.allclose(LIN.central_difference_norm(linear, x, v, 1e-4), jv)
    with pytest.raises(ValueError, match="t"):
        LIN.linearization_ratio(linear, x, v, [0.0])
    with pytest.raises(ValueError, match="shaped like x"):
        LIN.directional_change(linear, x, v[:1], [1.0])
    with pytest.raises(ValueError):
        LIN.central_difference_norm(linear, x, v, h=-1.0)


def test_deviation_keeps_every_name_after_the_split():
    import robattr.bounds as B
    for name in D.__all__:
        assert getattr(D, name) is getattr(B, name)
    assert D.ig_jacobian_parts is IGJ.ig_jacobian_parts and D.linearity_residual is LIN.linearity_residual
    assert B.jacobian_spectral_norm.__module__ == "robattr.bounds.jacobian"


def test_matrix_heatmap():
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    fig, ax = plt.subplots()
    im = viz.matrix_heatmap(ax, -torch.eye(4), "|J|")
    assert im.get_array().min() == 0.0 and ax.get_title() == "|J|"
    with pytest.raises(ValueError, match="2-D"):
        viz.matrix_heatmap(ax, torch.ones(3), "x")
    with pytest.raises(ValueError, match="quantile"):
        viz.matrix_heatmap(ax, torch.ones(3, 3), "x", quantile=0.0)
    plt.close(fig)


# --------------------------------------------------------------------------- Tables 6-10
def _run(dev, angle, Te, Tp, Tc, random=None):
    t = lambda v: torch.tensor(v, dtype=torch.float64)  # noqa: E731
    r = {"dev_paper": t(dev), "dev_direct": t(dev) * 2, "angle_paper": t(angle), "angle_direct": t(angle),
         "T_e": t(Te), "T_prime_e": t(Tp), "T_c_deg": t(Tc)}
    if random is not None:
        r["dev_random"] = t(random)
    return r


def test_crossings_and_cases_within():
    r = _run([1.0, 3.0], [10.0, 50.0], [2.0, 2.0], [4.0, 4.0], [20.0, 20.0])
    s = T.crossing_shares(r, "paper", "l2")
    assert s == {"> T_e (%)": 50.0, "> T'_e (%)": 0.0, "> T_c (%)": 50.0}
    assert math.isnan(T.crossing_shares(r, "paper", "linf")["> T'_e (%)"])
    assert T.cases_within([r, r], "paper", ("T_prime_e",)) == (4, 4)
    assert T.cases_within([r], "paper", ("T_e", "T_c")) == (1, 2)
    assert T.cases_within([r], "direct", ("T_prime_e",)) == (1, 2)
    assert torch.equal(T.concat_runs([r, r], "T_e"), torch.full((4,), 2.0, dtype=torch.float64))
    viol = pd.DataFrame([{"norm": "l2", "attack": "paper", **s},
                         {"norm": "linf", "attack": "paper", **T.crossing_shares(r, "paper", "linf")}])
    assert T.worst_cell(viol, "paper") == 50.0
    with pytest.raises(ValueError, match="bounds"):
        T.cases_within([r], "paper", ("T_x",))
    with pytest.raises(ValueError, match="norm"):
        T.crossing_shares(r, "paper", "l1")
    with pytest.raises(ValueError, match="no rows"):
        T.worst_cell(viol, "direct")


def test_bound_table_and_side_by_side():
    r = _run([1.0, 3.0], [10.0, 50.0], [2.0, 2.0], [4.0, 4.0], [20.0, 20.0])
    runs = {("at", "l2", 0.1): r, ("at", "linf", 0.01): r}
    summary = T.bound_summary(r)
    assert float(summary["T_hat_e"]) == 2.0 and float(summary["T_hat_c_deg"]) == 30.0
    tidy = T.bound_table(runs, "l2", ["T_e", "T_hat_e"], {"at": "AT"})
    assert set(tidy.quantity) == {"T_e", "T_hat_e"} and set(tidy.eps) == {"0.1"} and set(tidy.model) == {"AT"}
    cmp = tidy.assign(ours=tidy.value, paper=np.nan)
    wide = T.side_by_side(cmp, ["eps", "model"], ["T_hat_e", "T_e"])
    assert list(wide.columns) == [("T_hat_e", "ours"), ("T_hat_e", "paper"), ("T_e", "ours"), ("T_e", "paper")]
    assert wide.loc[("0.1", "AT"), ("T_e", "ours")] == 2.0
    # a reference run's column (robattr.report.references) stays beside ours
    ref = T.side_by_side(cmp.assign(**{"medium ref (mnist, abc1234)": 2 * tidy.value}),
                         ["eps", "model"], ["T_e"])
    assert list(ref.columns) == [("T_e", "ours"), ("T_e", "medium ref (mnist, abc1234)"),
                                 ("T_e", "paper")]
    assert ref.loc[("0.1", "AT"), ("T_e", "medium ref (mnist, abc1234)")] == 4.0


def test_eps_label_guarded_and_random_deviation():
    assert T.eps_label(8 / 255) == "8/255" and T.eps_label(0.1) == "0.1"
    rule = verdicts.exact(0, 5)
    assert T.guarded(rule, np.linspace(1, 2, 50), np.zeros(50)) is rule
    idle = T.guarded(rule, np.zeros(50), np.zeros(50))      # an attack that does nothing
    assert idle.verdict == "not comparable" and "ineffective" in idle.rule
    outside = T.guarded(rule, np.linspace(1, 2, 50), np.zeros(50), broken="max-pooling")
    assert outside.verdict == "not comparable" and "max-pooling" in outside.rule
    assert rule.rule in outside.rule and T.HYPOTHESIS_WANGKONG2023 in outside.rule
    assert T.guarded(rule, np.zeros(50), np.zeros(50), broken="max-pooling").verdict == "not comparable"
    net = _softplus_net(0, d=4).float()
    x = torch.rand(3, 4)
    y = torch.zeros(3, dtype=torch.long)
    a = T.random_deviation(net, x, y, "sm", "l2", 0.1, seed=1)
    assert a.shape == (3,) and a.dtype == torch.float64 and (a > 0).all()
    assert torch.equal(a, T.random_deviation(net, x, y, "sm", "l2", 0.1, seed=1))
    assert T.random_deviation(net, x, y, "sm", "linf", 0.1).shape == (3,)
    with pytest.raises(ValueError, match="norm"):
        T.random_deviation(net, x, y, "sm", "l1", 0.1)
    with pytest.raises(ValueError, match="eps"):
        T.random_deviation(net, x, y, "sm", "l2", 0.0)
    assert attribution_function is D.attribution_function


# --------------------------------------------------------------------------- 001's local linearity
def test_linear_share_judges_on_the_locally_linear_cases():
    from robattr.bounds.linearity import LINEARITY_TOL

    groups = np.repeat(np.arange(60), 2)                       # 60 images, two cases each
    ok = np.ones(120, dtype=bool)
    linear = np.full(120, LINEARITY_TOL / 2)
    v = T.linear_share(ok, linear, groups, at_least=0.9)
    assert v.verdict == "holds" and "met by 120 of 120 cases on 60 images" in v.rule
    # the cases outside the hypothesis are left out, whatever they did
    lin2 = linear.copy()
    lin2[:40] = 1.0
    bad = ok.copy()
    bad[:40] = False
    v = T.linear_share(bad, lin2, groups, at_least=0.9)
    assert v.verdict == "holds" and "80 of 80 locally linear" in v.rule
    # failures among the locally linear cases count
    assert T.linear_share(~ok, linear, groups, at_least=0.9).verdict == "does not hold"
    # most cases outside the hypothesis: not comparable, with what was measured on all
    v = T.linear_share(ok, np.full(120, 1.0), groups, at_least=0.9)
    assert v.verdict == "not comparable" and T.HYPOTHESIS_WANGKONG2023 in v.rule and "measured on all" in v.rule
    # too few images to confirm the share, even if every one passes
    v = T.linear_share(ok[:20], linear[:20], groups[:20], at_least=0.9)
    assert v.verdict == "inconclusive" and "could not confirm" in v.rule
    with pytest.raises(ValueError, match="one entry per case"):
        T.linear_share(ok, linear[:5], groups, at_least=0.9)
    with pytest.raises(ValueError, match="NaN"):
        T.linear_share(ok, np.full(120, np.nan), groups, at_least=0.9)
    with pytest.raises(ValueError, match="tol"):
        T.linear_share(ok, linear, groups, at_least=0.9, tol=0.0)


def test_concat_groups_and_case_hits():
    r = _run([1.0, 3.0], [10.0, 50.0], [2.0, 2.0], [4.0, 4.0], [20.0, 20.0])
    r["image"] = np.array([7, 9])
    assert list(T.concat_groups([r, r])) == [7, 9, 7, 9]
    assert T.case_hits([r], "paper", ("T_e", "T_c")).tolist() == [True, False]
    assert T.case_hits([r, r], "paper", ("T_prime_e",)).tolist() == [True] * 4
    r["image"] = np.array([1])
    with pytest.raises(ValueError, match="one id per image"):
        T.concat_groups([r])
    with pytest.raises(ValueError, match="bounds"):
        T.case_hits([r], "paper", ("T_x",))

"""003 (Joo et al. 2023): criteria, α-transformation and Theorem 6 terms in robattr.bounds."""
from __future__ import annotations

import numpy as np
import pytest
import torch
from hypothesis import assume, example, given, settings, strategies as st
from scipy.spatial import distance
from torch import nn

from robattr.bounds import (alignment_criteria, cosine_bound_terms, cosine_criterion,
                            hessian_frobenius_norm, hessian_spectral_norm,
                            hessian_vector_product, l2_criterion, logit_hessian,
                            logit_input_hessian, param_layers, scale_layer)

FAST = settings(max_examples=25, deadline=None)


def mlp(seed: int, d: int = 5, h: int = 7, c: int = 3, act: str = "softplus", beta: float = 2.0,
        depth: int = 2, bias: bool = True) -> nn.Module:
    g = torch.Generator().manual_seed(seed)
    layers, width = [], d
    for _ in range(depth - 1):
        layers += [nn.Linear(width, h, bias=bias),
                   nn.Softplus(beta=beta) if act == "softplus" else nn.ReLU()]
        width = h
    layers.append(nn.Linear(width, c, bias=bias))
    net = nn.Sequential(*layers).double()
    with torch.no_grad():
        for p in net.parameters():
            p.copy_(torch.randn(p.shape, generator=g, dtype=torch.float64))
    return net.eval()


def batch(seed: int, n: int = 6, d: int = 5, scale: float = 1.0):
    g = torch.Generator().manual_seed(seed + 1000)
    x = torch.randn(n, d, generator=g, dtype=torch.float64)
    delta = scale * torch.randn(n, d, generator=g, dtype=torch.float64)
    return x, delta


seeds = st.integers(0, 10_000)


# ----------------------------------------------------------------------- criteria, oracles
def test_criteria_match_scipy_and_direct_autograd():
    net = mlp(0)
    x, delta = batch(0)
    t = torch.tensor([0, 1, 2, 0, 1, 2])
    out = alignment_criteria(net, x, delta, t)
    for i in range(x.shape[0]):
        xi = x[i:i + 1].clone().requires_grad_(True)
        (a,) = torch.autograd.grad(net(xi)[0, t[i]], xi)
        xd = (x[i:i + 1] + delta[i:i + 1]).requires_grad_(True)
        (b,) = torch.autograd.grad(net(xd)[0, t[i]], xd)
        a, b = a.numpy().ravel(), b.numpy().ravel()
        assert out["cosd"][i].item() == pytest.approx(distance.cosine(b, a) / 2, abs=1e-12)
        assert out["l2"][i].item() == pytest.approx(np.linalg.norm(b - a), rel=1e-12)
        assert out["grad_norm"][i].item() == pytest.approx(np.linalg.norm(a), rel=1e-12)
    assert torch.equal(l2_criterion(net, x, delta, t), out["l2"])
    assert torch.equal(cosine_criterion(net, x, delta, t), out["cosd"])


def test_zero_gradient_gives_nan_cosd_and_zero_delta_gives_zero():
    net = mlp(1)
    with torch.no_grad():
        param_layers(net)[-1].weight[0].zero_()
    x, delta = batch(1)
    t = torch.zeros(6, dtype=torch.long)
    assert torch.isnan(cosine_criterion(net, x, delta, t)).all()
    t = torch.ones(6, dtype=torch.long)
    assert torch.allclose(cosine_criterion(net, x, 0 * delta, t), torch.zeros(6, dtype=torch.float64), atol=1e-12)
    assert torch.equal(l2_criterion(net, x, 0 * delta, t), torch.zeros(6, dtype=torch.float64))


def test_bad_inputs_raise():
    net = mlp(2)
    x, delta = batch(2)
    with pytest.raises(ValueError, match="delta"):
        l2_criterion(net, x, delta[:, :3])
    with pytest.raises(ValueError, match="model"):
        l2_criterion("net", x, delta)
    with pytest.raises(ValueError, match="alpha"):
        scale_layer(net, -1.0)
    with pytest.raises(ValueError, match="layer"):
        scale_layer(net, 2.0, layer=5)
    with pytest.raises(ValueError, match="following_biases"):
        scale_layer(net, 2.0, following_biases=1)
    with pytest.raises(ValueError, match="iters"):
        hessian_spectral_norm(net, x, iters=0)
    with pytest.raises(ValueError, match="BatchNorm"):
        scale_layer(nn.Sequential(nn.Linear(2, 2), nn.BatchNorm1d(2), nn.Linear(2, 2)), 2.0)


# ----------------------------------------------------------------------- Lemma 3, Prop 5
@FAST
@given(seed=seeds, log_alpha=st.floats(-6, 6), act=st.sampled_from(["relu", "softplus"]))
def test_last_layer_scaling_lemma3_prop5(seed, log_alpha, act):
    alpha = float(np.exp(log_alpha))
    net = mlp(seed, act=act)
    scaled = scale_layer(net, alpha)
    x, delta = batch(seed)
    t = net(x).argmax(1)
    assert torch.allclose(scaled(x), alpha * net(x), rtol=1e-10, atol=0)
    base, new = alignment_criteria(net, x, delta, t), alignment_criteria(scaled, x, delta, t)
    assert torch.allclose(new["l2"], alpha * base["l2"], rtol=1e-9, atol=0)          # Lemma 3
    ok = ~torch.isnan(base["cosd"])
    assume(bool(ok.any()))                  # every cosd undefined: the check would be vacuous
    assert torch.allclose(new["cosd"][ok], base["cosd"][ok], rtol=0, atol=1e-10)     # Prop 5
    assert torch.equal(scaled(x).argmax(1), net(x).argmax(1))


@FAST
@given(seed=seeds, alpha=st.floats(0.1, 10.0), layer=st.integers(0, 2))
def test_hidden_layer_homogeneity_needs_following_biases(seed, alpha, layer):
    net = mlp(seed, act="relu", depth=3)
    x, _ = batch(seed, n=20)
    corrected = scale_layer(net, alpha, layer, following_biases=True)
    assert torch.allclose(corrected(x), alpha * net(x), rtol=1e-9, atol=1e-9)
    no_bias = mlp(seed, act="relu", depth=3, bias=False)
    assert torch.allclose(scale_layer(no_bias, alpha, layer)(x), alpha * no_bias(x),
                          rtol=1e-9, atol=1e-9)


def test_hidden_layer_homogeneity_fails_as_printed_with_biases():
    net = mlp(3, act="relu", depth=3)
    x, _ = batch(3, n=50)
    printed = scale_layer(net, 3.0, 0)
    assert (printed(x) - 3.0 * net(x)).abs().max() > 1e-2
    # softplus is not homogeneous even with the corrected transformation (Appendix B)
    sp = mlp(3, act="softplus", depth=3)
    assert (scale_layer(sp, 3.0, 0, following_biases=True)(x) - 3.0 * sp(x)).abs().max() > 1e-2


# ----------------------------------------------------------------------- Hessian pieces
def test_hvp_and_dense_hessian_match_autograd_oracle():
    net = mlp(4, depth=3)
    x, v = batch(4)
    t = torch.tensor([0, 1, 2, 2, 1, 0])
    dense = logit_input_hessian(net, x, t)
    assert torch.allclose(logit_hessian(net, x, t), dense, atol=1e-10)
    hv = hessian_vector_product(net, x, v, t)
    assert torch.allclose(hv, torch.einsum("nij,nj->ni", dense, v), atol=1e-10)
    assert torch.allclose(hessian_frobenius_norm(net, x, t), dense.flatten(1).norm(dim=1))
    spec = torch.linalg.eigvalsh(dense).abs().amax(1)
    est = hessian_spectral_norm(net, x, t, iters=2000, tol=1e-13,
                                generator=torch.Generator().manual_seed(0))
    assert (est <= spec * (1 + 1e-9)).all()
    assert torch.allclose(est, spec, rtol=1e-4)


def test_relu_hessian_is_zero():
    net = mlp(5, act="relu")
    x, v = batch(5)
    assert torch.equal(hessian_vector_product(net, x, v), torch.zeros_like(x))


# ----------------------------------------------------------------------- Theorem 6
@FAST
@given(seed=seeds, log_scale=st.floats(-4, 1), act=st.sampled_from(["relu", "softplus"]),
       beta=st.floats(0.5, 20.0))
@example(seed=200, log_scale=0.75, act="softplus", beta=11.5)   # both sides ~4.5e9: rounding
def test_exact_bounds_hold_on_random_networks(seed, log_scale, act, beta):
    net = mlp(seed, act=act, beta=beta, depth=3)
    x, delta = batch(seed, scale=10 ** log_scale)
    out = cosine_bound_terms(net, x, delta)
    ok = ~torch.isnan(out["cosd"]) & (out["grad_norm"] > 1e-12) & (out["grad_norm_pert"] > 1e-12)
    assume(bool(ok.any()))                  # no row with a defined cosd: nothing to check
    c = out["cosd"][ok]
    tol = 1e-9

    def le(a, b):            # a <= b up to rounding, relative for large b (e.g. 4.5e9 == 4.5e9)
        return (a <= b + tol * (1 + b.abs())).all()

    assert le(c, out["proof_exact"][ok])
    assert le(out["proof_exact"][ok], out["exact"][ok])
    assert le(c, out["exact_sq"][ok])
    assert ((c >= -tol) & (c <= 1 + tol)).all()


def test_first_order_bound_is_tight_in_the_limit_and_spectral_dominates():
    net = mlp(6, depth=3)
    x, delta = batch(6)
    delta = delta / delta.norm(dim=1, keepdim=True)
    t = net(x).argmax(1)
    for eps in (1e-2, 1e-3, 1e-4):
        out = cosine_bound_terms(net, x, eps * delta, t, spectral=True, frobenius=True)
        # l2 -> eps ||H dhat|| (first order), cosd -> the second-order term
        hb = out["first_order"] * out["grad_norm_pert"]
        assert torch.allclose(out["l2"], hb, rtol=30 * eps)
        assert torch.allclose(out["cosd"], out["second_order"], rtol=60 * eps, atol=1e-14)
        assert (out["first_order"] <= out["spectral"] * (1 + 1e-6)).all()
        assert (out["spectral"] <= out["frobenius"] * (1 + 1e-9)).all()


def test_relu_kink_breaks_the_first_order_bound():
    # a 1-hidden-unit ReLU net: the gradient jumps across the kink while H = 0
    net = nn.Sequential(nn.Linear(2, 2), nn.ReLU(), nn.Linear(2, 2)).double().eval()
    with torch.no_grad():
        net[0].weight.copy_(torch.tensor([[1.0, 0.0], [0.0, 1.0]]))
        net[0].bias.zero_()
        net[2].weight.copy_(torch.tensor([[1.0, 1.0], [0.0, 0.0]]))
        net[2].bias.zero_()
    x = torch.tensor([[-0.01, 1.0]], dtype=torch.float64)
    delta = torch.tensor([[0.02, 0.0]], dtype=torch.float64)
    out = cosine_bound_terms(net, x, delta, torch.tensor([0]))
    assert out["first_order"].item() == 0.0
    assert out["cosd"].item() == pytest.approx((1 - 1 / np.sqrt(2)) / 2)
    assert out["cosd"].item() <= out["exact"].item()


@pytest.mark.parametrize("alpha", [0.5, 2.0, 3.0])
def test_homogeneity_counterexample_is_the_errata_example(alpha):
    """relu(x) + 1 at x = 0: the printed form is off by |1 - alpha| / alpha, the corrected one exact."""
    from robattr.bounds.alignment import homogeneity_check, homogeneity_counterexample

    net, x = homogeneity_counterexample()
    assert net(x).item() == 1.0
    hidden = scale_layer(net, alpha, 0)
    assert hidden(x).item() == pytest.approx(1.0)                 # alpha relu(0) + 1, not alpha
    assert scale_layer(net, alpha, 0, following_biases=True)(x).item() == pytest.approx(alpha)
    tab = homogeneity_check(net, x, alpha).set_index(["layer", "form"]).err
    assert tab[0, "printed"] == pytest.approx(abs(1 - alpha) / alpha)
    assert tab[0, "corrected"] == 0 and tab[1, "printed"] == 0 and tab[1, "corrected"] == 0

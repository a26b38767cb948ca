"""Property tests (hypothesis) and finite-difference checks of create_graph for
robattr.attributions. float64, tiny random softplus / ReLU networks."""
from __future__ import annotations

import math
import warnings
from functools import partial
from types import SimpleNamespace

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st
from scipy import stats

from robattr import attributions as A
from robattr.models import build

RGB = SimpleNamespace(shape=(3, 8, 8), num_classes=5, mean=(0.3, 0.4, 0.5), std=(0.2, 0.3, 0.25))
TINY = SimpleNamespace(shape=(1, 4, 4), num_classes=3, mean=(0.4,), std=(0.3,))
PROPS = settings(max_examples=8, deadline=None, derandomize=True)


def make(arch="cnn", act="softplus", beta=3.0, seed=0, info=RGB, n=3):
    torch.manual_seed(seed)
    model = build(arch, info, act, beta).double().eval()
    x = torch.rand((n,) + tuple(info.shape), dtype=torch.float64)
    return model, x, torch.arange(n) % info.num_classes


pytestmark = pytest.mark.usefixtures("one_thread")   # tiny float64 nets: one thread is much faster


@pytest.fixture(autouse=True)
def _quiet():
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        yield


# --------------------------------------------------------------------------- create_graph
DIFFERENTIABLE = {
    "grad": A.grad,
    "input_x_grad": A.input_x_grad,
    "integrated_gradients": partial(A.integrated_gradients, steps=4, batch_size=5,
                                    baseline=0.3),
    "smoothgrad": partial(A.smoothgrad, n_samples=3, sigma=0.1, seed=0, batch_size=4),
    "smoothgrad_x_input": partial(A.smoothgrad, n_samples=3, sigma=0.1, seed=0,
                                  multiply_by_input=True),
    "uniform_grad": partial(A.uniform_grad, n_samples=3, radius=0.05, seed=1),
    "ball_smooth": partial(A.ball_smooth, r=0.3, n_samples=3, seed=2),
    "ball_smooth_gbp": A.ball_smoothed(A.guided_backprop, r=0.3, n_samples=2, seed=3),
    "guided_backprop": A.guided_backprop,
    "lrp": A.lrp,
}


def test_every_differentiable_method_is_covered():
    covered = {getattr(f, "func", f).__name__.split("(")[0] for f in DIFFERENTIABLE.values()}
    assert set(A.DIFFERENTIABLE) <= covered | {"ball_smoothed"}


@pytest.mark.parametrize("name", sorted(DIFFERENTIABLE))
@pytest.mark.parametrize("arch", ["mlp", "cnn"])
def test_create_graph_matches_finite_differences(name, arch):
    """torch.autograd.gradcheck: the full Jacobian of x -> method(x) by autograd (through
    create_graph=True) against central finite differences, softplus network, float64."""
    model, x, t = make(arch, "softplus", 2.0, seed=sorted(DIFFERENTIABLE).index(name),
                       info=TINY, n=2)
    method = DIFFERENTIABLE[name]
    x = x.requires_grad_(True)
    assert torch.autograd.gradcheck(lambda z: method(model, z, t, create_graph=True), (x,),
                                    eps=1e-6, atol=1e-6, rtol=1e-4)


@pytest.mark.parametrize("name", ["grad", "guided_backprop", "lrp", "integrated_gradients"])
def test_directional_derivative_on_lenet(name):
    """d/dx of a nonlinear scalar of the attribution, along random directions, on 003's
    LeNet with Softplus(beta=3) (LRP also on ReLU, where it is not piecewise constant)."""
    method = DIFFERENTIABLE[name]
    for act, beta in (("softplus", 3.0),) + ((("relu", None),) if name == "lrp" else ()):
        model, x, t = make("lenet", act, beta, seed=5, n=2)
        w = torch.randn_like(x)

        def phi(z):
            a = method(model, z, t, create_graph=True)
            return (w * a).sum() + 0.5 * a.pow(2).sum() * 100

        xg = x.clone().requires_grad_(True)
        (g,) = torch.autograd.grad(phi(xg), xg)
        for _ in range(2):
            v = torch.randn_like(x)
            h = 1e-6
            with torch.no_grad():
                fd = (phi(x + h * v) - phi(x - h * v)) / (2 * h)
            assert math.isclose((g * v).sum().item(), fd.item(), rel_tol=1e-5, abs_tol=1e-8)


def test_guided_backprop_is_piecewise_constant_on_relu():
    model, x, t = make("lenet", "relu", None, seed=6, n=2)
    x.requires_grad_(True)
    a = A.guided_backprop(model, x, t, create_graph=True)
    (g,) = torch.autograd.grad((a * torch.randn_like(a)).sum(), x, allow_unused=True)
    assert g is None or g.abs().max() == 0


# --------------------------------------------------------------------------- IG completeness
@PROPS
@given(seed=st.integers(0, 10**6), arch=st.sampled_from(["mlp", "cnn"]),
       method=st.sampled_from(["midpoint", "trapezoid", "gausslegendre", "left"]))
def test_ig_completeness_and_convergence(seed, arch, method):
    model, x, t = make(arch, "softplus", 3.0, seed=seed % 1000, n=2)
    torch.manual_seed(seed)
    b = 0.5 * torch.rand_like(x)
    gap = (model(x) - model(b)).gather(1, t[:, None]).squeeze(1).detach()

    def err(steps):
        ig = A.integrated_gradients(model, x, t, baseline=b, steps=steps, method=method)
        return (ig.sum((1, 2, 3)) - gap).abs().max().item()

    coarse, fine = err(4), err(64)
    assert fine <= 1e-2 * max(1.0, gap.abs().max().item())
    assert fine <= max(coarse / 4, 1e-10)  # first order at worst (left), O(1/m^2) else


# --------------------------------------------------------------------------- noise samplers
@PROPS
@given(shape=st.sampled_from([(40, 1), (40, 3), (40, 2, 3, 3), (40, 1, 8, 8), (40, 500)]),
       r=st.floats(1e-3, 50.0), seed=st.integers(0, 2**31))
def test_ball_noise_is_uniform_in_the_ball(shape, r, seed):
    x = torch.zeros(shape, dtype=torch.float64)
    eta = A.ball_noise(x, 25, r=r, seed=seed)  # 25 draws x 40 inputs = 1000 points
    d = x[0].numel()
    norms = eta.flatten(2).norm(dim=2)
    assert (norms <= r * (1 + 1e-12)).all()
    u = (norms / r) ** d  # U[0, 1) exactly when the radius is r U^(1/d)
    assert abs(u.mean().item() - 0.5) < 0.05  # 5.5 standard errors
    assert stats.kstest(u.flatten().numpy(), "uniform").pvalue > 1e-4
    directions = eta.flatten(2) / norms[..., None]  # isotropic: the mean of 1000 unit
    assert directions.mean((0, 1)).norm() < 6 / math.sqrt(1000)  # vectors has norm ~ 1/sqrt(1000)


@PROPS
@given(radius=st.floats(1e-3, 10.0), seed=st.integers(0, 2**31))
def test_cube_and_gaussian_noise(radius, seed):
    x = torch.rand(30, 3, 4, 4, dtype=torch.float64)
    cube = A.cube_noise(x, 20, radius=radius, seed=seed)
    assert cube.abs().max() <= radius
    assert abs(cube.var().item() / radius**2 - 1 / 3) < 0.03
    g = A.gaussian_noise(x, 20, noise_ratio=0.2, seed=seed)
    sigma = 0.2 * (x.flatten(1).amax(1) - x.flatten(1).amin(1))
    ratio = g.transpose(0, 1).flatten(1).std(1) / sigma
    assert (ratio - 1).abs().max() < 0.15


# --------------------------------------------------------------------------- seeds and chunks
SAMPLING = {
    "smoothgrad": partial(A.smoothgrad, n_samples=7),
    "uniform_grad": partial(A.uniform_grad, n_samples=7, radius=0.1),
    "ball_smooth": partial(A.ball_smooth, n_samples=7, r=0.5),
    "ball_smooth_ig": partial(A.ball_smooth, n_samples=3, r=0.5,
                              base=partial(A.integrated_gradients, steps=3, batch_size=4)),
    "integrated_gradients": partial(A.integrated_gradients, steps=7),
    "relex": partial(A.relex, epochs=2, n_noisy=5),
}
RANDOM = [k for k in SAMPLING if k != "integrated_gradients"]


@pytest.mark.parametrize("name", RANDOM)
def test_seeded_methods_are_reproducible(name):
    model, x, t = make("cnn", seed=1)
    f = SAMPLING[name]
    a, b = f(model, x, t, seed=11), f(model, x, t, seed=11)
    assert torch.equal(a, b)
    assert not torch.equal(a, f(model, x, t, seed=12))
    c = f(model, x, t, generator=torch.Generator().manual_seed(11))
    assert torch.equal(a, c)  # seed= is a fresh generator on x's device
    torch.manual_seed(3)
    d = f(model, x, t)
    torch.manual_seed(3)
    assert torch.equal(d, f(model, x, t))  # no seed: torch's global generator


@PROPS
@given(name=st.sampled_from(sorted(SAMPLING)), batch_size=st.integers(1, 40))
def test_chunking_does_not_change_the_result(name, batch_size):
    model, x, t = make("cnn", seed=2)
    f = SAMPLING[name]
    kw = {} if name == "integrated_gradients" else {"seed": 5}
    ref = f(model, x, t, batch_size=10**6, **kw)
    got = f(model, x, t, batch_size=batch_size, **kw)
    assert torch.allclose(got, ref, rtol=0, atol=1e-12)


def test_smoothgrad_converges_to_the_gradient_for_tiny_noise():
    model, x, t = make("lenet", seed=4)
    sg = A.smoothgrad(model, x, t, sigma=1e-7, n_samples=3, seed=0)
    assert torch.allclose(sg, A.grad(model, x, t), atol=1e-5)

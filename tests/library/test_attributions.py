"""Tests for robattr.attributions: oracles (Captum, Zennit), API, bad input, post-processing.

Property tests (hypothesis) and finite-difference checks of create_graph live in
test_attributions_properties.py. Everything runs in float64 on tiny random networks.
"""
from __future__ import annotations

import warnings
from functools import partial
from types import SimpleNamespace

import numpy as np
import pytest
import torch
from torch import nn

from robattr import attributions as A
from robattr.models import build

RGB = SimpleNamespace(shape=(3, 8, 8), num_classes=5, mean=(0.3, 0.4, 0.5), std=(0.2, 0.3, 0.25))
GRAY = SimpleNamespace(shape=(1, 8, 8), num_classes=4, mean=(0.45,), std=(0.3,))
SEQUENTIAL = ("mlp", "cnn", "lenet")
ACTS = (("relu", None), ("softplus", 3.0))


def make(arch="cnn", act="softplus", beta=3.0, seed=0, info=RGB, n=3):
    """A random float64 model in eval mode, a batch in [0, 1] and mixed targets."""
    torch.manual_seed(seed)
    model = build(arch, info, act, beta).double().eval()
    x = torch.rand((n,) + tuple(info.shape), dtype=torch.float64)
    target = torch.arange(n) % info.num_classes
    return model, x, target


def close(a, b, tol=1e-6):
    assert a.shape == b.shape
    err = (a - b).abs().max().item()
    assert err <= tol * max(1.0, b.abs().max().item()), err


pytestmark = pytest.mark.usefixtures("one_thread")   # tiny float64 nets: one thread is much faster


@pytest.fixture(autouse=True)
def _quiet():
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # Captum's hook and "requires_grad" warnings
        yield


# --------------------------------------------------------------------------- Captum oracles
@pytest.mark.parametrize("act,beta", ACTS)
@pytest.mark.parametrize("arch", SEQUENTIAL)
@pytest.mark.parametrize("seed", [0, 1])
def test_grad_and_input_x_grad_match_captum(arch, act, beta, seed):
    from captum.attr import InputXGradient, Saliency

    model, x, t = make(arch, act, beta, seed)
    close(A.grad(model, x, t), Saliency(model).attribute(x, target=t, abs=False))
    close(A.input_x_grad(model, x, t), InputXGradient(model).attribute(x, target=t))


@pytest.mark.parametrize("method,captum_method,factor", [
    ("left", "riemann_left", 1.0), ("right", "riemann_right", 1.0),
    ("midpoint", "riemann_middle", 1.0), ("gausslegendre", "gausslegendre", 1.0),
    ("trapezoid", "riemann_trapezoid", 16 / 15),  # Captum's weights sum to (n-1)/n
])
@pytest.mark.parametrize("act,beta", ACTS)
def test_integrated_gradients_match_captum(method, captum_method, factor, act, beta):
    from captum.attr import IntegratedGradients

    for arch, seed in (("cnn", 0), ("mlp", 1)):
        model, x, t = make(arch, act, beta, seed)
        b = torch.rand_like(x) * 0.2
        ours = A.integrated_gradients(model, x, t, baseline=b, steps=16, method=method,
                                      batch_size=7)
        ref = IntegratedGradients(model).attribute(x, baselines=b, target=t, n_steps=16,
                                                   method=captum_method)
        close(ours, factor * ref)  # (Captum builds its nodes in float32: ~1e-9 apart)


@pytest.mark.parametrize("act,beta", ACTS)
@pytest.mark.parametrize("arch", SEQUENTIAL)
def test_smoothgrad_matches_captum_on_the_same_noise(arch, act, beta):
    from captum.attr import Saliency

    model, x, t = make(arch, act, beta, seed=3)
    noise = A.gaussian_noise(x, 6, noise_ratio=0.15, seed=1)
    ref = torch.stack([Saliency(model).attribute(x + e, target=t, abs=False) for e in noise]).mean(0)
    close(A.smoothgrad(model, x, t, noise=noise, batch_size=4), ref)
    close(A.smoothgrad(model, x, t, noise=noise, multiply_by_input=True), x * ref)
    # the same draws come out of a seed: noise= and seed= agree
    close(A.smoothgrad(model, x, t, n_samples=6, noise_ratio=0.15, seed=1), ref)


@pytest.mark.parametrize("arch", SEQUENTIAL)
@pytest.mark.parametrize("seed", [0, 1])
def test_guided_backprop_matches_captum_on_relu(arch, seed):
    from captum.attr import GuidedBackprop

    model, x, t = make(arch, "relu", None, seed)
    close(A.guided_backprop(model, x, t), GuidedBackprop(model).attribute(x, target=t))


class _CaptumGBPAllActivations:
    """Captum's GuidedBackprop with its ReLU hook (``relu(grad_input)``) put on Softplus too:
    the convention robattr documents for softplus models."""

    def __new__(cls, model):
        from captum._utils.common import _register_backward_hook
        from captum.attr import GuidedBackprop

        class GBP(GuidedBackprop):
            def _register_hooks(self, module):
                if isinstance(module, (nn.ReLU, nn.Softplus)):
                    self.backward_hooks.extend(
                        _register_backward_hook(module, self._backward_hook, self))

        return GBP(model)


@pytest.mark.parametrize("arch", SEQUENTIAL)
@pytest.mark.parametrize("beta", [1.0, 3.0, 20.0])
def test_guided_backprop_softplus_convention(arch, beta):
    model, x, t = make(arch, "softplus", beta, seed=int(beta))
    close(A.guided_backprop(model, x, t), _CaptumGBPAllActivations(model).attribute(x, target=t))


def test_guided_backprop_softplus_tends_to_relu():
    from robattr.models import using_activation

    model, x, t = make("cnn", "softplus", 3.0, seed=5)
    with using_activation(model, "relu"):
        relu = A.guided_backprop(model, x, t)
    with using_activation(model, "softplus", 1e4):
        soft = A.guided_backprop(model, x, t)
    close(soft, relu, tol=1e-2)


def test_guided_backprop_leaves_the_model_unchanged():
    model, x, t = make("lenet", "relu", None)
    g0 = A.grad(model, x, t)
    A.guided_backprop(model, x, t)
    close(A.grad(model, x, t), g0, tol=0)
    assert not any(m._forward_hooks for m in model.modules())


# --------------------------------------------------------------------------- Zennit oracle
def _zennit_lrp(model, x, t, bias):
    """Zennit: ZBox on the first layer (pixel box mapped through Normalize), ZPlus on every
    later Linear/Conv (zero_params='bias' unless ``bias``), Pass on activations, the
    gradient through max-pooling; run on the model without its Normalize layer."""
    from zennit.composites import SpecialFirstLayerMapComposite
    from zennit.rules import Pass, ZBox, ZPlus
    from zennit.types import Activation, Convolution, Linear

    norm, net = model[0], model[1:]
    xn = norm(x).detach().requires_grad_(True)
    lo, hi = norm(torch.zeros_like(x)).detach(), norm(torch.ones_like(x)).detach()
    if isinstance(net[0], nn.Flatten):
        lo, hi = lo.flatten(1), hi.flatten(1)
    zplus = ZPlus() if bias else ZPlus(zero_params="bias")
    composite = SpecialFirstLayerMapComposite(
        layer_map=[(Activation, Pass()), (Convolution, zplus), (nn.Linear, zplus)],
        first_map=[(Linear, ZBox(lo, hi))])
    with composite.context(net) as hooked:
        out = hooked(xn)
        (rel,) = torch.autograd.grad(out, xn, nn.functional.one_hot(t, out.shape[1]).to(out))
    return rel


@pytest.mark.parametrize("act,beta", ACTS)
@pytest.mark.parametrize("arch", SEQUENTIAL)
@pytest.mark.parametrize("seed", [0, 1, 2])
def test_lrp_matches_zennit(arch, act, beta, seed):
    model, x, t = make(arch, act, beta, seed, info=GRAY if seed == 2 else RGB)
    close(A.lrp(model, x, t), _zennit_lrp(model, x, t, bias=False))
    close(A.lrp(model, x, t, rule=A.ZPlus(bias=True)), _zennit_lrp(model, x, t, bias=True))


def test_lrp_conserves_relevance_without_bias():
    model, x, t = make("lenet", "relu", None, seed=4)
    r = A.lrp(model, x, t)
    # conserved up to the stabilizer (1e-6 against denominators of ~0.05 here)
    assert torch.allclose(r.sum((1, 2, 3)), torch.ones(3, dtype=torch.float64), atol=1e-3)


def test_lrp_epsilon_rule_and_explicit_first_rule():
    model, x, t = make("mlp", "relu", None, seed=2)
    r = A.lrp(model, x, t, rule=A.Epsilon(1e-9), first_rule=A.Epsilon(1e-9))
    # epsilon-LRP on a bias-free path is gradient x input in the normalized space
    assert r.shape == x.shape and torch.isfinite(r).all()
    lo, hi = model[0](torch.zeros_like(x)), model[0](torch.ones_like(x))
    explicit = A.lrp(model, x, t, first_rule=A.ZBox(lo.flatten(1), hi.flatten(1)))
    close(explicit, A.lrp(model, x, t), tol=1e-12)


def test_lrp_rejects_unsupported_modules():
    # ResNets and a BatchNorm right after a Linear / Conv2d are handled (test_lrp_resnet.py)
    odd = nn.Sequential(nn.Flatten(), nn.Linear(12, 6), nn.ReLU(), nn.BatchNorm1d(6), nn.Linear(6, 2))
    with pytest.raises(ValueError, match=r"'3' \(BatchNorm1d\) follows '2'"):
        A.lrp(odd.eval(), torch.rand(2, 12))
    odd = nn.Sequential(nn.Flatten(), nn.Linear(12, 6), nn.LayerNorm(6), nn.Linear(6, 2))
    with pytest.raises(ValueError, match=r"'2' \(LayerNorm\)"):
        A.lrp(odd.eval(), torch.rand(2, 12))


# --------------------------------------------------------------------------- smoothing API
def test_ball_smooth_defaults_to_grad_and_composes():
    model, x, t = make("cnn", seed=6)
    noise = A.ball_noise(x, 5, r=0.7, seed=2)
    ref = torch.stack([A.grad(model, x + e, t) for e in noise]).mean(0)
    close(A.ball_smooth(model, x, t, r=0.7, noise=noise), ref, tol=1e-12)
    close(A.ball_smooth(model, x, t, r=0.7, n_samples=5, seed=2), ref, tol=1e-12)
    smoothed = A.ball_smoothed(A.grad, r=0.7, n_samples=5, seed=2)
    close(smoothed(model, x, t), ref, tol=1e-12)
    assert "ball_smoothed(grad" in smoothed.__name__
    # any base with the standard call shape, options bound with partial
    ig = partial(A.integrated_gradients, steps=4)
    ref_ig = torch.stack([ig(model, x + e, t) for e in noise]).mean(0)
    close(A.ball_smooth(model, x, t, r=0.7, base=ig, noise=noise, batch_size=4), ref_ig, tol=1e-12)
    # composition: a smoothed method is itself a base
    twice = A.ball_smoothed(A.ball_smoothed(A.guided_backprop, r=0.3, n_samples=2, seed=0),
                            r=0.5, n_samples=3, seed=1)
    assert twice(model, x, t).shape == x.shape


def test_uniform_grad_and_ball_smooth_on_the_same_noise_match_captum():
    from captum.attr import GuidedBackprop, Saliency

    model, x, t = make("lenet", "relu", None, seed=7)
    cube = A.cube_noise(x, 4, radius=0.05, seed=0)
    assert cube.abs().max() <= 0.05
    ref = torch.stack([Saliency(model).attribute(x + e, target=t, abs=False) for e in cube]).mean(0)
    close(A.uniform_grad(model, x, t, noise=cube), ref)
    close(A.uniform_grad(model, x, t, radius=0.05, n_samples=4, seed=0), ref)
    ball = A.ball_noise(x, 4, r=0.5, seed=3)
    ref = torch.stack([GuidedBackprop(model).attribute(x + e, target=t) for e in ball]).mean(0)
    close(A.ball_smooth(model, x, t, r=0.5, base=A.guided_backprop, noise=ball, batch_size=3), ref)


def test_target_none_is_the_predicted_class():
    model, x, _ = make("cnn", seed=8)
    pred = model(x).argmax(1)
    close(A.grad(model, x), A.grad(model, x, pred), tol=0)
    close(A.lrp(model, x, None), A.lrp(model, x, pred), tol=0)
    close(A.grad(model, x, 2), A.grad(model, x, torch.full((3,), 2)), tol=0)


def test_flat_inputs_are_accepted():
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(6, 8), nn.Softplus(beta=2.0), nn.Linear(8, 3)).double()
    x = torch.rand(4, 6, dtype=torch.float64)
    for name in ("grad", "input_x_grad", "integrated_gradients", "smoothgrad", "uniform_grad",
                 "guided_backprop", "deeplift"):
        assert A.METHODS[name](model, x, 1).shape == x.shape
    assert A.ball_smooth(model, x, 1, r=0.1, seed=0).shape == x.shape
    assert A.lrp(model, x, 1, first_rule=A.ZBox(0.0, 1.0)).shape == x.shape
    assert A.relex(model, x, 1, epochs=2, n_noisy=2, seed=0).shape == x.shape


def test_create_graph_reaches_the_parameters():
    model, x, t = make("mlp", seed=9)
    w = model[2].weight
    for f in (A.grad, A.guided_backprop, A.lrp, partial(A.integrated_gradients, steps=3)):
        a = f(model, x, t, create_graph=True)
        (gw,) = torch.autograd.grad(a.pow(2).sum(), w)
        assert gw.abs().sum() > 0
    # without create_graph nothing is kept
    assert not A.grad(model, x, t).requires_grad
    assert not A.lrp(model, x, t).requires_grad


# --------------------------------------------------------------------------- RelEx
def _relex_reference(model, x, t, *, epochs, lr, momentum, lambda1, lambda2):
    """One image, no noisy batch, zero init: torch.optim.SGD on the unit-norm gradient."""
    m = torch.zeros_like(x, requires_grad=True)
    opt = torch.optim.SGD([m], lr=lr, momentum=momentum)
    for _ in range(epochs):
        keep = torch.log_softmax(model(m * x), 1)[0, t]
        drop = torch.softmax(model((1 - m) * x), 1)[0, t]
        loss = -keep + lambda1 * m.abs().sum() - lambda2 * torch.log(1 - drop + 1e-7)
        opt.zero_grad()
        loss.backward(inputs=[m])
        m.grad /= m.grad.norm()
        opt.step()
        with torch.no_grad():
            m.clamp_(0, 1)
    return m.detach()


def test_relex_matches_a_reference_loop_and_is_per_image():
    model, x, t = make("cnn", seed=10)
    opts = dict(epochs=6, lr=0.05, momentum=0.9, lambda1=1e-3, lambda2=0.5)
    masks = A.relex(model, x, t, batch=False, init=0.0, **opts)
    for i in range(x.shape[0]):
        ref = _relex_reference(model, x[i:i + 1], int(t[i]), **opts)
        close(masks[i:i + 1], ref, tol=1e-10)


def test_relex_mask_range_reproducibility_and_loss():
    model, x, t = make("lenet", seed=11)
    m1 = A.relex(model, x, t, epochs=5, n_noisy=4, seed=3, batch_size=5)
    m2 = A.relex(model, x, t, epochs=5, n_noisy=4, seed=3, batch_size=64)
    assert m1.shape == x.shape and m1.min() >= 0 and m1.max() <= 1
    close(m1, m2, tol=1e-12)
    m0 = 0.01 * torch.rand_like(x)
    before = A.relex_loss(model, m0, x, t)
    after = A.relex_loss(model, A.relex(model, x, t, epochs=30, n_noisy=4, seed=1), x, t)
    assert (after < before).all()


# --------------------------------------------------------------------------- Captum baselines
def test_grad_cam_and_deeplift_wrap_captum():
    from captum.attr import DeepLift, LayerAttribution, LayerGradCam

    model, x, t = make("lenet", "relu", None, seed=12)
    cam = A.grad_cam(model, x, t)
    conv = A.last_conv(model)
    assert conv is model[8]
    ref = LayerAttribution.interpolate(
        LayerGradCam(model, conv).attribute(x, target=t, relu_attributions=True), (8, 8), "bilinear")
    assert cam.shape == x.shape
    close(cam, ref.expand_as(x))
    close(A.grad_cam(model, x, t, layer="8"), cam, tol=0)
    dl = A.deeplift(model, x, t)
    close(dl, DeepLift(model).attribute(x.clone(), baselines=torch.zeros_like(x), target=t))
    # DeepLIFT's completeness (exact without max-pooling, whose Captum rule is approximate)
    model, x, t = make("mlp", "softplus", 3.0, seed=12)
    gap = model(x).gather(1, t[:, None]) - model(torch.zeros_like(x)).gather(1, t[:, None])
    assert torch.allclose(A.deeplift(model, x, t).sum((1, 2, 3)), gap.squeeze(1), atol=1e-8)


def test_meaningful_perturbation_runs_and_deletes_evidence():
    model, x, t = make("cnn", "relu", None, seed=13, n=2)
    d = A.meaningful_perturbation(model, x, t, iterations=20, mask_size=4)
    assert d.shape == x.shape and d.min() >= 0 and d.max() <= 1
    assert torch.equal(d[:, 0], d[:, 1])


def test_meaningful_perturbation_lowers_the_class_score():
    """A constructed detector: logit 0 = a ±0.5 checkerboard template on the central 4 x 4
    patch, logit 1 = 0; the images carry the checkerboard there. Blurring the patch
    flattens it and kills the evidence. The perturbed input is rebuilt here from the
    returned deletion map with scipy's Gaussian blur (replicated borders, radius 3 sigma),
    not robattr's: ``(1 - d) x + d blur(x)``."""
    from scipy.ndimage import gaussian_filter

    patch = torch.tensor([[(i + j) % 2 for j in range(4)] for i in range(4)], dtype=torch.float64)
    lin = nn.Linear(64, 2).double()
    with torch.no_grad():
        lin.weight.zero_()
        lin.bias.zero_()
        lin.weight[0].view(8, 8)[2:6, 2:6] = 0.5 * (2 * patch - 1)
    model = nn.Sequential(nn.Flatten(), lin).eval()
    x = torch.full((2, 1, 8, 8), 0.5, dtype=torch.float64)
    x[0, 0, 2:6, 2:6] = patch
    x[1, 0, 2:6, 2:6] = 0.2 + 0.6 * patch
    x[1, 0, 0, :] = 0.9                                   # an edge the detector ignores
    t = torch.tensor([0, 0])
    d = A.meaningful_perturbation(model, x, t, iterations=100, mask_size=8, blur_sigma=1.0,
                                  l1=1e-3)
    assert d.shape == x.shape and d.min() >= 0 and d.max() <= 1
    blurred = torch.tensor(np.stack([[gaussian_filter(c, 1.0, mode="nearest", truncate=3.0)
                                      for c in im] for im in x.numpy()]))

    def score(z):
        with torch.no_grad():
            return model(z).softmax(1)[:, 0]

    clean, perturbed = score(x), score((1 - d) * x + d * blurred)
    assert bool((clean > 0.9).all())
    assert bool((perturbed < clean - 0.3).all()), (clean, perturbed)
    # the deletion sits on the evidence, and beats a uniform deletion of the same area
    inside = d[:, 0, 2:6, 2:6].mean((1, 2))
    outside = (d[:, 0].sum((1, 2)) - d[:, 0, 2:6, 2:6].sum((1, 2))) / 48
    assert bool((inside > outside + 0.3).all()), (inside, outside)
    area = d.mean((1, 2, 3), keepdim=True)
    assert bool((perturbed < score((1 - area) * x + area * blurred) - 0.1).all())


# --------------------------------------------------------------------------- bad input
ALL = sorted(A.METHODS)
EXTRA = {"ball_smooth": dict(r=0.5), "relex": dict(epochs=1, n_noisy=1),
         "meaningful_perturbation": dict(iterations=1)}


def _call(name, model, x, target, **kw):
    return A.METHODS[name](model, x, target, **{**EXTRA.get(name, {}), **kw})


@pytest.mark.parametrize("name", ALL)
def test_bad_x_and_target(name):
    model, x, t = make("lenet", "relu", None, n=2)
    with pytest.raises(ValueError, match="x must be a floating"):
        _call(name, model, (x * 255).to(torch.uint8), t)
    with pytest.raises(ValueError, match="x must be a batch"):
        _call(name, model, x[0], t)
    with pytest.raises(ValueError, match="x must be a torch.Tensor"):
        _call(name, model, x.numpy(), t)
    with pytest.raises(ValueError, match="target must hold integer"):
        _call(name, model, x, t.double())
    with pytest.raises(ValueError, match="target must hold one class per input"):
        _call(name, model, x, torch.tensor([0, 1, 2]))
    with pytest.raises(ValueError, match="target must be >= 0"):
        _call(name, model, x, torch.tensor([0, -1]))
    with pytest.raises(ValueError, match="out of range"):
        _call(name, model, x, torch.tensor([0, 5]))
    with pytest.raises(ValueError, match="model must be a torch.nn.Module"):
        _call(name, lambda z: z, x, t)


@pytest.mark.parametrize("name", sorted(set(ALL) - set(A.DIFFERENTIABLE)))
def test_non_differentiable_methods_refuse_create_graph(name):
    model, x, t = make("lenet", "relu", None, n=2)
    with pytest.raises(A.NotDifferentiableError, match=name):
        _call(name, model, x, t, create_graph=True)


@pytest.mark.parametrize("name,kw,arg", [
    ("integrated_gradients", dict(steps=0), "steps"),
    ("integrated_gradients", dict(steps=2.5), "steps"),
    ("integrated_gradients", dict(method="simpson"), "method"),
    ("integrated_gradients", dict(steps=1, method="trapezoid"), "steps"),
    ("integrated_gradients", dict(batch_size=0), "batch_size"),
    ("integrated_gradients", dict(baseline=torch.zeros(2, 3)), "baseline"),
    ("smoothgrad", dict(n_samples=0), "n_samples"),
    ("smoothgrad", dict(noise_ratio=-0.1), "noise_ratio"),
    ("smoothgrad", dict(sigma=0.0), "sigma"),
    ("smoothgrad", dict(batch_size=-1), "batch_size"),
    ("smoothgrad", dict(seed=1, generator=torch.Generator()), "generator or seed"),
    ("smoothgrad", dict(seed=1.5), "seed"),
    ("smoothgrad", dict(noise=torch.zeros(3, 2, 3)), "noise"),
    ("uniform_grad", dict(radius=0), "radius"),
    ("uniform_grad", dict(n_samples=-3), "n_samples"),
    ("ball_smooth", dict(r=-1.0), "r"),
    ("ball_smooth", dict(r=float("inf")), "r"),
    ("ball_smooth", dict(r=1.0, n_samples=0), "n_samples"),
    ("ball_smooth", dict(r=1.0, base="grad"), "base"),
    ("relex", dict(n_noisy=0), "n_noisy"),
    ("relex", dict(epochs=0), "epochs"),
    ("relex", dict(lr=0), "lr"),
    ("relex", dict(lambda1=-1), "lambda1"),
    ("meaningful_perturbation", dict(iterations=0), "iterations"),
    ("grad_cam", dict(layer="nope"), "layer"),
])
def test_bad_options_name_the_argument(name, kw, arg):
    model, x, t = make("lenet", "relu", None, n=2)
    with pytest.raises(ValueError, match=arg):
        A.METHODS[name](model, x, t, **{**EXTRA.get(name, {}), **kw})


def test_bad_ball_smoothed_and_noise_helpers():
    with pytest.raises(ValueError, match="r must be"):
        A.ball_smoothed(A.grad, r=0)
    with pytest.raises(ValueError, match="n_samples"):
        A.ball_noise(torch.rand(2, 3), 0, r=1.0)
    with pytest.raises(ValueError, match="radius"):
        A.cube_noise(torch.rand(2, 3), 2, radius=-1)
    with pytest.raises(ValueError, match="grad_cam needs image inputs"):
        A.grad_cam(nn.Sequential(nn.Linear(3, 2)), torch.rand(2, 3))
    with pytest.raises(ValueError, match="ReLU or Softplus"):
        A.guided_backprop(nn.Sequential(nn.Linear(3, 2)), torch.rand(2, 3))


# --------------------------------------------------------------------------- post-processing
def test_reduce_channels():
    a = torch.tensor([[[[1.0, -2.0]], [[-3.0, 4.0]]]])  # 1 x 2 x 1 x 2
    assert A.reduce_channels(a).tolist() == [[[4.0, 6.0]]]
    assert A.reduce_channels(a, "sum").tolist() == [[[-2.0, 2.0]]]
    assert A.reduce_channels(a, "mean").tolist() == [[[-1.0, 1.0]]]
    assert A.reduce_channels(a, "abs_mean", keepdim=True).shape == (1, 1, 1, 2)
    with pytest.raises(ValueError, match="how"):
        A.reduce_channels(a, "max")
    # fewer than four axes: no channel axis, the maps are taken as already reduced
    assert torch.equal(A.reduce_channels(a[0]), a[0].abs())


def test_percentile_and_minmax_normalize():
    torch.manual_seed(0)
    a = torch.randn(3, 10, 10, dtype=torch.float64).abs()
    p = A.percentile_normalize(a, q=99)
    assert p.min() >= 0 and p.max() <= 1
    for i in range(3):
        v = a[i].numpy()
        ref = np.clip((v - v.min()) / (np.percentile(v, 99) - v.min()), 0, 1)
        np.testing.assert_allclose(p[i].numpy(), ref, atol=1e-12)
    m = A.minmax_normalize(a)
    assert torch.allclose(m.flatten(1).amin(1), torch.zeros(3, dtype=torch.float64))
    assert torch.allclose(m.flatten(1).amax(1), torch.ones(3, dtype=torch.float64))
    with pytest.raises(ValueError, match="q must be"):
        A.percentile_normalize(a, q=0)


def test_saliency_wang2020():
    model, x, t = make("cnn", seed=14)
    g = A.grad(model, x, t)
    s = A.saliency_wang2020(g, x)
    assert s.shape == (3, 8, 8)
    assert torch.allclose(s.sum((1, 2)), torch.full((3,), 64.0, dtype=torch.float64))
    ref = (g * x).abs().sum(1)
    close(s, ref / ref.sum((1, 2), keepdim=True) * 64, tol=1e-12)
    close(A.saliency_wang2020(A.input_x_grad(model, x, t)), s, tol=1e-12)

"""Tests of robattr.attributions.relex.grad_cam_graph, the differentiable Grad-CAM that
004's targeted-transfer notebook attacks (oracle: Captum's Grad-CAM via robattr)."""
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st
from torch import nn

from robattr.attacks import topk_attack
from robattr.attributions import grad_cam
from robattr.attributions.relex import grad_cam_graph


def cnn(seed, act=nn.ReLU, channels=3, width=6, classes=4):
    torch.manual_seed(seed)
    return nn.Sequential(nn.Conv2d(channels, width, 3, padding=1), act(), nn.MaxPool2d(2),
                         nn.Conv2d(width, width, 3, padding=1), act(), nn.Flatten(),
                         nn.Linear(width * 16, classes)).eval()


@settings(max_examples=25, deadline=None)
@given(seed=st.integers(0, 10_000), n=st.integers(1, 4), channels=st.sampled_from([1, 3]),
       relu=st.booleans())
def test_matches_captum_on_random_networks(seed, n, channels, relu):
    net = cnn(seed, channels=channels)
    x = torch.rand(n, channels, 8, 8, generator=torch.Generator().manual_seed(seed))
    t = torch.randint(0, 4, (n,), generator=torch.Generator().manual_seed(seed + 1))
    ours = grad_cam_graph(net, x, t, relu=relu)
    ref = grad_cam(net, x, t, relu=relu)
    assert ours.shape == x.shape
    torch.testing.assert_close(ours, ref, atol=1e-5, rtol=1e-4)


def test_named_layer_and_default_target():
    net = cnn(0)
    x = torch.rand(2, 3, 8, 8)
    a = grad_cam_graph(net, x, layer="0")
    b = grad_cam(net, x, layer=net[0])
    torch.testing.assert_close(a, b, atol=1e-5, rtol=1e-4)


def test_differentiable_and_gradient_matches_finite_differences():
    net = cnn(1, act=nn.Softplus).double()
    x = torch.rand(1, 3, 8, 8, dtype=torch.float64, requires_grad=True)
    t = torch.tensor([2])
    cam = grad_cam_graph(net, x, t, create_graph=True, relu=False)
    assert cam.requires_grad
    w = torch.randn_like(cam)
    (g,) = torch.autograd.grad((cam * w).sum(), x)
    assert g.abs().sum() > 0
    d = torch.randn_like(x)
    h = 1e-6
    f = lambda z: float((grad_cam_graph(net, z, t, relu=False) * w).sum())
    fd = (f(x.detach() + h * d) - f(x.detach() - h * d)) / (2 * h)
    assert abs(fd - float((g * d).sum())) < 1e-5 * max(1.0, abs(fd))


def test_no_graph_by_default_and_hook_removed():
    net = cnn(2)
    x = torch.rand(2, 3, 8, 8)
    out = grad_cam_graph(net, x)
    assert not out.requires_grad
    assert all(len(m._forward_hooks) == 0 for m in net.modules())


def test_attack_through_it_moves_the_map():
    net = cnn(3)
    x = torch.rand(4, 3, 8, 8, generator=torch.Generator().manual_seed(3))
    res = topk_attack(net, x, k=8, eps=0.2, method=grad_cam_graph, steps=15,
                      surrogate_beta=10.0, seed=0)
    assert (res.x_adv - x).abs().max() <= 0.2 + 1e-6
    assert float(res.criterion.mean()) < 1.0          # the top-k set changed somewhere
    with torch.no_grad():
        assert torch.equal(net(res.x_adv).argmax(1), net(x).argmax(1))


@pytest.mark.parametrize("bad, kw", [
    (torch.rand(2, 64), {}),                            # not an image
    (torch.rand(2, 3, 8, 8), {"layer": "nope"}),        # unknown layer name
    (torch.rand(2, 3, 8, 8), {"layer": 3}),             # not a module
])
def test_bad_inputs(bad, kw):
    with pytest.raises(ValueError):
        grad_cam_graph(cnn(0), bad, **kw)

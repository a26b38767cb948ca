"""LRP on ResNets (issue 29, item 2): BatchNorm folded, residual sums split, against Zennit.

The oracle is Zennit 0.5 with the same composite as tests/library/test_attributions.py's (ZBox on
the first layer, ZPlus on every later conv / linear, Pass on activations) plus Zennit's
``Norm`` rule on its ``Sum`` and ``AvgPool`` layers, and its canonizers: ``ResNetCanonizer``
on torchvision's own ResNet; ``SequentialMergeBatchNorm`` and a test-side
``AttributeCanonizer`` that puts a ``Sum`` into robattr's blocks (``BasicBlock``,
``_SplitBlock``). Zennit leaves each merged BatchNorm in place as ``x / sqrt(1 + eps)``, a
factor 1 - 5e-6 on both passes (about 4e-5 relative on a ResNet-18); :class:`_ZeroEps` sets
eps to 0 after the merge so the two canonical networks are the same function.
A flat model with a BatchNorm1d checks the fold of a biased Linear. Everything runs in
float64 on random weights with random BatchNorm statistics, batch 2.
"""
from __future__ import annotations

import copy
from types import SimpleNamespace

import pytest
import torch
from torch import nn

from robattr import attributions as A
from robattr.models import (BasicBlock, Normalize, ResNetCIFAR, _SplitBlock, build,
                            set_activation)

RGB16 = SimpleNamespace(shape=(3, 16, 16), num_classes=5, mean=(0.3, 0.4, 0.5),
                        std=(0.2, 0.3, 0.25))
RGB32 = SimpleNamespace(**{**vars(RGB16), "shape": (3, 32, 32)})
GRAY = SimpleNamespace(shape=(1, 8, 8), num_classes=4, mean=(0.45,), std=(0.3,))


pytestmark = pytest.mark.usefixtures("one_thread")   # tiny float64 nets: one thread is much faster


def close(a, b, tol=1e-9):
    assert a.shape == b.shape
    err = (a - b).abs().max().item()
    assert err <= tol * max(1e-12, b.abs().max().item()), err


def randomize_bn(model: nn.Module, seed: int) -> nn.Module:
    """Non-trivial BatchNorm statistics and affine parameters (a fresh BN folds to nothing)."""
    g = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for m in model.modules():
            if isinstance(m, nn.BatchNorm2d):
                n = m.num_features
                m.running_mean.copy_(torch.randn(n, generator=g) * 0.2)
                m.running_var.copy_(torch.rand(n, generator=g) + 0.5)
                m.weight.copy_(torch.rand(n, generator=g) + 0.5)
                m.bias.copy_(torch.randn(n, generator=g) * 0.1)
    return model


def make(arch, info=RGB16, act="relu", beta=None, seed=0):
    torch.manual_seed(seed)
    model = randomize_bn(build(arch, info, act, beta).double().eval(), seed + 100)
    x = torch.rand((2,) + tuple(info.shape), dtype=torch.float64)
    return model, x, torch.tensor([0, info.num_classes - 1])


# --------------------------------------------------------------------------- Zennit oracle
def _zennit_canonizers(kind):
    from zennit.canonizers import AttributeCanonizer, Canonizer, SequentialMergeBatchNorm
    from zennit.layer import Sum
    from zennit.torchvision import ResNetCanonizer

    class _ZeroEps(Canonizer):
        """After the merge: the identity BatchNorms Zennit leaves behind become exact."""

        def apply(self, root):
            inst = _ZeroEps()
            inst.register(root)
            return [inst]

        def register(self, root=None):
            bn_types = (nn.BatchNorm1d, nn.BatchNorm2d)
            self.bns = [m for m in root.modules() if isinstance(m, bn_types)]
            self.eps = [m.eps for m in self.bns]
            for m in self.bns:
                m.eps = 0.0

        def remove(self):
            for m, eps in zip(self.bns, self.eps):
                m.eps = eps

    def basic_forward(self, x):
        out = self.bn2(self.conv2(self.act1(self.bn1(self.conv1(x)))))
        return self.act2(self.canonizer_sum(torch.stack([self.shortcut(x), out], dim=-1)))

    def split_forward(self, x):
        out = self.bn2(self.conv2(self.relu(self.bn1(self.conv1(x)))))
        if self.conv3 is not None:
            out = self.bn3(self.conv3(self.relu2(out)))
        identity = x if self.downsample is None else self.downsample(x)
        return self.relu_out(self.canonizer_sum(torch.stack([identity, out], dim=-1)))

    def attributes(name, module):
        fwd = {BasicBlock: basic_forward, _SplitBlock: split_forward}.get(type(module))
        return None if fwd is None else {"forward": fwd.__get__(module), "canonizer_sum": Sum()}

    if kind == "torchvision":
        return [ResNetCanonizer(), _ZeroEps()]
    if kind == "merge":
        return [SequentialMergeBatchNorm(), _ZeroEps()]
    return [SequentialMergeBatchNorm(), AttributeCanonizer(attributes), _ZeroEps()]


def zennit_lrp(norm, net, x, t, bias, kind="robattr"):
    from zennit.composites import SpecialFirstLayerMapComposite
    from zennit.layer import Sum
    from zennit.rules import Norm, Pass, ZBox, ZPlus
    from zennit.types import Activation, AvgPool, Convolution, Linear

    net = copy.deepcopy(net)  # the canonizers change it while they are registered
    xn = norm(x).detach().requires_grad_(True)
    lo, hi = norm(torch.zeros_like(x)).detach(), norm(torch.ones_like(x)).detach()
    zplus = ZPlus() if bias else ZPlus(zero_params="bias")
    composite = SpecialFirstLayerMapComposite(
        layer_map=[(Activation, Pass()), (Convolution, zplus), (nn.Linear, zplus),
                   (Sum, Norm()), (AvgPool, Norm())],
        first_map=[(Linear, ZBox(lo, hi))], canonizers=_zennit_canonizers(kind))
    with composite.context(net) as hooked:
        out = hooked(xn)
        (rel,) = torch.autograd.grad(out, xn, nn.functional.one_hot(t, out.shape[1]).to(out))
    return rel


@pytest.mark.parametrize("block", ["basic", "bottleneck"])
def test_lrp_matches_zennit_on_torchvision_resnet(block):
    """torchvision's own ResNet (its blocks reuse one ReLU module), Zennit's ResNetCanonizer."""
    from torchvision.models import resnet18
    from torchvision.models.resnet import Bottleneck, ResNet

    torch.manual_seed(3)
    net = (resnet18(weights=None, num_classes=5) if block == "basic"
           else ResNet(Bottleneck, [1, 1, 1, 1], num_classes=5, width_per_group=16))
    net = randomize_bn(net.double().eval(), 4)
    norm = Normalize(RGB32.mean, RGB32.std).double()
    model = nn.Sequential(norm, net).eval()
    x, t = torch.rand(2, 3, 32, 32, dtype=torch.float64), torch.tensor([1, 3])
    for bias in (False, True):
        close(A.lrp(model, x, t, rule=A.ZPlus(bias=bias)),
              zennit_lrp(norm, net, x, t, bias, kind="torchvision"))


@pytest.mark.parametrize("arch,info,act,beta,biases", [
    ("resnet20", RGB16, "relu", None, (False, True)),
    ("resnet20", RGB16, "softplus", 3.0, (False, True)),
    ("resnet20", GRAY, "relu", None, (False,)),
    ("resnet18_cifar", RGB16, "relu", None, (True,)),
    ("resnet18", RGB32, "relu", None, (False,)),
    ("resnet50", RGB32, "relu", None, (True,)),
])
def test_lrp_matches_zennit_on_robattr_resnets(arch, info, act, beta, biases):
    model, x, t = make(arch, info, act, beta)
    for bias in biases:
        # Softplus: no exact zeros, ratios of small sums; agreement ~1e-11 relative
        close(A.lrp(model, x, t, rule=A.ZPlus(bias=bias)),
              zennit_lrp(model.normalize, model.net, x, t, bias), tol=1e-9)


def test_lrp_folds_batchnorm1d_into_a_biased_linear_like_zennit():
    """BatchNorm1d after a Linear that has a bias (the fold's other branch)."""
    torch.manual_seed(11)
    net = nn.Sequential(nn.Flatten(), nn.Linear(12, 6), nn.BatchNorm1d(6), nn.ReLU(),
                        nn.Linear(6, 3)).double().eval()
    with torch.no_grad():
        bn = net[2]
        bn.running_mean.uniform_(-0.3, 0.3)
        bn.running_var.uniform_(0.5, 1.5)
        bn.weight.uniform_(0.5, 1.5)
        bn.bias.uniform_(-0.2, 0.2)
    x, t = torch.rand(2, 12, dtype=torch.float64), torch.tensor([0, 2])
    for bias in (False, True):
        # no Normalize layer: the box is [0, 1] itself (an identity "norm" for the oracle)
        got = A.lrp(net, x, t, rule=A.ZPlus(bias=bias))
        ref = zennit_lrp(nn.Identity(), net, x, t, bias, kind="merge")
        close(got, ref)


# --------------------------------------------------------------------------- properties
def test_lrp_resnet_conserves_relevance_and_leaves_the_model_alone():
    model, x, t = make("resnet20", seed=5)
    before = {k: v.clone() for k, v in model.state_dict().items()}
    r = A.lrp(model, x, t)  # z+ without bias: the folded biases take no relevance
    assert torch.allclose(r.sum((1, 2, 3)), torch.ones(2, dtype=torch.float64), atol=1e-3)
    after = model.state_dict()
    assert all(torch.equal(before[k], after[k]) for k in before)
    assert not r.requires_grad


def test_lrp_resnet_in_float32_agrees_with_float64():
    model, x, t = make("resnet20", seed=6)
    r64 = A.lrp(model, x, t)
    r32 = A.lrp(copy.deepcopy(model).float(), x.float(), t)
    assert r32.dtype == torch.float32
    close(r32.double(), r64, tol=1e-4)


def _tiny(shortcut, act, beta, seed):
    torch.manual_seed(seed)
    net = ResNetCIFAR(3, 4, widths=(4, 8), blocks=(1, 1), shortcut=shortcut)
    model = set_activation(nn.Sequential(Normalize(RGB16.mean, RGB16.std), net), act, beta)
    return randomize_bn(model.double().eval(), seed)


@pytest.mark.parametrize("shortcut,act,beta", [("A", "softplus", 2.0), ("B", "softplus", 2.0),
                                               ("B", "relu", None)])
def test_lrp_resnet_input_gradient_matches_finite_differences(shortcut, act, beta):
    """The attacks' derivative: d<w, LRP(x)>/dx (create_graph) against central differences
    (gradcheck's fast mode: random directions). LRP's ratios have small denominators on a
    ReLU net, so its second derivative is large there: a step of 1e-7 keeps the
    differences' O(h^2) error below the tolerance (1e-6 was 7e-5 off, 1e-4 crossed a kink)."""
    model = _tiny(shortcut, act, beta, seed=7)
    g = torch.Generator().manual_seed(8)
    x = torch.rand(2, 3, 8, 8, dtype=torch.float64, generator=g)
    w = torch.randn(2, 3, 8, 8, dtype=torch.float64, generator=g)
    t = torch.tensor([1, 2])

    def f(z):
        return (A.lrp(model, z, t, create_graph=True) * w).sum()

    assert torch.autograd.gradcheck(f, (x.clone().requires_grad_(True),), eps=1e-7,
                                    atol=1e-7, rtol=1e-5, fast_mode=True)


def test_lrp_resnet_parameter_gradient_reaches_batchnorm():
    """Through the fold: d<w, LRP>/d(BN weight) against a central difference."""
    model = _tiny("B", "softplus", 2.0, seed=9)
    x, t = torch.rand(2, 3, 8, 8, dtype=torch.float64), torch.tensor([0, 3])
    w = torch.randn_like(x)
    bn = model[1].layers[1][0].bn2
    (grad,) = torch.autograd.grad((A.lrp(model, x, t, create_graph=True) * w).sum(), bn.weight)
    v, h = torch.randn_like(bn.weight), 1e-6
    vals = []
    for sign in (1, -1):
        with torch.no_grad():
            bn.weight.add_(sign * h * v)
            vals.append((A.lrp(model, x, t) * w).sum())
            bn.weight.sub_(sign * h * v)
    fd = (vals[0] - vals[1]) / (2 * h)
    assert abs((grad * v).sum().item() - fd.item()) <= 1e-6 * max(1.0, abs(fd.item()))


# --------------------------------------------------------------------------- what it refuses
def test_lrp_refuses_what_it_cannot_handle():
    x = torch.rand(2, 3, 8, 8, dtype=torch.float64)
    model = make("resnet20")[0].train()
    with pytest.raises(ValueError, match="training mode.*model.eval"):
        A.lrp(model, x, 0)
    loose = nn.Sequential(nn.Conv2d(3, 4, 3), nn.ReLU(), nn.BatchNorm2d(4), nn.Flatten(),
                          nn.Linear(144, 2)).double().eval()
    with pytest.raises(ValueError, match=r"'2' \(BatchNorm2d\) follows '1'"):
        A.lrp(loose, x, 0)
    unknown = nn.Sequential(nn.Conv2d(3, 4, 3), nn.GroupNorm(2, 4)).double().eval()
    with pytest.raises(ValueError, match=r"module '1' \(GroupNorm\)"):
        A.lrp(unknown, x, 0)
    stats = nn.Sequential(nn.Conv2d(3, 4, 3), nn.BatchNorm2d(4, track_running_stats=False),
                          nn.Flatten(), nn.Linear(144, 2)).double().eval()
    with pytest.raises(ValueError, match="running statistics"):
        A.lrp(stats, x, 0)

    class MyBlock(BasicBlock):  # a subclass may compute something else in forward
        pass

    net = _tiny("B", "relu", None, seed=0)
    net[1].layers[0][0] = MyBlock(4, 4).double().eval()
    with pytest.raises(ValueError, match=r"container '1.layers.0.0' \(MyBlock\)"):
        A.lrp(net, x, 0)
    inside = nn.Sequential(BasicBlock(3, 3).double().eval(), nn.Flatten(), nn.Linear(192, 2))
    with pytest.raises(ValueError, match="inside a residual block: pass first_rule"):
        A.lrp(inside.double(), x, 0)
    assert A.lrp(inside.double(), x, 0, first_rule=A.ZBox(0.0, 1.0)).shape == x.shape

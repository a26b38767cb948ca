"""Models: a Normalize layer first, then the network, so every input is raw [0, 1] pixels.

Every model here takes pixels in [0, 1]; the dataset's mean/std live in a
:class:`Normalize` layer (``model[0]``), so every epsilon in the book is in pixel units.
Every activation is an ``nn.Module`` (no functional ReLU inside a ``forward``), which is
what lets :func:`set_activation` swap ReLU for Softplus(beta) in place.

>>> from types import SimpleNamespace
>>> info = SimpleNamespace(shape=(1, 8, 8), num_classes=10, mean=(0.3,), std=(0.4,))
>>> model = build("lenet", info)
>>> model(torch.rand(2, 1, 8, 8)).shape
torch.Size([2, 10])
>>> set_activation(model, "softplus", beta=3.0).activation
'softplus'
"""
from __future__ import annotations


import contextlib
import math
import os
from collections import OrderedDict
from collections.abc import Iterator, Mapping, Sequence
from types import SimpleNamespace
from typing import Any, NamedTuple

import numpy as np

import torch
from torch import nn

from robattr.catalog import ARCHS

__all__ = [
    "ARCHS", "ACTIVATIONS", "Normalize", "build", "set_activation", "get_activation",
    "using_activation", "has_relu", "not_twice_differentiable", "load_weights", "ResNetCIFAR",
    "BasicBlock", "LambdaShortcut", "random_mlp", "sample_random_mlp", "RandomMLP", "PairLogit",
    "two_layer_scorer", "predict", "correctly_classified",
]

ACTIVATIONS = ("relu", "softplus")


# --------------------------------------------------------------------------- layers
class Normalize(nn.Module):
    """``(x - mean) / std`` per channel, with mean and std stored as buffers.

    The first layer of every robattr model: inputs stay in [0, 1] pixel units.
    """

    def __init__(self, mean: Sequence[float], std: Sequence[float]):
        super().__init__()
        mean_t = torch.as_tensor(mean, dtype=torch.float32).reshape(1, -1, 1, 1)
        std_t = torch.as_tensor(std, dtype=torch.float32).reshape(1, -1, 1, 1)
        if mean_t.shape != std_t.shape:
            raise ValueError(f"mean and std need one value per channel, got {mean} and {std}")
        if not bool((std_t > 0).all()):
            raise ValueError(f"std must be > 0 in every channel, got {std}")
        self.register_buffer("mean", mean_t)
        self.register_buffer("std", std_t)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return (x - self.mean) / self.std

    def extra_repr(self) -> str:
        return f"mean={self.mean.flatten().tolist()}, std={self.std.flatten().tolist()}"


def _check_activation(activation: str, beta: float | None) -> float | None:
    """Validate an (activation, beta) pair; return beta as a float (or None for ReLU)."""
    if activation not in ACTIVATIONS:
        raise ValueError(f"activation must be one of {ACTIVATIONS}, got {activation!r}")
    if activation == "relu":
        if beta is not None:
            raise ValueError(f"beta is only used by softplus; got beta={beta!r} with relu")
        return None
    if beta is None or isinstance(beta, bool) or not isinstance(beta, (int, float)):
        raise ValueError(f"softplus needs an explicit beta > 0, got beta={beta!r}")
    if not (math.isfinite(beta) and beta > 0):
        raise ValueError(f"softplus needs a finite beta > 0, got beta={beta!r}")
    return float(beta)


def _act(activation: str = "relu", beta: float | None = None) -> nn.Module:
    beta = _check_activation(activation, beta)
    if activation == "relu":
        return nn.ReLU(inplace=False)
    return nn.Softplus(beta=beta)


# --------------------------------------------------------------------------- small nets
def _mlp(c: int, h: int, w: int, k: int) -> list[nn.Module]:
    """64 -> 128 -> 64 -> classes for digits (any input size is flattened)."""
    return [nn.Flatten(), nn.Linear(c * h * w, 128), _act(), nn.Linear(128, 64), _act(),
            nn.Linear(64, k)]


def _cnn(c: int, h: int, w: int, k: int) -> list[nn.Module]:
    """Two 3x3 convs (32, 64), each followed by 2x2 max-pooling, then 128 hidden units."""
    return [
        nn.Conv2d(c, 32, 3, padding=1), _act(), nn.MaxPool2d(2),
        nn.Conv2d(32, 64, 3, padding=1), _act(), nn.MaxPool2d(2),
        nn.Flatten(), nn.Linear(64 * (h // 4) * (w // 4), 128), _act(), nn.Linear(128, k),
    ]


def _lenet(c: int, h: int, w: int, k: int) -> list[nn.Module]:
    """The "LeNet" of Joo et al. (AAAI 2023, paper 003), appendix "Architecture".

    Four 3x3 convs (32, 32, 64, 64; padding 1), two 2x2 max-pools, Linear(64*H/4*W/4, 256),
    Linear(256, classes): 4096 in-features at CIFAR's 32x32, 256 at digits' 8x8.
    """
    return [
        nn.Conv2d(c, 32, 3, stride=1, padding=1), _act(),
        nn.Conv2d(32, 32, 3, stride=1, padding=1), _act(),
        nn.MaxPool2d(kernel_size=2, stride=2),
        nn.Conv2d(32, 64, 3, stride=1, padding=1), _act(),
        nn.Conv2d(64, 64, 3, stride=1, padding=1), _act(),
        nn.MaxPool2d(kernel_size=2, stride=2),
        nn.Flatten(),
        nn.Linear(64 * (h // 4) * (w // 4), 256), _act(),
        nn.Linear(256, k),
    ]


# --------------------------------------------------------------------------- CIFAR ResNets
class LambdaShortcut(nn.Module):
    """He et al.'s option-A shortcut: subsample by ``stride`` and zero-pad the channels."""

    def __init__(self, in_planes: int, planes: int, stride: int):
        super().__init__()
        self.stride, self.pad = stride, planes - in_planes

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = x[:, :, ::self.stride, ::self.stride]
        return nn.functional.pad(x, (0, 0, 0, 0, self.pad // 2, self.pad - self.pad // 2))


class BasicBlock(nn.Module):
    """conv3x3-BN-act-conv3x3-BN, plus shortcut, then act (He et al., CVPR 2016).

    ``shortcut="B"`` projects with 1x1 conv + BN when the shape changes (ResNet-18 CIFAR);
    ``shortcut="A"`` subsamples and zero-pads (ResNet-20, parameter-free).
    """

    expansion = 1

    def __init__(self, in_planes: int, planes: int, stride: int = 1, shortcut: str = "B"):
        super().__init__()
        self.conv1 = nn.Conv2d(in_planes, planes, 3, stride=stride, padding=1, bias=False)
        self.bn1 = nn.BatchNorm2d(planes)
        self.act1 = _act()
        self.conv2 = nn.Conv2d(planes, planes, 3, stride=1, padding=1, bias=False)
        self.bn2 = nn.BatchNorm2d(planes)
        self.act2 = _act()
        if stride == 1 and in_planes == planes:
            self.shortcut: nn.Module = nn.Identity()
        elif shortcut == "A":
            self.shortcut = LambdaShortcut(in_planes, planes, stride)
        else:
            self.shortcut = nn.Sequential(
                nn.Conv2d(in_planes, planes, 1, stride=stride, bias=False), nn.BatchNorm2d(planes))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        out = self.act1(self.bn1(self.conv1(x)))
        out = self.bn2(self.conv2(out))
        return self.act2(out + self.shortcut(x))


class ResNetCIFAR(nn.Module):
    """CIFAR-style ResNet (He et al., CVPR 2016): 3x3 stem at stride 1, no max-pool,
    stages of BasicBlocks, global average pooling, one linear layer.

    ``widths=(64, 128, 256, 512), blocks=(2, 2, 2, 2), shortcut="B"`` is the widely used
    CIFAR ResNet-18 (the kuangliu/pytorch-cifar layout 003 uses); ``widths=(16, 32, 64),
    blocks=(3, 3, 3), shortcut="A"`` is He et al.'s ResNet-20 (Sec. 4.2, option A).
    Average pooling is adaptive, so other input sizes work too (at 32x32 it is the same
    as the 4x4 / 8x8 pooling of the original code).
    """

    def __init__(self, in_channels: int, num_classes: int, widths: Sequence[int],
                 blocks: Sequence[int], shortcut: str = "B"):
        super().__init__()
        self.conv1 = nn.Conv2d(in_channels, widths[0], 3, stride=1, padding=1, bias=False)
        self.bn1 = nn.BatchNorm2d(widths[0])
        self.act1 = _act()
        layers, in_planes = [], widths[0]
        for i, (planes, n) in enumerate(zip(widths, blocks)):
            stage = []
            for j in range(n):
                stride = 2 if (i > 0 and j == 0) else 1
                stage.append(BasicBlock(in_planes, planes, stride, shortcut))
                in_planes = planes
            layers.append(nn.Sequential(*stage))
        self.layers = nn.Sequential(*layers)
        self.pool = nn.AdaptiveAvgPool2d(1)
        self.flatten = nn.Flatten()
        self.linear = nn.Linear(in_planes, num_classes)
        for m in self.modules():
            if isinstance(m, nn.Conv2d):
                nn.init.kaiming_normal_(m.weight, mode="fan_out", nonlinearity="relu")

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        out = self.act1(self.bn1(self.conv1(x)))
        out = self.layers(out)
        return self.linear(self.flatten(self.pool(out)))


def _torchvision_resnet(arch: str, c: int, k: int) -> nn.Module:
    """torchvision's ImageNet ResNet (He et al., CVPR 2016), random init (weights=None).

    A non-RGB input gets a fresh 7x7 stem with the right number of input channels.
    torchvision's blocks call one ReLU module two or three times; each block is given
    one activation module per use (same maths, same state dict), so hook-based
    methods (DeepLIFT, Guided Backprop) and ``set_activation`` see every use.
    """
    import torchvision
    from torchvision.models.resnet import BasicBlock, Bottleneck

    net = getattr(torchvision.models, arch)(weights=None, num_classes=k)
    if c != 3:
        net.conv1 = nn.Conv2d(c, 64, kernel_size=7, stride=2, padding=3, bias=False)
        nn.init.kaiming_normal_(net.conv1.weight, mode="fan_out", nonlinearity="relu")
    for layer in (net.layer1, net.layer2, net.layer3, net.layer4):
        for i, block in enumerate(layer):
            assert isinstance(block, (BasicBlock, Bottleneck))
            layer[i] = _SplitBlock(block)
    net.relu = nn.ReLU(inplace=False)
    return net


class _SplitBlock(nn.Module):
    """A torchvision BasicBlock or Bottleneck, same submodules and state-dict keys,
    with a fresh activation module for each of its uses."""

    def __init__(self, block: nn.Module):
        super().__init__()
        self.conv1, self.bn1, self.conv2, self.bn2 = block.conv1, block.bn1, block.conv2, block.bn2
        self.conv3 = getattr(block, "conv3", None)          # Bottleneck only
        self.bn3 = getattr(block, "bn3", None)
        self.downsample = block.downsample
        self.relu = nn.ReLU(inplace=False)
        self.relu2 = nn.ReLU(inplace=False) if self.conv3 is not None else None
        self.relu_out = nn.ReLU(inplace=False)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        out = self.bn2(self.conv2(self.relu(self.bn1(self.conv1(x)))))
        if self.conv3 is not None:
            out = self.bn3(self.conv3(self.relu2(out)))
        identity = x if self.downsample is None else self.downsample(x)
        return self.relu_out(out + identity)


# --------------------------------------------------------------------------- build
def _as_info(dataset_or_info: Any) -> Any:
    if isinstance(dataset_or_info, (str, os.PathLike)):
        from robattr import data

        return data.info(os.fspath(dataset_or_info))
    if isinstance(dataset_or_info, Mapping):
        return SimpleNamespace(**dataset_or_info)
    return dataset_or_info


def build(arch: str, dataset_or_info: Any, activation: str = "relu",
          beta: float | None = None, weights: str | os.PathLike | None = None) -> nn.Module:
    """Build ``arch`` for a dataset: ``Normalize`` first, then the network.

    ``dataset_or_info`` is a dataset name (looked up with :func:`robattr.data.info`, no
    loading) or anything with ``shape`` (C, H, W), ``num_classes``, ``mean`` and ``std``.
    ``mlp``, ``cnn`` and ``lenet`` are flat ``nn.Sequential`` (``model[1:]`` is the net);
    the ResNets are ``nn.Sequential(normalize=..., net=...)``. ``weights`` (a
    ``.safetensors`` file or a ``torch.save`` state dict, read with ``weights_only=True``)
    is loaded only when given; nothing is ever downloaded.
    """
    if arch not in ARCHS:
        raise ValueError(f"arch must be one of {', '.join(ARCHS)}, got {arch!r}")
    info = _as_info(dataset_or_info)
    try:
        c, h, w = (int(s) for s in info.shape)
        k, mean, std = int(info.num_classes), tuple(info.mean), tuple(info.std)
    except (AttributeError, TypeError, ValueError) as e:
        raise TypeError("dataset_or_info must be a dataset name or have shape (C, H, W), "
                        f"num_classes, mean and std; got {dataset_or_info!r}") from e
    _check_activation(activation, beta)
    if arch in ("cnn", "lenet") and (h < 4 or w < 4):
        raise ValueError(f"{arch} needs inputs of at least 4x4 pixels, got {h}x{w}")
    norm = Normalize(mean, std)
    if arch in ("mlp", "cnn", "lenet"):
        layers = {"mlp": _mlp, "cnn": _cnn, "lenet": _lenet}[arch](c, h, w, k)
        model = nn.Sequential(norm, *layers)
    else:
        if arch == "resnet18_cifar":
            net = ResNetCIFAR(c, k, (64, 128, 256, 512), (2, 2, 2, 2), shortcut="B")
        elif arch == "resnet20":
            net = ResNetCIFAR(c, k, (16, 32, 64), (3, 3, 3), shortcut="A")
        else:
            net = _torchvision_resnet(arch, c, k)
        model = nn.Sequential(OrderedDict(normalize=norm, net=net))
    model.arch = arch
    set_activation(model, activation, beta)  # also turns torchvision's inplace ReLUs off
    if weights is not None:
        load_weights(model, weights)
    return model


def _read_state_dict(path: str | os.PathLike) -> dict[str, torch.Tensor]:
    path = os.fspath(path)
    if not os.path.isfile(path):
        raise FileNotFoundError(f"weights file not found: {path}")
    if path.endswith(".safetensors"):
        from safetensors.torch import load_file

        return load_file(path, device="cpu")
    obj = torch.load(path, map_location="cpu", weights_only=True)
    if isinstance(obj, Mapping) and "state_dict" in obj and isinstance(obj["state_dict"], Mapping):
        obj = obj["state_dict"]
    if not isinstance(obj, Mapping) or not all(isinstance(v, torch.Tensor) for v in obj.values()):
        raise ValueError(f"{path} does not hold a state dict (name -> tensor)")
    return dict(obj)


def load_weights(model: nn.Module, path: str | os.PathLike) -> nn.Module:
    """Load a user-supplied state dict into ``model`` (strict), never unpickling code.

    Accepts a ``.safetensors`` file or a ``torch.save`` file (read with
    ``weights_only=True``; a ``{"state_dict": ...}`` wrapper and a DataParallel
    ``module.`` prefix are unwrapped). For the ResNets, a state dict of the bare network
    (e.g. torchvision's own keys, ``conv1.weight``...) is loaded into ``model.net`` and the
    Normalize layer keeps the dataset's statistics. Mind that pretrained ImageNet weights
    expect ImageNet's mean/std in the Normalize layer.
    """
    sd = _read_state_dict(path)
    if sd and all(key.startswith("module.") for key in sd):
        sd = {key[len("module."):]: v for key, v in sd.items()}
    target = model
    net = getattr(model, "net", None)
    if isinstance(net, nn.Module) and not any(key.startswith(("normalize.", "net.")) for key in sd):
        target = net
    try:
        target.load_state_dict(sd, strict=True)
    except RuntimeError as e:
        raise ValueError(f"weights in {os.fspath(path)} do not fit this model: {e}") from e
    return model


# --------------------------------------------------------------------------- activations
def _swap(module: nn.Module, activation: str, beta: float | None) -> int:
    n = 0
    for name, child in module.named_children():
        if isinstance(child, (nn.ReLU, nn.Softplus)):
            setattr(module, name, _act(activation, beta))
            n += 1
        else:
            n += _swap(child, activation, beta)
    return n


def has_relu(model: nn.Module) -> bool:
    """True if any module of ``model`` is a piecewise-linear activation (ReLU family):
    its input Hessian is zero almost everywhere."""
    return any(isinstance(m, (nn.ReLU, nn.ReLU6, nn.LeakyReLU, nn.PReLU, nn.Hardtanh))
               for m in model.modules())


def not_twice_differentiable(model: nn.Module) -> str | None:
    """Why ``model`` is not a twice-differentiable function of its input, or ``None`` when
    nothing in it breaks that: the hypothesis under which 001's bounds, 003's Theorem 6 and
    the papers' second-order arguments are stated. Found from its modules: a piecewise
    linear activation (the ReLU family: kinks, :func:`has_relu`) or max-pooling (the
    gradient jumps when a window's argmax changes, :mod:`robattr.bounds.maxpool`)."""
    found = []
    if has_relu(model):
        found.append("piecewise-linear activations (ReLU family)")
    if any(isinstance(m, (nn.MaxPool1d, nn.MaxPool2d, nn.MaxPool3d, nn.AdaptiveMaxPool1d,
                          nn.AdaptiveMaxPool2d, nn.AdaptiveMaxPool3d)) for m in model.modules()):
        found.append("max-pooling")
    return " and ".join(found) or None


def set_activation(model: nn.Module, activation: str, beta: float | None = None) -> nn.Module:
    """Replace every ReLU / Softplus module of ``model`` (recursively, in place).

    ``"softplus"`` needs an explicit ``beta > 0`` (Softplus(beta) -> ReLU as beta grows);
    ``"relu"`` takes no beta. Parameters and buffers are untouched. The choice is recorded
    as ``model.activation`` and ``model.beta``. Returns ``model``.
    """
    beta = _check_activation(activation, beta)
    if _swap(model, activation, beta) == 0:
        raise ValueError("model has no ReLU or Softplus module to replace "
                         "(functional activations cannot be swapped)")
    model.activation, model.beta = activation, beta
    return model


def get_activation(model: nn.Module) -> tuple[str, float | None]:
    """The model's activation and beta, read from its first ReLU / Softplus module."""
    for m in model.modules():
        if isinstance(m, nn.ReLU):
            return "relu", None
        if isinstance(m, nn.Softplus):
            return "softplus", float(m.beta)
    raise ValueError("model has no ReLU or Softplus module")


@contextlib.contextmanager
def using_activation(model: nn.Module, activation: str,
                     beta: float | None = None) -> Iterator[nn.Module]:
    """Temporarily swap the activation (e.g. a Softplus(beta) surrogate of a ReLU model
    for second derivatives); the previous one is restored on exit."""
    old = get_activation(model)
    set_activation(model, activation, beta)
    try:
        yield model
    finally:
        set_activation(model, *old)


# --------------------------------------------------------------------------- random MLPs
def _standard_normal(rng, shape: tuple[int, ...], dtype: torch.dtype) -> torch.Tensor:
    """Standard-normal draws from a numpy ``Generator`` or a ``torch.Generator``."""
    if isinstance(rng, torch.Generator):
        return torch.randn(shape, generator=rng, dtype=torch.float32).to(dtype)
    if hasattr(rng, "standard_normal"):
        return torch.from_numpy(rng.standard_normal(shape)).to(dtype)
    raise ValueError(f"rng must be a numpy.random.Generator or a torch.Generator, got {type(rng).__name__}")


def random_mlp(sizes: Sequence[int], activation: str = "softplus", beta: float | None = None, *,
               rng, weight_gain: float = 1.0, bias_std: float | None = None, flatten: bool = False,
               dtype: torch.dtype = torch.float64) -> nn.Sequential:
    """A multilayer perceptron with Gaussian random weights, for checks on "random small networks".

    ``sizes = [d_in, h_1, ..., h_k, n_out]`` gives one ``nn.Linear`` per consecutive pair, each
    hidden one followed by ReLU or Softplus(``beta``) (``activation``). With ``flatten=True`` an
    ``nn.Flatten`` comes first (image batches). Each layer's weight, then its bias, is drawn from
    ``rng`` (a ``numpy.random.Generator`` or a ``torch.Generator``, float32 draws for the latter):
    weight = z / sqrt(fan_in) * ``weight_gain``; bias = z * ``bias_std``, or, when ``bias_std`` is
    None, z / sqrt(fan_out) * ``weight_gain`` (the weight's rule applied to the bias's own length).
    Returns the network in ``dtype``, in eval mode, on the CPU.
    """
    sizes = [int(s) for s in sizes]
    if len(sizes) < 2 or min(sizes) < 1:
        raise ValueError(f"sizes must list at least two positive layer widths, got {list(sizes)}")
    beta = _check_activation(activation, beta if activation == "softplus" else None)
    if not (math.isfinite(weight_gain) and weight_gain > 0):
        raise ValueError(f"weight_gain must be a finite number > 0, got {weight_gain}")
    if bias_std is not None and not (math.isfinite(bias_std) and bias_std >= 0):
        raise ValueError(f"bias_std must be None or a finite number >= 0, got {bias_std}")
    layers: list[nn.Module] = [nn.Flatten()] if flatten else []
    for i, (n_in, n_out) in enumerate(zip(sizes[:-1], sizes[1:])):
        layers.append(nn.Linear(n_in, n_out))
        if i < len(sizes) - 2:
            layers.append(_act(activation, beta))
    net = nn.Sequential(*layers).to(dtype).eval()
    with torch.no_grad():
        for layer in net:
            if isinstance(layer, nn.Linear):
                w = _standard_normal(rng, tuple(layer.weight.shape), dtype)
                layer.weight.copy_(w / math.sqrt(layer.in_features) * weight_gain)
                b = _standard_normal(rng, tuple(layer.bias.shape), dtype)
                layer.bias.copy_(b / math.sqrt(layer.out_features) * weight_gain if bias_std is None
                                 else b * bias_std)
    return net


class RandomMLP(NamedTuple):
    """A random network of :func:`sample_random_mlp` and the draws that define it."""
    net: nn.Sequential
    d: int
    activation: str
    beta: float


def sample_random_mlp(rng, activation: str | None = None, *, d: tuple[int, int] = (2, 32),
                      depth: tuple[int, int] = (1, 3), width: tuple[int, int] = (4, 32),
                      classes: tuple[int, int] = (2, 10), beta: tuple[float, float] = (0.5, 20.0),
                      relu_share: float = 0.3, weight_gain: float = 1.5) -> RandomMLP:
    """Draw an architecture at random, then a float64 :func:`random_mlp` of it.

    From the numpy generator ``rng``, in this order: input dimension, depth (hidden layers) and
    width, uniform integers in the closed ranges ``d``, ``depth``, ``width``; the activation
    (ReLU with probability ``relu_share``, else Softplus) unless ``activation`` is given; a
    Softplus beta log-uniform in ``beta`` (drawn for ReLU too, unused there); the number of
    classes in ``classes``; then the weights (bias std = ``weight_gain``/sqrt(fan_out)).
    """
    if not hasattr(rng, "integers"):
        raise ValueError(f"rng must be a numpy.random.Generator, got {type(rng).__name__}")
    if activation is not None and activation not in ACTIVATIONS:
        raise ValueError(f"activation must be None or one of {ACTIVATIONS}, got {activation!r}")
    for name, (lo, hi) in (("d", d), ("depth", depth), ("width", width), ("classes", classes)):
        if not 1 <= lo <= hi:
            raise ValueError(f"{name} must be a range (lo, hi) with 1 <= lo <= hi, got {(lo, hi)}")
    if not 0 < beta[0] <= beta[1]:
        raise ValueError(f"beta must be a range (lo, hi) with 0 < lo <= hi, got {beta}")
    n_in = int(rng.integers(d[0], d[1] + 1))
    n_hidden = int(rng.integers(depth[0], depth[1] + 1))
    n_width = int(rng.integers(width[0], width[1] + 1))
    act = activation or ("relu" if rng.random() < relu_share else "softplus")
    b = float(np.exp(rng.uniform(np.log(beta[0]), np.log(beta[1]))))
    n_out = int(rng.integers(classes[0], classes[1] + 1))
    net = random_mlp([n_in] + [n_width] * n_hidden + [n_out], act, b if act == "softplus" else None,
                     rng=rng, weight_gain=weight_gain)
    return RandomMLP(net, n_in, act, b)


class PairLogit(nn.Module):
    """``g -> (-g/2, g/2)`` for a one-output network ``g``: softmax cross-entropy on these two
    logits is exactly the binary cross-entropy of ``g``, and the gradient of either logit has
    the direction of ``∇g``. Turns a scorer into a two-class model for the book's losses."""

    def forward(self, g: torch.Tensor) -> torch.Tensor:
        if g.ndim != 2 or g.shape[1] != 1:
            raise ValueError(f"PairLogit expects a (N, 1) score, got {tuple(g.shape)}")
        return torch.cat([-g / 2, g / 2], dim=1)


def two_layer_scorer(d_in: int, hidden: int, activation: str = "relu",
                     beta: float | None = None) -> nn.Sequential:
    """``x -> w_2ᵀ σ(W_1 x + b_1) + b_2`` with one output, followed by :class:`PairLogit`:
    a two-class model for low-dimensional toys (torch's default init; seed torch first)."""
    for name, v in (("d_in", d_in), ("hidden", hidden)):
        if isinstance(v, bool) or not isinstance(v, int) or v < 1:
            raise ValueError(f"{name} must be an int >= 1, got {v!r}")
    return nn.Sequential(nn.Linear(d_in, hidden), _act(activation, beta), nn.Linear(hidden, 1), PairLogit())


# --------------------------------------------------------------------------- predictions
@torch.no_grad()
def predict(model: nn.Module, x: torch.Tensor, batch: int = 1024) -> torch.Tensor:
    """The class ``model`` predicts for each image of ``x`` (chunks of ``batch``, no grad)."""
    if batch < 1:
        raise ValueError(f"batch must be >= 1, got {batch}")
    return torch.cat([model(chunk).argmax(1) for chunk in x.split(batch)])


def correctly_classified(model: nn.Module, x: torch.Tensor, y: torch.Tensor,
                         n: int | None = None, batch: int = 1024) -> torch.Tensor:
    """Indices (in order) of the images of ``x`` that ``model`` classifies as ``y``: the
    first ``n`` of them, or all when ``n`` is None. The book attacks and explains only
    such images, as the papers do."""
    if len(x) != len(y):
        raise ValueError(f"x has {len(x)} images but y {len(y)} labels")
    if n is not None and n < 0:
        raise ValueError(f"n must be >= 0, got {n}")
    ok = (predict(model, x, batch) == y.to(x.device)).nonzero().squeeze(1)
    return ok if n is None else ok[:n]

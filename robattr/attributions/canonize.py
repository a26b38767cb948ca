"""A network as a chain of LRP-ready steps: BatchNorm folded, residual blocks made explicit.

LRP rules are stated for a chain of affine layers and elementwise activations. Two things
in a ResNet are neither, and this module rewrites them, as Zennit's ``ResNetCanonizer``
does (Anders et al., Zennit 0.5; written here from the maths, not from its code):

* an eval-mode ``BatchNorm`` right after a ``Conv2d`` / ``Linear`` is an affine map of that
  layer's output, so the two are one affine layer with weight ``w * g / sqrt(var + eps)``
  (per output channel) and bias ``(b - mean) * g / sqrt(var + eps) + beta``
  (:class:`FoldedLayer`). The fold is computed with torch ops on every call, so it stays
  differentiable w.r.t. the parameters and follows any change of them;
* a residual block ``post(branch(a) + shortcut(a))`` becomes a :class:`Residual` step whose
  sum the LRP walk splits in proportion to the two summands (Zennit's ``Sum`` module with
  its ``Norm`` rule).

:func:`compile_chain` turns a model into a list of steps; each step's ``forward(a)``
returns ``(output, saved)``, where ``saved`` is what the relevance pass needs. It knows
flat / nested ``nn.Sequential`` models of Linear, Conv2d, BatchNorm, activations,
pooling, Flatten, Normalize, Dropout and Identity, robattr's CIFAR ResNets
(:class:`robattr.models.ResNetCIFAR`, ResNet-20 / ResNet-18), robattr's torchvision
ResNets (``resnet18``, ``resnet50``) and torchvision's own ``ResNet`` with its
``BasicBlock`` / ``Bottleneck``. A block is recognised by its exact class (a subclass may
have changed ``forward``); anything else raises ``ValueError`` naming the module.
"""
from __future__ import annotations

import torch
from torch import nn
from torch.nn import functional as F

__all__ = ["compile_chain", "FoldedLayer", "Affine", "Residual", "Leaf", "run_chain",
           "SUPPORTED"]

#: What :func:`compile_chain` understands, for error messages.
SUPPORTED = ("Linear, Conv2d (zero padding), BatchNorm1d/2d right after one of them (eval "
             "mode, folded), ReLU, Softplus, MaxPool2d, AvgPool2d, AdaptiveAvgPool2d, Flatten, "
             "Normalize, Dropout, Identity, nested Sequential; robattr's ResNetCIFAR "
             "(resnet20, resnet18_cifar) and torchvision-style ResNets (BasicBlock, Bottleneck)")

_PASS = (nn.ReLU, nn.Softplus, nn.Dropout, nn.Identity)
_BN = (nn.BatchNorm1d, nn.BatchNorm2d)


# --------------------------------------------------------------------------- steps
class FoldedLayer:
    """A ``Conv2d`` / ``Linear`` with the BatchNorm after it folded in.

    Has what a rule reads from a layer: ``weight``, ``bias`` and, for a convolution,
    ``stride``, ``padding``, ``dilation``, ``groups`` (those of the convolution).
    """

    def __init__(self, layer: nn.Module, bn: nn.Module):
        scale = torch.rsqrt(bn.running_var + bn.eps)
        if bn.weight is not None:
            scale = bn.weight * scale
        bias = -bn.running_mean if layer.bias is None else layer.bias - bn.running_mean
        bias = bias * scale
        if bn.bias is not None:
            bias = bias + bn.bias
        self.weight = layer.weight * scale.reshape((-1,) + (1,) * (layer.weight.ndim - 1))
        self.bias = bias
        self.layer = layer
        for key in ("stride", "padding", "dilation", "groups"):
            if hasattr(layer, key):
                setattr(self, key, getattr(layer, key))

    def __repr__(self):
        return f"FoldedLayer({self.layer!r} + BatchNorm)"


def affine_forward(layer, a: torch.Tensor, weight: torch.Tensor, bias=None) -> torch.Tensor:
    """``layer``'s affine map of ``a`` with the given weight (and bias): a Linear when
    ``weight`` is 2-d, else a Conv2d with ``layer``'s stride, padding, dilation, groups."""
    if weight.ndim == 2:
        return F.linear(a, weight, bias)
    return F.conv2d(a, weight, bias, layer.stride, layer.padding, layer.dilation, layer.groups)


class Affine:
    """A Linear / Conv2d layer, with the BatchNorm that follows it folded in (``bn``)."""

    def __init__(self, name: str, module: nn.Module):
        self.name, self.module = name, module
        self.bn, self.bn_name = None, None

    def fold(self, name: str, bn: nn.Module) -> None:
        if bn.training:
            raise ValueError(f"lrp folds BatchNorm {name!r} with its running statistics, but it "
                             "is in training mode (batch statistics): call model.eval() first")
        if bn.running_mean is None or bn.running_var is None:
            raise ValueError(f"BatchNorm {name!r} keeps no running statistics "
                             "(track_running_stats=False): lrp cannot fold it")
        if bn.num_features != self.module.weight.shape[0]:
            raise ValueError(f"BatchNorm {name!r} has {bn.num_features} features but the layer "
                             f"before it, {self.name!r}, has {self.module.weight.shape[0]} outputs")
        self.bn, self.bn_name = bn, name

    def layer(self):
        """The layer the rules see: the module itself, or a :class:`FoldedLayer`."""
        return self.module if self.bn is None else FoldedLayer(self.module, self.bn)

    def forward(self, a):
        layer = self.layer()
        return affine_forward(layer, a, layer.weight, layer.bias), layer

    def __repr__(self):
        return f"Affine({self.name!r}{' + ' + repr(self.bn_name) if self.bn is not None else ''})"


class Leaf:
    """A step without parameters: ``kind`` says how relevance crosses it.

    ``"pass"`` (activations, Normalize, Dropout, Identity: unchanged), ``"maxpool"``
    (to the maximum), ``"avgpool"`` (in proportion to the inputs), ``"flatten"``
    (reshaped), ``"select"`` (a linear selection such as option-A shortcuts: the gradient).
    """

    def __init__(self, name: str, kind: str, fn):
        self.name, self.kind, self.fn = name, kind, fn

    def forward(self, a):
        return self.fn(a), None

    def __repr__(self):
        return f"Leaf({self.name!r}, {self.kind})"


class Residual:
    """``post(branch(a) + shortcut(a))``; ``post`` is a pass-through activation (or None)."""

    def __init__(self, name: str, branch: list, shortcut: list, post: nn.Module | None):
        self.name, self.branch, self.shortcut, self.post = name, branch, shortcut, post

    def forward(self, a):
        b_acts, b_saved = run_chain(self.branch, a)
        s_acts, s_saved = run_chain(self.shortcut, a)
        b, s = b_acts[-1], s_acts[-1]
        if b.shape != s.shape:
            raise ValueError(f"residual block {self.name!r}: branch output {tuple(b.shape)} and "
                             f"shortcut output {tuple(s.shape)} differ")
        out = b + s
        if self.post is not None:
            out = self.post(out)
        return out, (b_acts, b_saved, s_acts, s_saved)

    def __repr__(self):
        return f"Residual({self.name!r}, branch={self.branch}, shortcut={self.shortcut})"


def run_chain(steps: list, a: torch.Tensor):
    """Inputs of every step plus the last output (``acts``), and what each step saved."""
    acts, saved = [a], []
    for step in steps:
        out, s = step.forward(acts[-1])
        acts.append(out)
        saved.append(s)
    return acts, saved


# --------------------------------------------------------------------------- compiling
def _join(prefix: str, name: str) -> str:
    return f"{prefix}.{name}" if prefix else name


def _resnet_types():
    """(torchvision ResNet, BasicBlock, Bottleneck), or Nones without torchvision."""
    try:
        from torchvision.models.resnet import BasicBlock, Bottleneck, ResNet
    except ImportError:  # pragma: no cover - torchvision is a dependency
        return None, None, None
    return ResNet, BasicBlock, Bottleneck


def _leaf(name: str, m: nn.Module):
    from robattr.models import LambdaShortcut, Normalize

    if isinstance(m, (nn.Linear, nn.Conv2d)):
        if isinstance(m, nn.Conv2d) and (m.padding_mode != "zeros" or isinstance(m.padding, str)):
            raise ValueError(f"lrp supports Conv2d with integer zero padding only; layer "
                             f"{name!r} has padding={m.padding!r}, padding_mode={m.padding_mode!r}")
        return Affine(name, m)
    if isinstance(m, _BN):
        return ("bn", name, m)  # folded into the Affine before it by _fold
    if isinstance(m, _PASS) or isinstance(m, Normalize):
        return Leaf(name, "pass", m)
    if isinstance(m, nn.MaxPool2d):
        return Leaf(name, "maxpool", m)
    if isinstance(m, (nn.AvgPool2d, nn.AdaptiveAvgPool2d)):
        return Leaf(name, "avgpool", m)
    if isinstance(m, nn.Flatten):
        return Leaf(name, "flatten", m)
    if type(m) is LambdaShortcut:
        return Leaf(name, "select", m)
    return None


def _fold(steps: list) -> list:
    """Fold every BatchNorm marker into the Affine right before it."""
    out = []
    for step in steps:
        if isinstance(step, tuple):
            _, name, bn = step
            prev = out[-1] if out else None
            if not isinstance(prev, Affine) or prev.bn is not None:
                raise ValueError(
                    f"lrp folds a BatchNorm into the Conv2d / Linear right before it, but "
                    f"{name!r} ({type(bn).__name__}) follows "
                    f"{'nothing' if prev is None else repr(prev.name)}: no rule for it")
            prev.fold(name, bn)
        else:
            out.append(step)
    return out


def _seq(parent: nn.Module, prefix: str, names) -> list:
    steps = []
    for n in names:
        child = getattr(parent, n)
        if child is not None:
            steps += _compile(child, _join(prefix, n))
    return steps


def _block(name: str, m: nn.Module, branch: list, shortcut: str, post: str) -> Residual:
    sc = getattr(m, shortcut)
    sc_steps = [] if sc is None else _compile(sc, _join(name, shortcut))
    return Residual(name, _fold(_seq(m, name, branch)), _fold(sc_steps), getattr(m, post))


def _compile(m: nn.Module, name: str) -> list:
    from robattr.models import BasicBlock, ResNetCIFAR, _SplitBlock

    ResNet, TVBasic, TVBottleneck = _resnet_types()
    t = type(m)
    if isinstance(m, nn.Sequential):
        return [s for n, child in m.named_children() for s in _compile(child, _join(name, n))]
    if t is ResNetCIFAR:
        return _seq(m, name, ("conv1", "bn1", "act1", "layers", "pool", "flatten", "linear"))
    if t is BasicBlock:
        return [_block(name, m, ("conv1", "bn1", "act1", "conv2", "bn2"), "shortcut", "act2")]
    if t is _SplitBlock:
        return [_block(name, m, ("conv1", "bn1", "relu", "conv2", "bn2", "relu2", "conv3", "bn3"),
                       "downsample", "relu_out")]
    if ResNet is not None and t is TVBasic:
        return [_block(name, m, ("conv1", "bn1", "relu", "conv2", "bn2"), "downsample", "relu")]
    if ResNet is not None and t is TVBottleneck:
        return [_block(name, m, ("conv1", "bn1", "relu", "conv2", "bn2", "relu", "conv3", "bn3"),
                       "downsample", "relu")]
    if ResNet is not None and t is ResNet:
        return (_seq(m, name, ("conv1", "bn1", "relu", "maxpool", "layer1", "layer2", "layer3",
                               "layer4", "avgpool"))
                + [Leaf(_join(name, "flatten"), "flatten", lambda a: torch.flatten(a, 1))]
                + _seq(m, name, ("fc",)))
    leaf = _leaf(name, m)
    if leaf is not None:
        return [leaf]
    what = "container" if any(True for _ in m.children()) else "module"
    raise ValueError(f"lrp does not support {what} {name or '<model>'!r} ({t.__name__}): it "
                     f"handles {SUPPORTED}")


def compile_chain(model: nn.Module) -> list:
    """``model`` as a list of steps (:class:`Affine`, :class:`Leaf`, :class:`Residual`),
    BatchNorms folded; ``ValueError`` naming the first module it cannot handle."""
    return _fold(_compile(model, ""))


def iter_affine(steps: list):
    """Every :class:`Affine` step in forward order (a block's branch before its shortcut)."""
    for step in steps:
        if isinstance(step, Affine):
            yield step
        elif isinstance(step, Residual):
            yield from iter_affine(step.branch)
            yield from iter_affine(step.shortcut)

"""Layer-wise Relevance Propagation (z+ / zB) by explicit layer-by-layer propagation.

Zennit-style: a rule is a small object called as ``rule(module, a, R) -> R_in`` on a
Linear or Conv2d layer with input ``a`` and upper relevance ``R``; everything is plain
torch, so the relevance is differentiable (double backward) when asked.

Rule mapping to Zennit 0.5 (checked to 1e-6 in the tests)::

    robattr                      zennit
    ZPlus()        (default)     ZPlus(zero_params='bias')
    ZPlus(bias=True)             ZPlus()               (the 003 authors' code)
    ZBox(low, high)              ZBox(low, high)
    Epsilon(eps)                 Epsilon(eps)
    activations, Dropout         Pass()
    MaxPool2d                    no rule: the gradient (winner takes all)
"""
from __future__ import annotations

import torch
from torch import nn
from torch.nn import functional as F

from ._core import check_input, check_model, check_nonnegative, resolve_target

__all__ = ["lrp", "ZPlus", "ZBox", "Epsilon", "stabilize"]


def stabilize(z: torch.Tensor, epsilon: float = 1e-6) -> torch.Tensor:
    """``z + epsilon * sign(z)`` (``+epsilon`` at 0): Zennit's default stabilizer."""
    return z + ((z == 0).to(z.dtype) + z.sign()) * epsilon


# --------------------------------------------------------------------------- layer algebra
def _forward(module, a, weight, bias=None):
    if isinstance(module, nn.Linear):
        return F.linear(a, weight, bias)
    return F.conv2d(a, weight, bias, module.stride, module.padding, module.dilation,
                    module.groups)


def _transpose(module, a, weight, s):
    """``W^T s`` shaped like the layer input ``a`` (the vector-Jacobian product)."""
    if isinstance(module, nn.Linear):
        return s @ weight
    out_pad = []
    for i in range(2):
        expect = ((s.shape[2 + i] - 1) * module.stride[i] - 2 * module.padding[i]
                  + module.dilation[i] * (weight.shape[2 + i] - 1) + 1)
        out_pad.append(a.shape[2 + i] - expect)
    return F.conv_transpose2d(s, weight, None, module.stride, module.padding, tuple(out_pad),
                              module.groups, module.dilation)


class Epsilon:
    """LRP-epsilon: ``R_i = sum_j a_i w_ij / (z_j + eps sign z_j) R_j``, bias in ``z``."""

    def __init__(self, epsilon: float = 1e-6):
        self.epsilon = check_nonnegative("epsilon", epsilon)

    def __call__(self, module, a, R):
        z = _forward(module, a, module.weight, module.bias)
        s = R / stabilize(z, self.epsilon)
        return a * _transpose(module, a, module.weight, s)

    def __repr__(self):
        return f"Epsilon({self.epsilon})"


class ZPlus:
    """LRP z+ (003, Bach et al. 2015): ``R_i = sum_j a_i w+_ij / sum_i' a_i' w+_i'j R_j``.

    Exactly 003's printed rule for the non-negative inputs of hidden layers (after ReLU /
    Softplus); for negative inputs it adds the ``a- w-`` term, as Zennit does
    (alpha = 1, beta = 0). ``bias=True`` adds the positive part of the bias to the
    denominator, as Zennit's default ZPlus and the 003 authors' code do.
    """

    def __init__(self, bias: bool = False, stabilizer: float = 1e-6):
        self.bias, self.stabilizer = bool(bias), check_nonnegative("stabilizer", stabilizer)

    def __call__(self, module, a, R):
        w = module.weight
        wp, wn = w.clamp(min=0), w.clamp(max=0)
        ap, an = a.clamp(min=0), a.clamp(max=0)
        bp = module.bias.clamp(min=0) if (self.bias and module.bias is not None) else None
        z = _forward(module, ap, wp, bp) + _forward(module, an, wn)
        s = R / stabilize(z, self.stabilizer)
        return ap * _transpose(module, a, wp, s) + an * _transpose(module, a, wn, s)

    def __repr__(self):
        return f"ZPlus(bias={self.bias})"


class ZBox:
    """LRP zB (Montavon et al. 2017; 003's first-layer rule) for inputs in a box [low, high]:
    ``R_i = sum_j (a_i w_ij - l_i w+_ij - h_i w-_ij) / sum_i' (...) R_j``.

    ``low`` / ``high`` are in the layer's own input space (numbers or tensors that
    broadcast to it); :func:`lrp` maps pixel bounds through the Normalize layer for you.
    """

    def __init__(self, low=0.0, high=1.0, stabilizer: float = 1e-6):
        self.low, self.high = low, high
        self.stabilizer = check_nonnegative("stabilizer", stabilizer)

    def __call__(self, module, a, R):
        w = module.weight
        wp, wn = w.clamp(min=0), w.clamp(max=0)
        lo = torch.as_tensor(self.low, dtype=a.dtype, device=a.device).expand_as(a)
        hi = torch.as_tensor(self.high, dtype=a.dtype, device=a.device).expand_as(a)
        z = _forward(module, a, w) - _forward(module, lo, wp) - _forward(module, hi, wn)
        s = R / stabilize(z, self.stabilizer)
        return (a * _transpose(module, a, w, s) - lo * _transpose(module, a, wp, s)
                - hi * _transpose(module, a, wn, s))

    def __repr__(self):
        return "ZBox(low, high)"


# --------------------------------------------------------------------------- the walk
_PASS = (nn.ReLU, nn.Softplus, nn.Dropout, nn.Identity)
_SUPPORTED = "Linear, Conv2d, ReLU, Softplus, MaxPool2d, Flatten, Normalize, Dropout, Identity"


def _layers(model: nn.Module, prefix: str = ""):
    if not isinstance(model, nn.Sequential):
        return [(prefix or type(model).__name__, model)]
    out = []
    for name, child in model.named_children():
        full = f"{prefix}.{name}" if prefix else name
        out += _layers(child, full) if isinstance(child, nn.Sequential) else [(full, child)]
    return out


def _is_normalize(m):
    from robattr.models import Normalize

    return isinstance(m, Normalize)


def _check_layer(name, m):
    if isinstance(m, (nn.Linear, nn.MaxPool2d, nn.Flatten)) or isinstance(m, _PASS) \
            or _is_normalize(m):
        return
    if isinstance(m, nn.Conv2d):
        if m.padding_mode != "zeros" or isinstance(m.padding, str):
            raise ValueError(f"lrp supports Conv2d with integer zero padding only; layer "
                             f"{name!r} has padding={m.padding!r}, padding_mode={m.padding_mode!r}")
        return
    raise ValueError(f"lrp does not support module {name!r} ({type(m).__name__}): it handles "
                     f"sequential models made of {_SUPPORTED} (robattr's mlp, cnn, lenet)")


def _maxpool_back(m: nn.MaxPool2d, a, R):
    _, idx = F.max_pool2d(a, m.kernel_size, m.stride, m.padding, m.dilation, m.ceil_mode,
                          return_indices=True)
    n, c = a.shape[:2]
    out = torch.zeros((n, c, a.shape[2] * a.shape[3]), dtype=R.dtype, device=R.device)
    return out.scatter_add(2, idx.flatten(2), R.flatten(2)).reshape(a.shape)


def lrp(model: nn.Module, x: torch.Tensor, target=None, *, rule=None, first_rule=None,
        low: float = 0.0, high: float = 1.0, create_graph: bool = False) -> torch.Tensor:
    """LRP with 003's rules: zB in the first layer, z+ in every later Linear / Conv2d.

    Relevance starts as ``R = onehot(target)`` on the logits (003: ``R_i = delta_iy``),
    passes unchanged through activations (and Dropout / Identity), is routed to the
    maximum by max-pooling, reshaped by Flatten, and is redistributed by ``rule``
    (default :class:`ZPlus`, 003's printed rule without bias) at every Linear / Conv2d
    except the first, where ``first_rule`` applies (default :class:`ZBox` with the pixel
    box ``[low, high] = [0, 1]`` mapped through the Normalize layer, i.e.
    ``[(0 - mean)/std, (1 - mean)/std]``, as the 003 code does). The Normalize layer is
    elementwise, so relevance crosses it unchanged: the heatmap is ``R^(0)`` of 003.

    Works on flat ``nn.Sequential`` models (nested Sequentials are flattened) made of
    Linear, Conv2d, ReLU, Softplus, MaxPool2d, Flatten, Normalize, Dropout, Identity:
    robattr's ``mlp``, ``cnn`` and ``lenet``. Anything else raises ``ValueError`` naming
    the module (ResNets need residual rules that 003 does not specify).

    ``create_graph=True``: differentiable w.r.t. ``x`` and the parameters; ``d/dx`` is
    the derivative of this propagation with the max-pool switches and the signs inside
    the stabilizer held fixed (they are locally constant). Unlike GBP it is not zero on
    ReLU networks, since the ratios depend on the activations.
    """
    check_model(model)
    x = check_input(x)
    layers = _layers(model)
    for name, m in layers:
        _check_layer(name, m)
    params = [i for i, (_, m) in enumerate(layers) if isinstance(m, (nn.Linear, nn.Conv2d))]
    if not params:
        raise ValueError("lrp needs at least one Linear or Conv2d layer in the model")
    rule = ZPlus() if rule is None else rule
    target = resolve_target(model, x, target)
    ctx = torch.enable_grad() if create_graph else torch.no_grad()
    with ctx:
        acts = [x if create_graph else x.detach()]
        for _, m in layers:
            acts.append(m(acts[-1]))
        logits = acts[-1]
        if logits.ndim != 2:
            raise ValueError(f"the model must return N x classes logits, got {tuple(logits.shape)}")
        target = resolve_target(model, x, target, num_classes=logits.shape[1])
        if first_rule is None:
            lo = torch.full_like(x, float(low))
            hi = torch.full_like(x, float(high))
            for _, m in layers[:params[0]]:  # all supported pre-layers are monotone
                lo, hi = m(lo), m(hi)
            first_rule = ZBox(lo.detach(), hi.detach())
        R = F.one_hot(target, logits.shape[1]).to(logits.dtype)
        for i in range(len(layers) - 1, -1, -1):
            m, a = layers[i][1], acts[i]
            if isinstance(m, (nn.Linear, nn.Conv2d)):
                R = (first_rule if i == params[0] else rule)(m, a, R)
            elif isinstance(m, nn.MaxPool2d):
                R = _maxpool_back(m, a, R)
            elif isinstance(m, nn.Flatten):
                R = R.reshape(a.shape)
            # activations, Dropout, Identity, Normalize: relevance passes unchanged
    return R

"""Layer-wise Relevance Propagation (z+ / zB) by explicit layer-by-layer propagation.

Zennit-style: a rule is a small object called as ``rule(module, a, R) -> R_in`` on a
Linear or Conv2d layer (or a :class:`~robattr.attributions.canonize.FoldedLayer`, a
convolution with its BatchNorm folded in) with input ``a`` and upper relevance ``R``;
everything is plain torch, so the relevance is differentiable (double backward) when asked.

Rule mapping to Zennit 0.5 (checked to 1e-6 in the tests; ResNets in
tests/library/test_lrp_resnet.py)::

    robattr                      zennit
    ZPlus()        (default)     ZPlus(zero_params='bias')
    ZPlus(bias=True)             ZPlus()               (the 003 authors' code)
    ZBox(low, high)              ZBox(low, high)
    Epsilon(eps)                 Epsilon(eps)
    activations, Dropout         Pass()
    MaxPool2d                    no rule: the gradient (winner takes all)
    BatchNorm after a conv       folded (ResNetCanonizer's SequentialMergeBatchNorm)
    residual sum b + s           Norm() on the canonizer's Sum
    AvgPool2d, AdaptiveAvgPool2d Norm()
    option-A shortcut            no rule: the gradient (a selection)
"""
from __future__ import annotations

import torch
from torch import nn
from torch.nn import functional as F

from ._core import check_input, check_model, check_nonnegative, resolve_target
from .canonize import Affine, Leaf, Residual, affine_forward, compile_chain, iter_affine, run_chain

__all__ = ["lrp", "ZPlus", "ZBox", "Epsilon", "stabilize"]


def stabilize(z: torch.Tensor, epsilon: float = 1e-6) -> torch.Tensor:
    """``z + epsilon * sign(z)`` (``+epsilon`` at 0): Zennit's default stabilizer."""
    return z + ((z == 0).to(z.dtype) + z.sign()) * epsilon


# --------------------------------------------------------------------------- layer algebra
def _forward(layer, a, weight, bias=None):
    return affine_forward(layer, a, weight, bias)


def _transpose(layer, a, weight, s):
    """``W^T s`` shaped like the layer input ``a`` (the vector-Jacobian product)."""
    if weight.ndim == 2:
        return s @ weight
    out_pad = []
    for i in range(2):
        expect = ((s.shape[2 + i] - 1) * layer.stride[i] - 2 * layer.padding[i]
                  + layer.dilation[i] * (weight.shape[2 + i] - 1) + 1)
        out_pad.append(a.shape[2 + i] - expect)
    return F.conv_transpose2d(s, weight, None, layer.stride, layer.padding, tuple(out_pad),
                              layer.groups, layer.dilation)


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
def _maxpool_back(m: nn.MaxPool2d, a, R):
    _, idx = F.max_pool2d(a, m.kernel_size, m.stride, m.padding, m.dilation, m.ceil_mode,
                          return_indices=True)
    n, c = a.shape[:2]
    out = torch.zeros((n, c, a.shape[2] * a.shape[3]), dtype=R.dtype, device=R.device)
    return out.scatter_add(2, idx.flatten(2), R.flatten(2)).reshape(a.shape)


def _linear_vjp(fn, a, s, create_graph):
    """``J^T s`` for a linear map ``fn`` (pooling, selection): its Jacobian does not depend
    on ``a``, so it is taken at a detached copy; the result is differentiable in ``s``."""
    with torch.enable_grad():
        a0 = a.detach().requires_grad_(True)
        (g,) = torch.autograd.grad(fn(a0), a0, s, create_graph=create_graph)
    return g


class _Walk:
    """The relevance pass: rules, the first layer and the stabilizer of the splits."""

    def __init__(self, rule, first, first_rule, stabilizer, create_graph):
        self.rule, self.first, self.first_rule = rule, first, first_rule
        self.stabilizer, self.create_graph = stabilizer, create_graph

    def chain(self, steps, acts, saved, R):
        for i in range(len(steps) - 1, -1, -1):
            R = self.step(steps[i], acts[i], acts[i + 1], saved[i], R)
        return R

    def step(self, step, a, out, saved, R):
        if isinstance(step, Affine):
            return (self.first_rule if step is self.first else self.rule)(saved, a, R)
        if isinstance(step, Residual):
            b_acts, b_saved, s_acts, s_saved = saved
            b, s = b_acts[-1], s_acts[-1]
            # the activation after the sum passes R; the sum splits it like Zennit's Norm
            ratio = R / stabilize(b + s, self.stabilizer)
            R_in = self.chain(step.branch, b_acts, b_saved, b * ratio)
            if step.shortcut:
                return R_in + self.chain(step.shortcut, s_acts, s_saved, s * ratio)
            return R_in + s * ratio
        kind = step.kind
        if kind == "maxpool":
            return _maxpool_back(step.fn, a, R)
        if kind == "avgpool":  # LRP-z on a layer with positive weights: proportional
            ratio = R / stabilize(out, self.stabilizer)
            return a * _linear_vjp(step.fn, a, ratio, self.create_graph)
        if kind == "select":
            return _linear_vjp(step.fn, a, R, self.create_graph)
        if kind == "flatten":
            return R.reshape(a.shape)
        return R  # activations, Dropout, Identity, Normalize


def lrp(model: nn.Module, x: torch.Tensor, target=None, *, rule=None, first_rule=None,
        low: float = 0.0, high: float = 1.0, stabilizer: float = 1e-6,
        create_graph: bool = False) -> torch.Tensor:
    """LRP with 003's rules: zB in the first layer, z+ in every later Linear / Conv2d.

    Relevance starts as ``R = onehot(target)`` on the logits (003: ``R_i = delta_iy``),
    passes unchanged through activations (and Dropout / Identity), is routed to the
    maximum by max-pooling, reshaped by Flatten, and is redistributed by ``rule``
    (default :class:`ZPlus`, 003's printed rule without bias) at every Linear / Conv2d
    except the first, where ``first_rule`` applies (default :class:`ZBox` with the pixel
    box ``[low, high] = [0, 1]`` mapped through the Normalize layer, i.e.
    ``[(0 - mean)/std, (1 - mean)/std]``, as the 003 code does). The Normalize layer is
    elementwise, so relevance crosses it unchanged: the heatmap is ``R^(0)`` of 003.

    ResNets (003's ResNet-18; robattr's ``resnet20``, ``resnet18_cifar``, ``resnet18``,
    ``resnet50`` and torchvision's ``ResNet``) are first put in canonical form, as Zennit's
    ``ResNetCanonizer`` does (:mod:`robattr.attributions.canonize`): each eval-mode
    BatchNorm is folded into the convolution before it, so ``rule`` sees one affine layer
    (its bias is the fold's); at each residual sum ``b + s`` the relevance is split in
    proportion to the summands, ``R_b = b R / (b + s)`` and ``R_s = s R / (b + s)``
    (Zennit's ``Norm`` rule on its ``Sum``); average pooling splits it in proportion to
    its inputs (Zennit's ``Norm`` on ``AvgPool``); an option-A shortcut (subsample and
    zero-pad) routes it back to the pixels it took. ``stabilizer`` is the ``epsilon`` of
    :func:`stabilize` in those two splits. Anything else (a BatchNorm that follows no
    Conv2d / Linear or is in training mode, an unknown block or layer) raises
    ``ValueError`` naming the module.

    ``create_graph=True``: differentiable w.r.t. ``x`` and the parameters (BatchNorm's
    too, through the fold); ``d/dx`` is the derivative of this propagation with the
    max-pool switches and the signs inside the stabilizers held fixed (they are locally
    constant). Unlike GBP it is not zero on ReLU networks, since the ratios depend on the
    activations.
    """
    check_model(model)
    x = check_input(x)
    stabilizer = check_nonnegative("stabilizer", stabilizer)
    steps = compile_chain(model)
    first = next(iter_affine(steps), None)
    if first is None:
        raise ValueError("lrp needs at least one Linear or Conv2d layer in the model")
    rule = ZPlus() if rule is None else rule
    target = resolve_target(model, x, target)
    ctx = torch.enable_grad() if create_graph else torch.no_grad()
    with ctx:
        acts, saved = run_chain(steps, x if create_graph else x.detach())
        logits = acts[-1]
        if logits.ndim != 2:
            raise ValueError(f"the model must return N x classes logits, got {tuple(logits.shape)}")
        target = resolve_target(model, x, target, num_classes=logits.shape[1])
        if first_rule is None:
            if first not in steps:
                raise ValueError(f"the first Linear / Conv2d ({first.name!r}) is inside a "
                                 "residual block: pass first_rule (e.g. ZBox(low, high) in its "
                                 "input space)")
            lo = torch.full_like(x, float(low))
            hi = torch.full_like(x, float(high))
            for step in steps[:steps.index(first)]:
                if not (isinstance(step, Leaf) and step.kind in ("pass", "flatten", "maxpool")):
                    raise ValueError(f"cannot map the pixel box through {step.name!r} to the "
                                     f"first layer {first.name!r}: pass first_rule")
                lo, hi = step.fn(lo), step.fn(hi)  # monotone: Normalize, activations, pooling
            first_rule = ZBox(lo.detach(), hi.detach())
        R = F.one_hot(target, logits.shape[1]).to(logits.dtype)
        R = _Walk(rule, first, first_rule, stabilizer, create_graph).chain(steps, acts, saved, R)
    return R

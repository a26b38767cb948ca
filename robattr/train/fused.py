"""A faster Softplus for training on the CPU, swapped in for the length of a training run.

PyTorch's CPU ``softplus`` kernel calls ``log1p`` element by element, unvectorised: on a
LeNet activation it takes about seven times as long as ``exp`` (``benchmarks/training.py
--variants`` measures it). :class:`FusedSoftplus` computes the same function in the stable form

    softplus_β(x) = max(x, 0) + log(1 + exp(−β|x|)) / β

from vectorised ``exp`` and ``log``. ``1 + exp(−β|x|)`` lies in (1, 2], so its ``log`` is
off by at most a float epsilon: about 1e-7/β on the result in float32, the same order as
PyTorch's own rounding, except far left, where the value itself is that small and
``log1p`` would keep its relative precision (tested). Its backward is ``sigmoid(βx)``. PyTorch's returns ``x`` itself where
``βx > threshold`` (20); this one does not cut, but in float32 the term it adds there,
below ``exp(−20)/β``, is under half an ulp of ``x``, and ``sigmoid`` rounds to 1: the results
are PyTorch's (tested). The backward is written in differentiable ops, so the losses
that differentiate a gradient (Hessian, IGA, SSR, IG-NORM) differentiate through it too.

:func:`fused_softplus` replaces every ``nn.Softplus`` of a model by a :class:`FusedSoftplus`
of the same β for the length of a ``with`` block and puts the originals back afterwards:
evaluation, attribution and the bounds keep PyTorch's own ``nn.Softplus``. A
:class:`FusedSoftplus` is an ``nn.Softplus`` (same β, same threshold), so code that looks for
Softplus layers finds it during training too.
"""
from __future__ import annotations

from contextlib import contextmanager
from typing import Iterator

import torch
from torch import nn


class _Softplus(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x: torch.Tensor, beta: float) -> torch.Tensor:
        ctx.save_for_backward(x)            # x, not βx: a second derivative needs x
        ctx.beta = beta
        return x.clamp_min(0) + torch.log(1 + torch.exp(-beta * x.abs())) / beta

    @staticmethod
    def backward(ctx, grad: torch.Tensor):
        (x,) = ctx.saved_tensors
        return grad * torch.sigmoid(ctx.beta * x), None


class FusedSoftplus(nn.Softplus):
    """``nn.Softplus(beta)`` computed from vectorised ``exp``/``log`` (see the module)."""

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return _Softplus.apply(x, float(self.beta))


@contextmanager
def fused_softplus(model: nn.Module) -> Iterator[int]:
    """Swap every ``nn.Softplus`` of ``model`` for a :class:`FusedSoftplus` of the same β
    inside the block; yields how many were swapped. The originals come back on exit, also
    after an exception."""
    swapped: list[tuple[nn.Module, str, nn.Module]] = []
    for parent in model.modules():
        for name, child in parent.named_children():
            if type(child) is nn.Softplus:
                swapped.append((parent, name, child))
    try:
        for parent, name, child in swapped:
            setattr(parent, name, FusedSoftplus(beta=child.beta, threshold=child.threshold))
        yield len(swapped)
    finally:
        for parent, name, child in swapped:
            setattr(parent, name, child)

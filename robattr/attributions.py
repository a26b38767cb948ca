"""Differentiable, batched attribution methods.

Every method has one call shape, batch-first::

    attr = method(model, x, target, *, create_graph=False, **options)

``x`` is a batch N×C×H×W of pixels in [0, 1]; ``target`` an int tensor of N class
indices, or None for the predicted class. The result has the shape of ``x``.
With ``create_graph=True`` the result stays differentiable w.r.t. ``x`` and the
model's parameters, which attacks and robust-training losses need.

Only the plain gradient lives here so far; the other methods of the five papers
(x*Grad, IG, SmoothGrad, Uniform Gradient, ball smoothing, Guided Backprop, LRP,
RelEx) arrive with their own issue.
"""
from __future__ import annotations

import torch
from torch import nn

__all__ = ["grad", "resolve_target"]


def resolve_target(model: nn.Module, x: torch.Tensor, target) -> torch.Tensor:
    """``target`` as a LongTensor of N indices on ``x``'s device (None: predicted class)."""
    if target is None:
        with torch.no_grad():
            return model(x).argmax(dim=1)
    target = torch.as_tensor(target, device=x.device, dtype=torch.long)
    if target.ndim == 0:
        target = target.expand(x.shape[0])
    if target.shape != (x.shape[0],):
        raise ValueError(f"target must hold one class per input: shape ({x.shape[0]},), "
                         f"got {tuple(target.shape)}")
    return target


def grad(model: nn.Module, x: torch.Tensor, target=None, *,
         create_graph: bool = False) -> torch.Tensor:
    """Gradient of the target logit w.r.t. the input (Simonyan et al., 2014).

    This is the "saliency map" of 000 and 001 before any absolute value, and
    003's "Grad". Each input's gradient is that of its own logit, so the batch
    is processed in one backward pass.
    """
    target = resolve_target(model, x, target)
    x = x if (create_graph and x.requires_grad) else x.detach().requires_grad_(True)
    with torch.enable_grad():
        logits = model(x)
        selected = logits.gather(1, target[:, None]).sum()
        (g,) = torch.autograd.grad(selected, x, create_graph=create_graph)
    return g

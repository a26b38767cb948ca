"""Grad and Input x Grad: one backward pass for the whole batch."""
from __future__ import annotations

import torch
from torch import nn

from ._core import check_input, check_model, logit_grad, resolve_target

__all__ = ["grad", "input_x_grad"]


def grad(model: nn.Module, x: torch.Tensor, target=None, *,
         create_graph: bool = False) -> torch.Tensor:
    """Gradient of the target logit w.r.t. the input (Simonyan et al., 2014).

    The "saliency map" of 000 and 001 before any absolute value, and 003's "Grad".
    Each input's gradient is that of its own logit, so the batch takes one backward
    pass. With ``create_graph=True`` the result is differentiable w.r.t. ``x`` (when
    ``x.requires_grad``) and the model's parameters (a Hessian-vector product away).
    """
    check_model(model)
    x = check_input(x)
    target = resolve_target(model, x, target)
    return logit_grad(model, x, target, create_graph)


def input_x_grad(model: nn.Module, x: torch.Tensor, target=None, *,
                 create_graph: bool = False) -> torch.Tensor:
    """Input x Gradient, ``x * grad`` (Shrikumar et al., 2017; 003's "xGrad").

    000 uses it as the "saliency" of its attack experiments (then takes ``|.|`` summed
    over channels, see :func:`robattr.attributions.saliency_wang2020`). Pixels are in [0, 1],
    so the product is taken in pixel units, before the model's Normalize layer.
    """
    g = grad(model, x, target, create_graph=create_graph)
    return (x if create_graph else x.detach()) * g

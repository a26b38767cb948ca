"""Guided Backpropagation as a modified backward pass that supports double backward."""
from __future__ import annotations

import contextlib

import torch
from torch import nn
from torch.nn import functional as F

from ._core import check_input, check_model, logit_grad, resolve_target

__all__ = ["guided_backprop", "guided_activations"]


class _Guided(torch.autograd.Function):
    """Forward ``act(z)``; backward ``act'(z_ref) * relu(g)``.

    ``z_ref`` is ``z`` itself, or (with ``create_graph``) the same pre-activation taken
    from a plain forward pass, whose graph carries the true derivative w.r.t. ``x``.
    """

    @staticmethod
    def forward(ctx, z, z_ref, beta, threshold):
        ctx.save_for_backward(z_ref)
        ctx.beta, ctx.threshold = beta, threshold
        return z.clamp_min(0) if beta is None else F.softplus(z, beta, threshold)

    @staticmethod
    def backward(ctx, g):
        (z,) = ctx.saved_tensors
        if ctx.beta is None:
            slope = (z > 0).to(g.dtype)
        else:
            bz = z * ctx.beta
            slope = torch.where(bz > ctx.threshold, torch.ones_like(z), torch.sigmoid(bz))
        return slope * g.clamp_min(0), None, None, None


def _activations(model):
    acts = [m for m in model.modules() if isinstance(m, (nn.ReLU, nn.Softplus))]
    if not acts:
        raise ValueError("guided_backprop needs ReLU or Softplus modules in the model "
                         "(functional activations inside forward() cannot be guided)")
    return acts


@contextlib.contextmanager
def _hooks(model, hook):
    handles = [m.register_forward_hook(hook) for m in _activations(model)]
    try:
        yield model
    finally:
        for h in handles:
            h.remove()


def _guide(module, z, z_ref):
    if isinstance(module, nn.ReLU):
        return _Guided.apply(z, z_ref, None, None)
    return _Guided.apply(z, z_ref, float(module.beta), float(module.threshold))


@contextlib.contextmanager
def guided_activations(model: nn.Module):
    """Within this context every ReLU / Softplus module of ``model`` back-propagates the
    guided way (the forward pass is unchanged). Raises ``ValueError`` if there is none.
    Good for first-order use; :func:`guided_backprop` handles ``create_graph``."""
    with _hooks(model, lambda m, inputs, out: _guide(m, inputs[0], inputs[0])):
        yield model


def guided_backprop(model: nn.Module, x: torch.Tensor, target=None, *,
                    create_graph: bool = False) -> torch.Tensor:
    """Guided Backpropagation (Springenberg et al., 2015; 003's "GBP").

    The gradient of the target logit, except that at every activation the incoming
    gradient ``g`` is passed back only where it is positive: ``dz = act'(z) * relu(g)``.
    For ReLU this is 003's rule ``1(g > 0) 1(z > 0) g`` (and Captum's GuidedBackprop).
    For Softplus(beta) the paper is silent; we use ``sigmoid(beta z) * relu(g)``, the
    softplus derivative masked by the positive incoming gradient. Why: it is the same
    rule with ReLU's derivative replaced by the surrogate's, so it tends to ReLU's GBP as
    beta grows, it keeps GBP's "only positive evidence" mask, and it is what the 003
    authors' code (RobustAGA) computes for its Softplus(beta=3) models. (Captum hooks
    only ``nn.ReLU``, so on a softplus model it silently returns the plain gradient.)
    Activations must be ``nn.ReLU`` / ``nn.Softplus`` modules; max-pooling, linear and
    conv layers back-propagate as usual.

    ``create_graph=True``: the result is differentiable w.r.t. ``x`` and the parameters.
    ``d/dx`` is the derivative of this modified backward pass, taken almost everywhere:
    the masks ``1(z > 0)``, ``1(g > 0)`` and the max-pool switches are locally constant.
    On a ReLU network GBP is piecewise constant in ``x`` (``d/dx = 0`` a.e.), so use a
    Softplus model (``robattr.models.using_activation``) when the derivative matters.
    With ``create_graph=True`` it costs one extra forward pass (see the code's comment).
    """
    check_model(model)
    x = check_input(x)
    target = resolve_target(model, x, target)
    if not create_graph:
        with guided_activations(model):
            return logit_grad(model, x, target)
    # The guided rule is not the Jacobian of any forward map, so one graph cannot carry
    # both it and the true derivative of the forward pass. Pass 1 (plain, on x) records
    # every pre-activation with its graph; pass 2 (on a detached copy) back-propagates the
    # guided rule with slopes read from pass 1. Linear, conv and pooling backward steps do
    # not depend on their inputs' values, so d/dx reaches x through the slopes only.
    recorded: list[torch.Tensor] = []
    with _hooks(model, lambda m, inputs, out: recorded.append(inputs[0])):
        with torch.enable_grad():
            model(x)
    replay = iter(recorded)
    with _hooks(model, lambda m, inputs, out: _guide(m, inputs[0], next(replay))):
        return logit_grad(model, x.detach(), target, create_graph=True)

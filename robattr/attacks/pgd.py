"""Projected gradient descent on the prediction (Madry et al., ICLR 2018).

    x_adv = pgd(model, x, y, eps=8/255)                          # ℓ∞, 10 steps
    x_adv = pgd(model, x, y, eps=0.5, norm="l2", restarts=5)
    x_adv = pgd(model, x, target, eps=8/255, targeted=True)      # push towards `target`

Batched over the images: each example has its own perturbation, step and bookkeeping.
ℓ∞ steps follow the gradient's sign, ℓ2 steps the gradient normalised per example;
after every step the iterate is projected onto the ε-ball and onto [0, 1]
(:func:`robattr.attacks.projection.project`). The attack keeps, per example, the best
iterate it has seen (over all steps and restarts) by its own criterion: for the
untargeted cross-entropy attack a misclassified iterate beats a correct one and, among
equals, the higher loss wins; for the targeted attack an iterate classified as the
target beats the others and, among equals, the lower loss wins; a custom ``loss`` is
ranked by its value alone. So ``restarts=k`` is never worse than one start drawn from
the same random stream.

It is also the inner maximisation of the robust training losses (AT, TRADES,
IG-NORM), which pass their own ``loss``.

**Train/eval mode.** The model is put in eval mode for the attack and every module's
previous mode is restored afterwards (also on error). In eval mode BatchNorm uses its
running statistics, so the examples of a batch do not interact (each gradient is that
example's own), the running statistics are not polluted by adversarial inputs, and
dropout does not randomise the objective being maximised; this is what the reference
implementations of Madry et al. and TRADES do.
"""
from __future__ import annotations

import contextlib
from typing import Callable, Union

import torch
from torch import nn
from torch.nn import functional as F

from robattr.utils import check_int
from robattr.attacks.projection import (check_eps, check_norm, per_example_norm, project,
                                        random_in_ball)

__all__ = ["pgd", "eval_mode"]

AttackLoss = Union[str, Callable[[nn.Module, torch.Tensor, torch.Tensor], torch.Tensor]]


@contextlib.contextmanager
def eval_mode(model: nn.Module):
    """Put every module of ``model`` in eval mode; restore each module's own mode on exit."""
    modes = [(m, m.training) for m in model.modules()]
    model.eval()
    try:
        yield model
    finally:
        for m, mode in modes:
            m.training = mode


def _ce_objective(model, x_adv, y, targeted):
    logits = model(x_adv)
    loss = F.cross_entropy(logits, y, reduction="none")
    pred = logits.detach().argmax(1)
    success = pred == y if targeted else pred != y
    return loss, success


def _better(loss, success, best_loss, best_success, minimize):
    """Per-example mask: is (loss, success) better than the best so far?"""
    gain = loss < best_loss if minimize else loss > best_loss
    if success is None:
        return gain
    return (success & ~best_success) | ((success == best_success) & gain)


def pgd(model: nn.Module, x: torch.Tensor, y: torch.Tensor, *, eps: float,
        norm: str = "linf", steps: int = 10, step_size: float | None = None,
        random_start: bool = True, restarts: int = 1, targeted: bool = False,
        loss: AttackLoss = "ce", generator: torch.Generator | None = None,
        select: str = "best") -> torch.Tensor:
    """Projected gradient ascent on ``loss`` within the ``norm`` ball of radius ``eps``.

    ``x``: a batch of pixels in [0, 1]; ``y``: the true labels (untargeted) or the target
    classes (``targeted=True``), one per example. ``step_size`` defaults to
    ``2.5 * eps / steps`` (Madry et al.). ``random_start`` draws the first iterate
    uniformly from the ball (else it starts at ``x``); ``restarts`` repeats the attack
    from fresh random starts and keeps the best iterate per example. ``loss`` is
    ``"ce"`` (cross-entropy of the logits) or a callable ``loss(model, x_adv, y) -> (N,)``
    of per-example values: it is maximised, or minimised when ``targeted``. ``generator``
    (a torch.Generator) makes the random starts reproducible; otherwise the global RNG is
    used. ``select="best"`` keeps the best iterate over all steps and restarts;
    ``"last"`` compares only each restart's final iterate (with one restart: the final
    iterate, as in the reference AT/TRADES code; the robust losses use it, saving one
    evaluation of ``loss``). Returns the adversarial batch, detached, with the shape,
    device and dtype of ``x``.
    """
    eps = check_eps(eps)
    check_norm(norm)
    steps = check_int("steps", steps, 1)
    restarts = check_int("restarts", restarts, 1)
    if step_size is None:
        step_size = 2.5 * eps / steps
    step_size = check_eps(step_size, "step_size")
    if select not in ("best", "last"):
        raise ValueError(f"select must be 'best' or 'last', got {select!r}")
    if not (loss == "ce" or callable(loss)):
        raise ValueError(f"loss must be 'ce' or a callable (model, x_adv, y) -> (N,), got {loss!r}")
    if not torch.is_tensor(x) or x.ndim < 2 or not x.is_floating_point():
        raise ValueError("x must be a floating-point batch tensor (N, ...)")
    y = torch.as_tensor(y, device=x.device)
    if y.shape != (x.shape[0],):
        raise ValueError(f"y must hold one label per example: shape ({x.shape[0]},), "
                         f"got {tuple(y.shape)}")
    x = x.detach()
    if x.numel() and (float(x.min()) < 0.0 or float(x.max()) > 1.0):
        raise ValueError("x must be pixels in [0, 1] (robattr models normalise inside)")
    if eps == 0.0 or x.shape[0] == 0:
        return x.clone()

    minimize = bool(targeted)
    use_ce = isinstance(loss, str)

    def objective(x_adv):
        if use_ce:
            return _ce_objective(model, x_adv, y, targeted)
        value = loss(model, x_adv, y)
        if not torch.is_tensor(value) or value.shape != (x.shape[0],):
            raise ValueError("a custom pgd loss must return one value per example, shape "
                             f"({x.shape[0]},); got {getattr(value, 'shape', type(value))}")
        return value, None

    view = (-1,) + (1,) * (x.ndim - 1)
    best = x.clone()
    best_loss = torch.full((x.shape[0],), float("inf") if minimize else -float("inf"),
                           device=x.device, dtype=x.dtype)
    best_success = torch.zeros(x.shape[0], dtype=torch.bool, device=x.device)

    def keep(x_adv, value, success):
        nonlocal best_loss, best_success
        value = value.detach()
        better = _better(value, success, best_loss, best_success, minimize)
        best[better] = x_adv.detach()[better]
        best_loss = torch.where(better, value, best_loss)
        if success is not None:
            best_success = best_success | (better & success)

    with eval_mode(model), torch.enable_grad():
        for _ in range(restarts):
            if random_start:
                x_adv = project(x + random_in_ball(x, eps, norm, generator), x, eps, norm)
            else:
                x_adv = x.clone()
            for _ in range(steps):
                x_adv.requires_grad_(True)
                value, success = objective(x_adv)
                (g,) = torch.autograd.grad(value.sum(), x_adv)
                if select == "best":
                    keep(x_adv, value, success)
                if minimize:
                    g = -g
                if norm == "linf":
                    step = g.sign()
                else:
                    step = g / per_example_norm(g, "l2").clamp_min(1e-12).reshape(view)
                x_adv = project(x_adv.detach() + step_size * step, x, eps, norm)
            if select == "last" and restarts == 1:
                return x_adv.detach()
            with torch.no_grad() if use_ce else contextlib.nullcontext():
                value, success = objective(x_adv.detach().requires_grad_(not use_ce))
            keep(x_adv, value, success)
    return best

"""Projections onto the ε-ball around an input and onto the pixel range [0, 1].

Every attack in :mod:`robattr.attacks` keeps its iterate feasible with :func:`project`:
first the perturbation ``delta = x_adv - x`` is projected onto the ℓ∞ or ℓ2 ball of
radius ``eps`` (:func:`project_linf` clips each coordinate, :func:`project_l2` rescales
the whole per-example vector), then ``x + delta`` is clipped to [0, 1]. The order is
safe: since ``x`` itself lies in [0, 1], clipping to the pixel range only shrinks each
``|delta_i|``, so the result stays in the ball for both norms.

All functions are batch-first (one perturbation per example along dim 0), work on any
device and are differentiable almost everywhere.
"""
from __future__ import annotations


import torch

from robattr.utils import check_eps

__all__ = ["NORMS", "check_norm", "check_eps", "project_linf", "project_l2", "project",
           "per_example_norm", "random_in_ball"]

NORMS = ("linf", "l2")


def check_norm(norm: str) -> str:
    """``norm`` if it is ``"linf"`` or ``"l2"``, else a ValueError naming both."""
    if norm not in NORMS:
        raise ValueError(f"norm must be 'linf' or 'l2', got {norm!r}")
    return norm


def per_example_norm(t: torch.Tensor, norm: str) -> torch.Tensor:
    """The ℓ∞ or ℓ2 norm of each example of a batch, shape (N,)."""
    flat = t.reshape(t.shape[0], -1)
    if check_norm(norm) == "linf":
        return flat.abs().amax(dim=1)
    return flat.norm(dim=1)


def project_linf(delta: torch.Tensor, eps: float) -> torch.Tensor:
    """Euclidean projection of each perturbation onto the ℓ∞ ball: clip to [-eps, eps]."""
    eps = check_eps(eps)
    return delta.clamp(-eps, eps)


def project_l2(delta: torch.Tensor, eps: float) -> torch.Tensor:
    """Euclidean projection of each perturbation onto the ℓ2 ball of radius ``eps``:
    rescale the examples whose norm exceeds ``eps`` onto the sphere, leave the others."""
    eps = check_eps(eps)
    norms = per_example_norm(delta, "l2")
    # eps / norm <= 1 exactly where the projection moves the point; guard 0/0
    factor = torch.where(norms > eps, eps / norms.clamp_min(torch.finfo(delta.dtype).tiny),
                         torch.ones_like(norms))
    return delta * factor.reshape(-1, *([1] * (delta.ndim - 1)))


def project(x_adv: torch.Tensor, x: torch.Tensor, eps: float, norm: str = "linf") -> torch.Tensor:
    """``x_adv`` moved into the ``norm`` ball of radius ``eps`` around ``x``, then into [0, 1].

    ``x`` must itself be in [0, 1] (robattr's pixel convention) for the result to be in
    both sets; the ball projection comes first, the pixel clip second (which keeps it in
    the ball).
    """
    if x_adv.shape != x.shape:
        raise ValueError(f"x_adv and x must have the same shape, got {tuple(x_adv.shape)} "
                         f"and {tuple(x.shape)}")
    proj = project_linf if check_norm(norm) == "linf" else project_l2
    return (x + proj(x_adv - x, eps)).clamp(0.0, 1.0)


def random_in_ball(x: torch.Tensor, eps: float, norm: str,
                   generator: torch.Generator | None = None) -> torch.Tensor:
    """A perturbation drawn uniformly from each example's ε-ball (ℓ∞: the cube, coordinate
    by coordinate; ℓ2: the solid ball, a Gaussian direction times ``eps * U^(1/d)``) --
    the random start of PGD and of the attribution attacks. Same samplers as the
    smoothing methods (:mod:`robattr.attributions.noise`)."""
    from robattr.attributions.noise import ball_one, cube_one

    eps = check_eps(eps)
    return cube_one(x, eps, generator) if check_norm(norm) == "linf" else ball_one(x, eps, generator)

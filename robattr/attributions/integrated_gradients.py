"""Integrated Gradients with batched path points."""
from __future__ import annotations

import numpy as np
import torch
from torch import nn

from ._core import (check_count, check_input, check_like, check_model, logit_grad,
                    resolve_target, chunks)

__all__ = ["integrated_gradients", "IG_METHODS", "path_points"]

#: Quadrature rules for the path integral.
IG_METHODS = ("left", "right", "midpoint", "trapezoid", "gausslegendre")


def path_points(steps: int, method: str = "midpoint") -> tuple[np.ndarray, np.ndarray]:
    """Nodes ``alpha`` in [0, 1] and weights ``w`` (summing to 1) of the quadrature rule.

    ``left``/``right``/``midpoint``: ``steps`` equal cells, ``w = 1/steps``;
    ``trapezoid``: ``steps`` nodes ``0, 1/(steps-1), ..., 1`` (both ends evaluated),
    weights ``1/(steps-1)`` halved at the ends; ``gausslegendre``: Gauss-Legendre nodes.
    Note Captum's ``riemann_trapezoid`` puts its ``n`` nodes on the same grid but uses
    weights ``1/n`` (halved at the ends), which sum to ``(n-1)/n``: its result is ours
    times ``(n-1)/n``. Its left/right/middle rules are the same as ours.
    """
    steps = check_count("steps", steps)
    if method not in IG_METHODS:
        raise ValueError(f"method must be one of {IG_METHODS}, got {method!r}")
    n = steps
    if method == "left":
        alphas, weights = np.arange(n) / n, np.full(n, 1 / n)
    elif method == "right":
        alphas, weights = np.arange(1, n + 1) / n, np.full(n, 1 / n)
    elif method == "midpoint":
        alphas, weights = (np.arange(n) + 0.5) / n, np.full(n, 1 / n)
    elif method == "trapezoid":
        if n < 2:
            raise ValueError(f"steps must be >= 2 for the trapezoid rule, got {n}")
        alphas, weights = np.linspace(0, 1, n), np.full(n, 1 / (n - 1))
        weights[0] = weights[-1] = 0.5 / (n - 1)
    else:
        nodes, w = np.polynomial.legendre.leggauss(n)
        alphas, weights = 0.5 * (nodes + 1), 0.5 * w
    return alphas, weights


def integrated_gradients(model: nn.Module, x: torch.Tensor, target=None, *,
                         baseline=None, steps: int = 50, method: str = "midpoint",
                         batch_size: int | None = None,
                         create_graph: bool = False) -> torch.Tensor:
    """Integrated Gradients (Sundararajan et al., 2017) along the straight path.

    ``(x - b) * sum_k w_k grad f(b + alpha_k (x - b))`` with the quadrature of
    :func:`path_points` (``steps`` gradient evaluations; ``method`` one of
    :data:`IG_METHODS`). The baseline ``b`` is zero (a black image, as in 000) unless
    given (anything broadcastable to ``x``). Completeness: the attributions of each input
    sum to ``f(x) - f(b)`` up to the quadrature error (O(1/steps) for left/right,
    O(1/steps^2) for midpoint/trapezoid). 000's reference code uses ``method="right"``,
    50 steps.

    Path points are evaluated ``batch_size`` rows at a time (whole copies of the batch,
    at least one): memory is bounded by ``batch_size`` model inputs. The default (None)
    is device-aware: 128 rows on the CPU, as many as the free memory holds on CUDA (see
    :func:`robattr.attributions.chunk_rows`). With
    ``create_graph=True`` the result is differentiable w.r.t. ``x`` (through both the
    path points and the ``x - b`` factor) and the parameters.
    """
    check_model(model)
    x = check_input(x)
    target = resolve_target(model, x, target)
    b = torch.zeros_like(x) if baseline is None else check_like("baseline", baseline, x)
    alphas, weights = path_points(steps, method)
    xx = x if create_graph else x.detach()
    diff = xx - b
    shape = (-1,) + (1,) * x.ndim
    total = torch.zeros_like(x)
    for s, ks in chunks(batch_size, model, x, len(alphas), create_graph=create_graph):
        a = torch.as_tensor(alphas[s:s + ks], dtype=x.dtype, device=x.device).reshape(shape)
        w = torch.as_tensor(weights[s:s + ks], dtype=x.dtype, device=x.device).reshape(shape)
        path = (b + a * diff).reshape((ks * x.shape[0],) + x.shape[1:])
        g = logit_grad(model, path, target.repeat(ks), create_graph, check=(s == 0))
        total = total + (w * g.reshape((ks,) + x.shape)).sum(0)
    return diff * total

"""001 Sec. C.1: the Jacobian of Integrated Gradients and how diagonal it is.

With a zero baseline and quadrature nodes ``α_k``, weights ``w_k``, IG is
``x ⊙ Σ_k w_k ∇f(α_k x)`` and its Jacobian is ``diag(a) + B`` with ``a`` the path-averaged
gradient and ``B = diag(x) Σ_k w_k α_k ∇²f(α_k x)`` (:func:`ig_jacobian_parts`,
:func:`ig_jacobian`). The Hessian term's total weight ``Σ_k w_k α_k`` tends to 1/2, not 0, as
the step count grows (:func:`ig_hessian_weight`; exact for a :class:`QuadraticLogit`), and
:func:`diagonal_dominance` / :func:`offdiag_share` measure how diagonal a Jacobian is.
"""
from __future__ import annotations

from typing import NamedTuple

import numpy as np
import torch
from torch import nn

from robattr.bounds.jacobian import (DenseJacobianTooLarge, _check_x, _count, attribution_function,
                                     dense_jacobian, jacobian_ops)

__all__ = ["diagonal_dominance", "offdiag_share", "ig_hessian_weight", "ig_jacobian_parts", "ig_jacobian",
           "ig_jacobian_check", "IGJacobianCheck", "QuadraticLogit"]


def diagonal_dominance(J: torch.Tensor, rows: torch.Tensor | None = None) -> dict[str, torch.Tensor]:
    """How diagonal a square Jacobian is, per example: ``diag_mass`` = Σ|J_ii| / Σ|J_ij|
    and ``dominant_rows`` = the fraction of rows with ``|J_ii| ≥ Σ_{j≠i} |J_ij|``.

    ``rows`` (optional, (N, d) bool): count only those rows in both numbers (e.g. the
    pixels with ``x_i ≠ 0``: for IG with a zero baseline the other rows are diagonal by
    construction, see :func:`ig_jacobian_parts`). An example with no selected row gets NaN.
    """
    if not torch.is_tensor(J) or J.ndim != 3 or J.shape[1] != J.shape[2]:
        raise ValueError(f"J must be (N, d, d), got {getattr(J, 'shape', J)!r}")
    A = J.abs().double()
    diag = torch.diagonal(A, dim1=1, dim2=2)
    row_sum = A.sum(2)
    off = row_sum - diag
    if rows is None:
        w = torch.ones_like(diag)
    else:
        if not torch.is_tensor(rows) or rows.shape != diag.shape:
            raise ValueError(f"rows must be a (N, d) = {tuple(diag.shape)} bool tensor")
        w = rows.to(diag.device).double()
    n_rows = w.sum(1)
    nan = torch.full_like(n_rows, float("nan"))
    mass = (diag * w).sum(1) / (row_sum * w).sum(1).clamp_min(1e-300)
    dom = ((diag >= off).double() * w).sum(1) / n_rows.clamp_min(1)
    return {"diag_mass": torch.where(n_rows > 0, mass, nan),
            "dominant_rows": torch.where(n_rows > 0, dom, nan)}


def ig_hessian_weight(steps: int, method: str = "right") -> float:
    """``Σ_k w_k α_k``: the total weight of the Hessian term in the Jacobian of IG.

    With the quadrature nodes ``α_k`` and weights ``w_k`` of
    :func:`robattr.attributions.path_points`, IG with a zero baseline is
    ``x ⊙ Σ_k w_k ∇f(α_k x)`` and its Jacobian is
    ``diag(Σ_k w_k ∇f(α_k x)) + diag(x) Σ_k w_k α_k ∇²f(α_k x)``. For a quadratic ``f``
    (constant Hessian ``A``) the off-diagonal part is exactly ``x_i A_ij`` times this
    number. It is ``(m+1)/(2m)`` for the right Riemann sum (the paper's Eq. 40,
    ``α = 1..m``), ``(m−1)/(2m)`` for the left one and ``1/2`` for midpoint, trapezoid and
    Gauss-Legendre: it tends to ``∫₀¹ t dt = 1/2``, **not** to 0, as ``m`` grows.
    """
    from robattr.attributions import path_points

    a, w = path_points(_count("steps", steps), method)
    return float((np.asarray(a, dtype=np.float64) * np.asarray(w, dtype=np.float64)).sum())


def ig_jacobian_parts(model: nn.Module, x: torch.Tensor, target=None, *, steps: int = 16,
                      method: str = "right", max_bytes: float = 2 ** 30):
    """The two parts of the Jacobian of Integrated Gradients (zero baseline), densely.

    ``J_IG(x) = diag(a) + B`` with ``a = Σ_k w_k ∇f(α_k x)`` (the path-averaged gradient,
    (N, d)) and ``B = diag(x) Σ_k w_k α_k ∇²f(α_k x)`` ((N, d, d); row ``i`` is ``x_i``
    times a weighted sum of Hessian rows, so it vanishes where ``x_i = 0``). ``f`` is the
    logit of ``target`` (fixed; None: the class predicted at ``x``); the nodes and weights
    are those of :func:`robattr.attributions.path_points` (``method="right"`` is the
    paper's Eq. 40). The Hessians at the ``N·steps`` path points are dense (``d`` backward
    passes): for small inputs. They are taken a few images at a time, so that those held at
    once stay within ``max_bytes``; refused (:class:`DenseJacobianTooLarge`) when one image's
    alone would not. Returns ``(a, B)`` as float64 tensors; ``a`` is shaped like ``x``,
    ``B`` is (N, d, d) over the flattened input.
    """
    from robattr.attributions import path_points, resolve_target

    if not isinstance(model, nn.Module):
        raise ValueError(f"model must be a torch.nn.Module, got {type(model).__name__}")
    x = _check_x(x)
    steps = _count("steps", steps)
    alphas, weights = path_points(steps, method)
    n, d, k = x.shape[0], x[0].numel(), len(alphas)
    per_image = k * d * d * 8 * 2
    if per_image > max_bytes:
        raise DenseJacobianTooLarge(
            f"the {k} Hessians of one image in ig_jacobian_parts (d = {d}) need about "
            f"{per_image / 2 ** 30:.2f} GiB, over the allowed {max_bytes / 2 ** 30:.2f} GiB")
    with torch.no_grad():
        t = resolve_target(model, x, target)
    chunk = int(max_bytes // per_image)
    if n > chunk:
        parts = [ig_jacobian_parts(model, x[i:i + chunk], t[i:i + chunk], steps=steps,
                                   method=method, max_bytes=max_bytes)
                 for i in range(0, n, chunk)]
        return torch.cat([a for a, _ in parts]), torch.cat([B for _, B in parts])
    a_t = torch.as_tensor(alphas, dtype=x.dtype, device=x.device)
    w_t = torch.as_tensor(weights, dtype=torch.float64, device=x.device)
    pts = (a_t.reshape((k, 1) + (1,) * (x.ndim - 1)) * x.unsqueeze(0)).reshape((k * n,) + x.shape[1:])
    sal = attribution_function(model, "sm", t.repeat(k))
    ops = jacobian_ops(sal, pts)
    H = dense_jacobian(sal, pts, ops=ops, max_bytes=max(max_bytes, 1.0)).double()  # (k n, d, d)
    grads = ops.out.double().reshape(k, n, d)
    a = (w_t[:, None, None] * grads).sum(0)
    wa = (w_t * torch.as_tensor(alphas, dtype=torch.float64, device=x.device))
    M = (wa[:, None, None, None] * H.reshape(k, n, d, d)).sum(0)
    B = x.reshape(n, d).double()[:, :, None] * M
    return a.reshape(x.shape), B


def ig_jacobian(model: nn.Module, x: torch.Tensor, target=None, *, steps: int = 16,
                method: str = "right") -> torch.Tensor:
    """The (N, d, d) float64 Jacobian ``diag(a) + B`` of IG over the flattened input
    (:func:`ig_jacobian_parts`, same arguments)."""
    a, B = ig_jacobian_parts(model, x, target, steps=steps, method=method)
    return torch.diag_embed(a.reshape(B.shape[:2])) + B


def offdiag_share(J: torch.Tensor, rows: torch.Tensor | None = None) -> torch.Tensor:
    """Per example, the off-diagonal share Σ_{i≠j}|J_ij| / Σ_ij|J_ij| of a square Jacobian:
    ``1 − diag_mass`` of :func:`diagonal_dominance` (same ``rows`` option)."""
    return 1 - diagonal_dominance(J, rows)["diag_mass"]


class IGJacobianCheck(NamedTuple):
    """What :func:`ig_jacobian_check` found, and the two matrices it compared."""
    rel_err: float                # max |diag(a) + B − J| / max |J|
    zero_row_violations: int      # rows with x_i = 0 that have a nonzero off-diagonal entry
    zero_rows: int                # rows with x_i = 0
    a: torch.Tensor               # the path-averaged gradient, shaped like x (float64)
    J: torch.Tensor               # the autograd Jacobian of the IG map, (N, d, d) float64


def ig_jacobian_check(model: nn.Module, x: torch.Tensor, target=None, *, steps: int = 16,
                      method: str = "right") -> IGJacobianCheck:
    """Check the C.1 decomposition on one model: ``diag(a) + B`` of :func:`ig_jacobian_parts`
    against the dense Jacobian that autograd takes of the IG map itself, and the rows at a
    baseline pixel (``x_i = 0``), which must be exactly diagonal. ``target`` is the class
    (an int or (N,) tensor, as for IG); ``steps`` / ``method`` the quadrature."""
    a, B = ig_jacobian_parts(model, x, target, steps=steps, method=method)
    n, d = B.shape[:2]
    J = dense_jacobian(attribution_function(model, "ig", target, steps=steps, ig_method=method), x).double()
    rel = float((torch.diag_embed(a.reshape(n, d)) + B - J).abs().max() / J.abs().max())
    zero = (x.reshape(n, d) == 0)
    off = J - torch.diag_embed(torch.diagonal(J, dim1=1, dim2=2))
    return IGJacobianCheck(rel, int((off.abs().sum(2)[zero] > 0).sum()), int(zero.sum()), a, J)


class QuadraticLogit(nn.Module):
    """The logits ``f_c(z) = ½ zᵀ A_c z + b_cᵀ z`` on flat inputs (N, d): a network whose input
    Hessian is the constant ``A_c``, so the IG Jacobian's Hessian term is known exactly
    (``x_i A_ij Σ_k w_k α_k``). ``A`` is (C, d, d), ``b`` (C, d) or None (no linear term)."""

    def __init__(self, A: torch.Tensor, b: torch.Tensor | None = None):
        super().__init__()
        if not torch.is_tensor(A) or A.ndim != 3 or A.shape[1] != A.shape[2]:
            raise ValueError(f"A must be a (C, d, d) tensor, got {getattr(A, 'shape', A)!r}")
        if b is not None and (not torch.is_tensor(b) or tuple(b.shape) != tuple(A.shape[:2])):
            raise ValueError(f"b must be None or a (C, d) = {tuple(A.shape[:2])} tensor")
        self.register_buffer("A", A)
        self.register_buffer("b", b)

    def forward(self, z: torch.Tensor) -> torch.Tensor:
        out = 0.5 * torch.einsum("ni,cij,nj->nc", z, self.A, z)
        return out if self.b is None else out + z @ self.b.T

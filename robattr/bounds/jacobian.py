"""The matrix-free Jacobian machinery of an attribution map (001: Wang & Kong, CVPR 2023).

``g`` maps a batch ``x`` (N, ...) to one attribution per example, the same shape; examples do
not interact (a model in eval mode). For one example ``J = ∂g/∂x``.
:func:`attribution_function` builds ``g`` from a model, :func:`jacobian_ops` gives the
products ``Jᵀu`` and ``Jv`` from one forward graph (each one backward pass),
:func:`jacobian_spectral_norm` the top singular value ξ_max (Lanczos / power iteration, or
dense as a check), and :func:`dense_jacobian` all rows of ``J``, refused
(:class:`DenseJacobianTooLarge`) when they would not fit in memory. The bounds built on them
are in :mod:`robattr.bounds.deviation`.
"""
from __future__ import annotations


import math
import numbers
from typing import Callable, NamedTuple

import numpy as np
import torch
from torch import nn
__all__ = [
    "DenseJacobianTooLarge", "JacobianOps", "SpectralNorm", "attribution_function", "jacobian_ops",
    "jacobian_spectral_norm", "dense_jacobian", "SPECTRAL_METHODS",
]

SPECTRAL_METHODS = ("lanczos", "power", "dense")
ATTRIBUTIONS = ("sm", "grad", "ig", "ixg", "input_x_grad")


class DenseJacobianTooLarge(MemoryError):
    """The dense Jacobian asked for would not fit in the allowed memory."""


# --------------------------------------------------------------------------- checks
def _check_x(x) -> torch.Tensor:
    if not torch.is_tensor(x) or not x.is_floating_point() or x.ndim < 2 or x.shape[0] == 0:
        raise ValueError("x must be a non-empty floating-point batch tensor (N, ...), got "
                         f"{getattr(x, 'shape', type(x).__name__)}")
    return x.detach()


def _pos(name: str, v, *, allow_zero: bool = False) -> float:
    if isinstance(v, bool) or not isinstance(v, numbers.Real) or not math.isfinite(v) \
            or (v < 0 if allow_zero else v <= 0):
        raise ValueError(f"{name} must be a finite number {'>=' if allow_zero else '>'} 0, "
                         f"got {v!r}")
    return float(v)


def _count(name: str, v, lo: int = 1) -> int:
    if isinstance(v, bool) or not isinstance(v, numbers.Integral) or v < lo:
        raise ValueError(f"{name} must be an integer >= {lo}, got {v!r}")
    return int(v)


def _bdot(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    """Per-example inner product of two batches, (N,)."""
    return (a.reshape(a.shape[0], -1) * b.reshape(b.shape[0], -1)).sum(1)


def _bnorm(a: torch.Tensor) -> torch.Tensor:
    return a.reshape(a.shape[0], -1).norm(dim=1)


def _view(n: torch.Tensor, like: torch.Tensor) -> torch.Tensor:
    return n.reshape((-1,) + (1,) * (like.ndim - 1))


# --------------------------------------------------------------------------- attributions
def attribution_function(model: nn.Module, method: str = "sm", target=None, *,
                         steps: int = 50, ig_method: str = "midpoint",
                         batch_size: int = 512) -> Callable[[torch.Tensor], torch.Tensor]:
    """``g(x)``: a differentiable attribution map for a fixed target class, batch-first.

    ``method``: ``"sm"`` / ``"grad"`` (saliency: gradient of the target logit, the paper's
    SM), ``"ixg"`` / ``"input_x_grad"`` (Input × Gradient), ``"ig"`` (Integrated Gradients,
    zero baseline, ``steps`` points of ``ig_method``). The returned function calls
    :mod:`robattr.attributions` with ``create_graph=True``, so its output can be
    differentiated w.r.t. its input (second derivatives of the network: use a Softplus
    model, a ReLU network has a zero Hessian almost everywhere). ``target`` is fixed when
    the function is built (None: the class predicted at the points it is called on —
    pass the label of the clean input to keep the class fixed under perturbation).
    """
    from robattr.attributions import grad, input_x_grad, integrated_gradients, resolve_target

    if not isinstance(model, nn.Module):
        raise ValueError(f"model must be a torch.nn.Module, got {type(model).__name__}")
    if method not in ATTRIBUTIONS:
        raise ValueError(f"method must be one of {ATTRIBUTIONS}, got {method!r}")
    steps = _count("steps", steps)

    def fn(z: torch.Tensor) -> torch.Tensor:
        t = None if target is None else resolve_target(model, z, target)
        if method in ("sm", "grad"):
            return grad(model, z, t, create_graph=True)
        if method in ("ixg", "input_x_grad"):
            return input_x_grad(model, z, t, create_graph=True)
        return integrated_gradients(model, z, t, steps=steps, method=ig_method,
                                    batch_size=batch_size, create_graph=True)

    fn.method = method
    return fn


class JacobianOps(NamedTuple):
    """Matrix-free products with the per-example Jacobian ``J`` of ``fn`` at ``x``.

    ``out``: ``fn(x)`` (detached); ``jvp(v)``: ``J v`` (shape of ``out``) for ``v`` shaped
    like ``x``; ``vjp(u)``: ``Jᵀ u`` (shape of ``x``) for ``u`` shaped like ``out``.
    """
    out: torch.Tensor
    jvp: Callable[[torch.Tensor], torch.Tensor]
    vjp: Callable[[torch.Tensor], torch.Tensor]


def jacobian_ops(fn: Callable, x: torch.Tensor, *, backend: str = "autograd") -> JacobianOps:
    """Build ``J v`` and ``Jᵀ u`` for ``fn`` at ``x`` (see the module docstring).

    ``backend="autograd"``: one forward of ``fn`` with its graph kept, every product one
    backward pass. ``backend="func"``: ``torch.func.vjp`` of ``fn`` and of its vjp.
    """
    x = _check_x(x)
    if not callable(fn):
        raise ValueError(f"fn must be callable, got {fn!r}")
    if backend == "func":
        out, vjp_fn = torch.func.vjp(fn, x)
        _, jvp_fn = torch.func.vjp(lambda u: vjp_fn(u)[0], torch.zeros_like(out))
        return JacobianOps(out.detach(), lambda v: jvp_fn(v)[0].detach(),
                           lambda u: vjp_fn(u)[0].detach())
    if backend != "autograd":
        raise ValueError(f"backend must be 'autograd' or 'func', got {backend!r}")
    with torch.enable_grad():
        xx = x.clone().requires_grad_(True)
        out = fn(xx)
        if not torch.is_tensor(out) or out.shape[0] != x.shape[0]:
            raise ValueError("fn must return a tensor with one row per input, got "
                             f"{getattr(out, 'shape', type(out).__name__)}")
        if not out.requires_grad:
            raise ValueError("fn's output does not depend differentiably on its input "
                             "(call the attribution with create_graph=True)")
        u0 = torch.zeros_like(out, requires_grad=True)
        (jtu,) = torch.autograd.grad(out, xx, u0, create_graph=True, allow_unused=True)
    if jtu is None or not jtu.requires_grad:
        zero_in, zero_out = torch.zeros_like(x), torch.zeros_like(out.detach())

        def jvp(v):  # J does not depend on u at all: fn is constant in x
            return zero_out.clone()

        def vjp(u):
            return zero_in.clone()
        return JacobianOps(out.detach(), jvp, vjp)

    def jvp(v: torch.Tensor) -> torch.Tensor:
        with torch.enable_grad():
            (r,) = torch.autograd.grad(jtu, u0, v.to(x.dtype), retain_graph=True,
                                       allow_unused=True)
        return torch.zeros_like(out.detach()) if r is None else r.detach()

    def vjp(u: torch.Tensor) -> torch.Tensor:
        with torch.enable_grad():
            (r,) = torch.autograd.grad(out, xx, u.to(out.dtype), retain_graph=True,
                                       allow_unused=True)
        return torch.zeros_like(x) if r is None else r.detach()

    return JacobianOps(out.detach(), jvp, vjp)


# --------------------------------------------------------------------------- dense
def dense_jacobian(fn: Callable, x: torch.Tensor, *, max_bytes: float = 2 ** 31,
                   ops: JacobianOps | None = None) -> torch.Tensor:
    """The per-example Jacobian ``J`` as a dense (N, m, d) tensor (m outputs, d inputs).

    Row ``k`` of every example's ``J`` is one backward pass with the k-th output basis
    vector (examples do not interact, so one pass serves the whole batch): m passes.
    Refuses with :class:`DenseJacobianTooLarge` (a ``MemoryError``) when ``N·m·d``
    floats exceed ``max_bytes`` (default 2 GiB). For checks on small inputs.
    """
    x = _check_x(x)
    n, d = x.shape[0], x[0].numel()
    ops = ops or jacobian_ops(fn, x)
    m = ops.out[0].numel()
    need = n * m * d * x.element_size() + n * d * d * x.element_size()
    if need > max_bytes:
        raise DenseJacobianTooLarge(
            f"the dense Jacobian of {n} input(s) with d = {d}, m = {m} needs about "
            f"{need / 2 ** 30:.1f} GiB (J and the matrix for its SVD), over the allowed "
            f"{max_bytes / 2 ** 30:.1f} GiB; use method='lanczos' or 'power' (matrix-free)")
    rows = torch.empty(n, m, d, dtype=x.dtype, device=x.device)
    basis = torch.zeros((n, m), dtype=ops.out.dtype, device=x.device)
    for k in range(m):
        basis.zero_()
        basis[:, k] = 1.0
        rows[:, k] = ops.vjp(basis.reshape(ops.out.shape)).reshape(n, d)
    return rows


# --------------------------------------------------------------------------- spectra
def _lanczos(ops: JacobianOps, x: torch.Tensor, tol: float, max_iter: int, gen):
    n, d = x.shape[0], x[0].numel()
    dt = torch.float64
    q = torch.randn(x.shape, generator=gen, dtype=x.dtype, device=gen.device).to(x.device)
    q = q.reshape(n, d).to(dt)
    q = q / q.norm(dim=1, keepdim=True)
    Q = [q]
    alphas, betas = [], []
    theta = torch.zeros(n, dtype=dt, device=x.device)
    s_top = None
    converged = torch.zeros(n, dtype=torch.bool, device=x.device)
    it = 0
    for it in range(1, max_iter + 1):
        v = Q[-1]
        w = ops.vjp(ops.jvp(v.to(x.dtype).reshape(x.shape))).reshape(n, d).to(dt)
        a = (w * v).sum(1)
        alphas.append(a)
        w = w - a[:, None] * v - (betas[-1][:, None] * Q[-2] if betas else 0.0)
        Qm = torch.stack(Q, 1)                                     # (n, k, d)
        for _ in range(2):                                         # full re-orthogonalisation
            w = w - torch.einsum("nkd,nk->nd", Qm, torch.einsum("nkd,nd->nk", Qm, w))
        b = w.norm(dim=1)
        k = len(alphas)
        T = torch.diag_embed(torch.stack(alphas, 1))
        if k > 1:
            off = torch.stack(betas, 1)
            T = T + torch.diag_embed(off, 1) + torch.diag_embed(off, -1)
        evals, evecs = torch.linalg.eigh(T)
        theta, s_top = evals[:, -1], evecs[:, :, -1]
        resid = b * s_top[:, -1].abs()
        scale = theta.abs().clamp_min(torch.finfo(dt).tiny)
        converged = (resid <= tol * scale) | (b <= 1e-12 * scale) | (theta <= 0)
        if bool(converged.all()) or it == max_iter or k >= d:
            break
        betas.append(b)
        Q.append(w / b.clamp_min(torch.finfo(dt).tiny)[:, None])
    Qm = torch.stack(Q[:len(alphas)], 1)
    vec = torch.einsum("nkd,nk->nd", Qm, s_top)
    vec = vec / vec.norm(dim=1, keepdim=True).clamp_min(torch.finfo(dt).tiny)
    return theta.clamp_min(0.0), vec, it, converged


def _power(ops: JacobianOps, x: torch.Tensor, tol: float, max_iter: int, gen):
    n, d = x.shape[0], x[0].numel()
    v = torch.randn(x.shape, generator=gen, dtype=x.dtype, device=gen.device).to(x.device)
    v = v.reshape(n, d).double()
    v = v / v.norm(dim=1, keepdim=True)
    lam = torch.zeros(n, dtype=torch.float64, device=x.device)
    converged = torch.zeros(n, dtype=torch.bool, device=x.device)
    it = 0
    for it in range(1, max_iter + 1):
        w = ops.vjp(ops.jvp(v.to(x.dtype).reshape(x.shape))).reshape(n, d).double()
        new = (w * v).sum(1)                                       # Rayleigh quotient
        nw = w.norm(dim=1)
        converged = ((new - lam).abs() <= tol * new.abs().clamp_min(1e-300)) | (nw == 0)
        lam = new
        v = torch.where(nw[:, None] > 0, w / nw.clamp_min(1e-300)[:, None], v)
        if bool(converged.all()):
            break
    return lam.clamp_min(0.0), v, it, converged


class SpectralNorm(NamedTuple):
    """``value`` ξ_max per example (N,); ``vector`` the top right singular vector (shape of
    ``x``, unit ℓ2 norm per example); ``iterations``; ``converged`` (N,) bool."""
    value: torch.Tensor
    vector: torch.Tensor
    iterations: int
    converged: torch.Tensor


def jacobian_spectral_norm(fn: Callable, x: torch.Tensor, method: str = "lanczos", *,
                           tol: float = 1e-6, max_iter: int = 100, backend: str = "autograd",
                           generator: torch.Generator | None = None, seed: int | None = 0,
                           max_bytes: float = 2 ** 31, return_vector: bool = False,
                           ops: JacobianOps | None = None):
    """ξ_max, the largest singular value of the Jacobian of ``fn`` at each input of ``x``.

    ``fn`` maps a batch to a batch (one attribution per example, examples independent);
    its output must be differentiable w.r.t. its input (e.g. :func:`attribution_function`).
    ξ_max² is the top eigenvalue of ``JᵀJ``, found matrix-free, batched over the inputs:

    * ``"lanczos"`` (default): Lanczos on ``JᵀJ`` with full re-orthogonalisation; stops
      when every example's Ritz residual ``β_k |s_k|`` is at most ``tol`` times its top
      Ritz value (or after ``max_iter`` products);
    * ``"power"``: power iteration; stops when the Rayleigh quotient changes by at most
      ``tol`` (relative) for every example;
    * ``"dense"``: all of ``J`` (:func:`dense_jacobian`) and ``torch.linalg.svdvals``; a
      check only, refused (``DenseJacobianTooLarge``, a MemoryError) above ``max_bytes``.

    Each ``JᵀJ v`` costs two backward passes (see the module docstring). The start vector
    is Gaussian from ``generator`` (else ``seed``). Returns ξ_max (N,) as a float64
    tensor, or a :class:`SpectralNorm` (value, unit top singular vector ``v_max`` shaped
    like ``x``, iterations, converged) with ``return_vector=True``.
    """
    x = _check_x(x)
    if method not in SPECTRAL_METHODS:
        raise ValueError(f"method must be one of {SPECTRAL_METHODS}, got {method!r}")
    tol = _pos("tol", tol)
    max_iter = _count("max_iter", max_iter)
    if method == "dense":
        J = dense_jacobian(fn, x, max_bytes=max_bytes, ops=ops).double()
        _, s, vh = torch.linalg.svd(J, full_matrices=False)
        res = SpectralNorm(s[:, 0], vh[:, 0].reshape(x.shape), 1,
                           torch.ones(x.shape[0], dtype=torch.bool, device=x.device))
        return res if return_vector else res.value
    if generator is None:
        generator = torch.Generator().manual_seed(0 if seed is None else int(seed))
    ops = ops or jacobian_ops(fn, x, backend=backend)
    run = _lanczos if method == "lanczos" else _power
    lam, vec, it, conv = run(ops, x, tol, max_iter, generator)
    res = SpectralNorm(lam.sqrt(), vec.reshape(x.shape), it, conv)
    return res if return_vector else res.value

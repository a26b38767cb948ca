"""000 (Wang et al., NeurIPS 2020): the curvature side of Proposition 1, Lemma 3 /
Theorem 2 and Theorem 3 -- SmoothGrad as Stein's gradient, the Hessian of the
Gaussian-smoothed model and the input Hessian's spectral norm.

Notation as in :mod:`robattr.bounds.geometry` (``f̃_σ = f * N(0, σ²I)``, whose gradient
is SmoothGrad and whose Hessian is ``H̃_x = E[∇²f(x + u)] = E[(u uᵀ − σ²I) f(x + u)] / σ⁴``):
:func:`stein_gradient` (Prop. 1's two estimators), :func:`smoothed_hvp` (Hessian-vector
products of ``f̃_σ`` under a fixed set of noise draws, by autograd or by the zeroth-order
Stein form), :func:`power_iteration` and :func:`smoothed_hessian_spectral_norm`;
:func:`smoothed_hessian_quadrature` computes ``H̃_x`` by Gauss–Hermite quadrature for
small d (an accurate reference); :func:`input_hessian_spectral_norm` gives ``‖H_x‖₂``
(Theorem 3's right side). Split from :mod:`robattr.bounds.geometry` to keep each module
short; the two share their argument checks.
"""
from __future__ import annotations

import math
from typing import Callable

import numpy as np
import torch
from torch import nn

from robattr.attributions import resolve_target
from robattr.bounds.geometry import (_check_model, _check_output, _check_x, _flat_norm, _pos,
                                     _view, scalar_output)
from robattr.utils import check_int, make_generator

__all__ = ["stein_gradient", "smoothed_hvp", "power_iteration", "smoothed_hessian_spectral_norm",
           "smoothed_hessian_quadrature", "input_hessian_spectral_norm"]


def stein_gradient(model: nn.Module, x: torch.Tensor, target=None, *, sigma: float,
                   n_samples: int = 50, output: str = "prob", control_variate: bool = False,
                   batch_size: int = 1024, generator=None, seed=None):
    """Proposition 1's two Monte-Carlo estimators of ``∇f̃_σ(x)``, on the same draws
    ``u_j ~ N(0, σ²I)``:

    * ``pathwise``: ``mean_j ∇f(x + u_j)`` (SmoothGrad);
    * ``stein``: ``mean_j u_j f(x + u_j) / σ²`` (Stein's lemma, zeroth order); with
      ``control_variate=True`` ``f(x + u_j) − f(x)`` replaces ``f(x + u_j)``
      (same expectation since ``E u = 0``, far smaller variance).

    Returns ``(pathwise, stein)``, each shaped like ``x``.
    """
    _check_model(model)
    _check_output(output)
    x = _check_x(x)
    sigma = _pos("sigma", sigma)
    n = check_int("n_samples", n_samples, 1)
    bs = check_int("batch_size", batch_size, 1)
    t = resolve_target(model, x, target)
    gen = make_generator(x, generator, seed)
    gdev = gen.device if gen is not None else x.device
    with torch.no_grad():
        f0 = scalar_output(model, x, t, output) if control_variate else None
    path = torch.zeros_like(x)
    stein = torch.zeros_like(x)
    per = max(1, bs // x.shape[0])
    for s in range(0, n, per):
        k = min(per, n - s)
        u = sigma * torch.randn((k,) + x.shape, generator=gen, device=gdev,
                                dtype=x.dtype).to(x.device)
        z = (x.unsqueeze(0) + u).reshape((k * x.shape[0],) + x.shape[1:]).requires_grad_(True)
        with torch.enable_grad():
            fz = scalar_output(model, z, t.repeat(k), output)
            (g,) = torch.autograd.grad(fz.sum(), z)
        path += g.reshape((k,) + x.shape).sum(0)
        fz = fz.detach().reshape(k, x.shape[0])
        if f0 is not None:
            fz = fz - f0
        stein += (u * fz.reshape((k, x.shape[0]) + (1,) * (x.ndim - 1))).sum(0)
    return path / n, stein / (n * sigma ** 2)


# --------------------------------------------------------------------------- Lemma 3 / Thm 2
def smoothed_hvp(model: nn.Module, x: torch.Tensor, target: torch.Tensor, *,
                 noise: torch.Tensor, sigma: float, output: str = "prob",
                 estimator: str = "autograd") -> Callable[[torch.Tensor], torch.Tensor]:
    """The operator ``v ↦ H̃ v`` of the smoothed model under a fixed set of draws ``noise``
    (n, *x.shape), ``u_j = noise[j]`` (already scaled by σ): one symmetric matrix, the
    Monte-Carlo average, so power iteration applies. The work that does not depend on
    ``v`` (the forward passes, the first backward) is done once here.

    ``estimator="autograd"``: ``mean_j ∇²f(x + u_j) v`` (double backward; smooth models).
    ``estimator="stein"``: Lemma 3's zeroth-order form with a control variate,
    ``mean_j ((u_jᵀv) u_j − σ² v) (f(x + u_j) − f(x)) / σ⁴`` (any model, ReLU included).
    ``target`` is a LongTensor (N,); the operator takes and returns tensors shaped like ``x``.
    """
    if estimator not in ("autograd", "stein"):
        raise ValueError(f"estimator must be 'autograd' or 'stein', got {estimator!r}")
    if not torch.is_tensor(noise) or noise.ndim != x.ndim + 1 or noise.shape[1:] != x.shape:
        raise ValueError(f"noise must be shaped (n, *x.shape), got "
                         f"{getattr(noise, 'shape', type(noise).__name__)}")
    sigma = _pos("sigma", sigma)
    n = noise.shape[0]
    xs = (x.unsqueeze(0) + noise).reshape((n * x.shape[0],) + x.shape[1:])
    tt = target.repeat(n)
    if estimator == "autograd":
        z = xs.detach().requires_grad_(True)
        with torch.enable_grad():
            (g,) = torch.autograd.grad(scalar_output(model, z, tt, output).sum(), z,
                                       create_graph=True)

        def hvp(v):
            vv = v.detach().unsqueeze(0).expand((n,) + x.shape).reshape(z.shape)
            with torch.enable_grad():
                (hv,) = torch.autograd.grad((g * vv).sum(), z, retain_graph=True)
            return hv.reshape((n,) + x.shape).mean(0)
        return hvp

    with torch.no_grad():
        fz = scalar_output(model, xs, tt, output).reshape(n, x.shape[0])
        fz = fz - scalar_output(model, x, target, output)
    shape = (n, x.shape[0]) + (1,) * (x.ndim - 1)
    fz = fz.reshape(shape)

    def stein(v):
        with torch.no_grad():
            uv = (noise * v.unsqueeze(0)).reshape(n, x.shape[0], -1).sum(2).reshape(shape)
            return ((uv * fz * noise).mean(0) - sigma ** 2 * v * fz.mean(0)) / sigma ** 4
    return stein


def power_iteration(matvec: Callable[[torch.Tensor], torch.Tensor], v0: torch.Tensor, *,
                    iters: int = 50, tol: float = 1e-6):
    """Largest |eigenvalue| of a batch of symmetric operators by power iteration.

    ``matvec`` maps a batch of vectors (N, ...) to their images; ``v0`` the start (N, ...).
    Returns ``(norm, v)``: ``‖A v‖`` at the final unit ``v`` (N,), and ``v``. For a
    symmetric A this converges to ``‖A‖₂ = max |ξ_i|`` (from below, as a Rayleigh-type
    estimate); ``tol`` stops when every relative change is below it.
    """
    iters = check_int("iters", iters, 1)
    v = v0 / _view(_flat_norm(v0).clamp_min(1e-30), v0)
    est = torch.zeros(v0.shape[0], dtype=v0.dtype, device=v0.device)
    for _ in range(iters):
        w = matvec(v)
        new = _flat_norm(w)
        v = w / _view(new.clamp_min(1e-30), w)
        done = bool(((new - est).abs() <= tol * new.clamp_min(1e-30)).all())
        est = new
        if done:
            break
    return est, v


def smoothed_hessian_spectral_norm(model: nn.Module, x: torch.Tensor, target=None, *,
                                   sigma: float, n_samples: int = 64, output: str = "prob",
                                   estimator: str = "autograd", iters: int = 30,
                                   generator=None, seed=None) -> torch.Tensor:
    """``‖H̃_x‖₂`` of the σ-smoothed model, per example (N,): power iteration on
    :func:`smoothed_hvp` with ``n_samples`` fixed draws (common random numbers, so the
    operator is one symmetric matrix: the Monte-Carlo average of Hessians)."""
    _check_model(model)
    _check_output(output)
    x = _check_x(x)
    sigma = _pos("sigma", sigma)
    n = check_int("n_samples", n_samples, 1)
    t = resolve_target(model, x, target)
    gen = make_generator(x, generator, seed)
    gdev = gen.device if gen is not None else x.device
    noise = sigma * torch.randn((n,) + x.shape, generator=gen, device=gdev,
                                dtype=x.dtype).to(x.device)
    v0 = torch.randn(x.shape, generator=gen, device=gdev, dtype=x.dtype).to(x.device)
    op = smoothed_hvp(model, x, t, noise=noise, sigma=sigma, output=output, estimator=estimator)
    est, _ = power_iteration(op, v0, iters=iters)
    return est.detach()


def input_hessian_spectral_norm(model: nn.Module, x: torch.Tensor, target=None, *,
                                output: str = "logit", iters: int = 50,
                                generator=None, seed=None, return_vector: bool = False):
    """``‖H_x‖₂ = max_i |ξ_i|`` of the input Hessian of ``f`` (N,), by power iteration on
    Hessian-vector products (double backward; zero for ReLU networks). The estimate is
    ``‖H_x v‖`` at a unit ``v``, so it never exceeds the true norm. With
    ``return_vector=True`` returns ``(norm, v)``, ``v`` (shaped like ``x``) the unit
    eigenvector estimate, the direction of the first-order maximum of Theorem 3."""
    _check_model(model)
    _check_output(output)
    x = _check_x(x)
    t = resolve_target(model, x, target)
    gen = make_generator(x, generator, seed)
    gdev = gen.device if gen is not None else x.device
    z = x.detach().requires_grad_(True)
    with torch.enable_grad():
        (g,) = torch.autograd.grad(scalar_output(model, z, t, output).sum(), z,
                                   create_graph=True)

    def hvp(v):
        with torch.enable_grad():
            (hv,) = torch.autograd.grad((g * v).sum(), z, retain_graph=True)
        return hv

    v0 = torch.randn(x.shape, generator=gen, device=gdev, dtype=x.dtype).to(x.device)
    est, v = power_iteration(hvp, v0, iters=iters)
    return (est.detach(), v.detach()) if return_vector else est.detach()


def smoothed_hessian_quadrature(fn: Callable[[torch.Tensor], torch.Tensor], x: torch.Tensor, *,
                                sigma: float, nodes: int = 40, form: str = "hessian") -> torch.Tensor:
    """``H̃_x`` by tensor-product Gauss–Hermite quadrature, for small d.

    ``fn`` maps a batch of points (M, d) to their values (M,), each row on its own (a
    model's selected output). ``x`` is one point (d,).
    ``form="hessian"``: ``E[∇²f(x + σZ)]`` (per-point Hessians by d double-backward passes
    over the whole batch); ``form="stein"``: Lemma 3's ``E[(ZZᵀ − I) f(x + σZ)] / σ²``
    (values of f only). The two agree when the quadrature has converged -- the check to
    make, since sharp networks need many nodes. Exact for low-degree polynomial ``f``;
    ``nodes**d`` points, so keep ``d ≤ 3``. Returns (d, d).
    """
    if form not in ("hessian", "stein"):
        raise ValueError(f"form must be 'hessian' or 'stein', got {form!r}")
    if not torch.is_tensor(x) or x.ndim != 1 or not x.is_floating_point():
        raise ValueError("x must be one point: a floating 1-D tensor (d,)")
    d = x.shape[0]
    sigma = _pos("sigma", sigma)
    nodes = check_int("nodes", nodes, 1)
    if nodes ** d > 2_000_000:
        raise ValueError(f"nodes**d = {nodes ** d} quadrature points is too many; lower nodes or d")
    z1, w1 = np.polynomial.hermite_e.hermegauss(nodes)
    w1 = w1 / math.sqrt(2 * math.pi)
    grids = np.meshgrid(*([z1] * d), indexing="ij")
    pts = np.stack([g.ravel() for g in grids], 1)
    wts = np.prod(np.meshgrid(*([w1] * d), indexing="ij"), axis=0).ravel()
    pts_t = torch.as_tensor(pts, dtype=x.dtype, device=x.device)
    wts_t = torch.as_tensor(wts, dtype=x.dtype, device=x.device)
    pts_x = x.detach()[None] + sigma * pts_t
    if form == "stein":
        with torch.no_grad():
            fv = fn(pts_x).reshape(-1)
        kern = pts_t[:, :, None] * pts_t[:, None, :] - torch.eye(d, dtype=x.dtype, device=x.device)
        return (wts_t[:, None, None] * kern * fv[:, None, None]).sum(0) / sigma ** 2
    z = pts_x.requires_grad_(True)
    with torch.enable_grad():
        (g,) = torch.autograd.grad(fn(z).sum(), z, create_graph=True)
        rows = [torch.autograd.grad(g[:, j].sum(), z, retain_graph=j < d - 1)[0]
                for j in range(d)]
    hs = torch.stack(rows, 1)                                   # (M, d, d)
    return (wts_t[:, None, None] * hs).sum(0).detach()


# --------------------------------------------------------------------------- bounds

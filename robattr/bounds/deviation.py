"""Worst-case attribution deviations (001: Wang & Kong, CVPR 2023), matrix-free.

**Notation.** ``g`` maps a batch ``x`` (N, ...) to one attribution per example, the same
shape; examples do not interact (a model in eval mode). For one example, ``J = ∂g/∂x``
is the m×d Jacobian (m = d for an attribution map). The paper writes ``H = ∇g = Jᵀ``
(gradient layout) and ``P = H Hᵀ``, which in our layout is ``P = Jᵀ J`` (d×d, PSD), so
``δᵀ P δ = ‖J δ‖²``.

**The bounds** (``g`` locally linear on the ball):

* Thm 1 (ℓ2): ``‖g(x+δ) − g(x)‖ ≤ ξ_max ε``, ξ_max the top singular value of ``J``
  (:func:`jacobian_spectral_norm`, :func:`l2_deviation_bound`);
* Lemma 1 / Cor 1 (ℓp, p > 2): ``‖δ‖₂ ≤ d^{1/2−1/p} ‖δ‖_p``, so the bound is
  ``d^{1/2−1/p} ξ_max ε`` (:func:`lp_norm_constant`, :func:`lp_deviation_bound`);
* Thm 2 (ℓ∞): ``ε √(Σ_ij |P_ij|)`` (:func:`linf_deviation_bound`, blockwise). The exact
  maximum of ``δᵀPδ`` on the cube is at a vertex (:func:`vertex_maximum`, by enumeration)
  and equals the bound only under the sign condition ``sign(P_ij) = s_i s_j``
  (:func:`sign_consistent`);
* Prop 1 (label constraint, first order): :func:`label_constraint_condition`;
* Cor 2 (cosine): ``1 − cos ≤ 1 − √(1 − T²/‖g‖²)``, i.e. the angle is at most
  ``arcsin(T/‖g‖)`` (:func:`cosine_distance_bound`, :func:`angle_bound`);
* Thm 3 / Eqs. 37–39: ``T′_e = c ξ_max ε`` with ``c = max{1, ‖g(x+εv) − g(x)‖/(ξ_max ε)}``
  (:func:`taylor_constant`); the smallest ``c`` that satisfies Thm 3's element-wise
  hypothesis for a given δ is :func:`remainder_constant`;
* Sec. E: the largest ε for a tolerance ω (:func:`max_eps_for_tolerance`, with the
  squares of Eqs. 51–52 restored; ``printed=True`` gives the formula as extracted);
* B.1: the linearity residual ``η = ‖g(x+δ) − g(x) − J δ‖`` (:func:`linearity_residual`);
* C.1: the Jacobian of IG is ``diag(path-averaged gradient) + diag(x) Σ_k w_k α_k ∇²f(α_k x)``
  (:func:`ig_jacobian_parts`); the Hessian term's total weight ``Σ_k w_k α_k`` tends to
  1/2, not 0, as the step count grows (:func:`ig_hessian_weight`), and
  :func:`diagonal_dominance` measures how diagonal a Jacobian is.

**Matrix-free products.** ``fn`` is called once on a leaf copy of ``x`` with its graph
kept; ``Jᵀu`` is one backward pass through that graph and ``J v`` is the "double-vjp"
trick (the backward of the linear map ``u ↦ Jᵀu`` w.r.t. ``u``), so each product of the
Lanczos / power iteration costs one backward pass and nothing is re-run forward. Any
``fn`` whose output is differentiable w.r.t. its input works, e.g. a robattr attribution
called with ``create_graph=True`` (:func:`attribution_function`). ``backend="func"``
builds the same products with ``torch.func.vjp`` instead (slower on the CPU here, kept
as a cross-check). The dense path (all rows of ``J`` by backward passes, then an SVD) is
for checks and refuses inputs whose Jacobian would not fit in memory.
"""
from __future__ import annotations

import math
import numbers
from typing import Callable, NamedTuple

import numpy as np
import torch
from torch import nn

__all__ = [
    "DenseJacobianTooLarge", "JacobianOps", "attribution_function", "jacobian_ops",
    "jacobian_spectral_norm", "dense_jacobian", "l2_deviation_bound", "lp_norm_constant",
    "lp_deviation_bound", "linf_deviation_bound", "vertex_maximum", "sign_consistent",
    "cosine_distance_bound", "angle_bound", "taylor_constant", "remainder_constant",
    "linearity_residual", "max_eps_for_tolerance", "label_constraint_condition",
    "deviation_attack", "diagonal_dominance", "ig_hessian_weight", "ig_jacobian_parts",
    "evaluate_bounds", "SPECTRAL_METHODS",
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


# --------------------------------------------------------------------------- the bounds
def l2_deviation_bound(xi_max, eps):
    """Thm 1: ``T_e = ξ_max ε``, the ℓ2 bound on ``‖g(x+δ) − g(x)‖`` for ``‖δ‖₂ ≤ ε``."""
    _pos("eps", eps, allow_zero=True)
    return xi_max * eps


def lp_norm_constant(d, q: float, p: float) -> float:
    """Lemma 1: the constant ``d^{1/q − 1/p}`` of ``‖x‖_q ≤ d^{1/q−1/p} ‖x‖_p`` (0 < q < p,
    ``p = inf`` allowed). It is attained by the all-ones vector."""
    d = _count("d", d)
    q = _pos("q", q)
    if not (isinstance(p, numbers.Real) and (p == math.inf or (math.isfinite(p) and p > q))):
        raise ValueError(f"p must be a number > q = {q} (or math.inf), got {p!r}")
    return float(d) ** (1.0 / q - (0.0 if p == math.inf else 1.0 / p))


def lp_deviation_bound(xi_max, eps, d: int, p: float):
    """Cor 1: ``d^{1/2 − 1/p} ξ_max ε`` for ``‖δ‖_p ≤ ε``, p > 2 (``math.inf`` allowed)."""
    if not (isinstance(p, numbers.Real) and (p == math.inf or p > 2)):
        raise ValueError(f"Corollary 1 needs p > 2 (or math.inf), got {p!r}")
    return lp_norm_constant(d, 2.0, p) * l2_deviation_bound(xi_max, eps)


def linf_deviation_bound(J: torch.Tensor, eps: float, *, block: int = 256) -> torch.Tensor:
    """Thm 2: ``ε √(Σ_ij |P_ij|)`` with ``P = JᵀJ``, per example, from the dense Jacobian
    ``J`` (N, m, d) (:func:`dense_jacobian`). ``P`` is never formed: its rows are built
    ``block`` at a time (memory N·block·d besides ``J``) and their absolute values summed.
    """
    if not torch.is_tensor(J) or J.ndim != 3:
        raise ValueError(f"J must be a (N, m, d) tensor, got {getattr(J, 'shape', J)!r}")
    eps = _pos("eps", eps, allow_zero=True)
    block = _count("block", block)
    Jd = J.double()
    total = torch.zeros(J.shape[0], dtype=torch.float64, device=J.device)
    for s in range(0, J.shape[2], block):
        total += (Jd[:, :, s:s + block].transpose(1, 2) @ Jd).abs().sum((1, 2))
    return eps * total.sqrt()


def vertex_maximum(P, eps: float = 1.0, *, max_dim: int = 22, chunk: int = 65536):
    """The exact ``max_{‖δ‖∞ ≤ ε} δᵀ P δ`` for a PSD matrix ``P`` (d ≤ ``max_dim``).

    A convex function on the cube peaks at a vertex, so the maximum is
    ``ε² max_s sᵀPs`` over the 2^d sign vectors (2^{d−1} up to the sign flip), enumerated
    in chunks. Returns ``(value, s)`` with ``s`` a maximising sign vector (numpy).
    """
    P = np.asarray(P, dtype=float)
    if P.ndim != 2 or P.shape[0] != P.shape[1]:
        raise ValueError(f"P must be a square matrix, got shape {P.shape}")
    eps = _pos("eps", eps, allow_zero=True)
    d = P.shape[0]
    if d > max_dim:
        raise ValueError(f"enumerating 2^{d - 1} vertices is too many (d = {d} > max_dim = "
                         f"{max_dim})")
    best, best_s = -np.inf, None
    total = 2 ** (d - 1)
    bits = np.arange(d - 1)
    for start in range(0, total, chunk):
        idx = np.arange(start, min(start + chunk, total))
        s = np.ones((len(idx), d))
        s[:, 1:] = 1 - 2 * ((idx[:, None] >> bits) & 1)
        vals = np.einsum("ni,ij,nj->n", s, P, s)
        k = int(vals.argmax())
        if vals[k] > best:
            best, best_s = float(vals[k]), s[k].copy()
    return eps ** 2 * best, best_s


def sign_consistent(P, *, tol: float = 0.0) -> tuple[bool, np.ndarray | None]:
    """Is there one sign vector ``s`` with ``sign(P_ij) = s_i s_j`` wherever ``|P_ij| > tol``?

    Exactly then ``sᵀ P s = Σ_ij |P_ij|`` and Theorem 2's bound is attained at the vertex
    ``ε s``. Decided by propagating signs along the nonzero pattern (a graph 2-colouring
    with parity). Returns ``(ok, s)`` (``s`` None when not consistent).
    """
    P = np.asarray(P, dtype=float)
    if P.ndim != 2 or P.shape[0] != P.shape[1]:
        raise ValueError(f"P must be a square matrix, got shape {P.shape}")
    d = P.shape[0]
    s = np.zeros(d)
    for root in range(d):
        if s[root]:
            continue
        s[root] = 1.0
        stack = [root]
        while stack:
            i = stack.pop()
            for j in np.nonzero(np.abs(P[i]) > tol)[0]:
                if j == i:
                    continue
                want = s[i] * np.sign(P[i, j])
                if s[j] == 0:
                    s[j] = want
                    stack.append(j)
                elif s[j] != want:
                    return False, None
    return True, s


def cosine_distance_bound(T, g_norm):
    """Cor 2: ``1 − √(1 − T²/‖g‖²)``, the largest cosine distance ``1 − cos`` between
    ``g(x)`` and any ``g(x) + s`` with ``‖s‖ ≤ T``. Vacuous when ``T ≥ ‖g‖``: then the
    perturbed map can point against ``g(x)`` and the value returned is 2.
    """
    T, gn = np.asarray(T, dtype=float), np.asarray(g_norm, dtype=float)
    if np.any(T < 0) or np.any(np.isnan(T)):
        raise ValueError("T must be >= 0")
    if np.any(gn <= 0) or np.any(np.isnan(gn)):
        raise ValueError("g_norm must be > 0")
    q = np.minimum(T / gn, 1.0)
    out = np.where(T < gn, 1.0 - np.sqrt(1.0 - q ** 2), 2.0)
    return float(out) if out.ndim == 0 else out


def angle_bound(T, g_norm, *, degrees: bool = True):
    """Cor 2 as an angle: ``arccos(1 − D_c) = arcsin(T/‖g‖)`` (the paper's T_c in degrees);
    180° (π) when ``T ≥ ‖g‖`` (no bound)."""
    dc = np.asarray(cosine_distance_bound(T, g_norm))
    a = np.arccos(np.clip(1.0 - dc, -1.0, 1.0))
    a = np.degrees(a) if degrees else a
    return float(a) if a.ndim == 0 else a


def taylor_constant(fn: Callable, x: torch.Tensor, v_max: torch.Tensor, xi_max, eps: float,
                    *, form: str = "eq39", g0: torch.Tensor | None = None,
                    ops: JacobianOps | None = None) -> torch.Tensor:
    """The paper's constant ``c`` (Eqs. 37–39) per example, so that ``T′_e = c ξ_max ε``.

    ``form="eq39"``: ``max{1, ‖g(x + ε v) − g(x)‖ / (ξ_max ε)}``; ``form="eq38"``:
    ``max{0, (‖g(x+εv) − g(x)‖ − ‖J εv‖) / (ξ_max ε)} + 1`` with ``‖J εv‖`` computed by a
    Jacobian-vector product (the two agree when ``v`` is the top singular vector, since
    then ``‖J v‖ = ξ_max``). ``v_max`` is the unit top right singular vector
    (:func:`jacobian_spectral_norm` with ``return_vector=True``). The point ``x + εv`` is
    not clipped to the pixel range (the bound is over the whole ball).
    """
    x = _check_x(x)
    eps = _pos("eps", eps)
    if form not in ("eq38", "eq39"):
        raise ValueError(f"form must be 'eq38' or 'eq39', got {form!r}")
    xi = torch.as_tensor(xi_max, dtype=torch.float64, device=x.device).reshape(-1)
    with torch.enable_grad():
        if g0 is None:
            g0 = fn(x.clone().requires_grad_(True)).detach()
        g1 = fn((x + eps * v_max.to(x.dtype)).detach().requires_grad_(True)).detach()
    dev = _bnorm((g1 - g0).double())
    denom = (xi * eps).clamp_min(torch.finfo(torch.float64).tiny)
    if form == "eq39":
        return torch.clamp(dev / denom, min=1.0)
    ops = ops or jacobian_ops(fn, x)
    lin = _bnorm(ops.jvp(eps * v_max.to(x.dtype)).double())
    return torch.clamp((dev - lin) / denom, min=0.0) + 1.0


def linearity_residual(fn: Callable, x: torch.Tensor, delta: torch.Tensor, *,
                       ops: JacobianOps | None = None, relative: bool = False):
    """B.1: ``η(x, δ) = ‖g(x+δ) − g(x) − J δ‖₂`` per example (N,); with ``relative=True``
    also divided by ``‖g(x+δ) − g(x)‖`` (returned as a pair ``(η, η/‖Δg‖)``)."""
    x = _check_x(x)
    if not torch.is_tensor(delta) or delta.shape != x.shape:
        raise ValueError(f"delta must be shaped like x {tuple(x.shape)}")
    ops = ops or jacobian_ops(fn, x)
    with torch.enable_grad():
        g1 = fn((x + delta).detach().requires_grad_(True)).detach()
    diff = (g1 - ops.out).double()
    eta = _bnorm(diff - ops.jvp(delta.detach()).double())
    if relative:
        return eta, eta / _bnorm(diff).clamp_min(torch.finfo(torch.float64).tiny)
    return eta


def remainder_constant(fn: Callable, x: torch.Tensor, delta: torch.Tensor, *,
                       ops: JacobianOps | None = None) -> torch.Tensor:
    """The smallest ``c ≥ 1`` with Thm 3's hypothesis ``|R_i| ≤ (c − 1) |(J δ)_i|`` for
    every coordinate ``i``, where ``R = g(x+δ) − g(x) − J δ``: ``1 + max_i |R_i|/|(Jδ)_i|``
    (inf if some ``(Jδ)_i = 0`` with ``R_i ≠ 0``). Under it, Thm 3 gives
    ``‖g(x+δ) − g(x)‖ ≤ c ‖J δ‖ ≤ c ξ_max ‖δ‖``."""
    x = _check_x(x)
    ops = ops or jacobian_ops(fn, x)
    with torch.enable_grad():
        g1 = fn((x + delta).detach().requires_grad_(True)).detach()
    lin = ops.jvp(delta.detach()).double().reshape(x.shape[0], -1)
    R = ((g1 - ops.out).double().reshape(x.shape[0], -1) - lin).abs()
    ratio = torch.where(lin.abs() > 0, R / lin.abs().clamp_min(1e-300),
                        torch.where(R > 0, torch.full_like(R, math.inf), torch.zeros_like(R)))
    return 1.0 + ratio.amax(1)


def max_eps_for_tolerance(omega, g_norm=None, *, xi_max=None, linf_constant=None,
                          distance: str = "l2", printed: bool = False):
    """Sec. E: the largest budget ε whose bound keeps the deviation within ``omega``.

    Give the bound's slope: ``xi_max`` (ℓ2 budgets, Thm 1) or ``linf_constant`` =
    ``√(Σ|P_ij|)`` (ℓ∞ budgets, Thm 2); call it κ.

    * ``distance="l2"`` (Eq. 50): ``ε = ω / κ``;
    * ``distance="cosine"`` (from Cor 2, ω a cosine distance in [0, 1]):
      ``ε = ‖g‖ √(1 − (1 − ω)²) / κ``. ``printed=True`` returns Eq. 52 as extracted,
      ``‖g‖² (1 − (1 − ω)²) / κ``, which lost the squares (and is not invariant to
      rescaling ``g``).
    """
    if (xi_max is None) == (linf_constant is None):
        raise ValueError("give exactly one of xi_max (l2 budgets) and linf_constant (linf)")
    kappa = np.asarray(xi_max if xi_max is not None else linf_constant, dtype=float)
    if np.any(kappa <= 0) or np.any(np.isnan(kappa)):
        raise ValueError("the bound's slope (xi_max or linf_constant) must be > 0")
    om = np.asarray(omega, dtype=float)
    if distance == "l2":
        if np.any(om < 0) or np.any(np.isnan(om)):
            raise ValueError("omega must be >= 0")
        out = om / kappa
    elif distance == "cosine":
        if np.any(om < 0) or np.any(om > 1) or np.any(np.isnan(om)):
            raise ValueError("omega must be a cosine distance in [0, 1]")
        if g_norm is None:
            raise ValueError("distance='cosine' needs g_norm = ||g(x)||")
        gn = np.asarray(g_norm, dtype=float)
        if np.any(gn <= 0):
            raise ValueError("g_norm must be > 0")
        k = 1.0 - (1.0 - om) ** 2
        out = gn ** 2 * k / kappa if printed else gn * np.sqrt(k) / kappa
    else:
        raise ValueError(f"distance must be 'l2' or 'cosine', got {distance!r}")
    return float(out) if out.ndim == 0 else out


# --------------------------------------------------------------------------- label constraint
def label_constraint_condition(model: nn.Module, x: torch.Tensor, delta: torch.Tensor,
                               target=None, *, method: str = "ig", steps: int = 50):
    """Prop 1: the first-order test that ``x + δ`` keeps the label ``y``.

    For an attribution with completeness (``Σ_i g^c_i(x) = f_c(x) − f_c(b)``, e.g. IG),
    ``∇_x Σ_i g^c_i = (J_c)ᵀ 1`` and the condition is, for every other class ``y'``,
    ``((J_{y'} − J_y)ᵀ 1)ᵀ δ < f_y(x) − f_{y'}(x)``. Returns ``(condition, kept)``: the
    condition for all ``y'`` at once (N,) bool, and whether the model's prediction at
    ``x + δ`` really is ``y`` (N,) bool. The classes' ``(J_c)ᵀ 1`` cost one backward pass
    each through ``method`` (``"ig"``, ``"sm"`` or ``"ixg"``).
    """
    from robattr.attributions import resolve_target

    x = _check_x(x)
    if not torch.is_tensor(delta) or delta.shape != x.shape:
        raise ValueError(f"delta must be shaped like x {tuple(x.shape)}")
    with torch.no_grad():
        logits = model(x)
        y = resolve_target(model, x, target)
        kept = model(x + delta).argmax(1) == y
    k = logits.shape[1]
    n = x.shape[0]
    lhs = torch.empty(n, k, dtype=torch.float64, device=x.device)
    for c in range(k):
        fn = attribution_function(model, method, torch.full((n,), c, dtype=torch.long,
                                                              device=x.device), steps=steps)
        with torch.enable_grad():
            xx = x.clone().requires_grad_(True)
            (a,) = torch.autograd.grad(fn(xx).sum(), xx)
        lhs[:, c] = _bdot(a.double(), delta.double())
    fy = logits.double().gather(1, y[:, None])
    ly = lhs.gather(1, y[:, None])
    ok = (lhs - ly) < (fy - logits.double())
    ok.scatter_(1, y[:, None], True)
    return ok.all(1), kept


# --------------------------------------------------------------------------- attack
def deviation_attack(fn: Callable, x: torch.Tensor, eps: float, *, norm: str = "l2",
                     steps: int = 20, step_size: float | None = None, start=None,
                     model: nn.Module | None = None, keep_label: bool = True,
                     clip: bool = True, seed: int = 0) -> tuple[torch.Tensor, torch.Tensor]:
    """Projected gradient ascent on ``‖g(x+δ) − g(x)‖²`` (the quantity the bounds bound).

    ℓ2 steps along the normalised gradient, ℓ∞ steps along its sign; after each step the
    iterate is projected onto the ε-ball and (``clip``) the pixel range. ``start``: an
    initial δ (e.g. ``ε v_max``, the linear worst case), else a uniform draw from the ball
    (``seed``; at δ = 0 the gradient of the objective vanishes). With ``model`` and
    ``keep_label`` an iterate that changes the model's prediction is never kept. Returns
    ``(x_adv, deviation)`` of the best admissible iterate per example (``x`` itself,
    deviation 0, if none).
    """
    from robattr.attacks.projection import project, random_in_ball

    x = _check_x(x)
    eps = _pos("eps", eps)
    steps = _count("steps", steps, 0)
    if norm not in ("l2", "linf"):
        raise ValueError(f"norm must be 'l2' or 'linf', got {norm!r}")
    step_size = 2.5 * eps / max(steps, 1) if step_size is None else _pos("step_size", step_size)
    with torch.enable_grad():
        g0 = fn(x.clone().requires_grad_(True)).detach()
    label0 = None
    if model is not None and keep_label:
        with torch.no_grad():
            label0 = model(x).argmax(1)

    def proj(z):
        if clip:
            return project(z, x, eps, norm)
        from robattr.attacks.projection import project_l2, project_linf
        d = z - x
        return x + (project_l2(d, eps) if norm == "l2" else project_linf(d, eps))

    if start is None:
        start = random_in_ball(x, eps, norm, torch.Generator(device=x.device).manual_seed(seed))
    x_adv = proj(x + start.to(x.dtype))
    best = x.clone()
    best_dev = torch.zeros(x.shape[0], dtype=torch.float64, device=x.device)
    view = (-1,) + (1,) * (x.ndim - 1)
    for t in range(steps + 1):
        with torch.enable_grad():
            xa = x_adv.detach().requires_grad_(True)
            dev2 = ((fn(xa) - g0) ** 2).reshape(x.shape[0], -1).sum(1)
            (gr,) = torch.autograd.grad(dev2.sum(), xa) if t < steps else (None,)
        dev = dev2.detach().double().sqrt()
        ok = torch.ones_like(dev, dtype=torch.bool)
        if label0 is not None:
            with torch.no_grad():
                ok = model(xa).argmax(1) == label0
        better = ok & (dev > best_dev)
        best[better] = xa.detach()[better]
        best_dev = torch.where(better, dev, best_dev)
        if gr is None:
            break
        step = gr.sign() if norm == "linf" else \
            gr / _view(_bnorm(gr).clamp_min(1e-12), gr)
        x_adv = proj(xa.detach() + step_size * step)
    return best, best_dev


# --------------------------------------------------------------------------- C.1
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
    passes): for small inputs. Refused (:class:`DenseJacobianTooLarge`) above
    ``max_bytes``. Returns ``(a, B)`` as float64 tensors; ``a`` is shaped like ``x``,
    ``B`` is (N, d, d) over the flattened input.
    """
    from robattr.attributions import path_points, resolve_target

    if not isinstance(model, nn.Module):
        raise ValueError(f"model must be a torch.nn.Module, got {type(model).__name__}")
    x = _check_x(x)
    steps = _count("steps", steps)
    alphas, weights = path_points(steps, method)
    n, d, k = x.shape[0], x[0].numel(), len(alphas)
    need = n * k * d * d * 8 * 2
    if need > max_bytes:
        raise DenseJacobianTooLarge(
            f"the {n * k} Hessians of ig_jacobian_parts (d = {d}) need about "
            f"{need / 2 ** 30:.2f} GiB, over the allowed {max_bytes / 2 ** 30:.2f} GiB")
    with torch.no_grad():
        t = resolve_target(model, x, target)
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


# --------------------------------------------------------------------------- tables
def evaluate_bounds(model: nn.Module, x: torch.Tensor, y: torch.Tensor, *, method: str = "sm",
                    norm: str = "l2", eps: float, keep_label: bool = True, ig_steps: int = 16,
                    k: int = 8, paper_steps: int | None = None, direct_steps: int = 20,
                    seed: int = 0, tol: float = 1e-6, max_iter: int = 100) -> dict:
    """Per-example quantities of 001's Tables 6–10 for one (model, attribution, norm, ε).

    Bounds: ``T_e`` (Thm 1 ``ξ_max ε`` for ℓ2, Thm 2 for ℓ∞), ``T_prime_e`` (``c ξ_max ε``,
    Eq. 39; ℓ2 only, NaN for ℓ∞) and ``T_c_deg`` (Cor 2 on ``T_e``, degrees). Attacks,
    both with the pixel range and (``keep_label``) the label constraint:
    the paper's (top-k mass criterion; ℓ2: :func:`robattr.attacks.l2_attribution_attack`, 20 steps;
    ℓ∞: IFIA, :func:`robattr.attacks.ifia`, 200 steps; ``paper_steps`` overrides) giving
    ``dev_paper`` / ``angle_paper``, and :func:`deviation_attack` started at the linear
    worst case (``ε v_max`` or ``ε sign(v_max)``) giving ``dev_direct`` / ``angle_direct``.
    Also ``g_norm`` and ``xi_max``. Returns a dict of (N,) float64 CPU tensors.
    """
    from robattr import attacks

    if norm not in ("l2", "linf"):
        raise ValueError(f"norm must be 'l2' or 'linf', got {norm!r}")
    eps = _pos("eps", eps)
    x = _check_x(x)
    fn = attribution_function(model, method, y, steps=ig_steps)
    ops = jacobian_ops(fn, x)
    g0 = ops.out
    spec = jacobian_spectral_norm(fn, x, tol=tol, max_iter=max_iter, return_vector=True,
                                  ops=ops, seed=seed)
    gn = _bnorm(g0.double())
    if norm == "l2":
        T = spec.value * eps
        c = taylor_constant(fn, x, spec.vector, spec.value, eps, g0=g0)
        Tp = c * T
        start = eps * spec.vector.to(x.dtype)
    else:
        T = linf_deviation_bound(dense_jacobian(fn, x, ops=ops), eps)
        Tp = torch.full_like(T, float("nan"))
        start = eps * spec.vector.sign().to(x.dtype)
    steps = paper_steps or (20 if norm == "l2" else 200)
    opts = dict(criterion="mass", method="integrated_gradients" if method == "ig" else ("input_x_grad" if method in ("ixg", "input_x_grad")
                                                    else "grad"),
                keep_label=keep_label, seed=seed)
    if method == "ig":
        opts["method_options"] = {"steps": ig_steps}
    if norm == "l2":
        adv = attacks.l2_attribution_attack(model, x, y, k=k, eps=eps, steps=steps,
                                            step_size=2.5 * eps / steps, **opts).x_adv
    else:
        adv = attacks.ifia(model, x, y, k=k, eps=eps, steps=steps, **opts).x_adv
    xd, _ = deviation_attack(fn, x, eps, norm=norm, steps=direct_steps, start=start,
                             model=model if keep_label else None, keep_label=keep_label)

    def dev_angle(xa):
        with torch.enable_grad():
            ga = fn(xa.detach().clone().requires_grad_(True)).detach().double()
        diff = _bnorm(ga - g0.double())
        cos = _bdot(ga, g0.double()) / (_bnorm(ga) * gn).clamp_min(1e-300)
        return diff, torch.rad2deg(torch.arccos(cos.clamp(-1, 1)))

    dp, ap = dev_angle(adv)
    dd, ad = dev_angle(xd)
    Tc = torch.as_tensor(angle_bound(T.cpu().numpy(), gn.cpu().numpy()), dtype=torch.float64)
    out = dict(T_e=T, T_prime_e=Tp, T_c_deg=Tc, dev_paper=dp, angle_paper=ap, dev_direct=dd,
               angle_direct=ad, g_norm=gn, xi_max=spec.value)
    return {key: v.detach().double().cpu().reshape(-1) for key, v in out.items()}

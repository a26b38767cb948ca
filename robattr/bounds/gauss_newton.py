"""Each paper's quantities: Jacobians, input Hessians and the bounds built on them.

This module starts with the pieces of 000 (Wang et al., NeurIPS 2020) that SSR trains
through and that the wang2020 chapter checks; later chapters add theirs.

**Notation.** ``x`` is a batch of N inputs with d = C_in·H·W pixels each, ``z = model(x)``
the C logits, ``p = softmax(z)``. ``W`` is the paper's d×C input Jacobian of the logits,
one column ``∇_x z_c`` per class (:func:`input_jacobian` returns it batched, (N, d, C)).

**Gauss-Newton input Hessian (000 Prop. 3).** The input Hessian of the cross-entropy is
``H = W A Wᵀ + Σ_c (p_c − y_c) ∇²_x z_c`` with ``A = diag(p) − p pᵀ``. For a
piecewise-linear network (ReLU, max-pool, linear layers) every ``∇²_x z_c`` vanishes
almost everywhere, so ``H = W A Wᵀ`` exactly (:func:`gauss_newton_hessian`); for smooth
networks ``W A Wᵀ`` is the Gauss-Newton part. It is positive semi-definite: A is (it is
the covariance of a one-hot draw from p), and ``A = L Lᵀ`` gives ``H = (WL)(WL)ᵀ``.

**The C×C trick (000 B1).** ``(WL)(WL)ᵀ`` (d×d) and ``(WL)ᵀ(WL)`` (C×C) have the same
nonzero eigenvalues, so the top eigenvalue comes from a C×C ``eigvalsh``
(:func:`gauss_newton_top_eigenvalue`), differentiable, which is what SSR trains through.
We use the closed-form root ``L = diag(√p) − p √pᵀ`` (``L Lᵀ = A`` because
``I − √p √pᵀ`` is a projection, ``Σ p = 1``) instead of an eigendecomposition of A as in
the reference code: no clipping of A's eigenvalues is needed and the gradient is exact.

**Hutchinson (003, Dombrowski et al. 2022).** For ``v ~ N(0, I)``,
``E ‖H v‖² = tr(HᵀH) = ‖H‖²_F``: :func:`hutchinson_hessian_sq_norm` estimates the squared
Frobenius norm of the input Hessian of the target logit from Hessian-vector products
(double backward), without ever forming H.

The dense functions (:func:`gauss_newton_hessian`, :func:`loss_input_hessian`,
:func:`logit_input_hessian`) are for checks on small d.
"""
from __future__ import annotations

import torch
from torch import nn
from torch.nn import functional as F

from robattr.attributions import resolve_target

__all__ = [
    "logit_jacobian", "input_jacobian", "gauss_newton_factor", "gauss_newton_small_matrix",
    "uses_batch_statistics", "gauss_newton_top_eigenvalue", "gauss_newton_hessian",
    "loss_input_hessian", "logit_input_hessian", "hutchinson_hessian_sq_norm",
]


def _as_input(x: torch.Tensor) -> torch.Tensor:
    if not torch.is_tensor(x) or x.ndim < 2 or not x.is_floating_point():
        raise ValueError("x must be a floating-point batch tensor (N, ...)")
    return x.detach().requires_grad_(True)


# --------------------------------------------------------------------------- Jacobian
def logit_jacobian(logits: torch.Tensor, x: torch.Tensor, *, create_graph: bool = False,
                   vectorize: bool = False) -> torch.Tensor:
    """W = ∂logits/∂x as (N, d, C), from logits already computed from ``x`` (which must
    require grad). Column c is ``∇_x z_c`` of each example.

    ``vectorize=False`` loops over the C classes (C backward passes, each through the
    whole batch: the examples do not interact unless the model couples them, e.g.
    BatchNorm in train mode); ``vectorize=True`` does the same with one batched backward
    (``is_grads_batched``, vmap). On 2 CPU cores the loop was faster (LeNet, 32×32);
    on an H200 the batched form made SSR's LeNet step about 10 % faster.
    ``create_graph=True`` keeps W differentiable (w.r.t. x and the parameters).
    """
    if logits.ndim != 2 or logits.shape[0] != x.shape[0]:
        raise ValueError(f"logits must be (N, C) with N = {x.shape[0]}, got {tuple(logits.shape)}")
    n, c = logits.shape
    if vectorize:
        eye = torch.eye(c, device=logits.device, dtype=logits.dtype)
        (jac,) = torch.autograd.grad(logits, x, eye.unsqueeze(1).expand(c, n, c),
                                     is_grads_batched=True, create_graph=create_graph,
                                     retain_graph=True)
    else:
        jac = torch.stack([torch.autograd.grad(logits[:, k].sum(), x, create_graph=create_graph,
                                               retain_graph=True)[0] for k in range(c)])
    return jac.reshape(c, n, -1).permute(1, 2, 0)  # (N, d, C)


def input_jacobian(model: nn.Module, x: torch.Tensor, *, create_graph: bool = False,
                   vectorize: bool = False) -> torch.Tensor:
    """W, the input Jacobian of the logits, batched: (N, d, C) (000's d×C matrix)."""
    x = _as_input(x)
    with torch.enable_grad():
        logits = model(x)
        return logit_jacobian(logits, x, create_graph=create_graph, vectorize=vectorize)


# --------------------------------------------------------------------------- Gauss-Newton
def gauss_newton_factor(logits: torch.Tensor) -> torch.Tensor:
    """L (N, C, C) with ``L Lᵀ = diag(p) − p pᵀ``, p = softmax(logits): ``diag(√p) − p √pᵀ``.

    √p is computed as ``exp(log_softmax / 2)``, whose derivative stays bounded where p
    underflows.
    """
    logp = F.log_softmax(logits, dim=1)
    p, sp = logp.exp(), (0.5 * logp).exp()
    return torch.diag_embed(sp) - p.unsqueeze(2) * sp.unsqueeze(1)


def gauss_newton_small_matrix(jac: torch.Tensor, logits: torch.Tensor) -> torch.Tensor:
    """``(WL)ᵀ(WL)`` (N, C, C): same nonzero spectrum as the d×d ``W A Wᵀ`` (000 B1).

    ``jac`` is W as (N, d, C) (:func:`logit_jacobian`), ``logits`` (N, C).
    """
    lf = gauss_newton_factor(logits)
    gram = jac.transpose(1, 2) @ jac                      # Wᵀ W, (N, C, C)
    m = lf.transpose(1, 2) @ gram @ lf
    return 0.5 * (m + m.transpose(1, 2))


def uses_batch_statistics(model: nn.Module) -> bool:
    """True when a BatchNorm layer of ``model`` normalises with the statistics of the batch
    (train mode, or no running statistics): then each example's logits depend on the other
    examples of the batch."""
    return any(isinstance(m, nn.modules.batchnorm._BatchNorm)
               and (m.training or m.running_mean is None) for m in model.modules())


def _top_eigenvalue_from_eigenvector(logits: torch.Tensor, x: torch.Tensor,
                                     vectorize: bool) -> torch.Tensor:
    """λ_max of ``(WL)ᵀ(WL)`` per example, differentiable, at the cost of one backward
    pass kept in the graph instead of C.

    The top eigenvector v of the C×C matrix is found without a graph (W by C backward
    passes that keep nothing); then ``λ_max = vᵀ(WL)ᵀ(WL)v = ‖W L v‖²``, and ``W (L v)``
    is a single vector-Jacobian product of the logits with the cotangent ``L v``, taken
    with ``create_graph``. Holding v fixed gives the exact first derivative
    (``dλ = vᵀ d[(WL)ᵀ(WL)] v``, the derivative ``eigvalsh`` returns too). Valid when
    the examples do not interact: the cotangent differs per example, so the product
    mixes examples wherever the logits of one depend on the input of another.
    """
    jac = logit_jacobian(logits, x, vectorize=vectorize)                 # no graph
    small = gauss_newton_small_matrix(jac, logits.detach())
    v = torch.linalg.eigh(small)[1][:, :, -1:]                           # (N, C, 1)
    u = (gauss_newton_factor(logits) @ v).squeeze(2)                     # L v, (N, C)
    (wu,) = torch.autograd.grad(logits, x, u, create_graph=True)
    return wu.reshape(x.shape[0], -1).pow(2).sum(1)


def gauss_newton_top_eigenvalue(model: nn.Module, x: torch.Tensor, *,
                                create_graph: bool = False, vectorize: bool = False,
                                logits: torch.Tensor | None = None) -> torch.Tensor:
    """Largest eigenvalue of ``W (diag p − p pᵀ) Wᵀ`` per example, (N,), via the C×C trick.

    The spectral norm of the Gauss-Newton input Hessian of the cross-entropy (000's SSR
    quantity; for ReLU networks the exact input Hessian, Prop. 3). Differentiable when
    ``create_graph=True``. ``logits``: pass ``model(x)`` if already computed, with ``x``
    requiring grad (saves a forward pass, as the SSR loss does).

    With ``create_graph=True`` only the top eigenvector's direction is kept in the graph
    (one backward pass instead of C: ``λ_max = ‖W L v‖²``, same value and same first
    derivatives), unless a BatchNorm layer uses batch statistics
    (:func:`uses_batch_statistics`), where examples interact and W's C columns are kept
    in the graph as in the definition. Either way W's columns are ``∇_x`` of the batch
    sums of the logits (:func:`logit_jacobian`). ``vectorize`` is passed to
    :func:`logit_jacobian`.
    """
    if logits is None and not (create_graph and x.requires_grad):
        x = _as_input(x)  # else keep x's graph: the result is differentiable w.r.t. x too
    with torch.enable_grad():
        if logits is None:
            logits = model(x)
        if create_graph and not uses_batch_statistics(model):
            return _top_eigenvalue_from_eigenvector(logits, x, vectorize)
        jac = logit_jacobian(logits, x, create_graph=create_graph, vectorize=vectorize)
        small = gauss_newton_small_matrix(jac, logits if create_graph else logits.detach())
        top = torch.linalg.eigvalsh(small)[:, -1]
    top = top.clamp_min(0.0)  # PSD: only rounding makes it negative
    return top if create_graph else top.detach()


def gauss_newton_hessian(model: nn.Module, x: torch.Tensor, y=None) -> torch.Tensor:
    """Dense ``W (diag p − p pᵀ) Wᵀ`` per example, (N, d, d), d = pixels per example.

    The Gauss-Newton input Hessian of the cross-entropy; equal to the exact input Hessian
    for piecewise-linear networks (000 Prop. 3). It does not depend on the label: ``y``
    is accepted (and checked) for symmetry with :func:`loss_input_hessian`, whose
    second-order term does. For checks on small inputs (memory N·d²).
    """
    x = _as_input(x)
    if y is not None:
        resolve_target(model, x, y)
    with torch.enable_grad():
        logits = model(x)
        jac = logit_jacobian(logits, x).detach()
    p = F.softmax(logits.detach(), dim=1)
    a = torch.diag_embed(p) - p.unsqueeze(2) * p.unsqueeze(1)
    return jac @ a @ jac.transpose(1, 2)


def _per_example_hessian(fn, x: torch.Tensor) -> torch.Tensor:
    out = []
    for i in range(x.shape[0]):
        xi = x[i].detach()
        h = torch.autograd.functional.hessian(lambda v: fn(i, v), xi)
        out.append(h.reshape(xi.numel(), xi.numel()))
    return torch.stack(out)


def loss_input_hessian(model: nn.Module, x: torch.Tensor, y) -> torch.Tensor:
    """Exact input Hessian of the cross-entropy ``CE(model(x_i), y_i)`` per example,
    (N, d, d), by autograd (d double-backward passes per example): the reference the
    Gauss-Newton form is checked against. Small d only."""
    y = resolve_target(model, x, y)
    return _per_example_hessian(
        lambda i, v: F.cross_entropy(model(v.unsqueeze(0)), y[i:i + 1]), x)


def logit_input_hessian(model: nn.Module, x: torch.Tensor, target) -> torch.Tensor:
    """Exact input Hessian of the target logit per example, (N, d, d), by autograd (zero
    almost everywhere for piecewise-linear networks). Small d only."""
    t = resolve_target(model, x, target)
    return _per_example_hessian(lambda i, v: model(v.unsqueeze(0))[0, t[i]], x)


# --------------------------------------------------------------------------- Hutchinson
def _hutchinson(logits: torch.Tensor, x: torch.Tensor, target: torch.Tensor, samples: int,
                generator: torch.Generator | None, create_graph: bool) -> torch.Tensor:
    sel = logits.gather(1, target[:, None]).sum()
    (g,) = torch.autograd.grad(sel, x, create_graph=True)
    total = x.new_zeros(x.shape[0])
    gdev = generator.device if generator is not None else x.device
    for s in range(samples):
        v = torch.randn(x.shape, generator=generator, device=gdev, dtype=x.dtype).to(x.device)
        (hv,) = torch.autograd.grad((g * v).sum(), x, create_graph=create_graph,
                                    retain_graph=create_graph or s < samples - 1)
        total = total + hv.reshape(x.shape[0], -1).pow(2).sum(1)
    return total / samples


def hutchinson_hessian_sq_norm(model: nn.Module, x: torch.Tensor, target, *,
                               samples: int = 1, generator: torch.Generator | None = None,
                               create_graph: bool = False) -> torch.Tensor:
    """Unbiased estimate of ``‖∇²_x z_target(x)‖²_F`` per example, (N,): the mean of
    ``‖H v‖²`` over ``samples`` draws ``v ~ N(0, I)`` (Hutchinson; 003 / Dombrowski et al.
    2022 regularise it). One forward pass, one backward with ``create_graph`` and one
    double-backward per draw. Zero for piecewise-linear (ReLU) networks.
    """
    if isinstance(samples, bool) or not isinstance(samples, int) or samples < 1:
        raise ValueError(f"samples must be an integer >= 1, got {samples!r}")
    x = _as_input(x)
    t = resolve_target(model, x, target)
    with torch.enable_grad():
        est = _hutchinson(model(x), x, t, samples, generator, create_graph)
    return est if create_graph else est.detach()

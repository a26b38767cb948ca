"""001 Sec. B.1 and Thm 3: how linear an attribution map is around ``x``.

Every bound of :mod:`robattr.bounds.deviation` assumes ``g(x+δ) ≈ g(x) + J δ``. Here:
the linearity residual ``η = ‖g(x+δ) − g(x) − J δ‖`` (:func:`linearity_residual`), the
paper's constant ``c`` of Eqs. 37–39 (:func:`taylor_constant`), the smallest ``c`` that
meets Thm 3's element-wise hypothesis (:func:`remainder_constant`), and the ratio of the true
change to the linear prediction along a direction (:func:`linearization_ratio`), which tends
to 1 as the step shrinks for a differentiable map and grows like 1/t across a jump.

**Local linearity at the budget.** 001 states Thm 1-2 and Cor 1 for an attribution that "is
locally linear within the neighborhood of x", the ball of radius ε. A curved map breaks
that at second order: along ``±ε v_max`` one of the two points moves ``g`` by more than
``ξ_max ε`` by a term of order ε², so a bound checked on a curved map can only hold
approximately. :func:`remainder_ratio` measures how far from linear the map is at a point,
as the Taylor remainder relative to the first-order change, ``‖g(x+δ) − g(x) − Jδ‖ / ‖Jδ‖``
(Eq. 36's ``c − 1`` computed with the true remainder), and :func:`budget_linearity` takes it
at the two points where the linear bound is attained, ``±δ`` (``δ = ε v_max`` for ℓ2,
``ε sign(v_max)`` for ℓ∞). An example is *locally linear at the budget* when that is at
most :data:`LINEARITY_TOL`.
"""
from __future__ import annotations

import math
from typing import Callable

import torch

from robattr.bounds.jacobian import JacobianOps, _bnorm, _check_x, _pos, jacobian_ops

__all__ = ["taylor_constant", "linearity_residual", "remainder_constant", "linearization_ratio",
           "directional_change", "central_difference_norm", "remainder_ratio", "budget_linearity",
           "LINEARITY_TOL", "MIN_LINEAR_SHARE"]

#: The largest Taylor remainder, relative to the first-order change ``‖Jδ‖``, at which the book
#: reads an attribution as "locally linear" at the budget (001's hypothesis). 001 calls the
#: remainder "negligible" (App. B.1) and shows it in Fig. 3 at 0.07-0.09 against a mean
#: attribution norm of 3.47 (under 3 % of ``‖g‖``); its B.3 writes the same remainder as
#: ``c − 1`` with ``c = 1 + ‖R‖/‖Jδ‖`` (Eq. 36). A tenth of the linear change (``c ≤ 1.1``)
#: is our reading of "negligible"; ``ig_gradient``'s B.1 claim uses the same tenth.
LINEARITY_TOL = 0.1

#: The share of a run's cases that must be locally linear at the budget before a statement made
#: under that hypothesis is judged (on those cases); below it the run's model breaks the
#: hypothesis at this budget and the statement is not comparable there.
MIN_LINEAR_SHARE = 0.5


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


def _change_and_linear(fn: Callable, x: torch.Tensor, delta: torch.Tensor,
                       ops: JacobianOps | None):
    """``(g(x+δ) − g(x), J δ)`` in float64, per example."""
    x = _check_x(x)
    if not torch.is_tensor(delta) or delta.shape != x.shape:
        raise ValueError(f"delta must be shaped like x {tuple(x.shape)}")
    ops = ops or jacobian_ops(fn, x)
    with torch.enable_grad():
        g1 = fn((x + delta).detach().requires_grad_(True)).detach()
    return (g1 - ops.out).double(), ops.jvp(delta.detach()).double()


def linearity_residual(fn: Callable, x: torch.Tensor, delta: torch.Tensor, *,
                       ops: JacobianOps | None = None, relative: bool = False):
    """B.1: ``η(x, δ) = ‖g(x+δ) − g(x) − J δ‖₂`` per example (N,); with ``relative=True``
    also divided by ``‖g(x+δ) − g(x)‖`` (returned as a pair ``(η, η/‖Δg‖)``)."""
    diff, lin = _change_and_linear(fn, x, delta, ops)
    eta = _bnorm(diff - lin)
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


def _unit_like(name: str, v, x: torch.Tensor) -> torch.Tensor:
    if not torch.is_tensor(v) or v.shape != x.shape:
        raise ValueError(f"{name} must be a tensor shaped like x {tuple(x.shape)}")
    return v.detach()


def linearization_ratio(fn: Callable, x: torch.Tensor, v: torch.Tensor, ts, *,
                        ops: JacobianOps | None = None) -> torch.Tensor:
    """``‖g(x + t v) − g(x)‖ / (t ‖J v‖)`` per example and step: an (N, len(ts)) tensor.

    For a differentiable ``g`` it tends to 1 as ``t → 0``; across a jump of ``g`` (a max-pool
    switch) it grows like ``1/t``. Runs in ``x``'s dtype: use float64 for ``t`` near 1e-7."""
    x = _check_x(x)
    v = _unit_like("v", v, x)
    ts = [_pos("t", t) for t in ts]
    if not ts:
        raise ValueError("ts must hold at least one step t > 0")
    ops = ops or jacobian_ops(fn, x)
    lin_pred = ops.jvp(v).flatten(1).norm(dim=1)
    with torch.enable_grad():
        rat = [(fn((x + t * v).requires_grad_(True)).detach() - ops.out).flatten(1).norm(dim=1)
               / (t * lin_pred) for t in ts]
    return torch.stack(rat, 1)


def directional_change(fn: Callable, x: torch.Tensor, v: torch.Tensor, radii) -> torch.Tensor:
    """``‖g(x + r v) − g(x)‖`` for each radius r in ``radii``, per example: (N, len(radii)).
    Divided by ``ξ_max r`` it is the paper's Eq. 39 ratio along ``v``; a value far above 1
    at radii below ε means the map is not linear on the ball."""
    x = _check_x(x)
    v = _unit_like("v", v, x)
    radii = [_pos("r", r) for r in radii]
    with torch.enable_grad():
        g0 = fn(x.clone().requires_grad_(True)).detach()
        out = [(fn((x + r * v).requires_grad_(True)).detach() - g0).flatten(1).norm(dim=1) for r in radii]
    return torch.stack(out, 1)


def central_difference_norm(fn: Callable, x: torch.Tensor, v: torch.Tensor, h: float = 1e-6) -> torch.Tensor:
    """``‖g(x + h v) − g(x − h v)‖ / (2h)`` per example: a finite-difference estimate of
    ``‖J v‖`` (= ξ_max along the top singular vector). Use float64 for small ``h``."""
    x = _check_x(x)
    v = _unit_like("v", v, x)
    h = _pos("h", h)
    with torch.enable_grad():
        up = fn((x + h * v).requires_grad_(True)).detach()
        down = fn((x - h * v).requires_grad_(True)).detach()
    return (up - down).flatten(1).norm(dim=1) / (2 * h)


def remainder_ratio(fn: Callable, x: torch.Tensor, delta: torch.Tensor, *,
                    ops: JacobianOps | None = None) -> torch.Tensor:
    """``‖g(x+δ) − g(x) − J δ‖ / ‖J δ‖`` per example (N,), float64: the Taylor remainder
    relative to the first-order change, the ``c − 1`` of 001's Eq. 36 with the true
    remainder. 0 for a linear map (to rounding); about ``‖δ‖ ‖∇²g‖ / (2 ‖J δ/‖δ‖‖)`` for a
    smooth curved one; ``inf`` where ``J δ = 0`` but ``g`` moves (a map that jumps or is flat
    to first order). Unlike :func:`linearity_residual`'s ``relative`` form, which divides by
    the true change, this stays a ratio to what the linear model predicts."""
    diff, lin = _change_and_linear(fn, x, delta, ops)
    eta = _bnorm(diff - lin)
    den = _bnorm(lin)
    return torch.where(den > 0, eta / den.clamp_min(torch.finfo(torch.float64).tiny),
                       torch.where(eta > 0, torch.full_like(eta, math.inf), torch.zeros_like(eta)))


def budget_linearity(fn: Callable, x: torch.Tensor, delta: torch.Tensor, *,
                     ops: JacobianOps | None = None) -> torch.Tensor:
    """How far from linear ``g`` is at the budget, per example (N,): the larger
    :func:`remainder_ratio` of ``+δ`` and ``−δ``. Pass the point where the linear bound is
    attained, ``δ = ε v_max`` (ℓ2, Thm 1) or the vertex ``ε sign(v_max)`` (ℓ∞, Thm 2): a
    curved map exceeds the linear bound on one of the two sides by its remainder, so both are
    probed. The example is locally linear at the budget when the result is at most
    :data:`LINEARITY_TOL`."""
    x = _check_x(x)
    if not torch.is_tensor(delta) or delta.shape != x.shape:
        raise ValueError(f"delta must be shaped like x {tuple(x.shape)}")
    ops = ops or jacobian_ops(fn, x)
    return torch.maximum(remainder_ratio(fn, x, delta, ops=ops), remainder_ratio(fn, x, -delta, ops=ops))

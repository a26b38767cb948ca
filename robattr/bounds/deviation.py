"""Worst-case attribution deviations (001: Wang & Kong, CVPR 2023), matrix-free.

This module holds the bounds; it re-exports the pieces it builds on, which live in their own
modules: the matrix-free Jacobian products (:mod:`robattr.bounds.jacobian`), the linearity of
the map (:mod:`robattr.bounds.linearity`: Thm 3's constant, B.1's residual) and the Jacobian of
IG (:mod:`robattr.bounds.ig_structure`, C.1).

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
  the hypothesis of the bounds, local linearity at the budget, is measured by the remainder
  relative to ``‖Jδ‖`` at ``±ε v_max`` (:func:`budget_linearity`, :data:`LINEARITY_TOL`);
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
from typing import Callable

import numpy as np
import torch
from torch import nn

from robattr.bounds.ig_structure import (diagonal_dominance, ig_hessian_weight,  # noqa: F401 (re-exported)
                                        IGJacobianCheck, ig_jacobian, ig_jacobian_check, ig_jacobian_parts,
                                        offdiag_share, QuadraticLogit)
from robattr.bounds.jacobian import (ATTRIBUTIONS, SPECTRAL_METHODS, DenseJacobianTooLarge,  # noqa: F401
                                     JacobianOps, SpectralNorm, _bdot, _bnorm, _check_x, _count, _pos,
                                     _view, attribution_function, dense_jacobian, jacobian_ops,
                                     jacobian_spectral_norm)
from robattr.bounds.linearity import (LINEARITY_TOL, MIN_LINEAR_SHARE, budget_linearity,  # noqa: F401
                                      central_difference_norm, directional_change,
                                      linearity_residual, linearization_ratio, remainder_constant,
                                      remainder_ratio, taylor_constant)

__all__ = [
    "DenseJacobianTooLarge", "JacobianOps", "attribution_function", "jacobian_ops",
    "jacobian_spectral_norm", "dense_jacobian", "l2_deviation_bound", "lp_norm_constant",
    "lp_deviation_bound", "linf_deviation_bound", "vertex_maximum", "sign_consistent",
    "cosine_distance_bound", "angle_bound", "taylor_constant", "remainder_constant",
    "linearity_residual", "max_eps_for_tolerance", "label_constraint_condition",
    "deviation_attack", "diagonal_dominance", "ig_hessian_weight", "ig_jacobian_parts",
    "evaluate_bounds", "SPECTRAL_METHODS",
    # new with the split (defined in robattr.bounds.ig_structure / .linearity)
    "ig_jacobian", "ig_jacobian_check", "offdiag_share", "QuadraticLogit", "linearization_ratio",
    "directional_change", "central_difference_norm", "IGJacobianCheck", "SpectralNorm",
    # local linearity at the budget (robattr.bounds.linearity)
    "remainder_ratio", "budget_linearity", "LINEARITY_TOL", "MIN_LINEAR_SHARE",
]


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
    The hypothesis of the bounds, local linearity at the budget: ``linearity``, the Taylor
    remainder relative to the first-order change at ``±`` that worst case
    (:func:`budget_linearity`; at most :data:`LINEARITY_TOL` = locally linear), and the same
    ratio at the points the attacks reached, ``linearity_paper`` / ``linearity_direct``
    (:func:`remainder_ratio`; shown, not used to select). Also ``g_norm`` and ``xi_max``.
    Returns a dict of (N,) float64 CPU tensors.
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
               angle_direct=ad, g_norm=gn, xi_max=spec.value,
               linearity=budget_linearity(fn, x, start, ops=ops),
               linearity_paper=remainder_ratio(fn, x, (adv - x).detach(), ops=ops),
               linearity_direct=remainder_ratio(fn, x, (xd - x).detach(), ops=ops))
    return {key: v.detach().double().cpu().reshape(-1) for key, v in out.items()}

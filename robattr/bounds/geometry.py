"""000 (Wang et al., NeurIPS 2020): the geometry of saliency maps and of SmoothGrad.

The quantities behind the paper's Lemma 1 / Theorem 1, Proposition 1, Lemma 3 /
Theorem 2, Proposition 2 and Theorem 3, for a scalar output ``f`` of a model (the
target logit, its softmax probability or log-probability: ``output=``).

**Notation.** ``g(x) = ∇f(x)`` is the saliency map, ``B(x, δ)`` the ℓ2 ball, ``H_x`` the
input Hessian of ``f``. ``f̃_σ = f * N(0, σ²I)`` is the Gaussian-smoothed model; by
Stein's lemma (Prop. 1) its gradient is SmoothGrad,
``∇f̃_σ(x) = E[∇f(x + u)] = E[u f(x + u)] / σ²`` with ``u ~ N(0, σ²I)``, and (Lemma 3)
its Hessian is ``H̃_x = E[∇²f(x + u)] = E[(u uᵀ − σ²I) f(x + u)] / σ⁴``.

**Searches** (lower bounds on maxima, by projected gradient ascent in the ℓ2 ball,
the best iterate kept): :func:`max_grad_norm` (Lemma 1's L), :func:`saliency_lipschitz`
(Theorem 1's λ and its maximiser x*), :func:`max_gradient_change` (Theorem 3's
left side) and :func:`max_gradient_change_converged` (the same, from the Hessian's top
eigenvector and random restarts, refined until the maximum stops moving). They need second
derivatives of ``f``: use smooth (Softplus) models. :func:`first_order_excess_shrinks` is
the per-case test of a first-order bound: its excess vanishes as the radius shrinks.

**Smoothed Hessian** (Stein's gradient, Hessian-vector products of ``f̃_σ``, power
iteration, quadrature, ``‖H_x‖₂``): :mod:`robattr.bounds.smoothed_hessian`, which
shares this module's argument checks.

**Bounds.** :func:`smoothgrad_lipschitz_bound` is Theorem 2's ``2F/σ²``
(``tight=False``) or the sharper ``E|Z² − 1| F/σ²`` (``tight=True``). For a unit ``v``,
``vᵀH̃v = E[(Z² − 1) f(x + u)]/σ²`` with ``Z = vᵀu/σ ~ N(0, 1)``, so
``|vᵀH̃v| ≤ E|Z² − 1| F/σ²`` and, H̃ being symmetric, ``‖H̃‖₂`` obeys the same bound.
``E|Z² − 1| = 4φ(1) ≈ 0.968`` (:data:`E_ABS_Z2_MINUS_1`), attained by
``f(z) = F sign((z₁ − x₁)² − σ²)`` at x. :func:`prop2_sigma_threshold` is Proposition
2's ``√(δF/L)`` (and the threshold of the sharper bound), :func:`thm3_bound` Theorem 3's
``δ ‖H_x‖₂``.

000's attack evaluation (Tables 2-6: the attacks, metrics and AUC aggregation) is not a
bound; it lives in :mod:`robattr.attack_protocol` (:func:`robattr.attack_protocol.attack_eval_wang2020`).
"""
from __future__ import annotations

import math
from typing import Callable

import numpy as np
import torch
from torch import nn
from torch.nn import functional as F

from robattr.attributions import resolve_target
from robattr.bounds._checks import _arr, _out
from robattr.utils import check_int, make_generator

__all__ = [
    "E_ABS_Z2_MINUS_1", "OUTPUTS", "scalar_output", "output_grad", "max_grad_norm",
    "saliency_lipschitz", "thm1_bound", "max_gradient_change",
    "max_gradient_change_converged", "first_order_excess_shrinks",
    "smoothgrad_lipschitz_bound", "prop2_sigma_threshold", "thm3_bound",
]

#: ``E|Z² − 1|`` for ``Z ~ N(0, 1)``: ``4 φ(1) = 4 e^{-1/2} / √(2π) ≈ 0.9679``.
E_ABS_Z2_MINUS_1 = 4.0 * math.exp(-0.5) / math.sqrt(2.0 * math.pi)

#: The scalar outputs ``f`` the functions accept.
OUTPUTS = ("logit", "prob", "log_prob")


# --------------------------------------------------------------------------- helpers
def _check_model(model):
    if not isinstance(model, nn.Module) and not callable(model):
        raise ValueError(f"model must be a torch.nn.Module (or a callable), got {model!r}")


def _check_x(x) -> torch.Tensor:
    if not torch.is_tensor(x) or not x.is_floating_point() or x.ndim < 2 or x.shape[0] == 0:
        raise ValueError("x must be a non-empty floating-point batch tensor (N, ...), got "
                         f"{getattr(x, 'shape', type(x).__name__)}")
    return x.detach()


def _check_output(output: str) -> str:
    if output not in OUTPUTS:
        raise ValueError(f"output must be one of {OUTPUTS}, got {output!r}")
    return output


def _pos(name: str, v) -> float:
    if isinstance(v, bool) or not isinstance(v, (int, float)) or not math.isfinite(v) or v <= 0:
        raise ValueError(f"{name} must be a finite number > 0, got {v!r}")
    return float(v)


def _flat_norm(t: torch.Tensor) -> torch.Tensor:
    return t.reshape(t.shape[0], -1).norm(dim=1)


def _view(t: torch.Tensor, x: torch.Tensor) -> torch.Tensor:
    return t.reshape((-1,) + (1,) * (x.ndim - 1))


def scalar_output(model: nn.Module, x: torch.Tensor, target: torch.Tensor,
                  output: str = "logit") -> torch.Tensor:
    """``f(x)`` per example, (N,): the target's logit, softmax probability or
    log-probability. ``target`` is a LongTensor of N class indices."""
    logits = model(x)
    if output == "prob":
        logits = F.softmax(logits, dim=1)
    elif output == "log_prob":
        logits = F.log_softmax(logits, dim=1)
    elif output != "logit":
        _check_output(output)
    return logits.gather(1, target[:, None]).squeeze(1)


def output_grad(model: nn.Module, x: torch.Tensor, target, *, output: str = "logit",
                create_graph: bool = False) -> torch.Tensor:
    """The saliency map ``∇f(x)`` (shape of ``x``) of the scalar output ``f``."""
    _check_output(output)
    x0 = _check_x(x) if not (create_graph and x.requires_grad) else x
    t = resolve_target(model, x0.detach(), target)
    inp = x0 if (create_graph and x0.requires_grad) else x0.detach().requires_grad_(True)
    with torch.enable_grad():
        (g,) = torch.autograd.grad(scalar_output(model, inp, t, output).sum(), inp,
                                   create_graph=create_graph)
    return g


def _ball_ascent(objective: Callable[[torch.Tensor], torch.Tensor], x: torch.Tensor,
                 eps: float, steps: int, step_size: float | None, random_start: bool,
                 generator, include_start: bool = True, min_dist: float = 0.0,
                 clip: tuple[float, float] | None = None, start: torch.Tensor | None = None):
    """Projected ℓ2 gradient ascent of ``objective`` (N,) over ``B(x, eps)``.

    Returns (best value, best point); every iterate is scored, the start too when
    ``include_start``. Steps are gradients normalised per example (length
    ``step_size``, default ``2.5 eps / steps``). ``min_dist`` keeps iterates at least that
    far from ``x`` (objectives undefined at x). ``start`` (shaped like ``x``, projected
    into the ball) replaces the start at ``x`` or the random one.
    """
    eps = _pos("eps", eps)
    steps = check_int("steps", steps, 1)
    step = 2.5 * eps / steps if step_size is None else _pos("step_size", step_size)
    view = (-1,) + (1,) * (x.ndim - 1)

    def proj(z):
        d = z - x
        n = _view(_flat_norm(d), x)
        d = d * torch.clamp(eps / n.clamp_min(1e-30), max=1.0)
        if min_dist > 0:
            n2 = _view(_flat_norm(d), x)
            d = torch.where(n2 < min_dist, d / n2.clamp_min(1e-30) * min_dist, d)
        z = x + d
        return z.clamp(*clip) if clip is not None else z

    if start is not None:
        if not torch.is_tensor(start) or start.shape != x.shape:
            raise ValueError(f"start must be shaped like x {tuple(x.shape)}, got "
                             f"{getattr(start, 'shape', type(start).__name__)}")
        z = proj(start.detach().to(x.dtype))
    elif random_start:
        gdev = generator.device if generator is not None else x.device
        u = torch.randn(x.shape, generator=generator, device=gdev, dtype=x.dtype).to(x.device)
        r = torch.rand(x.shape[0], generator=generator, device=gdev, dtype=x.dtype).to(x.device)
        d = x[0].numel()
        u = u / _view(_flat_norm(u), x) * _view(eps * r ** (1.0 / d), x)
        z = proj(x + u)
    else:
        z = x.clone()
    best_v = torch.full((x.shape[0],), -float("inf"), dtype=x.dtype, device=x.device)
    best = x.clone()
    for t in range(steps + 1):
        zz = z.detach().requires_grad_(True)
        with torch.enable_grad():
            val = objective(zz)
            grad = None
            if t < steps:
                (grad,) = torch.autograd.grad(val.sum(), zz)
        v = val.detach()
        if t > 0 or include_start:
            better = v > best_v
            best_v = torch.where(better, v, best_v)
            best[better] = zz.detach()[better]
        if grad is None:
            break
        gn = _flat_norm(grad).clamp_min(1e-30).reshape(view)
        z = proj(zz.detach() + step * grad / gn)
    return best_v, best


# --------------------------------------------------------------------------- Lemma 1 / Thm 1
def max_grad_norm(model: nn.Module, x: torch.Tensor, target=None, *, eps: float,
                  output: str = "logit", steps: int = 20, step_size: float | None = None,
                  random_start: bool = False, generator=None, seed=None):
    """Lemma 1's local Lipschitz constant ``L = max_{x' ∈ B(x, eps)} ‖∇f(x')‖₂``, searched
    by projected ℓ2 ascent of ``‖∇f‖₂`` (a lower bound on the true maximum; the start
    ``x`` is scored too). Needs a smooth model (the ascent differentiates the gradient).
    Returns ``(L, x_dagger)``: (N,) and the maximiser, shaped like ``x``.
    """
    _check_model(model)
    _check_output(output)
    x = _check_x(x)
    t = resolve_target(model, x, target)
    gen = make_generator(x, generator, seed)

    def obj(z):
        (g,) = torch.autograd.grad(scalar_output(model, z, t, output).sum(), z,
                                   create_graph=True)
        return _flat_norm(g)

    return _ball_ascent(obj, x, eps, steps, step_size, random_start, gen)


def saliency_lipschitz(model: nn.Module, x: torch.Tensor, target=None, *, eps: float,
                       output: str = "logit", steps: int = 20, step_size: float | None = None,
                       min_dist: float | None = None, generator=None, seed=None):
    """Theorem 1's local robustness of the saliency map,
    ``λ = max_{x' ∈ B(x, eps)} ‖∇f(x) − ∇f(x')‖₂ / ‖x − x'‖₂``, searched by projected ℓ2
    ascent of the ratio from a random start in the ball (the ratio is undefined at x;
    iterates stay ``min_dist`` away from x, default ``eps / 100``).

    Returns ``(lam, x_star, dist)``: the best ratio (N,), its point, and ``‖x − x*‖₂``.
    """
    _check_model(model)
    _check_output(output)
    x = _check_x(x)
    eps = _pos("eps", eps)
    md = eps / 100 if min_dist is None else _pos("min_dist", min_dist)
    if md >= eps:
        raise ValueError(f"min_dist must be smaller than eps, got {md} >= {eps}")
    change = _gradient_change(model, x, target, output)
    gen = make_generator(x, generator, seed)

    def obj(z):
        return change(z) / _flat_norm(z - x).clamp_min(1e-30)

    lam, xs = _ball_ascent(obj, x, eps, steps, step_size, True, gen, include_start=True,
                           min_dist=md)
    return lam, xs, _flat_norm(xs - x)


def thm1_bound(L, dist):
    """Theorem 1: ``λ ≤ 2L / ‖x − x*‖₂`` (exact, given the true L of Lemma 1)."""
    L = _arr("L", L, low=0.0)
    d = _arr("dist", dist, low=0.0, strict=True)
    return _out(2.0 * L / d)


# --------------------------------------------------------------------------- Thm 3
def max_gradient_change(model: nn.Module, x: torch.Tensor, target=None, *, eps: float,
                        output: str = "logit", steps: int = 20, step_size: float | None = None,
                        generator=None, seed=None):
    """Theorem 3's left side ``max_{x' ∈ B(x, eps)} ‖∇f(x) − ∇f(x')‖₂``, searched by
    projected ℓ2 ascent from a random start. Returns ``(change, x_prime)``."""
    _check_model(model)
    _check_output(output)
    x = _check_x(x)
    gen = make_generator(x, generator, seed)
    return _ball_ascent(_gradient_change(model, x, target, output), x, eps, steps, step_size,
                        True, gen)


def max_gradient_change_converged(model: nn.Module, x: torch.Tensor, target=None, *, eps: float,
                                  output: str = "logit", steps: int = 20,
                                  directions: torch.Tensor | None = None, restarts: int = 1,
                                  tol: float = 1e-3, max_rounds: int = 10, generator=None,
                                  seed=None):
    """Theorem 3's left side ``max_{x' ∈ B(x, eps)} ‖∇f(x) − ∇f(x')‖₂``, searched until the
    maximum stops moving.

    Round 1 runs the projected ℓ2 ascent of :func:`max_gradient_change` (``steps`` steps of
    length ``2.5 eps / steps``) from every start: ``x ± eps v`` for each direction ``v`` of
    ``directions`` (shaped like ``x``, or ``(k, *x.shape)`` for k of them; e.g. the top
    eigenvector of ``H_x``, :func:`input_hessian_spectral_norm` with ``return_vector=True``,
    where the first-order maximum lies) and ``restarts`` random starts in the ball; the best
    point per example is kept. Each later round refines: the ascent again from the best
    point, plus one fresh random start. The search stops
    when no example's maximum rose by more than ``tol`` (relative) in a round, or after
    ``max_rounds`` rounds.

    Returns ``(change, x_prime, converged, rounds)``: the best value (N,), its point, whether
    each example's maximum rose by at most ``tol`` (relative) in the last round (bool (N,);
    all False when the search ends after one round), and the number of rounds run.
    """
    _check_model(model)
    _check_output(output)
    x = _check_x(x)
    eps = _pos("eps", eps)
    steps = check_int("steps", steps, 1)
    restarts = check_int("restarts", restarts, 0)
    max_rounds = check_int("max_rounds", max_rounds, 1)
    tol = _pos("tol", tol)
    gen = make_generator(x, generator, seed)
    change = _gradient_change(model, x, target, output)
    starts = []
    if directions is not None:
        dirs = directions.detach().to(x.device, x.dtype)
        dirs = dirs.unsqueeze(0) if dirs.shape == x.shape else dirs
        if dirs.ndim != x.ndim + 1 or dirs.shape[1:] != x.shape:
            raise ValueError(f"directions must be shaped like x {tuple(x.shape)} or (k, *x.shape), "
                             f"got {tuple(directions.shape)}")
        for v in dirs:
            unit = v / _view(_flat_norm(v).clamp_min(1e-30), x)
            starts += [x + eps * unit, x - eps * unit]
    if not starts and restarts == 0:
        raise ValueError("the search needs a start: give directions or restarts >= 1")
    step = 2.5 * eps / steps
    best_v = torch.full((x.shape[0],), -float("inf"), dtype=x.dtype, device=x.device)
    best = x.clone()

    def keep(v, z):
        better = v > best_v
        best_v[better] = v[better]
        best[better] = z[better]

    for s in starts:
        keep(*_ball_ascent(change, x, eps, steps, step, False, gen, start=s))
    for _ in range(restarts):
        keep(*_ball_ascent(change, x, eps, steps, step, True, gen))
    converged = torch.zeros(x.shape[0], dtype=torch.bool, device=x.device)
    rounds = 1
    while rounds < max_rounds and not bool(converged.all()):
        before = best_v.clone()
        keep(*_ball_ascent(change, x, eps, steps, step, False, gen, start=best.clone()))
        keep(*_ball_ascent(change, x, eps, steps, step, True, gen))
        rounds += 1
        converged = best_v - before <= tol * before.abs().clamp_min(1e-30)
    return best_v.detach(), best, converged, rounds


def first_order_excess_shrinks(ratio_small, ratio_large, eps_small: float, eps_large: float, *,
                               tol: float = 1e-3):
    """Per case, whether a first-order bound's excess vanishes as the radius shrinks, from
    ``ratio = measured / bound`` at two radii ``eps_small < eps_large``.

    A first-order statement allows ``ratio − 1 = O(eps)``: its excess over 1 must vanish
    with eps, not stay (a wrong constant) or grow (a jump the expansion cannot see). A case
    passes when the ratio at ``eps_small`` is at most ``1 + tol`` (the bound holds there,
    to the search's tolerance) or when its excess has shrunk at least like ``√eps``:
    ``ratio_small − 1 ≤ √(eps_small / eps_large) (ratio_large − 1)``, halfway (on a log
    scale) between ``O(eps)``, which a first-order statement predicts, and ``O(1)``, which
    it rules out. Returns a bool array, one per case.
    """
    rs = np.asarray(_arr("ratio_small", ratio_small, low=0.0), dtype=float)
    rl = np.asarray(_arr("ratio_large", ratio_large, low=0.0), dtype=float)
    if rs.shape != rl.shape:
        raise ValueError(f"ratio_small and ratio_large must be paired, got {rs.shape} and {rl.shape}")
    e_s, e_l = _pos("eps_small", eps_small), _pos("eps_large", eps_large)
    if e_s >= e_l:
        raise ValueError(f"eps_small must be below eps_large, got {e_s} >= {e_l}")
    tol = _pos("tol", tol)
    return (rs <= 1 + tol) | (rs - 1 <= math.sqrt(e_s / e_l) * (rl - 1))


def _gradient_change(model: nn.Module, x: torch.Tensor, target, output: str):
    """``z ↦ ‖∇f(z) − ∇f(x)‖₂`` per example, differentiable in ``z`` (for the ascents)."""
    t = resolve_target(model, x, target)
    g0 = output_grad(model, x, t, output=output).detach()

    def change(z):
        (g,) = torch.autograd.grad(scalar_output(model, z, t, output).sum(), z,
                                   create_graph=True)
        return _flat_norm(g - g0)

    return change


def thm3_bound(delta, hessian_norm):
    """Theorem 3 (first order): ``max ‖∇f(x) − ∇f(x')‖₂ ≲ δ ‖H_x‖₂ = δ max_i |ξ_i|``."""
    d = _arr("delta", delta, low=0.0)
    h = _arr("hessian_norm", hessian_norm, low=0.0)
    return _out(d * h)


# --------------------------------------------------------------------------- Prop 1
def smoothgrad_lipschitz_bound(F_max, sigma, *, tight: bool = False):
    """Theorem 2: SmoothGrad is globally ``λ̃``-robust with ``λ̃ ≤ 2F/σ²`` (``tight=False``,
    as printed), or the sharper ``λ̃ ≤ E|Z² − 1| F/σ² ≈ 0.968 F/σ²`` (``tight=True``;
    derivation in the module docstring), where ``F ≥ sup |f|``."""
    Fm = _arr("F_max", F_max, low=0.0)
    s = _arr("sigma", sigma, low=0.0, strict=True)
    c = E_ABS_Z2_MINUS_1 if tight else 2.0
    return _out(c * Fm / s ** 2)


def prop2_sigma_threshold(delta, F_max, L, *, tight: bool = False):
    """Proposition 2: for ``σ > √(δF/L)`` Theorem 2's bound ``2F/σ²`` is below the
    saliency bound ``2L/δ ≤ 2L/‖x − x*‖``. ``tight=True`` gives the threshold of the
    sharper bound, ``√(E|Z²−1| δF / (2L))``."""
    d = _arr("delta", delta, low=0.0)
    Fm = _arr("F_max", F_max, low=0.0)
    Lm = _arr("L", L, low=0.0, strict=True)
    c = E_ABS_Z2_MINUS_1 / 2 if tight else 1.0
    return _out(np.sqrt(c * d * Fm / Lm))

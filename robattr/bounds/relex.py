"""004 (Lim, Lee & Kim, CVPR 2021, RelEx): Theorems 1 and 2 on the masked loss.

Notation (ours, matching the chapter ``lim2021``). A classifier ``model`` gives softmax
probabilities ``f``; ``t`` is the target class; ``m`` a mask of the input's shape. The
masked loss is ``L(x, m) = -log f_t(m * x)``. Following the paper's proof (Eq. S8) we write
``g(x)`` for the gradient of ``log f_t`` with respect to the *masked* input ``u = m * x``,
taken at ``u = m * x``, so that the input gradient is ``grad_x L(x, m) = -m * g(x)``.
(The paper's Eq. 6 writes ``g = grad_x log f(m * x) = m * g``; with that reading Theorem 2
fails for masks with ``||m||_1 < 1``, see :func:`thm2_check`.)

A perturbation is ``gamma = alpha v`` with ``||v||_2 = 1``. With a loss threshold ``tau``
(``p_t(m * x) >= 1/2`` guarantees the class, i.e. ``tau = log 2``) and
``c = tau - L(x0, m) >= 0``:

* Thm 1 (Eq. 5): ``alpha >= (c / ||m||_1) * 2 / (||g(x0 + alpha v) - g(x0)|| + 2 ||g(x0)||)``
  for the radius ``alpha`` at which the loss first reaches ``tau`` along ``v``. It rests on
  the quadratic model with the secant Hessian, i.e. the trapezoid rule
  ``alpha (phi'(0) + phi'(alpha)) / 2`` for ``L(x0 + alpha v) - L(x0) = int_0^alpha phi'``,
  ``phi(s) = L(x0 + s v)``. The bound follows whenever that trapezoid is at least the
  increment ``c``, which holds when the *slope* ``phi'`` is convex on ``[0, alpha]``
  (``phi''' >= 0``; the trapezoid error is ``alpha^3 phi'''(xi) / 12``). Convexity of ``phi``
  is not enough: for a linear softmax classifier ``phi''`` is the variance and ``phi'''``
  the third central moment of the logit slopes under the softmax, of either sign. With two
  classes and ``tau <= log 2`` it is ``>= 0`` up to the crossing, so Eq. 5 is exact there;
  with more classes it can fail. Otherwise Eq. 5 is a first-order statement.
  :func:`thm1_check` returns the trapezoid so the implication can be checked row by row.
* Eq. 7 as printed, ``L(x0 + gamma, m) <= alpha ||m||_1 (||g(x0+alpha v) - g(x0)||/2 + ||g(x0)||)``,
  drops ``L(x0, m)`` (the proof adds the quadratic model's increment to ``L(x0, m)``); it
  fails as ``alpha -> 0``. Corrected: ``L(x0, m) +`` the same right-hand side.
* A rigorous replacement for Eq. 5 (mean-value theorem): ``alpha >= c / (||m||_inf
  max_{s in [0, alpha]} ||g(x0 + s v)||)`` (numerically, the maximum is taken on a grid).
* Thm 2 (Eq. 8, an *upper* bound although the text says "lower-bounded"):
  ``||grad_x L(x_i, m) - grad_x L(x0, m)|| <= ||m||_1 ||g(x_i) - g(x0)||`` with
  ``x_i = x0 + alpha v``. With ``g`` as above it is exact for any ``x_i`` (no Taylor step
  is needed): ``||m * a|| <= ||m||_inf ||a|| <= ||m||_1 ||a||``.
"""
from __future__ import annotations

import math

import torch
from torch import nn
from torch.nn import functional as F

from robattr.attributions._core import check_model, resolve_target

__all__ = [
    "masked_loss", "masked_grad", "thm1_radius_bound", "thm1_loss_bound", "thm1_radius_lipschitz",
    "thm2_bound", "loss_along", "first_crossing", "thm1_check", "thm2_check",
]


def _check_pair(x, m):
    if not isinstance(x, torch.Tensor) or not x.is_floating_point() or x.ndim < 2:
        raise ValueError("x must be a floating-point batch tensor (N, ...)")
    if not isinstance(m, torch.Tensor) or not m.is_floating_point():
        raise ValueError("m must be a floating-point tensor")
    if m.shape != x.shape:
        try:
            m = torch.broadcast_to(m, x.shape)
        except RuntimeError:
            raise ValueError(f"m of shape {tuple(m.shape)} does not broadcast to x "
                             f"{tuple(x.shape)}") from None
    return x.detach(), m.detach().to(x)


def masked_loss(model: nn.Module, x: torch.Tensor, m: torch.Tensor, target) -> torch.Tensor:
    """``L(x, m) = -log f_t(m * x)`` per row (004's loss on the masked input), no graph."""
    check_model(model)
    x, m = _check_pair(x, m)
    target = resolve_target(model, x, target)
    with torch.no_grad():
        return -F.log_softmax(model(m * x), dim=1).gather(1, target[:, None])[:, 0]


def masked_grad(model: nn.Module, x: torch.Tensor, m: torch.Tensor, target):
    """``(L, g)``: the masked loss per row and ``g(x) = d log f_t(u) / du`` at ``u = m * x``
    (004's Eq. S8), shaped like ``x``. The input gradient is ``grad_x L = -m * g``."""
    check_model(model)
    x, m = _check_pair(x, m)
    target = resolve_target(model, x, target)
    u = (m * x).requires_grad_(True)
    with torch.enable_grad():
        logp = F.log_softmax(model(u), dim=1).gather(1, target[:, None])[:, 0]
        (g,) = torch.autograd.grad(logp.sum(), u)
    return -logp.detach(), g.detach()


def _nonneg(name, value):
    t = torch.as_tensor(value, dtype=torch.float64)
    if bool(torch.isnan(t).any()) or bool((t < 0).any()):
        raise ValueError(f"{name} must be >= 0 (no NaN), got {value!r}")
    return t


def thm1_radius_bound(c, m_l1, g0_norm, gdiff_norm) -> torch.Tensor:
    """Eq. 5's right-hand side ``(c / ||m||_1) * 2 / (||g(x0+alpha v) - g(x0)|| + 2 ||g(x0)||)``.

    Arguments broadcast; all must be >= 0. A zero denominator (an all-zero mask, or a loss
    that does not move) gives ``inf`` when ``c > 0`` (the loss never reaches the threshold)
    and 0 when ``c = 0``."""
    c, g0, gd = _nonneg("c", c), _nonneg("g0_norm", g0_norm), _nonneg("gdiff_norm", gdiff_norm)
    den = _nonneg("m_l1", m_l1) * (gd + 2 * g0)
    c, den = torch.broadcast_tensors(c, den)
    flat = torch.where(c > 0, torch.full_like(den, math.inf), torch.zeros_like(den))
    return torch.where(den > 0, 2 * c / den.clamp_min(1e-300), flat)


def thm1_loss_bound(alpha, m_l1, g0_norm, gdiff_norm, loss0=None, *,
                    printed: bool = False) -> torch.Tensor:
    """Eq. 7's right-hand side ``alpha ||m||_1 (||g(x0+alpha v) - g(x0)|| / 2 + ||g(x0)||)``.

    ``printed=True`` returns it as printed; otherwise ``loss0 = L(x0, m)`` is required and
    added (the corrected bound: the proof bounds the *increment* of the loss)."""
    a = _nonneg("alpha", alpha)
    rhs = a * _nonneg("m_l1", m_l1) * (_nonneg("gdiff_norm", gdiff_norm) / 2
                                         + _nonneg("g0_norm", g0_norm))
    if printed:
        return rhs
    if loss0 is None:
        raise ValueError("the corrected Eq. 7 needs loss0 = L(x0, m) (or pass printed=True)")
    return _nonneg("loss0", loss0) + rhs


def thm1_radius_lipschitz(c, m_linf, gmax_norm) -> torch.Tensor:
    """The radius bound ``c / (||m||_inf max_s ||g(x0 + s v)||)`` (mean-value theorem),
    ``inf`` when the denominator is 0. It is rigorous given the true maximum over the
    segment; :func:`thm1_check` passes a grid estimate of it (:func:`first_crossing`)."""
    c, mi, gm = _nonneg("c", c), _nonneg("m_linf", m_linf), _nonneg("gmax_norm", gmax_norm)
    c, den = torch.broadcast_tensors(c, mi * gm)
    flat = torch.where(c > 0, torch.full_like(den, math.inf), torch.zeros_like(den))
    return torch.where(den > 0, c / den.clamp_min(1e-300), flat)


def thm2_bound(m_l1, gdiff_norm) -> torch.Tensor:
    """Eq. 8's right-hand side ``||m||_1 ||g(x_i) - g(x0)||`` (an upper bound)."""
    return _nonneg("m_l1", m_l1) * _nonneg("gdiff_norm", gdiff_norm)


def _unit_directions(v, x):
    if not isinstance(v, torch.Tensor) or not v.is_floating_point():
        raise ValueError("v must be a floating-point tensor")
    if v.shape != x.shape:
        raise ValueError(f"v must be shaped like x {tuple(x.shape)}, got {tuple(v.shape)}")
    n = v.flatten(1).norm(dim=1)
    if bool((n == 0).any()):
        raise ValueError("every direction v must be non-zero")
    return (v / n.reshape((-1,) + (1,) * (x.ndim - 1))).detach().to(x)


def loss_along(model, x0, m, v, target, alphas) -> torch.Tensor:
    """``L(x0 + alpha v, m)`` for every row and every ``alpha`` (N x len(alphas)); ``v`` is
    normalised to unit l2 norm per row."""
    x0, m = _check_pair(x0, m)
    v = _unit_directions(v, x0)
    target = resolve_target(model, x0, target)
    a = torch.as_tensor(alphas, dtype=x0.dtype, device=x0.device).flatten()
    out = torch.empty(x0.shape[0], a.numel(), dtype=x0.dtype, device=x0.device)
    for j in range(a.numel()):
        out[:, j] = masked_loss(model, x0 + a[j] * v, m, target)
    return out


def first_crossing(model, x0, m, v, target, tau: float, *, alpha_max: float, n_grid: int = 64,
                   n_bisect: int = 30):
    """The smallest ``alpha`` in ``(0, alpha_max]`` with ``L(x0 + alpha v, m) >= tau``, per row:
    a grid of ``n_grid`` steps, then bisection on the first bracketing cell. Rows whose loss
    never reaches ``tau`` on the grid get ``inf``. Returns ``(alpha, gmax)`` where ``gmax`` is
    ``max ||g||`` over the grid points up to the crossing and over ``n_grid + 1`` points of
    ``[0, alpha]``: an estimate of the supremum the mean-value bound needs, from below (a
    ReLU network's gradient can still peak between two points). Rows with
    ``L(x0, m) >= tau`` get ``alpha = 0``."""
    check_model(model)
    x0, m = _check_pair(x0, m)
    v = _unit_directions(v, x0)
    target = resolve_target(model, x0, target)
    if not (isinstance(alpha_max, (int, float)) and alpha_max > 0 and math.isfinite(alpha_max)):
        raise ValueError(f"alpha_max must be a finite number > 0, got {alpha_max!r}")
    if not isinstance(n_grid, int) or n_grid < 2 or not isinstance(n_bisect, int) or n_bisect < 0:
        raise ValueError("n_grid must be an int >= 2 and n_bisect an int >= 0")
    n = x0.shape[0]
    view = (-1,) + (1,) * (x0.ndim - 1)
    grid = torch.linspace(0, alpha_max, n_grid + 1, dtype=x0.dtype, device=x0.device)
    losses, gnorms = [], []
    for a in grid:
        loss, g = masked_grad(model, x0 + a * v, m, target)
        losses.append(loss)
        gnorms.append(g.flatten(1).norm(dim=1))
    losses, gnorms = torch.stack(losses, 1), torch.stack(gnorms, 1)
    above = losses >= tau
    found = above.any(1)
    idx = torch.where(found, above.to(torch.int8).argmax(1), torch.full_like(found, n_grid,
                                                                                dtype=torch.long))
    lo = grid[(idx - 1).clamp_min(0)]
    hi = grid[idx.clamp_max(n_grid)]
    for _ in range(n_bisect):
        mid = (lo + hi) / 2
        up = masked_loss(model, x0 + mid.reshape(view) * v, m, target) >= tau
        hi = torch.where(up, mid, hi)
        lo = torch.where(up, lo, mid)
    alpha = torch.where(found, hi, torch.full_like(hi, math.inf))
    alpha = torch.where(idx == 0, torch.zeros_like(alpha), alpha)
    cols = torch.arange(n_grid + 1, device=x0.device).expand(n, -1)
    gmax = torch.where(cols <= idx[:, None], gnorms, torch.zeros_like(gnorms)).amax(1)
    # a second grid of n_grid + 1 points on [0, alpha] itself (the crossing included): the
    # first grid's cells can be wider than the whole segment, and ||g|| can peak inside one
    end = torch.where(found, hi, grid[-1])
    for t in torch.linspace(0, 1, n_grid + 1, dtype=x0.dtype, device=x0.device)[1:]:
        _, g = masked_grad(model, x0 + (t * end).reshape(view) * v, m, target)
        gmax = torch.maximum(gmax, g.flatten(1).norm(dim=1))
    return alpha, gmax


def thm1_check(model, x0, m, v, target, *, tau: float = math.log(2), alpha_max: float = 10.0,
               n_grid: int = 64, n_bisect: int = 30) -> dict:
    """Both sides of Theorem 1 (Eq. 5 and Eq. 7) along the directions ``v``, one row each.

    Returns a dict of per-row tensors: ``alpha`` (the exact first crossing of ``tau``, inf
    if none up to ``alpha_max``), ``c``, ``loss0``, ``m_l1``, ``m_linf``, ``g0_norm``,
    ``gdiff_norm`` (``||g(x0 + alpha v) - g(x0)||`` at the crossing), ``bound`` (Eq. 5),
    ``lipschitz`` (the mean-value bound, its sup of ``||g||`` estimated on a grid), ``loss_at`` (``L(x0 + alpha v) = tau`` up to
    bisection), ``eq7_printed`` and ``eq7_corrected`` at ``alpha``, and ``trapezoid``
    (``alpha (phi'(0) + phi'(alpha)) / 2``, the proof's estimate of the increment ``c``:
    where it is ``>= c``, Eq. 5 and the corrected Eq. 7 follow exactly).
    Rows with ``c <= 0`` (the masked input already misses the threshold) are kept; their
    ``alpha`` is 0.
    """
    x0, m = _check_pair(x0, m)
    target = resolve_target(model, x0, target)
    v = _unit_directions(v, x0)
    alpha, gmax = first_crossing(model, x0, m, v, target, tau, alpha_max=alpha_max,
                                 n_grid=n_grid, n_bisect=n_bisect)
    view = (-1,) + (1,) * (x0.ndim - 1)
    loss0, g0 = masked_grad(model, x0, m, target)
    a_eval = torch.where(torch.isfinite(alpha), alpha, torch.zeros_like(alpha))
    loss1, g1 = masked_grad(model, x0 + a_eval.reshape(view) * v, m, target)
    c = (tau - loss0).clamp_min(0)
    m_l1 = m.flatten(1).abs().sum(1)
    m_linf = m.flatten(1).abs().amax(1)
    g0n = g0.flatten(1).norm(dim=1)
    gdn = (g1 - g0).flatten(1).norm(dim=1)
    out = {"alpha": alpha, "c": c, "loss0": loss0, "m_l1": m_l1, "m_linf": m_linf,
           "g0_norm": g0n, "gdiff_norm": gdn, "loss_at": loss1}
    out["bound"] = thm1_radius_bound(c, m_l1, g0n, gdn).to(x0.dtype)
    out["lipschitz"] = thm1_radius_lipschitz(c, m_linf, gmax).to(x0.dtype)
    out["eq7_printed"] = thm1_loss_bound(a_eval, m_l1, g0n, gdn, printed=True).to(x0.dtype)
    out["eq7_corrected"] = thm1_loss_bound(a_eval, m_l1, g0n, gdn, loss0).to(x0.dtype)
    # phi'(s) = <grad_x L(x0 + s v), v> = -<m * g(x0 + s v), v>
    slope0 = -(m * g0 * v).flatten(1).sum(1)
    slope1 = -(m * g1 * v).flatten(1).sum(1)
    out["trapezoid"] = a_eval * (slope0 + slope1) / 2
    return out


def thm2_check(model, x0, m, xi, target, *, eq6: bool = False) -> dict:
    """Both sides of Theorem 2 for the pairs ``(x0, xi)``, one row each.

    ``lhs = ||grad_x L(xi, m) - grad_x L(x0, m)||``; ``rhs = ||m||_1 ||g(xi) - g(x0)||``
    with ``g`` the masked-input gradient (Eq. S8; exact bound). ``eq6=True`` reads ``g``
    as Eq. 6 does, ``g = grad_x log f(m * x) = m * g_S8``: then ``rhs = ||m||_1 * lhs``,
    violated whenever ``||m||_1 < 1`` and the gradients differ."""
    x0, m = _check_pair(x0, m)
    xi, _ = _check_pair(xi, m)
    if xi.shape != x0.shape:
        raise ValueError("xi must be shaped like x0")
    target = resolve_target(model, x0, target)
    _, g0 = masked_grad(model, x0, m, target)
    _, gi = masked_grad(model, xi, m, target)
    lhs = (m * (gi - g0)).flatten(1).norm(dim=1)
    m_l1 = m.flatten(1).abs().sum(1)
    gd = lhs if eq6 else (gi - g0).flatten(1).norm(dim=1)
    return {"lhs": lhs, "rhs": thm2_bound(m_l1, gd).to(x0.dtype), "m_l1": m_l1,
            "gdiff_norm": gd, "dist": (xi - x0).flatten(1).norm(dim=1)}

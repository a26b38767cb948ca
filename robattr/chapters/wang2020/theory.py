"""The computations of the wang2020 chapter's two theory notebooks (Prop 1-3, Thm 1-3, B1, B2).

``theory_gauss_newton`` checks the Gauss-Newton input Hessian behind SSR:

* :func:`closed_form_gap`: ``W A Wᵀ`` against autograd's exact loss Hessian (Prop 3);
* :func:`psd_ratio`: smallest over largest eigenvalue, per point (Prop 3's PSD part);
* :func:`small_matrix_agreement`: the ``C × C`` eigenvalues against the dense top ``C`` (B1);
* :func:`timed_median` and :func:`eigen_solve_timing`: B1's timing table, dense against
  ``C × C``, on random ReLU MLPs; :func:`timing_gaps`: its per-size verdicts;
* :func:`second_order_terms`: B2's gradient and curvature terms per radius, with PGD's loss
  change.

``theory_geometry`` checks the smoothed geometry of SmoothGrad:

* :func:`random_softplus_mlp`: the random Softplus MLPs beside the trained model;
* :func:`saliency_cases`: Thm 1's ``L``, ``λ`` and ``‖x − x*‖`` per (model, point);
* :func:`stein_distances` and :func:`loglog_slope`: Prop 1's convergence study;
* :func:`extreme_curvature_ratio` and :func:`random_2d_quadrature`: Thm 2's exact cases;
* :func:`smoothed_hessian_norms`: Thm 2 on the trained model;
* :func:`gradient_change_study`, :func:`gradient_change_summary` and
  :func:`first_order_cases`: Thm 3's radii study and its first-order rule.

The figures of both notebooks are in :mod:`.theory_figures`.
"""
from __future__ import annotations

import math
import time
from typing import Callable, Mapping, Sequence

import numpy as np
import pandas as pd
import torch
from torch import nn
from torch.nn import functional as F

__all__ = ["closed_form_gap", "psd_ratio", "small_matrix_agreement", "timed_median",
           "eigen_solve_timing", "timing_gaps", "second_order_terms", "random_softplus_mlp",
           "saliency_cases", "stein_distances", "loglog_slope", "extreme_curvature_ratio",
           "random_2d_quadrature", "smoothed_hessian_norms", "gradient_change_study",
           "gradient_change_summary", "first_order_cases"]


# --------------------------------------------------------------------------- Prop 3 and B1

def _bar(items, desc: str, progress: bool):
    """``items`` under a tqdm bar when ``progress``, else as they are. The bar is made without
    a ``disable`` argument, so ``TQDM_DISABLE`` (set for the book's kernels) still hides it."""
    if not progress:
        return items
    from tqdm.auto import tqdm

    return tqdm(items, desc=desc)


def closed_form_gap(model: nn.Module, x: torch.Tensor, y: torch.Tensor):
    """``(rel, eigenvalues)``: per point, ``max |W A Wᵀ − H| / max |H|`` between the closed
    form (:func:`robattr.bounds.gauss_newton_hessian`) and autograd's exact Hessian of the
    cross-entropy (:func:`robattr.bounds.loss_input_hessian`), and the ascending eigenvalues
    of the closed form, (N, d)."""
    from robattr.bounds import gauss_newton_hessian, loss_input_hessian

    gn = gauss_newton_hessian(model, x)
    ex = loss_input_hessian(model, x, y)
    scale = ex.flatten(1).abs().amax(1).clamp_min(1e-30)
    rel = (gn - ex).flatten(1).abs().amax(1) / scale
    return rel, torch.linalg.eigvalsh(gn)


def psd_ratio(eigenvalues: torch.Tensor) -> torch.Tensor:
    """Per row of ascending ``eigenvalues`` (N, d): the smallest over the largest (the largest
    floored at 1e-300). A PSD matrix has it ``>= 0`` up to rounding."""
    if eigenvalues.ndim != 2:
        raise ValueError(f"eigenvalues must be N×d, got shape {tuple(eigenvalues.shape)}")
    return eigenvalues[:, 0] / eigenvalues[:, -1].clamp_min(1e-300)


def small_matrix_agreement(model: nn.Module, x: torch.Tensor, dense: torch.Tensor):
    """B1 on ``model`` at ``x``: ``(err, rank, n_classes)``. ``err``: per point, the largest
    gap between the ``C`` eigenvalues of ``(WL)ᵀ(WL)``
    (:func:`robattr.bounds.gauss_newton_small_matrix`) and the top ``C`` of the dense
    ``dense`` (ascending eigenvalues of ``W A Wᵀ``, N × d), over the dense largest; ``rank``:
    the numerical rank of the dense matrix (eigenvalues above 1e-10 of the largest)."""
    from robattr.bounds import gauss_newton_small_matrix, input_jacobian

    logits = model(x)
    jac = input_jacobian(model, x)
    small = torch.linalg.eigvalsh(gauss_newton_small_matrix(jac, logits.detach()))
    top_dense = dense[:, -small.shape[1]:]
    err = (small - top_dense).abs().amax(1) / dense[:, -1]
    rank = (dense > 1e-10 * dense[:, -1:]).sum(1)
    return err, rank, int(logits.shape[1])


def timed_median(fn: Callable, repeats: int, device=None):
    """``(median seconds, last output, array of seconds)`` of ``repeats`` calls of ``fn``
    (wall time; on CUDA after a synchronise, since its kernels run asynchronously)."""
    if isinstance(repeats, bool) or int(repeats) != repeats or repeats < 1:
        raise ValueError(f"repeats must be an integer >= 1, got {repeats!r}")
    cuda = device is not None and torch.device(device).type == "cuda"
    ts, out = [], None
    for _ in range(int(repeats)):
        t0 = time.perf_counter()
        out = fn()
        if cuda:
            torch.cuda.synchronize(device)
        ts.append(time.perf_counter() - t0)
    return float(np.median(ts)), out, np.array(ts)


def eigen_solve_timing(dims: Sequence[int], n_classes: int, *, repeats: int, seed: int, device,
                       progress: bool = True):
    """B1's timing table: for each input size ``d`` of ``dims``, a random ReLU MLP
    (d → 256 → 256 → ``n_classes``, seeded by ``seed``) at one random input, its Jacobian
    and both paths to the top eigenvalue (dense ``W A Wᵀ`` then ``eigvalsh``; ``(WL)ᵀ(WL)``
    then ``eigvalsh``), each timed ``repeats`` times (:func:`timed_median`).

    Returns ``(table, dense_seconds, small_seconds)``: one row per ``d`` (median ms of the
    Jacobian and of each eigen-solve, their speed-up and the eigenvalues' relative gap), and
    per ``d`` the arrays of the two eigen-solves' seconds, paired by repeat."""
    from robattr.bounds import gauss_newton_small_matrix, input_jacobian

    rows, t_dense_all, t_small_all = [], [], []
    for d in _bar(dims, "B1 timing", progress):
        torch.manual_seed(seed)
        net = nn.Sequential(nn.Linear(int(d), 256), nn.ReLU(), nn.Linear(256, 256), nn.ReLU(),
                            nn.Linear(256, n_classes)).to(device)
        xd = torch.rand(1, int(d), device=device)
        t_jac, jd, _ = timed_median(lambda: input_jacobian(net, xd), repeats, device)
        with torch.no_grad():
            lg = net(xd)
        p = F.softmax(lg, 1)
        a = torch.diag_embed(p) - p.unsqueeze(2) * p.unsqueeze(1)
        t_dense, evd, ts_dense = timed_median(
            lambda: torch.linalg.eigvalsh(jd @ a @ jd.transpose(1, 2))[:, -1], repeats, device)
        t_small, evs, ts_small = timed_median(
            lambda: torch.linalg.eigvalsh(gauss_newton_small_matrix(jd, lg))[:, -1], repeats, device)
        t_dense_all.append(ts_dense)
        t_small_all.append(ts_small)
        rows.append(dict(d=int(d), C=n_classes, jacobian_ms=1e3 * t_jac, dense_eig_ms=1e3 * t_dense,
                         small_eig_ms=1e3 * t_small, speedup=t_dense / t_small,
                         rel_diff=abs(evd.item() - evs.item()) / evd.item()))
    return pd.DataFrame(rows), t_dense_all, t_small_all


def timing_gaps(dims: Sequence[int], dense_seconds, small_seconds) -> list:
    """Per input size, :func:`robattr.report.verdicts.gap` of the dense eigen-solve's ms against the
    ``C × C`` one's, paired by repeat (the arrays of :func:`eigen_solve_timing`)."""
    from robattr.report import verdicts

    if not len(dims) == len(dense_seconds) == len(small_seconds):
        raise ValueError("dims, dense_seconds and small_seconds must have one entry per size")
    return [verdicts.gap(1e3 * td, 1e3 * ts, what=f"dense − C x C eigen-solve ms at d = {d}")
            for d, td, ts in zip(dims, dense_seconds, small_seconds)]


# --------------------------------------------------------------------------- B2
def second_order_terms(model: nn.Module, x: torch.Tensor, y: torch.Tensor,
                       deltas: Sequence[float], *, steps: int, generator=None):
    """B2: per ℓ2 radius ε of ``deltas``, the gradient term ``ε ‖∇ₓL‖`` and the curvature
    term ``ε²/2 λ_max(W A Wᵀ)`` of the loss change's second-order bound, and the loss change
    an ℓ2 PGD attack of ``steps`` steps finds (:func:`robattr.attacks.pgd`).

    Returns ``(table, cells)``: one row per radius (the medians over the points of both
    terms, of their ratio and of PGD's change, and the share of points where PGD exceeds the
    sum of the terms), and per radius the verdict of :func:`robattr.report.verdicts.gap` on the log
    of the gradient term against the log of the curvature term, paired over the points."""
    from robattr.report import verdicts
    from robattr.attacks import pgd
    from robattr.bounds import gauss_newton_top_eigenvalue

    xr = x.detach().requires_grad_(True)
    loss = F.cross_entropy(model(xr), y, reduction="none")
    (gl,) = torch.autograd.grad(loss.sum(), xr)
    gnorm = gl.flatten(1).norm(dim=1)
    lmax = gauss_newton_top_eigenvalue(model, x)
    rows, cells = [], []
    for dl in deltas:
        x_adv = pgd(model, x, y, eps=float(dl), norm="l2", steps=steps, generator=generator)
        with torch.no_grad():
            actual = F.cross_entropy(model(x_adv), y, reduction="none") - loss.detach()
        first, second = dl * gnorm, dl**2 / 2 * lmax
        rows.append(dict(delta=dl, first=first.median().item(), second=second.median().item(),
                         ratio=(second / first.clamp_min(1e-30)).median().item(),
                         actual=actual.median().item(),
                         above=(actual > first + second).float().mean().item()))
        # on a log scale: the terms span orders of magnitude across points, and
        # log(first / second) > 0 is the statement; its mean is the log of the geometric-mean ratio
        cells.append(verdicts.gap(first.detach().clamp_min(1e-30).log(),
                                  second.detach().clamp_min(1e-30).log(),
                                  what=f"log(gradient term / curvature term) at eps = {dl:g}"))
    return pd.DataFrame(rows), cells


# --------------------------------------------------------------------------- Thm 1, Prop 1
def random_softplus_mlp(i: int, d_in: int, n_classes: int, *, seed: int, device,
                        width: int = 32) -> nn.Module:
    """The ``i``-th random Softplus(2) MLP ``d_in → width → width → n_classes`` on flattened
    inputs, He-scaled (times 2) so its logits are O(1); seeded by ``seed * 1000 + i``."""
    from robattr.models import random_mlp

    return random_mlp([d_in, width, width, n_classes], "softplus", 2.0,
                      rng=torch.Generator().manual_seed(seed * 1000 + i),
                      weight_gain=2 * math.sqrt(2), bias_std=0.5, flatten=True,
                      dtype=torch.float32).to(device).eval()


def saliency_cases(models: Mapping[str, nn.Module], x: torch.Tensor, *, eps: float, steps: int,
                   generator=None, progress: bool = True) -> pd.DataFrame:
    """Thm 1's cases: per model and point of ``x``, ``L`` (the largest gradient norm in the ℓ2
    ball of radius ``eps``, the better of a search from ``x`` and one from a random start,
    :func:`robattr.bounds.max_grad_norm`), ``lam`` (the saliency map's Lipschitz ratio λ)
    and ``dist`` (``‖x − x*‖`` at the ratio's maximiser,
    :func:`robattr.bounds.saliency_lipschitz`). Columns ``model``, ``L``, ``lam``, ``dist``."""
    from robattr.bounds import max_grad_norm, saliency_lipschitz

    rows = []
    for name, net in _bar(models.items(), "Thm 1", progress):
        big, _ = max_grad_norm(net, x, eps=eps, steps=steps, random_start=False, generator=generator)
        big2, _ = max_grad_norm(net, x, eps=eps, steps=steps, random_start=True, generator=generator)
        big = torch.maximum(big, big2)
        lam, _, dist = saliency_lipschitz(net, x, eps=eps, steps=steps, generator=generator)
        rows += [dict(model=name, L=big[i].item(), lam=lam[i].item(), dist=dist[i].item())
                 for i in range(len(x))]
    return pd.DataFrame(rows, columns=["model", "L", "lam", "dist"])


def stein_distances(models: Mapping[str, nn.Module], x: torch.Tensor, *, sigma: float,
                    ns: Sequence[int], generator=None) -> dict:
    """Prop 1: per model of ``models`` and with/without a control variate, the relative
    distance ``‖pathwise − Stein‖ / ‖pathwise‖`` of SmoothGrad's two estimators
    (:func:`robattr.bounds.stein_gradient`, softmax probability, noise ``sigma``) for each
    sample count of ``ns``. Returns ``{(name, control_variate): array (len(ns), N)}``."""
    from robattr.bounds import stein_gradient

    out = {}
    for name, net in models.items():
        for cv in (False, True):
            errs = []
            for n in ns:
                path, stein = stein_gradient(net, x, sigma=sigma, n_samples=int(n), output="prob",
                                             control_variate=cv, generator=generator,
                                             batch_size=4096)
                errs.append(((path - stein).flatten(1).norm(dim=1)
                             / path.flatten(1).norm(dim=1)).cpu().numpy())
            out[(name, cv)] = np.array(errs)
    return out


def loglog_slope(ns, values):
    """The least-squares slope of ``log values`` against ``log ns``: a number for a 1-D
    ``values``, one per column for a 2-D one (rows: the entries of ``ns``)."""
    ns = np.asarray(ns, dtype=float)
    if len(ns) < 2 or len(ns) != len(values):
        raise ValueError(f"need at least 2 sample counts and one row of values each, got "
                         f"{len(ns)} and {len(values)}")
    return np.polyfit(np.log(ns), np.log(values), 1)[0]


# --------------------------------------------------------------------------- Thm 2
def extreme_curvature_ratio(ks, sigma: float) -> np.ndarray:
    """Thm 2's extreme 1-D functions ``f_k(u) = tanh(k (u² − σ²))`` (F = 1): per ``k`` of
    ``ks``, ``σ² |H̃| / F`` of the σ-smoothed function at 0, by quadrature. It tends to
    :data:`robattr.bounds.E_ABS_Z2_MINUS_1` as ``k`` grows."""
    from scipy import integrate, stats

    if not float(sigma) > 0:
        raise ValueError(f"sigma must be > 0, got {sigma!r}")
    ext = []
    for k in np.asarray(ks, dtype=float):
        val, _ = integrate.quad(lambda u: (u * u - sigma**2) * np.tanh(k * (u * u - sigma**2))
                                * stats.norm.pdf(u, scale=sigma), -9 * sigma, 9 * sigma,
                                points=[-sigma, sigma], limit=500)
        ext.append(val / sigma**4)
    return np.array(ext) * sigma**2


def random_2d_quadrature(n_quad: int, seed: int, *, nodes: int = 80,
                         progress: bool = True) -> np.ndarray:
    """Thm 2 checked exactly: ``n_quad`` random 2-D Softplus networks (2-8-3, weights times a
    random scale in [0.3, 3]), each at a random point and noise σ (log-uniform in [0.1, 1.5]);
    f is the first softmax probability (F = 1). Per case, one row: σ, ``‖H̃ₓ‖₂`` of the
    smoothed Hessian by quadrature (:func:`robattr.bounds.smoothed_hessian_quadrature`) and
    the largest gap between its two forms (pathwise and Stein: small when it converged)."""
    from robattr.bounds import smoothed_hessian_quadrature

    rng = np.random.default_rng(seed)
    quad = []
    for i in _bar(range(n_quad), "quadrature", progress):
        g = torch.Generator().manual_seed(10_000 + i)
        scale = float(rng.uniform(0.3, 3.0))
        net2 = nn.Sequential(nn.Linear(2, 8), nn.Softplus(1.0), nn.Linear(8, 3)).double()
        with torch.no_grad():
            for p in net2.parameters():
                p.copy_(torch.randn(p.shape, generator=g, dtype=torch.float64) * scale)
        sg = float(np.exp(rng.uniform(np.log(0.1), np.log(1.5))))
        x2 = torch.tensor(rng.standard_normal(2))

        def f2(z, net2=net2):
            return torch.softmax(net2(z), 1)[:, 0]

        h_a = smoothed_hessian_quadrature(f2, x2, sigma=sg, nodes=nodes).detach()
        h_b = smoothed_hessian_quadrature(f2, x2, sigma=sg, nodes=nodes, form="stein").detach()
        quad.append((sg, torch.linalg.eigvalsh(h_a).abs().max().item(),
                     (h_a - h_b).abs().max().item()))
    return np.array(quad).reshape(-1, 3)


def smoothed_hessian_norms(model: nn.Module, x: torch.Tensor, sigmas: Sequence[float], *,
                           n_samples: int, generator=None, progress: bool = True) -> dict:
    """Per σ of ``sigmas``: ``‖H̃ₓ‖₂`` of the softmax probability's smoothed Hessian at each
    point of ``x`` (:func:`robattr.bounds.smoothed_hessian_spectral_norm`, ``n_samples``
    draws, 30 power iterations), as a numpy array."""
    from robattr.bounds import smoothed_hessian_spectral_norm

    return {s: smoothed_hessian_spectral_norm(model, x, sigma=float(s), n_samples=n_samples,
                                              output="prob", iters=30,
                                              generator=generator).cpu().numpy()
            for s in _bar(sigmas, "smoothed Hessian", progress)}


# --------------------------------------------------------------------------- Thm 3
def gradient_change_study(models: Mapping[str, nn.Module], x: torch.Tensor,
                          deltas: Sequence[float], *, steps: int, tol: float, max_rounds: int,
                          generator=None, progress: bool = True) -> pd.DataFrame:
    """Thm 3 per model, point and radius ε of ``deltas``: the largest gradient change
    ``max ‖∇f(x) − ∇f(x')‖`` on B(x, ε) that a search finds
    (:func:`robattr.bounds.max_gradient_change_converged`, started along the top Hessian
    direction, ``tol`` and ``max_rounds``) against the bound ``ε ‖Hₓ‖₂``
    (:func:`robattr.bounds.thm3_bound`). A model is ``trained`` when its name starts with
    ``zoo``. Columns ``model``, ``trained``, ``point``, ``eps``, ``change``, ``bound``,
    ``converged``, ``rounds``, ``ratio`` (change over bound)."""
    from robattr.bounds import (input_hessian_spectral_norm, max_gradient_change_converged,
                                thm3_bound)

    rows = []
    for name, net in _bar(models.items(), "Thm 3", progress):
        hn, v_top = input_hessian_spectral_norm(net, x, iters=200, generator=generator,
                                                return_vector=True)
        for dl in deltas:
            ch, _, conv, rounds = max_gradient_change_converged(
                net, x, eps=float(dl), steps=steps, directions=v_top, tol=tol,
                max_rounds=max_rounds, generator=generator)
            rows += [dict(model=name, trained=name.startswith("zoo"), point=i, eps=float(dl),
                          change=ch[i].item(), bound=thm3_bound(dl, hn[i].item()),
                          converged=bool(conv[i]), rounds=rounds) for i in range(len(x))]
    return pd.DataFrame(rows).assign(ratio=lambda t: t.change / t.bound)


def gradient_change_summary(study: pd.DataFrame) -> pd.DataFrame:
    """Per (trained, eps) of :func:`gradient_change_study`: the cases, how many converged,
    the median and largest ratio and the share of ratios above 1."""
    return (study.assign(above_1=study.ratio > 1)
            .groupby(["trained", "eps"])
            .agg(cases=("ratio", "size"), converged=("converged", "sum"),
                 median_ratio=("ratio", "median"), max_ratio=("ratio", "max"),
                 share_above_1=("above_1", "mean")))


def first_order_cases(study: pd.DataFrame, eps1: float, eps2: float, *, tol: float):
    """Thm 3's first-order rule on the random MLPs (``trained`` False) of
    :func:`gradient_change_study`: ``(wide, both, passed)``. ``wide``: ratio and converged
    per (model, point) and radius; ``both``: the cases whose search converged at both radii
    ``eps1 < eps2``; ``passed``: for those, :func:`robattr.bounds.first_order_excess_shrinks`."""
    from robattr.bounds import first_order_excess_shrinks

    wide = study[~study.trained].pivot_table(index=["model", "point"], columns="eps",
                                             values=["ratio", "converged"], aggfunc="first")
    both = (wide["converged"][eps1] & wide["converged"][eps2]).astype(bool)
    passed = first_order_excess_shrinks(wide["ratio"][eps1][both], wide["ratio"][eps2][both],
                                        eps1, eps2, tol=tol)
    return wide, both, passed

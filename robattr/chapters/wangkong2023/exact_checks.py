"""The exact checks of the ``theory_bounds`` notebook: 001's statements on synthetic cases where
they must hold with no violation (or, for the errata, where they visibly fail).

Each check draws its cases from a ``numpy`` generator passed in, in a fixed order, so that a
notebook that calls them in turn reproduces the same draws: Theorem 1 on random linear maps
(:func:`thm1_linear_check`), Lemma 1 and Corollary 1 (:func:`lp_norm`, :func:`lemma1_cor1_check`),
Theorem 2's vertex maximum and its equality claim (:func:`thm2_vertex_study`), Corollary 2 on
random shifts (:func:`cor2_check`) and the hand-built map against Eq. 39
(:func:`curved_saliency`, :func:`eq39_counterexample`).
"""
from __future__ import annotations

import math

import numpy as np
import pandas as pd
import torch

from robattr.bounds import deviation as D

__all__ = ["thm1_linear_check", "lp_norm", "lemma1_cor1_check", "thm2_vertex_study", "cor2_check",
           "curved_saliency", "eq39_counterexample"]


def thm1_linear_check(rng: np.random.Generator, n: int, n_delta: int = 50) -> dict:
    """Theorem 1 on ``n`` random linear maps ``g(z) = A z`` (size 2-39, random scale): the
    violations of ``‖Aδ‖ ≤ ξ_max ε`` over ``n_delta`` random δ on each ε-sphere
    (``violations``), and the equality at ``ε v_max``: the largest ``|‖A ε v_max‖ / (ξ_max ε) − 1|``
    (``eq_err``) and the maps where it exceeds 1e-6 (``eq_violations``)."""
    viol, eq_err, eq_viol = 0, 0.0, 0
    for _ in range(n):
        dd = int(rng.integers(2, 40))
        A = torch.from_numpy(rng.standard_normal((dd, dd)) * rng.uniform(0.1, 10))
        xl = torch.from_numpy(rng.standard_normal((1, dd)))
        r = D.jacobian_spectral_norm(lambda z, A=A: z @ A.T, xl, tol=1e-12, max_iter=200,
                                     return_vector=True)
        e = float(rng.uniform(0.01, 1))
        delta = torch.from_numpy(rng.standard_normal((n_delta, dd)))
        delta = e * delta / delta.norm(dim=1, keepdim=True)
        dev = (delta @ A.T).norm(dim=1)
        viol += int((dev > r.value * e * (1 + 1e-9)).sum())
        eq_gap = abs(float((e * r.vector @ A.T).norm()) / float(r.value * e) - 1)
        eq_err, eq_viol = max(eq_err, eq_gap), eq_viol + int(eq_gap > 1e-6)
    return {"violations": viol, "eq_err": eq_err, "eq_violations": eq_viol}


def lp_norm(v, r: float):
    """``‖v‖_r`` along the last axis (``r = math.inf``: the largest absolute entry; ``0 < r < 1``:
    the quasi-norm ``(Σ|v_i|^r)^(1/r)``)."""
    if not r > 0:
        raise ValueError(f"r must be > 0, got {r!r}")
    return np.max(np.abs(v), -1) if r == math.inf else (np.abs(v) ** r).sum(-1) ** (1 / r)


def lemma1_cor1_check(rng: np.random.Generator, n: int, n_vec: int = 20) -> dict:
    """Lemma 1 and Corollary 1 on ``n`` random cases of ``n_vec`` vectors each: ``lemma1``, the
    vectors with ``‖v‖_q > d^(1/q − 1/p) ‖v‖_p``; ``worst_gap``, the largest gap to equality at the
    all-ones vector; ``cor1``, the (random linear map, δ on the ℓp sphere of radius 0.1, p > 2)
    pairs whose deviation exceeds ``d^(1/2 − 1/p) ξ_max ε``."""
    viol_l1 = viol_c1 = 0
    worst_gap = 0.0
    for _ in range(n):
        dd = int(rng.integers(1, 200))
        q = float(rng.uniform(0.3, 4))
        p = q + float(rng.uniform(0.1, 6)) if rng.random() < 0.8 else math.inf
        v = rng.standard_normal((n_vec, dd)) * rng.uniform(0.01, 10, (n_vec, 1))
        c = D.lp_norm_constant(dd, q, p)
        viol_l1 += int((lp_norm(v, q) > c * lp_norm(v, p) * (1 + 1e-12)).sum())
        worst_gap = max(worst_gap, abs(lp_norm(np.ones(dd), q) / (c * lp_norm(np.ones(dd), p)) - 1))
        # Corollary 1 on a random linear map, delta on the l_p sphere (p > 2)
        pc = float(rng.choice([3.0, 4.0, 8.0, math.inf]))
        A = rng.standard_normal((dd, dd))
        xi = np.linalg.svd(A, compute_uv=False)[0]
        dl = rng.standard_normal((n_vec, dd))
        dl = 0.1 * dl / lp_norm(dl, pc)[:, None]
        bound = D.lp_deviation_bound(xi, 0.1, dd, pc)
        viol_c1 += int((np.linalg.norm(dl @ A.T, axis=1) > bound * (1 + 1e-9)).sum())
    return {"lemma1": viol_l1, "cor1": viol_c1, "worst_gap": worst_gap}


def thm2_vertex_study(rng: np.random.Generator, n: int, max_dim: int, n_cube: int = 200) -> pd.DataFrame:
    """Theorem 2 on ``n`` random ``P = JᵀJ`` (size 2..``max_dim``; every third case rank one,
    the others of random rank): per case the size ``d``, the ``rank``, the exact vertex maximum
    over ``Σ|P_ij|`` (``ratio``), whether the sign condition holds (``sign_ok``), whether the
    bound is attained, whether any of ``n_cube`` random points of the cube beats the best vertex
    (``cube_above_vertex``) and whether the vertex maximum exceeds the bound (``above_bound``)."""
    rec = []
    for i in range(n):
        dd = int(rng.integers(2, max_dim + 1))
        rank = int(rng.integers(1, dd + 1)) if i % 3 else 1
        Jr = rng.standard_normal((rank, dd))
        P = Jr.T @ Jr
        vmax, _ = D.vertex_maximum(P, 1.0)
        bound = np.abs(P).sum()
        ok, _ = D.sign_consistent(P)
        # random points of the cube never beat the best vertex
        cube = rng.uniform(-1, 1, (n_cube, dd))
        inside = float(np.einsum("ni,ij,nj->n", cube, P, cube).max())
        rec.append(dict(d=dd, rank=rank, ratio=vmax / bound, sign_ok=ok,
                        attained=vmax >= bound * (1 - 1e-10), cube_above_vertex=inside > vmax * (1 + 1e-12),
                        above_bound=vmax > bound * (1 + 1e-12)))
    return pd.DataFrame(rec)


def cor2_check(rng: np.random.Generator, n: int, n_shift: int = 50) -> dict:
    """Corollary 2 on ``n`` random attribution vectors ``g`` (size 2-99) with ``n_shift`` random
    shifts of norm below a random ``T < ‖g‖`` each: ``violations`` (angles above
    ``arcsin(T/‖g‖)``), ``att_err`` (how far the extremal perpendicular shift is from the bound, in
    degrees), and per shift ``q`` (``T/‖g‖``) and ``angle`` (degrees), concatenated."""
    viol, att_err = 0, 0.0
    q_all, ang_all = [], []
    for _ in range(n):
        dd = int(rng.integers(2, 100))
        g = rng.standard_normal(dd) * rng.uniform(0.01, 10)
        gn = np.linalg.norm(g)
        T = float(rng.uniform(0, 0.999)) * gn
        s = rng.standard_normal((n_shift, dd))
        s *= T * rng.random((n_shift, 1)) / np.linalg.norm(s, axis=1, keepdims=True)
        h = g + s
        ang = np.degrees(np.arccos(np.clip(h @ g / (np.linalg.norm(h, axis=1) * gn), -1, 1)))
        viol += int((ang > D.angle_bound(T, gn) + 1e-9).sum())
        q_all.append(np.full(n_shift, T / gn))
        ang_all.append(ang)
        u = rng.standard_normal(dd)
        u -= u @ g / gn**2 * g
        u /= np.linalg.norm(u)
        s_star = T * (-(T / gn) * g / gn + math.sqrt(1 - (T / gn) ** 2) * u)
        h = g + s_star
        att_err = max(att_err, abs(math.degrees(math.acos(min(1, h @ g / (np.linalg.norm(h) * gn))))
                                   - D.angle_bound(T, gn)))
    return {"violations": viol, "att_err": att_err, "q": np.concatenate(q_all),
            "angle": np.concatenate(ang_all)}


def curved_saliency(z: torch.Tensor) -> torch.Tensor:
    """The saliency map of ``f(z) = z1² + z2²/2 + 2 z2³/3``: ``(2 z1, z2 + 2 z2²)``, for a batch
    (N, 2)."""
    return torch.stack([2 * z[:, 0], z[:, 1] + 2 * z[:, 1] ** 2], 1)


def eq39_counterexample() -> dict:
    """Eq. 39 against :func:`curved_saliency` at ``x = 0`` with ``ε = 1``: ``xi`` (ξ_max = 2),
    ``v_max`` (``|e1|``), Eq. 39's ``c`` (1, the map is linear along ``e1``), ``T_prime``
    (``c ξ_max ε = 2``) and ``dev``, the deviation at ``δ = e2`` (3, above ``T′_e``)."""
    x = torch.zeros(1, 2, dtype=torch.float64)
    r = D.jacobian_spectral_norm(curved_saliency, x, "dense", return_vector=True)
    c = float(D.taylor_constant(curved_saliency, x, r.vector, r.value, 1.0)[0])
    dev = float((curved_saliency(torch.tensor([[0.0, 1.0]], dtype=torch.float64))
                 - curved_saliency(x)).norm())
    return {"xi": float(r.value[0]), "v_max": r.vector[0].abs().tolist(), "c": c,
            "T_prime": c * float(r.value[0]), "dev": dev}

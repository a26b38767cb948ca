"""The trained-model checks of the ``theory_bounds`` notebook: 001's first-order statements on a
Softplus network, one attribution map ``fn`` at a time (:func:`robattr.bounds.attribution_function`).

``ξ_max`` three ways (:func:`spectral_norms`); Theorem 1 against random, top-singular and attacked
perturbations with the local linearity at the budget (:func:`thm1_on_model`,
:func:`thm1_summary`); B.1's residual per architecture (:func:`relative_residuals`,
:func:`residual_text`); Theorem 2 (:func:`thm2_on_model`); Proposition 1 (:func:`prop1_linear`,
:func:`prop1_table`); Theorem 3 and Eq. 39 (:func:`thm3_on_model`); Section E
(:func:`section_e`); and the pooled first-order cases of the summary (:func:`pooled`).
"""
from __future__ import annotations

import math
import time

import numpy as np
import pandas as pd
import torch
from torch import nn

from robattr.bounds import deviation as D

__all__ = ["ATTRIBUTION_KEYS", "attribution_maps", "spectral_norms", "thm1_on_model", "thm1_summary",
           "relative_residuals", "residual_text", "thm2_on_model", "prop1_linear", "prop1_table",
           "thm3_on_model", "section_e", "pooled"]

#: the three attributions of the chapter's checks: their names in the tables and robattr's keys
ATTRIBUTION_KEYS = {"SM": "sm", "Input*gradient": "ixg", "IG": "ig"}


def attribution_maps(model: nn.Module, y: torch.Tensor, ig_steps: int) -> dict:
    """The attribution maps of ``model`` for the classes ``y`` (name → differentiable function of
    the input): SM, Input*gradient and IG with ``ig_steps`` steps (:data:`ATTRIBUTION_KEYS`)."""
    return {name: D.attribution_function(model, key, y, steps=ig_steps)
            for name, key in ATTRIBUTION_KEYS.items()}


def spectral_norms(fns: dict, x: torch.Tensor, *, tol: float = 1e-8, max_iter: int = 150):
    """``ξ_max`` of each map of ``fns`` at ``x`` by Lanczos, power iteration (not for IG) and the
    dense SVD. Returns ``(table, spec)``: per (attribution, matrix-free method) the iterations,
    the seconds (and the dense path's) and the largest relative difference to the dense value;
    and the Lanczos result (with its vector) per attribution."""
    rows, spec = [], {}
    for name, fn in fns.items():
        out = {}
        for method in ("lanczos", "power", "dense") if name != "IG" else ("lanczos", "dense"):
            t0 = time.perf_counter()
            r = D.jacobian_spectral_norm(fn, x, method, tol=tol, max_iter=max_iter, return_vector=True)
            out[method] = (r, time.perf_counter() - t0)
        spec[name] = out["lanczos"][0]
        ref = out["dense"][0].value
        for method in [k for k in out if k != "dense"]:
            r, t = out[method]
            rows.append({"attribution": name, "method": method, "iterations": r.iterations,
                         "seconds": t, "dense seconds": out["dense"][1],
                         "max rel. diff. to dense": float(((r.value - ref).abs() / ref).max())})
    return pd.DataFrame(rows), spec


def _on_sphere(shape, seed: int, eps: float, device, dtype) -> torch.Tensor:
    """Random δ of ℓ2 norm ``eps`` per image (the leading axis of ``shape``), drawn from a
    ``torch.Generator`` seeded with ``seed``."""
    dl = torch.randn(tuple(shape), generator=torch.Generator().manual_seed(seed)).to(device, dtype)
    return eps * dl / dl.flatten(1).norm(dim=1)[:, None, None, None]


def thm1_on_model(fn, x: torch.Tensor, r, eps: float, steps: int, seed: int,
                  n_random: int = 8) -> dict:
    """Theorem 1 on one map ``fn`` at the images ``x`` (``r``: its ``ξ_max`` with vector): ``Te``
    (``ξ_max ε``); each deviation over ``Te`` for ``n_random`` random δ on the ε-sphere (``rand``,
    (n_random, N)), for ``δ = ε v_max`` (``vdir``) and for the direct attack started there (``att``,
    no clipping); the remainder at ``±ε v_max`` (``lin``, :func:`~robattr.bounds.budget_linearity`)
    and at the attack's point (``lin_att``)."""
    Te = (r.value * eps).cpu()
    g0 = fn(x.clone().requires_grad_(True)).detach()
    delta = torch.randn((n_random,) + tuple(x.shape), generator=torch.Generator().manual_seed(seed))
    delta = delta.to(x.device, x.dtype)
    delta = eps * delta / delta.flatten(2).norm(dim=2)[..., None, None, None]
    rand = torch.stack([(fn((x + dl).requires_grad_(True)).detach() - g0).flatten(1).norm(dim=1)
                        for dl in delta]).cpu()
    vdir = (fn((x + eps * r.vector.to(x.dtype)).requires_grad_(True)).detach() - g0
            ).flatten(1).norm(dim=1).cpu()
    xa, att = D.deviation_attack(fn, x, eps, norm="l2", steps=steps,
                                 start=eps * r.vector.to(x.dtype), clip=False)
    ops = D.jacobian_ops(fn, x)
    return dict(Te=Te, rand=rand / Te, vdir=vdir / Te, att=att.cpu() / Te,
                lin=D.budget_linearity(fn, x, eps * r.vector.to(x.dtype), ops=ops).cpu(),
                lin_att=D.remainder_ratio(fn, x, (xa - x).detach(), ops=ops).cpu())


def thm1_summary(thm1: dict) -> pd.DataFrame:
    """One row per attribution of :func:`thm1_on_model`'s results: the random directions' largest
    ratio and share above ``T_e``, the medians along ``ε v_max`` and at the attack, the attack's
    share above ``T_e`` and largest ratio, the median remainders and the share of locally linear
    images (remainder at most :data:`~robattr.bounds.LINEARITY_TOL`)."""
    return pd.DataFrame({name: {
        "random: max dev/T_e": float(v["rand"].max()),
        "random: % > T_e": 100 * float((v["rand"] > 1).double().mean()),
        "eps v_max: median dev/T_e": float(v["vdir"].median()),
        "attack: median dev/T_e": float(v["att"].median()),
        "attack: % > T_e": 100 * float((v["att"] > 1).double().mean()),
        "attack: max dev/T_e": float(v["att"].max()),
        "remainder at ±eps v_max: median": float(v["lin"].median()),
        "remainder at the attack: median": float(v["lin_att"].median()),
        f"locally linear (remainder <= {D.LINEARITY_TOL:g}) %":
            100 * float((v["lin"] <= D.LINEARITY_TOL).double().mean())}
        for name, v in thm1.items()}).T


def relative_residuals(models: dict, x: torch.Tensor, y: torch.Tensor, norms, seed: int) -> pd.DataFrame:
    """B.1's median relative residual ``η / ‖g(x+δ) − g(x)‖`` of the saliency map of each model
    of ``models`` (name → model) for a random δ of each ℓ2 size in ``norms`` (the same direction
    for every size): a table, one row per model, one column per size."""
    rows = []
    for name, m in models.items():
        f = D.attribution_function(m, "sm", y)
        ops = D.jacobian_ops(f, x)
        for e in norms:
            dl = _on_sphere(x.shape, seed, e, x.device, x.dtype)
            _, rel = D.linearity_residual(f, x, dl, ops=ops, relative=True)
            rows.append({"model": name, "||delta||": e, "median eta / ||dg||": float(rel.median())})
    return pd.DataFrame(rows).pivot(index="model", columns="||delta||", values="median eta / ||dg||")


def residual_text(resid: pd.DataFrame) -> str:
    """The line under :func:`relative_residuals`' table, in Markdown."""
    return "Median relative residual in this run: " + "; ".join(
        f"{name}: " + ", ".join(f"{v:.2g} at $\\lVert\\delta\\rVert = {e:g}$" for e, v in row.items())
        for name, row in resid.iterrows()) + "."


def thm2_on_model(fn, x: torch.Tensor, r, eps: float, steps: int):
    """Theorem 2 on one map ``fn`` at ``x`` (``r``: its ``ξ_max`` with vector). Returns
    ``(row, ratio, lin)``: the table row (mean bound, mean Corollary 1 at p = ∞, how often
    Theorem 2 is the tighter, the attacked deviation, the share and largest ratio above the bound,
    the share of locally linear images), the direct ℓ∞ attack's deviation over the bound per image
    (started at ``ε sign(v_max)``, no clipping) and the remainder at ``±ε sign(v_max)``."""
    J = D.dense_jacobian(fn, x)
    Te_inf = D.linf_deviation_bound(J, eps).cpu()
    cor1 = D.lp_deviation_bound(r.value.cpu(), eps, x[0].numel(), math.inf)
    vertex = eps * r.vector.sign().to(x.dtype)
    _, att = D.deviation_attack(fn, x, eps, norm="linf", steps=steps, start=vertex, clip=False)
    ratio = att.cpu() / Te_inf
    lin = D.budget_linearity(fn, x, vertex).cpu()
    row = {"mean T_e (Thm 2)": float(Te_inf.mean()), "mean Cor 1 (p = inf)": float(cor1.mean()),
           "Thm 2 tighter than Cor 1 (%)": 100 * float((Te_inf < cor1).double().mean()),
           "mean attacked dev.": float(att.mean()),
           "attack > T_e (%)": 100 * float((ratio > 1).double().mean()),
           "max dev / T_e": float(ratio.max()),
           f"locally linear (remainder <= {D.LINEARITY_TOL:g}, ±eps sign(v_max)) %":
               100 * float((lin <= D.LINEARITY_TOL).double().mean())}
    return row, ratio, lin


def prop1_linear(lin_model: nn.Module, x: torch.Tensor, seed: int, ig_steps: int, size: float = 0.5):
    """Proposition 1's condition on a linear model for a Gaussian δ (``size`` times a draw after
    ``torch.manual_seed(seed)``): (condition says kept, label kept), one bool per image."""
    torch.manual_seed(seed)
    delta = torch.randn_like(x) * size
    return D.label_constraint_condition(lin_model, x, delta, method="ig", steps=ig_steps)


def prop1_table(model: nn.Module, x: torch.Tensor, y: torch.Tensor, sizes, seed: int,
                steps: int = 8, n_draws: int = 2) -> pd.DataFrame:
    """Proposition 1's condition on ``model`` against the true prediction for ``n_draws`` random
    δ per image of each ℓ2 size in ``sizes`` (IG with ``steps`` steps): per size, how often the
    label changed, the disagreements both ways and the agreement (%)."""
    rows = []
    for e in sizes:
        dl = torch.randn((n_draws,) + tuple(x.shape), generator=torch.Generator().manual_seed(seed))
        dl = (e * dl / dl.flatten(2).norm(dim=2)[..., None, None, None]).to(x.device, x.dtype)
        cs, ks = zip(*(D.label_constraint_condition(model, x, d, y, method="ig", steps=steps)
                       for d in dl))
        cs, ks = torch.cat(cs), torch.cat(ks)
        rows.append({"l2 size": e, "label changed (%)": 100 * float((~ks).double().mean()),
                     "condition says kept, label changed": int((cs & ~ks).sum()),
                     "condition says changed, label kept": int((~cs & ks).sum()),
                     "agreement (%)": 100 * float((cs == ks).double().mean())})
    return pd.DataFrame(rows).set_index("l2 size")


def thm3_on_model(fn, x: torch.Tensor, r, eps: float, seed: int, thm1: dict, n_delta: int = 4):
    """Theorem 3 and Eq. 39 on one map ``fn`` at ``x`` (``r``: its ``ξ_max`` with vector;
    ``thm1``: its :func:`thm1_on_model` result). Returns ``(row, tp_ratio)``: the violations of
    Theorem 3 with the exact ``c`` of ``n_delta`` random δ, Eq. 38 against Eq. 39, the median and
    largest ``c`` and how often / how far the direct attack passes ``T′_e = c ξ_max ε``; and the
    attacked deviation over ``T′_e`` per image."""
    ops = D.jacobian_ops(fn, x)
    c39 = D.taylor_constant(fn, x, r.vector, r.value, eps, g0=ops.out)
    c38 = D.taylor_constant(fn, x, r.vector, r.value, eps, form="eq38", ops=ops)
    viol3 = 0
    for k in range(n_delta):
        dl = _on_sphere(x.shape, seed + k, eps, x.device, x.dtype)
        cd = D.remainder_constant(fn, x, dl, ops=ops)
        devn = (fn((x + dl).requires_grad_(True)).detach() - ops.out).flatten(1).norm(dim=1).double()
        viol3 += int((devn > cd * r.value * eps * (1 + 1e-9)).sum())
    att = thm1["att"] * thm1["Te"]
    Tp = (c39 * r.value * eps).cpu()
    row = {"Thm 3 violations (exact c)": viol3, "max |Eq.38 - Eq.39|": float((c38 - c39).abs().max()),
           "median c": float(c39.median()), "max c": float(c39.max()),
           "attack > T'_e (%)": 100 * float((att > Tp).double().mean()),
           "max attack / T'_e": float((att / Tp).max())}
    return row, (att / Tp).flatten()


def section_e(fns: dict, spec: dict, x: torch.Tensor, omegas=(0.01, 0.05, 0.1), tol: float = 1e-6):
    """Section E per attribution and tolerance ω: the median budget of the corrected and the
    printed Eq. 52, and each plugged back into Corollary 2. Returns ``(table, bad, printed_bad,
    n)``: the table, the (image, attribution, ω) cases where the corrected / printed budget misses
    ω by more than ``tol``, and the number of cases."""
    rows, bad, printed_bad, n = [], 0, 0, 0
    for name in fns:
        gn = fns[name](x.clone().requires_grad_(True)).detach().flatten(1).norm(dim=1).double().cpu()
        gn = gn.numpy()
        xi = spec[name].value.cpu().numpy()
        for omega in omegas:
            e_c = D.max_eps_for_tolerance(omega, gn, xi_max=xi, distance="cosine")
            e_p = D.max_eps_for_tolerance(omega, gn, xi_max=xi, distance="cosine", printed=True)
            n += len(gn)
            bad += int((np.abs(D.cosine_distance_bound(xi * e_c, gn) - omega) > tol).sum())
            printed_bad += int((np.abs(D.cosine_distance_bound(xi * e_p, gn) - omega) > tol).sum())
            rows.append({"attribution": name, "omega": omega,
                         "median eps (corrected)": float(np.median(e_c)),
                         "median eps (Eq. 52 as printed)": float(np.median(e_p)),
                         "Cor 2 at corrected eps: max |D_c - omega|":
                             float(np.abs(D.cosine_distance_bound(xi * e_c, gn) - omega).max()),
                         "Cor 2 at printed eps: median D_c":
                             float(np.median(D.cosine_distance_bound(xi * e_p, gn)))})
    return pd.DataFrame(rows), bad, printed_bad, n


def pooled(per_attribution: dict, key: str | None = None) -> torch.Tensor:
    """The per-image values of every attribution (``per_attribution``: name → tensor, or name →
    dict holding ``key``), flattened and concatenated in the attributions' order: the (image,
    attribution) cases of the summary's first-order claims."""
    return torch.cat([(v if key is None else v[key]).flatten() for v in per_attribution.values()])

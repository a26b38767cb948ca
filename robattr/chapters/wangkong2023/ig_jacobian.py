"""The computations of the ``ig_gradient`` notebook: 001's Sec. C.1 (the Jacobian of IG), B.1
(the linearity residual) and the ℓ2 bound at ImageNet size.

C.1: :func:`random_softplus_checks` and :func:`quadratic_weight_check` check the decomposition
``J_IG = diag(a) + B`` of :mod:`robattr.bounds.ig_structure` on synthetic networks;
:func:`steps_study` and :func:`beta_study` measure the off-diagonal share of the trained model's
``J_IG`` against the step count and the softplus β; :func:`tiny_softplus_cnn` is the random CNN of
the larger-input heatmap. B.1: :func:`linearity_study` sweeps ``‖δ‖``, :func:`linearization_ratios`
walks along each direction, :func:`maxpool_jumps` counts the pooling ties and the jumps they cause,
:func:`b1_cells` judges the residual on the paper's scale. ImageNet size: :func:`imagenet_resnet`,
:func:`resized_photo`, :func:`lanczos_checks` and :func:`dense_refusal`.
"""
from __future__ import annotations

import copy

import numpy as np
import pandas as pd
import torch
from torch import nn

from robattr.bounds import deviation as D

__all__ = ["random_softplus_checks", "quadratic_weight_check", "steps_study",
           "beta_study", "beta_cells", "tiny_softplus_cnn", "unit_directions", "linearity_study",
           "linearization_ratios", "maxpool_jumps", "residual_at", "b1_cells", "imagenet_resnet",
           "resized_photo", "lanczos_checks", "along_text", "dense_refusal"]


def random_softplus_checks(rng: np.random.Generator, n_nets: int, seed: int) -> dict:
    """``diag(a) + B`` against autograd's Jacobian of IG on ``n_nets`` random float64 Softplus
    MLPs (random input size 2-8, depth 1-3, widths 3-11, β, quadrature rule and step count; 3
    inputs each with about 30 % of the coordinates at the baseline). Net ``i`` is initialised
    after ``torch.manual_seed(seed + i)``; the other draws come from ``rng``, in a fixed order.
    Returns ``worst_rel`` (largest relative error), ``zero_row_violations`` (rows with
    ``x_i = 0`` that have an off-diagonal entry) and ``zero_rows`` (such rows checked)."""
    from robattr import attributions

    rules = [r for r in attributions.IG_METHODS if r != "gausslegendre"]
    worst, viol, rows = 0.0, 0, 0
    for i in range(n_nets):
        dd = int(rng.integers(2, 9))
        depth = int(rng.integers(1, 4))
        torch.manual_seed(seed + i)
        layers, w_in = [], dd
        b = float(rng.uniform(0.5, 30))
        for _ in range(depth):
            h = int(rng.integers(3, 12))
            layers += [nn.Linear(w_in, h), nn.Softplus(b)]
            w_in = h
        net = nn.Sequential(*layers, nn.Linear(w_in, 3)).double().eval()
        xr = torch.from_numpy(rng.standard_normal((3, dd)))
        xr[rng.random((3, dd)) < 0.3] = 0.0                       # some coordinates at the baseline
        rule, m = str(rng.choice(rules)), int(rng.integers(2, 20))
        check = D.ig_jacobian_check(net, xr, 0, steps=m, method=rule)
        worst = max(worst, check.rel_err)
        viol, rows = viol + check.zero_row_violations, rows + check.zero_rows
    return {"worst_rel": worst, "zero_row_violations": viol, "zero_rows": rows}


def quadratic_weight_check(rng: np.random.Generator, n: int,
                           steps=(1, 2, 5, 50, 500)) -> tuple[int, int]:
    """On ``n`` random quadratic logits (two classes, input size 2-7, symmetric ``A``), whether
    the right-rule ``B`` equals ``x_i A_ij (m+1)/(2m)`` for every step count in ``steps``.
    Returns (violations, cases)."""
    viol, cases = 0, 0
    for _ in range(n):
        dd = int(rng.integers(2, 8))
        A = torch.from_numpy(rng.standard_normal((2, dd, dd)))
        A = A + A.transpose(1, 2)
        qm = D.QuadraticLogit(A, torch.from_numpy(rng.standard_normal((2, dd))))
        xq = torch.from_numpy(rng.standard_normal((2, dd)))
        for m in steps:
            _, Bq = D.ig_jacobian_parts(qm, xq, 0, steps=m, method="right")
            want = (m + 1) / (2 * m) * xq[:, :, None] * A[0][None]
            viol += int(not torch.allclose(Bq, want, rtol=1e-10, atol=1e-12))
            cases += 1
    return viol, cases


def steps_study(model: nn.Module, x: torch.Tensor, y: torch.Tensor, steps_grid, limit_steps: int):
    """The off-diagonal share of ``J_IG`` against the step count, right and midpoint rules.

    Returns ``(table, per_image, limit)``: one row per (rule, m) with the Hessian weight, the
    mean off-diagonal share (all rows and the rows of non-zero pixels) and the share of
    diagonally dominant rows; the per-image shares keyed (rule, m); and the mean share of the
    midpoint rule with ``limit_steps`` steps (the stand-in for m → ∞)."""
    from tqdm.auto import tqdm

    nonzero = x.reshape(len(x), -1) != 0
    rows, per_image = [], {}
    for rule in ("right", "midpoint"):
        for m in tqdm(steps_grid, desc=f"steps ({rule})"):
            J = D.ig_jacobian(model, x, y, steps=m, method=rule)
            per_image[(rule, m)] = D.offdiag_share(J).cpu().numpy()
            rows.append({"rule": rule, "m": m, "Hessian weight": D.ig_hessian_weight(m, rule),
                         "off-diagonal share": float(D.offdiag_share(J).mean()),
                         "off-diagonal share (x_i != 0 rows)": float(D.offdiag_share(J, nonzero).mean()),
                         "dominant rows": float(D.diagonal_dominance(J)["dominant_rows"].mean())})
    limit = float(D.offdiag_share(D.ig_jacobian(model, x, y, steps=limit_steps, method="midpoint")).mean())
    return pd.DataFrame(rows), per_image, limit


def beta_study(model: nn.Module, x: torch.Tensor, y: torch.Tensor, beta_grid, beta_steps):
    """The off-diagonal share of the midpoint-rule ``J_IG`` of ``model``'s weights with the
    activation swapped to Softplus(β) (on a copy), for each β of ``beta_grid`` and step count of
    ``beta_steps``. Returns ``(rows, per_image)``: a tidy frame (beta, m, off-diagonal share)
    and the per-image shares keyed (β, m)."""
    from tqdm.auto import tqdm

    from robattr import models

    rows, per_image = [], {}
    for b in tqdm(beta_grid, desc="beta"):
        mb = models.set_activation(copy.deepcopy(model), "softplus", float(b))
        for m in beta_steps:
            J = D.ig_jacobian(mb, x, y, steps=m, method="midpoint")
            per_image[(b, m)] = D.offdiag_share(J).cpu().numpy()
            rows.append({"beta": b, "m": m, "off-diagonal share": float(D.offdiag_share(J).mean())})
    return pd.DataFrame(rows), per_image


def beta_cells(per_image: dict, b_hi: float, b_ref: float, steps) -> list:
    """One :func:`robattr.report.verdicts.gap` per step count: the per-image off-diagonal share at β
    ``b_hi`` against that at ``b_ref`` (lower is better), from :func:`beta_study`."""
    from robattr.report import verdicts

    return [verdicts.gap(per_image[(b_hi, m)], per_image[(b_ref, m)], higher_is_better=False,
                         what=f"off-diagonal share, beta {b_hi:g} − {b_ref:g}, m = {m}")
            for m in steps]


def tiny_softplus_cnn(side: int, beta: float) -> nn.Sequential:
    """A small random-weight Softplus(``beta``) CNN on ``side``×``side`` grey images (two 3×3
    convolutions with 2×2 average pooling, 10 classes); its weights come from torch's global
    generator (seed it first). ``side`` must be a multiple of 4."""
    if side < 4 or side % 4:
        raise ValueError(f"side must be a positive multiple of 4, got {side}")
    return nn.Sequential(nn.Conv2d(1, 4, 3, padding=1), nn.Softplus(beta), nn.AvgPool2d(2),
                         nn.Conv2d(4, 8, 3, padding=1), nn.Softplus(beta), nn.AvgPool2d(2),
                         nn.Flatten(), nn.Linear(8 * (side // 4) ** 2, 10))


def unit_directions(shape, seed: int, device=None, dtype=None) -> torch.Tensor:
    """Random directions of unit ℓ2 norm, one per leading index of ``shape``: Gaussian draws of a
    ``torch.Generator`` seeded with ``seed``, moved to ``device``/``dtype``, then normalised."""
    dirs = torch.randn(tuple(shape), generator=torch.Generator().manual_seed(seed)).to(device, dtype)
    return dirs / dirs.flatten(1).norm(dim=1).reshape(-1, *[1] * (len(shape) - 1))


def linearity_study(models: dict, xs: torch.Tensor, ys: torch.Tensor, dirs: torch.Tensor, norms,
                    ig_steps: int):
    """B.1's residual ``η = ‖g(x+δ) − g(x) − Jδ‖`` for δ = ``e · dirs`` at each ``e`` in
    ``norms``, for SM and IG of each model of ``models`` (name → model; float64 copies).

    Returns ``(table, eta, g_mean)``: one row per (model, attribution, ‖δ‖) with the median η,
    the median and quartiles of η / ‖g(x+δ) − g(x)‖ and the mean ‖g(x)‖; the per-image η keyed
    (model, attribution, ‖δ‖); the mean ‖g(x)‖ keyed (model, attribution)."""
    from tqdm.auto import tqdm

    rows, eta_img, g_mean = [], {}, {}
    xs64 = xs.double()   # float64: float32 rounding would put a floor of ~1e-7 ||g|| under eta
    for mname, m in tqdm(models.items(), desc="B.1"):
        m64 = copy.deepcopy(m).double()
        for attr in ("sm", "ig"):
            fn = D.attribution_function(m64, attr, ys, steps=ig_steps)
            ops = D.jacobian_ops(fn, xs64)
            g_norm = g_mean[(mname, attr.upper())] = float(ops.out.flatten(1).norm(dim=1).mean())
            for e in norms:
                eta, rel = D.linearity_residual(fn, xs64, float(e) * dirs.double(), ops=ops, relative=True)
                eta_img[(mname, attr.upper(), float(e))] = eta.cpu().numpy()
                rows.append({"model": mname, "attribution": attr.upper(), "||delta||": float(e),
                             "median eta": float(eta.median()), "median eta/||dg||": float(rel.median()),
                             "q25": float(rel.quantile(0.25)), "q75": float(rel.quantile(0.75)),
                             "mean ||g||": g_norm})
    return pd.DataFrame(rows), eta_img, g_mean


def linearization_ratios(models: dict, xs: torch.Tensor, ys: torch.Tensor, dirs: torch.Tensor,
                         ts) -> dict:
    """Per model of ``models`` (name → model), ``‖g(x+tv) − g(x)‖ / (t ‖Jv‖)`` of the saliency
    map along each direction ``v`` of ``dirs`` for every ``t`` of ``ts``, in float64
    (:func:`robattr.bounds.linearity.linearization_ratio`; (N, len(ts)) each)."""
    xs64, dirs64 = xs.double(), dirs.double()   # float64: at t = 1e-7 float32 rounding would swamp it
    return {name: D.linearization_ratio(D.attribution_function(copy.deepcopy(m).double(), "sm", ys),
                                        xs64, dirs64, ts)
            for name, m in models.items()}


def maxpool_jumps(gap: torch.Tensor, ratio_cnn: torch.Tensor, ratio_smooth: torch.Tensor,
                  i_small: int, i_mid: int, *, jump: float = 2.0, near: float = 1e-2) -> dict:
    """The pooling ties of one max-pool layer (``gap``: :func:`robattr.bounds.pool_gaps`'s
    (N, C, H, W) gaps) and the jumps of the saliency map (a linearization ratio above ``jump``):
    ``tied_windows`` (% of windows with an exact tie), ``tied_images``, ``near`` (% of windows
    with a gap below ``near``), ``jumps_small`` / ``jumps_mid`` (images of the CNN that jump at
    the ``t`` of index ``i_small`` / ``i_mid``), ``jumps_smooth`` ((image, t) pairs of the smooth
    model that jump with t up to index ``i_mid``)."""
    return {"tied_windows": 100 * float((gap == 0).double().mean()),
            "tied_images": int((gap == 0).flatten(1).any(1).sum()),
            "near": 100 * float((gap < near).double().mean()),
            "jumps_small": int((ratio_cnn[:, i_small] > jump).sum()),
            "jumps_mid": int((ratio_cnn[:, i_mid] > jump).sum()),
            "jumps_smooth": int((ratio_smooth[:, : i_mid + 1] > jump).sum())}


def residual_at(lin: pd.DataFrame, norm: float) -> pd.Series:
    """The median relative residual of :func:`linearity_study`'s table at ``‖δ‖ = norm``,
    indexed (model, attribution)."""
    sub = lin[np.isclose(lin["||delta||"], norm)]
    return sub.set_index(["model", "attribution"])["median eta/||dg||"]


def b1_cells(eta: dict, g_mean: dict, model_names, norm: float, tol: float) -> list:
    """B.1 read as the paper compares it: per Softplus model (names without "relu") and SM / IG,
    a :func:`robattr.report.verdicts.gap` of η / mean ‖g‖ at ``‖δ‖ = norm`` against ``tol`` (lower is
    better); ``eta`` and ``g_mean`` come from :func:`linearity_study`."""
    from robattr.report import verdicts

    return [verdicts.gap(eta[(mname, attr, float(norm))] / g_mean[(mname, attr)], tol,
                         higher_is_better=False, what=f"eta / mean ||g|| − {tol} ({mname}, {attr})")
            for mname in model_names if "relu" not in mname for attr in ("SM", "IG")]


#: ImageNet's channel statistics (the ResNet's Normalize layer)
IMAGENET_MEAN, IMAGENET_STD = (0.485, 0.456, 0.406), (0.229, 0.224, 0.225)


def imagenet_resnet(size: int, beta: float, seed: int, device) -> nn.Module:
    """A torchvision ResNet-18 with random weights (drawn after ``torch.manual_seed(seed)``),
    Softplus(``beta``) activations, 1000 classes and ImageNet's normalisation, for
    ``size``×``size`` RGB inputs, in eval mode on ``device``."""
    from types import SimpleNamespace

    from robattr import models

    info = SimpleNamespace(shape=(3, size, size), num_classes=1000, mean=IMAGENET_MEAN,
                           std=IMAGENET_STD)
    torch.manual_seed(seed)
    return models.build("resnet18", info, "softplus", beta).to(device).eval()


def resized_photo(photos: torch.Tensor, size: int) -> torch.Tensor:
    """The first photo of ``photos`` (N, 3, H, W) resized to ``size``×``size`` (bilinear,
    antialiased), clamped to [0, 1]: (1, 3, size, size)."""
    return nn.functional.interpolate(photos[:1], size=size, mode="bilinear", antialias=True,
                                     align_corners=False).clamp(0, 1)


def lanczos_checks(resnet: nn.Module, x: torch.Tensor, y: torch.Tensor, res, ops, *, seed: int,
                   radii, h: float = 1e-6, n_random: int = 4) -> dict:
    """The checks of a matrix-free ``ξ_max`` (``res``: a :class:`~robattr.bounds.SpectralNorm`
    with its vector, of the saliency map of ``resnet`` at ``x`` for classes ``y``; ``ops`` its
    :func:`~robattr.bounds.jacobian_ops`): ``fd``, the central difference along ``v_max`` (step
    ``h``, float64); ``jr``, the largest ``‖Jv‖`` over ``n_random`` random unit ``v``; ``g_norm``,
    ``‖g(x)‖``; ``change``, ``‖g(x + r v_max) − g(x)‖`` for each ``r`` of ``radii`` (float64);
    ``along``, a table of ``r`` and that change over ``ξ_max r``."""
    fn_d = D.attribution_function(copy.deepcopy(resnet).double(), "sm", y)
    x_d, v = x.double(), res.vector.double()
    fd = float(D.central_difference_norm(fn_d, x_d, v, h)[0])
    rand = torch.randn((n_random,) + tuple(x.shape[1:]),
                       generator=torch.Generator().manual_seed(seed)).to(x.device)
    rand = rand / rand.flatten(1).norm(dim=1).reshape(-1, 1, 1, 1)
    jr = max(float(ops.jvp(r[None]).norm()) for r in rand)
    change = D.directional_change(fn_d, x_d, v, list(radii))[0].tolist()
    xi = float(res.value[0])
    along = pd.DataFrame({"r": list(radii), "||g(x + r v_max) - g(x)|| / (xi_max r)":
                          [c / (xi * r) for c, r in zip(change, radii)]})
    return {"fd": fd, "jr": jr, "g_norm": float(ops.out.norm()), "change": change, "along": along}


def along_text(radii, change, xi: float, T_e: float, eps: float) -> str:
    """The sentence under the table of :func:`lanczos_checks`: the ratio of the change along
    ``v_max`` to ``ξ_max r`` at the smallest radius, its largest value, and the first radius
    where the change exceeds ``T_e`` (or that none does up to ``eps``), in Markdown."""
    ratio = pd.Series([c / (xi * r) for c, r in zip(change, radii)])
    crossed = [r for r, c in zip(radii, change) if c > T_e]
    moved = (f"The attribution moves by more than $T_e = \\xi_{{\\max}}\\varepsilon$ already at "
             f"$r = {min(crossed):g}$." if crossed else
             f"Up to $r = \\varepsilon = {eps:g}$ the change stays within $T_e$.")
    return (f"Along $v_{{\\max}}$: at $r = {radii[0]:g}$ the change is {ratio.iloc[0]:.4f} times "
            f"$\\xi_{{\\max}} r$; the largest ratio on the grid is {ratio.max():.3g}, at "
            f"$r = {radii[int(ratio.argmax())]:g}$. {moved}")


def dense_refusal(model: nn.Module, x: torch.Tensor) -> str | None:
    """Ask the dense path for ``ξ_max`` of ``model``'s saliency map (class 0) at ``x``: the
    message of :class:`~robattr.bounds.DenseJacobianTooLarge` when it refuses, None when it
    computed the value."""
    try:
        D.jacobian_spectral_norm(D.attribution_function(model, "sm", 0), x, "dense")
    except D.DenseJacobianTooLarge as err:
        return str(err)
    return None

"""003 (Joo et al., AAAI 2023): the l2 and cosine robust criteria, the α-transformation
of a layer, and the cosine bound of Theorem 6 from Hessian-vector products.

**Notation.** ``f`` is the model, ``f_y`` the logit of the target class, ``a = ∇f_y(x)``
and ``b = ∇f_y(x + δ)`` the input gradients at a point and at a perturbed point,
``Δ = b − a``, ``H = ∇²_x f_y(x)`` the input Hessian of the logit, ``δ = ε δ̂`` with
``‖δ̂‖₂ = 1``. All gradients are w.r.t. the pixels (the models normalise inside).

**The criteria (003 Sec. 3).**
``Γ^ℓ2(x, δ) = ‖b − a‖₂`` (Def. in Eq. 1) and ``Γ^cos(x, δ) = (1 − cos(b, a)) / 2``
(Def. 4) -- :func:`l2_criterion`, :func:`cosine_criterion`. The *training* losses
(:mod:`robattr.train.losses`) use the squared l2; the criteria here are the paper's.

**α-transformation (Def. 2).** :func:`scale_layer` multiplies the weight and bias of one
Linear/Conv2d layer by α. For the last layer every logit is multiplied by α (any network),
so ``Γ^ℓ2`` scales by α (Lemma 3) while ``Γ^cos`` does not change (Prop. 5). For a hidden
layer of a ReLU network with biases, 003's Appendix B claims the same; that is false as
printed (the bias of the next layer is not scaled), and ``following_biases=True`` gives
the corrected transformation (scale the biases of every later layer too).

**Theorem 6 and exact forms.** With ``e_a = a/‖a‖`` the proof's first inequality is exact:

    Γ^cos ≤ (‖Δ‖ − ⟨Δ, e_a⟩) / (2‖b‖) ≤ ‖Δ‖ / ‖b‖ = Γ^ℓ2 / ‖b‖,

and ``‖a − b‖² ≥ 2‖a‖‖b‖(1 − cos)`` gives the second-order exact bound
``Γ^cos ≤ ‖Δ‖² / (4‖a‖‖b‖)``. Theorem 6 replaces ``‖Δ‖`` by its first-order part
``ε‖H δ̂‖`` (Fig. 3b's term), then by ``ε‖H‖₂`` (the appendix's spectral form) and
``ε‖H‖_F`` (the main text): those are first-order statements and can fail.
:func:`cosine_bound_terms` returns all of them for a batch. H is never formed for large
inputs: :func:`hessian_vector_product` (double backward), :func:`hessian_spectral_norm`
(power iteration); :func:`logit_hessian` builds it from d products for small d.
"""
from __future__ import annotations

import copy
import numbers

import torch
from torch import nn

from robattr.attributions import resolve_target
from robattr.utils import check_int, check_number

__all__ = [
    "param_layers", "scale_layer", "l2_criterion", "cosine_criterion", "alignment_criteria",
    "hessian_vector_product", "logit_hessian", "hessian_spectral_norm",
    "hessian_frobenius_norm", "cosine_bound_terms", "scaling_check", "homogeneity_check",
    "theorem6_cases", "theorem6_tally", "log_slope", "FROBENIUS_MAX_D",
    "homogeneity_counterexample",
]

FROBENIUS_MAX_D = 1024   # theorem6_cases: the exact ||H||_F costs d Hessian-vector products per batch


# --------------------------------------------------------------------------- helpers
def _check(model, x) -> torch.Tensor:
    if not isinstance(model, nn.Module):
        raise ValueError(f"model must be a torch.nn.Module, got {type(model).__name__}")
    if not torch.is_tensor(x) or not x.is_floating_point() or x.ndim < 2 or x.shape[0] == 0:
        raise ValueError("x must be a non-empty floating-point batch tensor (N, ...)")
    return x.detach()


def _like(name: str, v, x: torch.Tensor) -> torch.Tensor:
    if not torch.is_tensor(v) or v.shape != x.shape:
        raise ValueError(f"{name} must be a tensor shaped like x {tuple(x.shape)}, got "
                         f"{tuple(v.shape) if torch.is_tensor(v) else type(v).__name__}")
    return v.detach().to(dtype=x.dtype, device=x.device)


def _flat(t: torch.Tensor) -> torch.Tensor:
    return t.reshape(t.shape[0], -1)


def _grad(model, x, target, create_graph=False) -> torch.Tensor:
    with torch.enable_grad():
        xi = x.detach().requires_grad_(True)
        out = model(xi).gather(1, target[:, None]).sum()
        (g,) = torch.autograd.grad(out, xi, create_graph=create_graph)
    return g if create_graph else g.detach()


def _cos(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    """Row-wise cosine; NaN where a row is zero (the angle is undefined)."""
    na, nb = a.norm(dim=1), b.norm(dim=1)
    c = (a * b).sum(1) / (na * nb)
    c = torch.where((na > 0) & (nb > 0), c, torch.full_like(c, float("nan")))
    return c.clamp(-1.0, 1.0)


# --------------------------------------------------------------------------- Def. 2
def param_layers(model: nn.Module) -> list[nn.Module]:
    """The Linear and Conv2d modules of ``model`` in registration (forward) order."""
    if not isinstance(model, nn.Module):
        raise ValueError(f"model must be a torch.nn.Module, got {type(model).__name__}")
    return [m for m in model.modules() if isinstance(m, (nn.Linear, nn.Conv1d, nn.Conv2d))]


def scale_layer(model: nn.Module, alpha: float, layer: int = -1, *,
                following_biases: bool = False) -> nn.Module:
    """003's α-transformation ``T_i(Θ, α)``: a copy of ``model`` with the weight and bias of
    its ``layer``-th Linear/Conv layer (:func:`param_layers`; -1 is the last) times ``alpha``.

    ``following_biases=True`` also multiplies the bias of every later Linear/Conv layer by
    ``alpha``: the transformation under which a ReLU network with biases is exactly
    α-homogeneous (Appendix B's proof folds the bias into the weight but forgets that the
    appended constant 1 of the next layer is not scaled). For the last layer both forms
    coincide. Models with normalisation layers after ``layer`` (BatchNorm) are refused.
    """
    alpha = check_number("alpha", alpha, positive=True)
    if not isinstance(following_biases, bool):
        raise ValueError(f"following_biases must be True or False, got {following_biases!r}")
    layers = param_layers(model)
    if not layers:
        raise ValueError("model has no Linear or Conv layer to scale")
    if isinstance(layer, bool) or not isinstance(layer, numbers.Integral) \
            or not -len(layers) <= layer < len(layers):
        raise ValueError(f"layer must be an integer in [-{len(layers)}, {len(layers) - 1}], "
                         f"got {layer!r}")
    if any(isinstance(m, nn.modules.batchnorm._BatchNorm) for m in model.modules()):
        raise ValueError("scale_layer: models with BatchNorm are not homogeneous in one layer")
    new = copy.deepcopy(model)
    new_layers = param_layers(new)
    i = layer % len(layers)
    with torch.no_grad():
        new_layers[i].weight.mul_(alpha)
        if new_layers[i].bias is not None:
            new_layers[i].bias.mul_(alpha)
        if following_biases:
            for m in new_layers[i + 1:]:
                if m.bias is not None:
                    m.bias.mul_(alpha)
    return new


# --------------------------------------------------------------------------- criteria
def alignment_criteria(model: nn.Module, x: torch.Tensor, delta: torch.Tensor,
                       target=None) -> dict[str, torch.Tensor]:
    """Both criteria of 003 for each example, and the two gradient norms.

    Returns a dict of (N,) tensors: ``l2`` = ‖b − a‖₂, ``cosd`` = (1 − cos(b, a))/2 (NaN
    where a gradient is zero), ``grad_norm`` = ‖a‖, ``grad_norm_pert`` = ‖b‖, with
    ``a = ∇f_y(x)``, ``b = ∇f_y(x + delta)`` (no clamping of ``x + delta``). ``target``:
    class indices (None: the prediction at ``x``).
    """
    x = _check(model, x)
    delta = _like("delta", delta, x)
    t = resolve_target(model, x, target)
    a, b = _flat(_grad(model, x, t)), _flat(_grad(model, x + delta, t))
    return {"l2": (b - a).norm(dim=1), "cosd": (1 - _cos(a, b)) / 2,
            "grad_norm": a.norm(dim=1), "grad_norm_pert": b.norm(dim=1)}


def l2_criterion(model: nn.Module, x: torch.Tensor, delta: torch.Tensor,
                 target=None) -> torch.Tensor:
    """003's ℓ2 robust criterion ``‖∇f_y(x + δ) − ∇f_y(x)‖₂`` per example, (N,)."""
    return alignment_criteria(model, x, delta, target)["l2"]


def cosine_criterion(model: nn.Module, x: torch.Tensor, delta: torch.Tensor,
                     target=None) -> torch.Tensor:
    """003's cosine robust criterion (Def. 4) ``(1 − cos(∇f_y(x + δ), ∇f_y(x))) / 2``, (N,)."""
    return alignment_criteria(model, x, delta, target)["cosd"]


# --------------------------------------------------------------------------- Hessian
def hessian_vector_product(model: nn.Module, x: torch.Tensor, v: torch.Tensor,
                           target=None) -> torch.Tensor:
    """``H v`` per example, shaped like ``x``, with ``H = ∇²_x f_y(x)``: one backward with
    ``create_graph`` and one double backward for the whole batch (examples must not
    interact, i.e. the model is in eval mode). Zero almost everywhere for ReLU networks."""
    x = _check(model, x)
    v = _like("v", v, x)
    t = resolve_target(model, x, target)
    with torch.enable_grad():
        xi = x.requires_grad_(True)
        (g,) = torch.autograd.grad(model(xi).gather(1, t[:, None]).sum(), xi, create_graph=True)
        (hv,) = torch.autograd.grad((g * v).sum(), xi, allow_unused=True)
    return torch.zeros_like(x) if hv is None else hv.detach()


def logit_hessian(model: nn.Module, x: torch.Tensor, target=None) -> torch.Tensor:
    """The dense input Hessian of the target logit per example, (N, d, d), from d
    Hessian-vector products (each batched over the examples). Small d only."""
    return torch.stack(list(_hessian_columns(model, x, target)), dim=2)


def _hessian_columns(model: nn.Module, x: torch.Tensor, target=None):
    """Yield ``H eⱼ`` (N, d) for j = 1..d: one Hessian-vector product per basis vector,
    each batched over the examples."""
    x = _check(model, x)
    t = resolve_target(model, x, target)
    n, d = x.shape[0], x[0].numel()
    for j in range(d):
        e = torch.zeros(n, d, dtype=x.dtype, device=x.device)
        e[:, j] = 1
        yield _flat(hessian_vector_product(model, x, e.reshape(x.shape), t))


def hessian_spectral_norm(model: nn.Module, x: torch.Tensor, target=None, *, iters: int = 100,
                          tol: float = 1e-6, generator: torch.Generator | None = None
                          ) -> torch.Tensor:
    """``‖H‖₂`` (largest |eigenvalue| of the symmetric input Hessian) per example, by power
    iteration on Hessian-vector products, matrix-free. Returns ``‖H v‖`` for the last unit
    iterate ``v``, which never exceeds the true norm; it stops when every example's
    estimate changes by less than ``tol`` (relative) or after ``iters`` products."""
    x = _check(model, x)
    iters = check_int("iters", iters, 1)
    tol = check_number("tol", tol)
    t = resolve_target(model, x, target)
    v = torch.randn(x.shape, generator=generator, dtype=x.dtype,
                    device=generator.device if generator is not None else x.device).to(x.device)
    v = v / _flat(v).norm(dim=1).reshape(-1, *([1] * (x.ndim - 1)))
    est = torch.zeros(x.shape[0], dtype=x.dtype, device=x.device)
    for _ in range(iters):
        hv = hessian_vector_product(model, x, v, t)
        new = _flat(hv).norm(dim=1)
        done = bool(((new - est).abs() <= tol * new.clamp_min(1e-30)).all())
        est = new
        if done or not bool((new > 0).any()):
            break
        v = hv / new.clamp_min(1e-30).reshape(-1, *([1] * (x.ndim - 1)))
    return est


def hessian_frobenius_norm(model: nn.Module, x: torch.Tensor, target=None) -> torch.Tensor:
    """Exact ``‖H‖_F`` per example, ``√(Σⱼ ‖H eⱼ‖²)`` over the d basis vectors: d
    Hessian-vector products (each batched over the examples), O(N·d) memory, the dense
    (N, d, d) Hessian never stored. Costs d products: for large inputs the Hutchinson
    estimate :func:`robattr.bounds.hutchinson_hessian_sq_norm` (its square) is cheaper."""
    return sum(col.pow(2).sum(1) for col in _hessian_columns(model, x, target)).sqrt()


# --------------------------------------------------------------------------- Theorem 6
def cosine_bound_terms(model: nn.Module, x: torch.Tensor, delta: torch.Tensor, target=None, *,
                       spectral: bool = False, frobenius: bool = False,
                       power_iters: int = 100) -> dict[str, torch.Tensor]:
    """Γ^cos at ``x + delta`` and every bound on it discussed in 003 Thm. 6, per example.

    Returns (N,) tensors (ε = ‖delta‖₂, δ̂ = delta/ε, a = ∇f_y(x), b = ∇f_y(x + delta),
    Δ = b − a):

    * ``cosd`` = Γ^cos, ``l2`` = ‖Δ‖, ``grad_norm`` = ‖a‖, ``grad_norm_pert`` = ‖b‖, ``eps``;
    * exact bounds: ``proof_exact`` = (‖Δ‖ − ⟨Δ, a/‖a‖⟩)/(2‖b‖), ``exact`` = ‖Δ‖/‖b‖,
      ``exact_sq`` = ‖Δ‖²/(4‖a‖‖b‖);
    * first-order terms (Thm. 6 without the O(ε²)): ``first_order`` = ε‖H δ̂‖/‖b‖ (Fig. 3b),
      with ``spectral=True`` also ``spectral`` = ε‖H‖₂/‖b‖ (power iteration), with
      ``frobenius=True`` ``frobenius`` = ε‖H‖_F/‖b‖ (dense H: small d only);
    * ``second_order`` = ε²‖P⊥ H δ̂‖²/(4‖a‖²), P⊥ the projection orthogonal to a: the
      leading term of Γ^cos itself (1 − cos θ ≈ θ²/2), an approximation, not a bound.
    """
    x = _check(model, x)
    delta = _like("delta", delta, x)
    t = resolve_target(model, x, target)
    a, b = _flat(_grad(model, x, t)), _flat(_grad(model, x + delta, t))
    d = b - a
    na, nb, nd = a.norm(dim=1), b.norm(dim=1), d.norm(dim=1)
    eps = _flat(delta).norm(dim=1)
    ea = a / na.clamp_min(1e-30)[:, None]
    hd = _flat(hessian_vector_product(model, x, delta, t))        # = ε H δ̂
    perp = hd - (hd * ea).sum(1, keepdim=True) * ea
    out = {
        "cosd": (1 - _cos(a, b)) / 2, "l2": nd, "grad_norm": na, "grad_norm_pert": nb, "eps": eps,
        "proof_exact": (nd - (d * ea).sum(1)) / (2 * nb),
        "exact": nd / nb,
        "exact_sq": nd ** 2 / (4 * na * nb),
        "first_order": hd.norm(dim=1) / nb,
        "second_order": perp.pow(2).sum(1) / (4 * na ** 2),
    }
    if spectral:
        out["spectral"] = eps * hessian_spectral_norm(model, x, t, iters=power_iters) / nb
    if frobenius:
        out["frobenius"] = eps * hessian_frobenius_norm(model, x, t) / nb
    return out


# --------------------------------------------------------------------------- the checks
def scaling_check(model: nn.Module, x: torch.Tensor, delta: torch.Tensor, target, alphas, *,
                  skip_small: float | None = None):
    """Lemma 3 and Prop. 5 on one model: for each α in ``alphas`` (an α-transformation of the
    last layer, :func:`scale_layer`), a pandas DataFrame row with

    * ``l2_err`` = max over inputs of |Γ^ℓ2(α) / (α Γ^ℓ2) − 1| (Lemma 3: 0),
    * ``cos_err`` = max over inputs of |Γ^cos(α) − Γ^cos| (Prop. 5: 0),
    * ``pred_same``: the scaled model predicts as the model on every input,
    * ``l2_mean``, ``cosd_mean``: the scaled model's mean criteria.

    With ``skip_small = r``, inputs whose Γ^cos is NaN or whose Γ^ℓ2 is at most r‖a‖ are left
    out of the errors (there b − a is rounding noise); if none is left, the frame is empty.
    """
    import pandas as pd

    x = _check(model, x)
    alphas = [check_number("alpha", a, positive=True) for a in alphas]
    base = alignment_criteria(model, x, delta, target)
    ok = torch.ones_like(base["l2"], dtype=torch.bool)
    if skip_small is not None:
        ok = ~torch.isnan(base["cosd"]) & (base["l2"] > skip_small * base["grad_norm"])
        if not bool(ok.any()):
            return pd.DataFrame(columns=["alpha", "l2_err", "cos_err", "pred_same", "l2_mean", "cosd_mean"])
    with torch.no_grad():
        pred = model(x).argmax(1)
    rows = []
    for alpha in alphas:
        scaled = scale_layer(model, alpha)
        new = alignment_criteria(scaled, x, delta, target)
        with torch.no_grad():
            same = bool(torch.equal(scaled(x).argmax(1), pred))
        rows.append(dict(alpha=alpha,
                         l2_err=float((new["l2"][ok] / (alpha * base["l2"][ok]) - 1).abs().max()),
                         cos_err=float((new["cosd"][ok] - base["cosd"][ok]).abs().max()),
                         pred_same=same, l2_mean=float(new["l2"].mean()), cosd_mean=float(new["cosd"].mean())))
    return pd.DataFrame(rows)


def homogeneity_check(model: nn.Module, x: torch.Tensor, alpha: float = 3.0):
    """003 Appendix B on one network: for every parameter layer and both forms of the
    transformation (``printed``: that layer only; ``corrected``: also the biases of every later
    layer, :func:`scale_layer`), the relative error max|f_α(x) − α f(x)| / max|α f(x)|.
    Returns a pandas DataFrame with columns layer, last, form, err."""
    import pandas as pd

    x = _check(model, x)
    alpha = check_number("alpha", alpha, positive=True)
    n_layers = len(param_layers(model))
    rows = []
    with torch.no_grad():
        ref = alpha * model(x)
        for layer in range(n_layers):
            for following in (False, True):
                out = scale_layer(model, alpha, layer, following_biases=following)(x)
                err = float((out - ref).abs().max() / ref.abs().max().clamp_min(1e-300))
                rows.append(dict(layer=layer, last=layer == n_layers - 1,
                                 form="corrected" if following else "printed", err=err))
    return pd.DataFrame(rows)


def homogeneity_counterexample(dtype: torch.dtype = torch.float64):
    """The smallest case against 003 Appendix B as printed: ``f(x) = relu(x) + 1`` (one hidden
    unit, weight 1, bias 0, output weight 1 and bias 1) at ``x = 0``. Scaling the hidden layer
    alone by α gives ``α relu(x) + 1 = 1`` at 0, not ``α f(0) = α``; the corrected
    transformation (the output bias scaled too) gives ``α``. Returns ``(net, x)`` with
    ``x`` of shape (1, 1), for :func:`homogeneity_check`."""
    net = nn.Sequential(nn.Linear(1, 1), nn.ReLU(), nn.Linear(1, 1)).to(dtype)
    with torch.no_grad():
        net[0].weight.fill_(1.0)
        net[0].bias.fill_(0.0)
        net[2].weight.fill_(1.0)
        net[2].bias.fill_(1.0)
    return net.eval(), torch.zeros(1, 1, dtype=dtype)


def theorem6_cases(model: nn.Module, x: torch.Tensor, target, eps_list, generator: torch.Generator, *,
                   power_iters: int = 100, spectral: bool = True, frobenius: bool | None = None,
                   frobenius_max_d: int = FROBENIUS_MAX_D):
    """Every term of :func:`cosine_bound_terms` on a grid of perturbation sizes, as a pandas
    DataFrame with one row per (example, ε).

    One random unit direction δ̂ per example (normalised uniform noise from ``generator``) is
    scaled to each ε in ``eps_list``. Columns: the terms, ``eps_l2``, ``example``,
    ``pool_flip`` (a max-pooling switch differs between x and x + εδ̂,
    :func:`robattr.bounds.maxpool.switch_moved`), and ``spectral`` = ε‖H‖₂/‖b‖ (power iteration,
    ``power_iters`` steps, from ``generator``) and ``frobenius`` = ε‖H‖_F/‖b‖ when asked for. The
    Frobenius term costs d Hessian-vector products; by default (``frobenius=None``) it is
    computed only for inputs of at most ``frobenius_max_d`` values.
    """
    import numpy as np
    import pandas as pd

    from robattr.bounds.maxpool import switch_moved

    x = _check(model, x)
    if not isinstance(generator, torch.Generator):
        raise ValueError(f"generator must be a torch.Generator, got {type(generator).__name__}")
    eps_list = [check_number("eps", e, positive=True) for e in eps_list]
    if not eps_list:
        raise ValueError("eps_list must hold at least one epsilon")
    if frobenius is None:
        frobenius = x[0].numel() <= frobenius_max_d
    direction = 2 * torch.rand(x.shape, generator=generator, dtype=x.dtype,
                               device=generator.device) - 1
    direction = (direction / direction.flatten(1).norm(dim=1).reshape(-1, *([1] * (x.ndim - 1)))
                 ).to(x.device)
    spec = hessian_spectral_norm(model, x, target, iters=power_iters, generator=generator) if spectral else None
    frob = hessian_frobenius_norm(model, x, target) if frobenius else None
    frames = []
    for eps in eps_list:
        out = cosine_bound_terms(model, x, eps * direction, target)
        df = pd.DataFrame({k: v.detach().cpu().numpy() for k, v in out.items()})
        df["eps_l2"] = eps
        df["example"] = np.arange(len(df))
        df["pool_flip"] = switch_moved(model, x, eps * direction).cpu().numpy()
        if spec is not None:
            df["spectral"] = eps * spec.detach().cpu().numpy() / df.grad_norm_pert
        if frob is not None:
            df["frobenius"] = eps * frob.detach().cpu().numpy() / df.grad_norm_pert
        frames.append(df)
    return pd.concat(frames, ignore_index=True)


def theorem6_tally(cases, tol: float = 1e-9) -> dict:
    """Counts over a :func:`theorem6_cases` frame, on the cases where Γ^cos is defined (both
    gradients nonzero): ``cases``; ``viol_<b>`` = Γ^cos > b + tol for the exact bounds
    (proof_exact, exact, exact_sq: must be 0); ``fail_<t>`` and ``worst_ratio_<t>`` (largest
    Γ^cos / t) for each first-order term present (first_order, spectral, frobenius)."""
    import numpy as np

    if tol < 0:
        raise ValueError(f"tol must be >= 0, got {tol}")
    ok = cases.cosd.notna() & (cases.grad_norm > 0) & (cases.grad_norm_pert > 0)
    d = cases[ok]
    res = {"cases": int(ok.sum())}
    for col in ("proof_exact", "exact", "exact_sq"):
        res[f"viol_{col}"] = int((d.cosd > d[col] + tol).sum())
    for col in ("first_order", "spectral", "frobenius"):
        if col in d:
            res[f"fail_{col}"] = int((d.cosd > d[col] + tol).sum())
            res[f"worst_ratio_{col}"] = float((d.cosd / d[col]).replace(np.inf, np.nan).max())
    return res


def log_slope(eps, values, n: int = 3) -> float:
    """Slope of log(values) against log(eps) over the first ``n`` finite positive points
    (least squares); NaN if fewer than two."""
    import numpy as np

    e, v = np.asarray(eps, dtype=float), np.asarray(values, dtype=float)
    if e.shape != v.shape:
        raise ValueError(f"eps and values must have the same shape, got {e.shape} and {v.shape}")
    ok = np.isfinite(v) & (v > 0)
    if ok.sum() < 2:
        return float("nan")
    return float(np.polyfit(np.log(e[ok][:n]), np.log(v[ok][:n]), 1)[0])

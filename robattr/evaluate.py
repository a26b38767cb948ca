"""Each paper's headline evaluation as one call: ``model, batch -> dict of scalars``.

The five papers each judge "robust attribution" by their own yardstick. These functions
put the five yardsticks behind one call shape so that any model (in particular every
model of :mod:`robattr.zoo`) can be scored by all of them::

    from robattr import evaluate as E
    E.attack_auc_000(model, x, y)          # 000: top-k attack, k-in (mass) / Spearman AUC
    E.deviation_bounds_001(model, x, y)    # 001: T_e, T_c and the attacked deviations
    E.certified_eps_002(model, x, y)       # 002: certified eps at T = 0.8 (corrected bound)
    E.interpretation_003(model, x, y)      # 003: RPS, Insertion, Adv-Insertion
    E.retrieval_004(model, x, y)           # 004: class retrieval under PGD, feature relevance R
    E.training_cost(model)                 # accuracy and cost, from model.zoo_meta

Every function takes a model in eval mode, a batch ``x`` of pixels in [0, 1] and the
labels ``y`` (``None``: the model's predictions), and returns a flat ``dict`` of Python
floats: batch means unless the key says otherwise. They only *compose* robattr's
attacks, attributions, metrics and bounds (nothing is reimplemented here); the module
docstring of each callee states its conventions. Every random draw comes from ``seed``,
so a call is deterministic. :func:`higher_is_better` says, for every key, which way is
"more robust" (used to rank models).

000's full protocol, on which :func:`attack_auc_000` is built, is here too, as the
wang2020 chapter's tables use it: :data:`METHODS_000`, :func:`attribution_map_000`,
:func:`metrics_000` (the four metrics of :data:`METRICS_000`), :func:`attack_eval_000`
(one attack on one method over the budgets, a tidy DataFrame), :func:`auc_000` (the AUC
over eps) and :func:`more_robust_000` (cell-by-cell comparison in the metrics' robust
directions, :data:`ROBUST_DIRECTION_000`).

The cross-paper matrix (the crosspaper chapter) is built from :func:`evaluate_all` (one
model under every evaluation), :func:`headline_per_image` (a headline's per-image values,
for verdicts), :func:`defenses_against_reference` (each paper's defenses against standard
training), :func:`spearman_terms` (the bootstrap terms of Spearman's ρ) and
:func:`pareto_front` (robustness against training cost). The claims about training time
(there and in the joo2023 chapter's Table 2) rest on :func:`step_time_rounds` (every
model timed once per round, under the same load) and :func:`faster_per_step` (a paired
verdict over the rounds, none below :data:`MIN_TIMING_ROUNDS` rounds).
"""
from __future__ import annotations

import functools
import math
import numbers
from typing import Sequence

import numpy as np
import torch
from torch import nn

__all__ = [
    "ATTACK_METHODS_000", "METHODS_000", "METRICS_000", "ROBUST_DIRECTION_000",
    "attribution_map_000", "metrics_000", "attack_eval_000", "auc_000", "more_robust_000",
    "METHODS_003", "METHODS_004", "attack_auc_000",
    "deviation_bounds_001", "certified_eps_002", "interpretation_003", "retrieval_004",
    "training_cost", "training_step_seconds", "higher_is_better", "EVALUATIONS",
    "PER_IMAGE_HEADLINES", "evaluate_all", "headline_per_image", "defenses_against_reference",
    "spearman_terms", "pareto_front", "learned_rows",
    "MIN_TIMING_ROUNDS", "step_time_rounds", "faster_per_step",
]

#: 000's four attributions, by the paper's names.
ATTACK_METHODS_000 = ("SM", "IG", "SG", "UG")
#: 003's four attributions.
METHODS_003 = ("Grad", "xGrad", "GBP", "LRP")
#: 004's explainers evaluated here (RelEx is 004's own; the others are its baselines).
METHODS_004 = ("SimGrad", "SmoothGrad", "IntGrad", "RelEx")


# --------------------------------------------------------------------------- checks
def _check_model(model) -> nn.Module:
    if not isinstance(model, nn.Module):
        raise ValueError(f"model must be a torch.nn.Module, got {type(model).__name__}")
    return model


def _check_batch(x, y):
    if not torch.is_tensor(x) or not x.is_floating_point() or x.ndim != 4 or x.shape[0] < 1:
        raise ValueError("x must be a non-empty floating-point image batch N x C x H x W, got "
                         f"{getattr(x, 'shape', type(x).__name__)}")
    if float(x.min()) < 0.0 or float(x.max()) > 1.0:
        raise ValueError("x must be pixels in [0, 1] (robattr models normalise inside)")
    if y is not None:
        y = torch.as_tensor(y, device=x.device)
        if y.shape != (x.shape[0],) or y.is_floating_point():
            raise ValueError(f"y must hold one integer label per example, shape ({x.shape[0]},), "
                             f"got {tuple(y.shape)}")
        y = y.long()
    return x.detach(), y


def _target(model, x, y):
    if y is not None:
        return y
    with torch.no_grad():
        return model(x).argmax(1)


def _count(name, v, lo=1) -> int:
    if isinstance(v, bool) or not isinstance(v, numbers.Integral) or v < lo:
        raise ValueError(f"{name} must be an integer >= {lo}, got {v!r}")
    return int(v)


def _positive(name, v, *, allow_zero=False) -> float:
    if isinstance(v, bool) or not isinstance(v, numbers.Real) or not math.isfinite(v) \
            or (v < 0 if allow_zero else v <= 0):
        raise ValueError(f"{name} must be a finite number {'>= 0' if allow_zero else '> 0'}, "
                         f"got {v!r}")
    return float(v)


def _methods(name, methods, known) -> tuple:
    if isinstance(methods, str) or not methods:
        raise ValueError(f"{name} must be a non-empty sequence of names among {known}, "
                         f"got {methods!r}")
    bad = [m for m in methods if m not in known]
    if bad:
        raise ValueError(f"{name} must be among {known}, got unknown {bad}")
    return tuple(methods)


def _eps_list(eps_list) -> tuple:
    if isinstance(eps_list, (str, bytes)) or not isinstance(eps_list, Sequence) \
            or len(eps_list) < 2:
        raise ValueError(f"eps_list needs at least 2 budgets, got {eps_list!r}")
    out = tuple(_positive("every eps in eps_list", e) for e in eps_list)
    if any(b <= a for a, b in zip(out, out[1:])):
        raise ValueError(f"eps_list must be strictly increasing, got {eps_list!r}")
    return out


def _k(k, x) -> int:
    k = _count("k", k)
    p = x.shape[-1] * x.shape[-2]
    if k > p:
        raise ValueError(f"k must be at most the number of pixels ({p}), got {k}")
    return k


def _gen(x, seed):
    return torch.Generator(device=x.device).manual_seed(int(seed))


def _mean(t) -> float:
    return float(torch.as_tensor(t, dtype=torch.float64).mean())


# --------------------------------------------------------------------------- 000
#: 000's four attribution methods as (robattr method name, options): grad × input for SM,
#: SG and UG (App. C1, change 2); IG with the zero baseline (it already multiplies by x).
METHODS_000 = {
    "SM": ("input_x_grad", {}),
    "IG": ("integrated_gradients", {"steps": 50, "method": "right"}),
    "SG": ("smoothgrad", {"multiply_by_input": True, "n_samples": 50, "noise_ratio": 0.1}),
    "UG": ("uniform_grad", {"multiply_by_input": True, "n_samples": 50, "radius": 4 / 255}),
}

#: The four metrics of 000's tables, in their order: k-in (mass form), Spearman, centre
#: dislocation (pixels), cosine distance.
METRICS_000 = ("k-in", "cor", "cdl", "cosd")

#: The robust direction of each of 000's metrics: +1 when a larger value means a more
#: robust map (k-in, cor), -1 when a smaller one does (cdl, cosd).
ROBUST_DIRECTION_000 = {"k-in": 1, "cor": 1, "cdl": -1, "cosd": -1}


def _seeded(name, opts, seed):
    o = dict(opts)
    if name in ("smoothgrad", "uniform_grad"):
        o["seed"] = seed                       # the same noise for the clean and attacked map
    return o


def attribution_map_000(method: str, options: dict, model: nn.Module, x: torch.Tensor,
                        target, seed: int = 0) -> torch.Tensor:
    """The reduced map (N×H×W, ``|a|`` summed over channels) of robattr method ``method``
    with ``options``; SG/UG draw their noise from ``seed`` (the same draws every call)."""
    from robattr.attributions import METHODS, reduce_channels
    return reduce_channels(METHODS[method](model, x, target, **_seeded(method, options, seed))
                           .detach(), "abs_sum")


def metrics_000(map0: torch.Tensor, map1: torch.Tensor, k: int) -> dict[str, torch.Tensor]:
    """000's four metrics between clean and perturbed maps (N×H×W, non-negative), per
    example: ``k-in`` = ``Σ_{i∈K(map0)} n(map1)_i`` (mass form), ``cor`` = Spearman,
    ``cdl`` = centre-of-mass distance in pixels, ``cosd`` = ``1 − cos``."""
    from robattr.metrics import center_dislocation, cosine_distance, spearman, topk_intersection
    return {"k-in": topk_intersection(map0, map1, k, variant="mass"),
            "cor": spearman(map0, map1),
            "cdl": center_dislocation(map0, map1, reduce=None),
            "cosd": cosine_distance(map0, map1)}


def attack_eval_000(model: nn.Module, x: torch.Tensor, *, attack: str, method: str,
                    eps_list, k: int, steps: int = 50, surrogate_beta=None,
                    methods: dict | None = None, eval_methods=None, seed: int = 0,
                    progress: bool = False, target=None, step_size: float | None = None,
                    per_image: bool = False, random_baseline: bool = False):
    """000's protocol (Tables 2-6) for one attacked method: for each ε of ``eps_list``
    (ℓ∞, pixel units) attack ``method`` (a key of ``methods``, default
    :data:`METHODS_000`) with ``attack`` = ``"topk"`` (Ghorbani et al., original top-k
    fixed, mass criterion), ``"manipulate"`` (Dombrowski et al., weights 1e11 / 1e6, the
    target map that of the next image in the batch) or ``"mass_center"``; then compare the
    clean and attacked maps of each method in ``eval_methods`` (default: the attacked one;
    others give 000's transfer Table 6) by :func:`metrics_000`, with the same noise draws
    for both maps. The label constraint is on. ``target`` is the explained class (default:
    the model's prediction, 000's protocol); ``step_size`` is the attack's (default: that of
    :mod:`robattr.attacks`). Returns a pandas DataFrame with columns
    ``method, metric, eps, value`` (the mean over images). ``per_image=True`` keeps one row
    per image instead (an ``image`` column; a verdict needs the spread over images).
    ``random_baseline=True`` also evaluates random ℓ∞ noise of the same size (``±ε`` on
    every pixel, :func:`robattr.attacks.random_perturbation` with ``linf="vertices"``), the
    baseline of :func:`robattr.verdicts.attack_effective`: a ``source`` column says
    ``"attack"`` or ``"random"``.
    """
    import pandas as pd

    from robattr.attacks import (mass_center_attack, random_perturbation, targeted_attack,
                                 topk_attack)
    from robattr.bounds.geometry import _check_x

    methods = dict(METHODS_000 if methods is None else methods)
    if method not in methods:
        raise ValueError(f"method must be one of {list(methods)}, got {method!r}")
    if attack not in ("topk", "manipulate", "mass_center"):
        raise ValueError(f"attack must be 'topk', 'manipulate' or 'mass_center', got {attack!r}")
    eval_methods = [method] if eval_methods is None else list(eval_methods)
    for m in eval_methods:
        if m not in methods:
            raise ValueError(f"eval_methods must be keys of {list(methods)}, got {m!r}")
    eps_list = [float(e) for e in eps_list]
    if not eps_list or any(e <= 0 for e in eps_list):
        raise ValueError(f"eps_list must hold positive numbers, got {eps_list!r}")
    x = _check_x(x)
    name, opts = methods[method]
    if target is None:
        with torch.no_grad():
            target = model(x).argmax(1)
    common = dict(method=name, method_options=dict(opts), steps=steps, step_size=step_size,
                  surrogate_beta=surrogate_beta, seed=seed, progress=progress)
    clean = {m: attribution_map_000(*methods[m], model, x, target, seed) for m in eval_methods}
    rows = []
    for eps in eps_list:
        if attack == "topk":
            res = topk_attack(model, x, target, k=k, eps=eps, criterion="mass", **common)
        elif attack == "manipulate":
            tmap = attribution_map_000(name, opts, model, x.roll(1, 0), target.roll(1, 0), seed)
            res = targeted_attack(model, x, target, target_map=tmap, eps=eps, **common)
        else:
            res = mass_center_attack(model, x, target, eps=eps, **common)
        moved = [("attack", res.x_adv)]
        if random_baseline:
            moved.append(("random", random_perturbation(x, eps=eps, norm="linf",
                                                        linf="vertices", seed=seed)))
        for m in eval_methods:
            for source, xs in moved:
                adv = attribution_map_000(*methods[m], model, xs, target, seed)
                for metric, val in metrics_000(clean[m], adv, k).items():
                    tag = {"source": source} if random_baseline else {}
                    if per_image:
                        rows += [dict(method=m, metric=metric, eps=eps, **tag, image=i, value=v)
                                 for i, v in enumerate(val.tolist())]
                    else:
                        rows.append(dict(method=m, metric=metric, eps=eps, **tag,
                                         value=val.mean().item()))
    return pd.DataFrame(rows)


def auc_000(curves, by=("attack", "method", "metric")):
    """000's aggregation of metric-vs-ε curves (the output of :func:`attack_eval_000`,
    with any extra label columns): per group of the columns ``by``, the area under
    ``value`` against the sorted ε with unit spacing (a metric equal to 1 at four budgets
    gives 3). Every group must hold the same ε values, each once. Returns a DataFrame
    with the columns ``by`` and ``value``."""
    import pandas as pd

    from robattr.metrics import auc_over_eps

    by = [by] if isinstance(by, str) else list(by)
    need = set(by) | {"eps", "value"}
    if not isinstance(curves, pd.DataFrame) or not need <= set(curves.columns):
        raise ValueError(f"curves must be a DataFrame with the columns {sorted(need)}")
    if curves.empty:
        raise ValueError("curves is empty")
    rows, grid = [], None
    for key, g in curves.groupby(by, sort=True):
        g = g.sort_values("eps")
        eps = tuple(g.eps.astype(float))
        if len(set(eps)) != len(eps):
            raise ValueError(f"group {key!r} repeats an eps value: {list(eps)}")
        if grid is None:
            grid = eps
        elif eps != grid:
            raise ValueError(f"group {key!r} has eps {list(eps)}, another has {list(grid)}")
        key = key if isinstance(key, tuple) else (key,)
        rows.append({**dict(zip(by, key)),
                     "value": auc_over_eps(torch.tensor(g.value.values, dtype=torch.float64)).item()})
    return pd.DataFrame(rows)


def more_robust_000(a, b, on=("attack", "method", "metric")):
    """Compare two tables of 000's numbers (DataFrames with the columns ``on``, one of
    them ``metric``, and ``value``) cell by cell: ``a`` is more robust than ``b`` in a
    cell when its value is strictly better in the metric's robust direction
    (:data:`ROBUST_DIRECTION_000`). Cells are matched on ``on``; those in only one table
    are ignored. Returns ``(wins, ties, total)``: cells where ``a`` is more robust, equal
    cells, and the number of matched cells (``b`` wins ``total - wins - ties``)."""
    import pandas as pd

    on = [on] if isinstance(on, str) else list(on)
    if "metric" not in on:
        raise ValueError(f"on must include 'metric', got {on!r}")
    for name, t in (("a", a), ("b", b)):
        if not isinstance(t, pd.DataFrame) or not set(on) | {"value"} <= set(t.columns):
            raise ValueError(f"{name} must be a DataFrame with the columns {on + ['value']}")
        if t.duplicated(on).any():
            raise ValueError(f"{name} has more than one row for some cell {on!r}")
        bad = set(t.metric) - set(ROBUST_DIRECTION_000)
        if bad:
            raise ValueError(f"{name} has metrics without a robust direction: {sorted(bad)}")
    m = a[on + ["value"]].merge(b[on + ["value"]], on=on, suffixes=("_a", "_b"))
    sign = m.metric.map(ROBUST_DIRECTION_000).astype(float)
    diff = sign * (m.value_a.astype(float) - m.value_b.astype(float))
    return int((diff > 0).sum()), int((diff == 0).sum()), int(len(m))


def _methods_000(ig_steps, n_samples, sg_noise, ug_radius, multiply_by_input):
    """:data:`METHODS_000` with the sizes of :func:`attack_auc_000` (and, for
    ``multiply_by_input=False``, the plain gradient for SM and the mean gradient for SG/UG)."""
    table = {m: (name, dict(opts)) for m, (name, opts) in METHODS_000.items()}
    if not multiply_by_input:
        table["SM"] = ("grad", {})
    table["IG"][1]["steps"] = ig_steps
    table["SG"][1].update(n_samples=n_samples, noise_ratio=sg_noise,
                          multiply_by_input=multiply_by_input)
    table["UG"][1].update(n_samples=n_samples, radius=ug_radius,
                          multiply_by_input=multiply_by_input)
    return table


def attack_auc_000(model: nn.Module, x: torch.Tensor, y=None, *,
                   methods: Sequence[str] = ATTACK_METHODS_000,
                   eps_list: Sequence[float] = (2 / 255, 4 / 255, 8 / 255, 16 / 255),
                   k: int = 8, steps: int = 10, step_size: float | None = None,
                   ig_steps: int = 8, n_samples: int = 8, sg_noise: float = 0.1,
                   ug_radius: float = 4 / 255, multiply_by_input: bool = True,
                   surrogate_beta=None, seed: int = 0) -> dict:
    """000 (Wang et al., NeurIPS 2020), Table 2 as scalars: for each method of ``methods``
    (SM, IG, SG, UG), :func:`attack_eval_000` with ``attack="topk"``, its k-in and
    Spearman curves over ``eps_list`` aggregated by :func:`auc_000` (the area with unit
    spacing, :func:`robattr.metrics.auc_over_eps`: a metric equal to 1 at every budget
    gives ``len(eps_list) - 1``). This is the protocol of the wang2020 chapter's tables at
    smaller sizes (``steps``, ``ig_steps``, ``n_samples``), with the labels ``y`` as the
    explained class.

    The saliency is 000's ``sum_c |a x|`` (``multiply_by_input=True``: SM is x*grad, SG
    and UG multiply the mean gradient by the input, IG carries its own ``x - 0`` factor).
    SG's and UG's noise is drawn from ``seed``: the same draws inside the attack and for
    the clean and attacked maps.

    **k-in is 000's mass form** (:func:`metrics_000`): the share of the attacked map's
    mass that falls on the clean map's top-k pixels. An unattacked map does not score 1
    but the share of its own mass in its top k, which differs between models and methods.
    We therefore return the raw mass-form AUC (000's number) together with its no-attack
    reference, and do not normalise (a ratio would hide how concentrated the clean maps
    are, and the attacked share can exceed the clean one).

    Returns, for each method ``M``: ``kin_auc_<M>`` (mass-form k-in AUC under the attack),
    ``kin_auc_clean_<M>`` (the same AUC for the clean map against itself, i.e. the value
    of a map the attack cannot move: ``len(eps_list) - 1`` times the clean top-k mass
    share) and ``spearman_auc_<M>`` (Spearman AUC; its no-attack value is
    ``len(eps_list) - 1``).
    """
    from robattr.metrics import auc_over_eps

    model = _check_model(model)
    x, y = _check_batch(x, y)
    methods = _methods("methods", methods, ATTACK_METHODS_000)
    eps_list = _eps_list(eps_list)
    k = _k(k, x)
    steps = _count("steps", steps)
    ig_steps, n_samples = _count("ig_steps", ig_steps), _count("n_samples", n_samples)
    _positive("sg_noise", sg_noise), _positive("ug_radius", ug_radius)
    if step_size is not None:
        _positive("step_size", step_size)
    _count("seed", seed, 0)
    y = _target(model, x, y)
    table = _methods_000(ig_steps, n_samples, sg_noise, ug_radius, multiply_by_input)
    out = {}
    for name in methods:
        curves = attack_eval_000(model, x, attack="topk", method=name, eps_list=eps_list, k=k,
                                 steps=steps, step_size=step_size, surrogate_beta=surrogate_beta,
                                 methods=table, seed=seed, target=y)
        auc = auc_000(curves, by="metric").set_index("metric").value
        clean = attribution_map_000(*table[name], model, x, y, seed)
        share = metrics_000(clean, clean, k)["k-in"].double().mean()
        out[f"kin_auc_{name}"] = float(auc["k-in"])
        out[f"kin_auc_clean_{name}"] = float(auc_over_eps(share.expand(len(eps_list))))
        out[f"spearman_auc_{name}"] = float(auc["cor"])
    return out


# --------------------------------------------------------------------------- 001
def deviation_bounds_001(model: nn.Module, x: torch.Tensor, y=None, *,
                         norms: Sequence[str] = ("l2", "linf"), method: str = "sm",
                         eps_l2: float = 0.1, eps_linf: float = 8 / 255, k: int = 8,
                         l2_steps: int = 20, linf_steps: int = 40, direct_steps: int = 10,
                         ig_steps: int = 8, seed: int = 0) -> dict:
    """001 (Wang & Kong, CVPR 2023), Tables 6-10: the first-order worst-case bounds on the
    attribution deviation and the deviations that attacks reach, through
    :func:`robattr.bounds.evaluate_bounds` (ξ_max matrix-free by Lanczos; ℓ∞ by Thm 2 on
    the dense Jacobian; 001's attack -- :func:`robattr.attacks.l2_attribution_attack` for
    ℓ2, IFIA for ℓ∞ -- and a direct ascent on the deviation started at the linear worst
    case, both with the label kept).

    For each norm ``n`` in ``norms``: ``T_e_<n>`` (the bound on ``‖g(x+δ) − g(x)‖₂``),
    ``T_c_deg_<n>`` (Cor 2: the bound on the angle between the maps, degrees; NaN-free:
    90 where ``T_e ≥ ‖g‖``), ``dev_<n>`` and ``angle_deg_<n>`` (the larger of the two
    attacks' deviation / angle per input), ``dev_over_Te_<n>`` (their ratio; > 1 means
    the first-order bound was exceeded) and ``frac_above_Te_<n>`` (the fraction of inputs
    where it was, by more than 1e-4 relative -- float32 rounding of a difference of maps;
    a linear attribution attains the bound). ``T_e`` scales with the size of the map; the angle does not.
    """
    from robattr.bounds import evaluate_bounds

    model = _check_model(model)
    x, y = _check_batch(x, y)
    if isinstance(norms, str) or not norms or any(n not in ("l2", "linf") for n in norms):
        raise ValueError(f"norms must be a non-empty sequence of 'l2' / 'linf', got {norms!r}")
    if method not in ("sm", "ig", "ixg"):
        raise ValueError(f"method must be 'sm', 'ig' or 'ixg', got {method!r}")
    eps = {"l2": _positive("eps_l2", eps_l2), "linf": _positive("eps_linf", eps_linf)}
    k = _k(k, x)
    steps = {"l2": _count("l2_steps", l2_steps), "linf": _count("linf_steps", linf_steps)}
    direct_steps, ig_steps = _count("direct_steps", direct_steps), _count("ig_steps", ig_steps)
    _count("seed", seed, 0)
    y = _target(model, x, y)
    out = {}
    for n in norms:
        r = evaluate_bounds(model, x, y, method=method, norm=n, eps=eps[n], k=k,
                            paper_steps=steps[n], direct_steps=direct_steps, ig_steps=ig_steps,
                            seed=seed)
        dev = torch.maximum(r["dev_paper"], r["dev_direct"])
        ang = torch.maximum(r["angle_paper"], r["angle_direct"])
        ratio = dev / r["T_e"].clamp_min(1e-300)
        out[f"T_e_{n}"] = _mean(r["T_e"])
        out[f"T_c_deg_{n}"] = _mean(torch.nan_to_num(r["T_c_deg"], nan=90.0))
        out[f"dev_{n}"] = _mean(dev)
        out[f"angle_deg_{n}"] = _mean(ang)
        out[f"dev_over_Te_{n}"] = _mean(ratio)
        out[f"frac_above_Te_{n}"] = _mean(ratio > 1 + 1e-4)   # ties: float32 rounding
    return out


# --------------------------------------------------------------------------- 002
def _unit(base):
    """``base`` normalised to unit ℓ2 norm per example (so ``M = 1`` bounds it)."""
    def unit_attribution(model, x, target=None, *, create_graph=False, **options):
        g = base(model, x, target, create_graph=create_graph, **options)
        n = g.flatten(1).norm(dim=1).clamp_min(1e-30)
        return g / n.reshape((-1,) + (1,) * (g.ndim - 1))
    return unit_attribution


def _base_002(base, ig_steps):
    from robattr.attributions import grad, integrated_gradients

    if base == "grad":
        return grad
    if base == "ig":
        return functools.partial(integrated_gradients, steps=ig_steps)
    raise ValueError(f"base must be 'grad' or 'ig', got {base!r}")


def _certified_eps_per_image(model, x, y, unit, *, r, T, n_samples, seed):
    """Per input: 002's corrected certified budget (Cor. 1 with ``M = 1``) and ``‖h‖``,
    the norm of the Monte-Carlo smoothed unit map (both float64 numpy arrays, length N)."""
    from robattr.bounds import ball_smoothing_max_eps, ball_smoothing_stats

    st = ball_smoothing_stats(model, x, y, r=r, n_samples=n_samples, base=unit, seed=seed)
    c = st["h"].flatten(1).norm(dim=1).double().cpu().numpy()
    eps_i = np.asarray(ball_smoothing_max_eps(np.clip(c, 1e-12, 1.0), 1.0, x[0].numel(), r, T,
                                              corrected=True), dtype=float).reshape(-1)
    return eps_i, c


def certified_eps_002(model: nn.Module, x: torch.Tensor, y=None, *, r: float = 1.0,
                      T: float = 0.8, base: str = "grad", ig_steps: int = 4,
                      n_samples: int = 64, attack_eps: float | None = None, k: int = 8,
                      steps: int = 10, step_size: float | None = None, n_attack: int = 8,
                      n_check: int = 64, seed: int = 0) -> dict:
    """002 (Wang & Kong, 2024/25), Tables 5-8: the certified ℓ2 budget of the uniformly
    ball-smoothed attribution, and the cosine an attack reaches.

    The smoothed map is the mean of the *unit-normalised* base attribution ``g/‖g‖`` over
    the ℓ2 ball of radius ``r`` (:func:`robattr.bounds.ball_smoothing_stats`,
    ``h_unit``), so ``M = 1`` bounds the integrand everywhere and the certificate is a
    proof up to the Monte-Carlo error of ``‖h‖``. The budget is 002's Corollary 1 in its
    corrected form (:func:`robattr.bounds.ball_smoothing_max_eps` with ``corrected=True``;
    the printed Thm 1 is not a bound, see the wangkong2025 chapter).

    The attack is :func:`robattr.attacks.l2_attribution_attack` (top-k loss, ℓ2 steps,
    random start, no label constraint) through the smoothed unit map with ``n_attack``
    draws, at ``attack_eps`` (None: the smallest certified budget in the batch, which
    tests the certificate on every input). The cosine between the smoothed maps of the
    clean and the attacked input is then estimated with ``n_check`` fresh draws each.

    Returns ``eps_cert_mean``, ``eps_cert_min``, ``h_unit_norm`` (mean ``‖h‖``, in (0, 1]),
    ``attack_eps``, ``cos_attack_mean``, ``cos_attack_min``, ``frac_certified`` (inputs
    whose budget is at least ``attack_eps``) and ``cert_violations`` (certified inputs
    whose attacked cosine fell below ``T`` by more than 3 Monte-Carlo standard errors;
    0 if the certificate holds).
    """
    from robattr.attacks import l2_attribution_attack
    from robattr.attributions import ball_smoothed
    from robattr.bounds import ball_smoothing_stats

    model = _check_model(model)
    x, y = _check_batch(x, y)
    r = _positive("r", r)
    if isinstance(T, bool) or not isinstance(T, numbers.Real) or not 0 < T < 1:
        raise ValueError(f"T must be a number in (0, 1), got {T!r}")
    g = _base_002(base, _count("ig_steps", ig_steps))
    n_samples, n_attack, n_check = (_count("n_samples", n_samples, 2),
                                    _count("n_attack", n_attack), _count("n_check", n_check, 2))
    k, steps = _k(k, x), _count("steps", steps)
    if attack_eps is not None:
        attack_eps = _positive("attack_eps", attack_eps)
    if step_size is not None:
        _positive("step_size", step_size)
    _count("seed", seed, 0)
    y = _target(model, x, y)
    unit = _unit(g)
    eps_i, c = _certified_eps_per_image(model, x, y, unit, r=r, T=T, n_samples=n_samples,
                                        seed=seed)
    a_eps = float(eps_i.min()) if attack_eps is None else attack_eps
    out = {"eps_cert_mean": float(eps_i.mean()), "eps_cert_min": float(eps_i.min()),
           "h_unit_norm": float(c.mean()), "attack_eps": a_eps}
    if a_eps <= 0:
        x_adv = x.clone()
    else:
        method = ball_smoothed(unit, r=r, n_samples=n_attack)
        x_adv = l2_attribution_attack(model, x, y, k=k, eps=a_eps, steps=steps,
                                      step_size=2.5 * a_eps / steps if step_size is None
                                      else step_size, random_start=True, keep_label=False,
                                      method=method, reduce=None, seed=seed).x_adv
    h0 = ball_smoothing_stats(model, x, y, r=r, n_samples=n_check, base=unit, seed=seed + 1)
    h1 = ball_smoothing_stats(model, x_adv, y, r=r, n_samples=n_check, base=unit,
                              seed=seed + 2)
    a, b = h0["h"].flatten(1).double(), h1["h"].flatten(1).double()
    cos = (a * b).sum(1) / (a.norm(dim=1) * b.norm(dim=1)).clamp_min(1e-300)
    err = ((h0["var"].flatten(1).sum(1) + h1["var"].flatten(1).sum(1)).double() / n_check).sqrt()
    tol = (3 * err / torch.minimum(a.norm(dim=1), b.norm(dim=1)).clamp_min(1e-300)).cpu()
    cos = cos.cpu()
    certified = torch.as_tensor(eps_i >= a_eps * (1 - 1e-9))
    out.update(cos_attack_mean=_mean(cos), cos_attack_min=float(cos.min()),
               frac_certified=_mean(certified),
               cert_violations=float((certified & (cos < T - tol)).sum()))
    return out


# --------------------------------------------------------------------------- 003
def _methods_003():
    from robattr.attributions import grad, guided_backprop, input_x_grad, lrp

    return {"Grad": grad, "xGrad": input_x_grad, "GBP": guided_backprop, "LRP": lrp}


def interpretation_003(model: nn.Module, x: torch.Tensor, y=None, *,
                       methods: Sequence[str] = METHODS_003, rps_eps: float = 16 / 255,
                       rps_samples: int = 10, attack_eps: float = 4 / 255,
                       attack_steps: int = 20, gamma: float = 0.5, frame_width: int = 1,
                       ratios: int = 20, seed: int = 0) -> dict:
    """003 (Joo et al., AAAI 2023), Table 1: for Grad, x*Grad, Guided Backprop and LRP,

    * ``rps_<M>``: random perturbation similarity (:func:`robattr.metrics.rps`), the mean
      cosine between the map and the maps of ``rps_samples`` uniform ℓ∞ perturbations of
      size ``rps_eps``;
    * ``ins_<M>``: Insertion (:func:`robattr.metrics.insertion`), mean true-class
      probability over ``ratios + 1`` insertion ratios, × 100;
    * ``advins_<M>``: Adv-Insertion (:func:`robattr.metrics.adv_insertion`): the same game
      on the clean input, pixels ordered by the map of the input attacked by 003's
      targeted attack toward a frame (:func:`robattr.attacks.targeted_attack` with
      ``gamma``, :func:`robattr.attacks.frame_target` of ``frame_width`` pixels), × 100.
    """
    from robattr.attacks import frame_target, targeted_attack
    from robattr.metrics import adv_insertion, insertion, rps

    model = _check_model(model)
    x, y = _check_batch(x, y)
    methods = _methods("methods", methods, METHODS_003)
    rps_eps, attack_eps = _positive("rps_eps", rps_eps), _positive("attack_eps", attack_eps)
    rps_samples, attack_steps = _count("rps_samples", rps_samples), _count("attack_steps",
                                                                            attack_steps)
    if isinstance(gamma, bool) or not isinstance(gamma, numbers.Real) or not 0 <= gamma <= 1:
        raise ValueError(f"gamma must be a number in [0, 1], got {gamma!r}")
    frame_width, ratios = _count("frame_width", frame_width), _count("ratios", ratios)
    _count("seed", seed, 0)
    y = _target(model, x, y)
    table = _methods_003()
    target_map = frame_target(tuple(x.shape[-2:]), frame_width, device=x.device)
    out = {}
    for name in methods:
        fn = table[name]
        out[f"rps_{name}"] = _mean(rps(model, fn, x, y, eps=rps_eps, n_samples=rps_samples,
                                       generator=_gen(x, seed)))
        out[f"ins_{name}"] = 100 * _mean(insertion(model, x, fn(model, x, y).detach(), y,
                                                   ratios=ratios).mean)
        res = targeted_attack(model, x, y, target_map=target_map, eps=attack_eps, method=fn,
                              gamma=gamma, steps=attack_steps, seed=seed)
        out[f"advins_{name}"] = 100 * _mean(adv_insertion(model, fn, x, res.x_adv, y,
                                                          ratios=ratios).mean)
    return out


# --------------------------------------------------------------------------- 004
def retrieval_004(model: nn.Module, x: torch.Tensor, y=None, *,
                  methods: Sequence[str] = ("SimGrad", "RelEx"), eps: float = 0.1,
                  pgd_steps: int = 10, sg_samples: int = 16, ig_steps: int = 8,
                  relex_epochs: int = 20, n_noisy: int = 8, ratios: int = 16,
                  seed: int = 0) -> dict:
    """004 (Lim et al., CVPR 2021), Table 1 and Fig. 3: explanations of attacked inputs.

    The clean class ``c0`` is the model's prediction on ``x`` (004's convention; ``y`` is
    only checked, not used). ``x_adv`` is untargeted ℓ∞ PGD on ``c0``
    (:func:`robattr.attacks.pgd`, ``eps``, ``pgd_steps``). Each explainer's map of
    ``x_adv`` for ``c0`` becomes a [0, 1] mask (gradient maps: ``|.|`` summed over
    channels, 99th-percentile min-max scaling as 004's code; RelEx: its own mask), and

    * ``retrieval_<M>``: the rate at which ``f(m ⊙ x_adv)`` is ``c0``
      (:func:`robattr.metrics.class_retrieval`);
    * ``R_<M>``: feature relevance R (:func:`robattr.metrics.feature_relevance`), the
      harmonic mean of preservation and 1 − deletion on ``x_adv``
      (:func:`robattr.metrics.preservation` / :func:`~robattr.metrics.deletion`, ``ratios``
      steps);

    and ``fooled``, the attack's success rate (retrieval is only hard where it is high).
    Explainers: SimGrad (the gradient), SmoothGrad, IntGrad and RelEx
    (:func:`robattr.attributions.relex`, ``relex_epochs`` steps of ``n_noisy`` copies).
    """
    from robattr import attributions as A
    from robattr.attacks import pgd
    from robattr.attributions import to_mask
    from robattr.metrics import class_retrieval, deletion, feature_relevance, preservation

    model = _check_model(model)
    x, y = _check_batch(x, y)
    methods = _methods("methods", methods, METHODS_004)
    eps = _positive("eps", eps)
    pgd_steps, sg_samples, ig_steps = (_count("pgd_steps", pgd_steps),
                                       _count("sg_samples", sg_samples),
                                       _count("ig_steps", ig_steps))
    relex_epochs, n_noisy, ratios = (_count("relex_epochs", relex_epochs),
                                     _count("n_noisy", n_noisy), _count("ratios", ratios))
    _count("seed", seed, 0)
    with torch.no_grad():
        c0 = model(x).argmax(1)
    x_adv = pgd(model, x, c0, eps=eps, steps=pgd_steps, generator=_gen(x, seed))
    with torch.no_grad():
        fooled = model(x_adv).argmax(1) != c0

    explain = {      # maps as masks by 004's S2.1 (robattr.attributions.to_mask)
        "SimGrad": lambda z: to_mask(A.grad(model, z, c0), "grad"),
        "SmoothGrad": lambda z: to_mask(A.smoothgrad(model, z, c0, n_samples=sg_samples,
                                                     seed=seed), "grad"),
        "IntGrad": lambda z: to_mask(A.integrated_gradients(model, z, c0, steps=ig_steps), "grad"),
        "RelEx": lambda z: to_mask(A.relex(model, z, c0, epochs=relex_epochs, n_noisy=n_noisy,
                                           seed=seed), "mask"),
    }
    out = {"fooled": _mean(fooled)}
    for name in methods:
        m = explain[name](x_adv).detach()
        out[f"retrieval_{name}"] = _mean(class_retrieval(model, x_adv, m, c0, normalize=None))
        D = deletion(model, x_adv, m, c0, ratios=ratios).auc
        P = preservation(model, x_adv, m, c0, ratios=ratios).auc
        out[f"R_{name}"] = _mean(feature_relevance(P, D))
    return out


# --------------------------------------------------------------------------- cost
def training_cost(model: nn.Module) -> dict:
    """Accuracy and training cost of a zoo model, from ``model.zoo_meta``:
    ``test_acc``, ``seconds_per_epoch`` (mean over epochs), ``train_seconds`` (the whole
    training) and ``peak_memory_mb`` (the trainer's peak: CUDA's allocator on a GPU,
    autograd's saved activations + parameters/gradients/optimizer state on the CPU;
    NaN if the zoo did not record it)."""
    meta = getattr(model, "zoo_meta", None)
    if not isinstance(meta, dict):
        raise ValueError("model has no zoo_meta: training_cost needs a model from "
                         "robattr.zoo.get_model")
    spe = meta.get("seconds_per_epoch")
    if isinstance(spe, (list, tuple)):
        spe = float(np.mean(spe)) if spe else float("nan")
    peak = meta.get("peak_memory_bytes")
    return {"test_acc": float(meta.get("test_acc", float("nan"))),
            "seconds_per_epoch": float(spe) if spe is not None else float("nan"),
            "train_seconds": float(meta.get("train_seconds", float("nan"))),
            "peak_memory_mb": float(peak) / 2 ** 20 if peak is not None else float("nan")}


def training_step_seconds(model: nn.Module, x: torch.Tensor, y, *, method: str | None = None,
                          repeats: int = 3, **hparams) -> float:
    """Seconds of one training step (loss, backward) of ``method`` on the batch ``(x, y)``,
    the median of ``repeats`` timed steps after one warm-up, on a copy of ``model`` in
    train mode (the model itself is not touched). ``method`` and ``hparams`` default to
    the model's zoo configuration (``model.zoo_meta["config"]``). Unlike the zoo's
    recorded ``seconds_per_epoch`` -- measured whenever and wherever each model was
    trained -- every model timed in one session shares the machine's load."""
    import copy
    import time

    from robattr.train import make_loss

    model = _check_model(model)
    x, y = _check_batch(x, y)
    if y is None:
        raise ValueError("y (the labels of the training batch) is required")
    repeats = _count("repeats", repeats)
    if method is None:
        cfg = (getattr(model, "zoo_meta", None) or {}).get("config")
        if not cfg:
            raise ValueError("give method= (the model has no zoo configuration)")
        method, hparams = cfg["method"], {**cfg["loss"], **hparams}
    loss = make_loss(method, **hparams)
    m = copy.deepcopy(model).train()
    times = []
    for i in range(repeats + 1):
        t0 = time.perf_counter()
        value, _ = loss(m, x, y)
        value.backward()
        m.zero_grad(set_to_none=True)
        if x.is_cuda:
            torch.cuda.synchronize(x.device)     # CUDA runs asynchronously: time the work, not its launch
        if i:
            times.append(time.perf_counter() - t0)
    return float(np.median(times))


#: The fewest timed rounds from which a claim about training time is decided
#: (:func:`faster_per_step`). Two or three rounds give two or three numbers, not an
#: interval: below this the notebooks print the measurement beside the paper's ratio,
#: without a verdict.
MIN_TIMING_ROUNDS = 5


def step_time_rounds(models: dict, x: torch.Tensor, y, rounds: int) -> dict:
    """Seconds of one training step of every model of ``models`` (name -> zoo model) on
    the batch ``(x, y)``, in ``rounds`` rounds. Each round times every model once
    (:func:`training_step_seconds` with ``repeats=1``: one warm-up step, one timed step),
    one model after the other, so that the times of a round share the machine's load and
    the rounds pair the models. Returns name -> numpy array of ``rounds`` seconds."""
    if not isinstance(models, dict) or not models:
        raise ValueError("models must be a non-empty dict name -> model")
    rounds = _count("rounds", rounds)
    times = {name: [] for name in models}
    for _ in range(rounds):
        for name, m in models.items():
            times[name].append(training_step_seconds(m, x, y, repeats=1))
    return {name: np.asarray(t, dtype=float) for name, t in times.items()}


def faster_per_step(step_times: dict, slow: str, fast: str, *,
                    min_rounds: int = MIN_TIMING_ROUNDS):
    """"``fast`` takes less time per training step than ``slow``", from the per-round times
    of :func:`step_time_rounds`: :func:`robattr.verdicts.gap` of ``slow − fast`` paired by
    round (its bootstrap interval over the rounds decides). ``None`` when there are fewer
    than ``min_rounds`` rounds: too few for an interval, so the caller reports the
    measurement without a verdict."""
    from robattr import verdicts

    for name in (slow, fast):
        if name not in step_times:
            raise ValueError(f"no step times for {name!r}; known: {sorted(step_times)}")
    a, b = np.asarray(step_times[slow], float), np.asarray(step_times[fast], float)
    if a.shape != b.shape or a.ndim != 1:
        raise ValueError(f"the times of {slow!r} and {fast!r} must be paired by round (same "
                         f"length), got {a.shape} and {b.shape}")
    min_rounds = _count("min_rounds", min_rounds, 2)
    if a.size < min_rounds:
        return None
    return verdicts.gap(a, b, what=f"{slow} − {fast} seconds per training step, paired by round")


# --------------------------------------------------------------------------- directions
_LOWER = ("T_e_", "T_c_deg_", "dev_", "angle_deg_", "frac_above_Te_", "fooled",
          "seconds_per_epoch", "train_seconds", "peak_memory_mb", "cert_violations")


def higher_is_better(key: str) -> bool:
    """Whether a larger value of an evaluation key means a more robust (or cheaper, or more
    accurate) model: False for bounds, deviations, angles, attack success and costs,
    True for agreement scores, certified budgets, cosines, retrieval, R and accuracy.
    (000's ``kin_auc_clean_*`` is a no-attack reference, not a robustness score: it says
    how concentrated the clean maps are; compare ``kin_auc_*`` with it rather than rank it.)"""
    if not isinstance(key, str) or not key:
        raise ValueError(f"key must be a non-empty string, got {key!r}")
    return not key.startswith(_LOWER)


#: The five papers' evaluations by chapter key.
EVALUATIONS = {
    "wang2020": attack_auc_000,
    "wangkong2023": deviation_bounds_001,
    "wangkong2025": certified_eps_002,
    "joo2023": interpretation_003,
    "lim2021": retrieval_004,
}


# --------------------------------------------------------------------------- the matrix
#: The headline of each paper whose per-image values :func:`headline_per_image` returns
#: (the batch mean of those values is the evaluation's cell).
PER_IMAGE_HEADLINES = {"wang2020": "kin_auc_SM", "wangkong2025": "eps_cert_mean",
                       "joo2023": "rps_Grad"}


def _paper_kwargs(paper, kwargs) -> dict:
    """The keyword arguments of ``EVALUATIONS[paper]``: its defaults updated by ``kwargs``
    (a name the evaluation does not take is a ValueError)."""
    import inspect

    fn = EVALUATIONS[paper]
    params = {n: p.default for n, p in inspect.signature(fn).parameters.items()
              if p.kind is inspect.Parameter.KEYWORD_ONLY}
    unknown = sorted(set(kwargs) - set(params))
    if unknown:
        raise ValueError(f"{fn.__name__} takes no argument {unknown}; it takes {sorted(params)}")
    return {**params, **kwargs}


def evaluate_all(model: nn.Module, x: torch.Tensor, y=None, kwargs: dict | None = None
                 ) -> tuple[dict, dict]:
    """Every paper's evaluation of :data:`EVALUATIONS` on one model and batch, in that
    order: ``kwargs`` maps a paper key to the keyword arguments of its evaluation (a
    paper left out runs with the defaults). Returns ``(cells, seconds)``: ``cells`` maps
    ``(paper, key)`` to each returned scalar, ``seconds`` maps each paper to the wall-clock
    seconds of its call. One row of the cross-paper matrix."""
    import time

    kwargs = {} if kwargs is None else dict(kwargs)
    unknown = sorted(set(kwargs) - set(EVALUATIONS))
    if unknown:
        raise ValueError(f"kwargs has keys that are not papers: {unknown} (papers: "
                         f"{list(EVALUATIONS)})")
    cells, seconds = {}, {}
    for paper, fn in EVALUATIONS.items():
        t0 = time.perf_counter()
        out = fn(model, x, y, **kwargs.get(paper, {}))
        cells.update({(paper, key): v for key, v in out.items()})
        seconds[paper] = time.perf_counter() - t0
    return cells, seconds


def headline_per_image(paper: str, model: nn.Module, x: torch.Tensor, y=None,
                       **kwargs) -> np.ndarray:
    """The per-image values whose mean is the headline cell :data:`PER_IMAGE_HEADLINES`
    ``[paper]`` of ``EVALUATIONS[paper](model, x, y, **kwargs)``, computed by the same
    calls with the same seeds: 000's mass-form k-in AUC of SM under the top-k attack,
    002's corrected certified ℓ2 budget, 003's RPS of the gradient. ``kwargs`` are the
    evaluation's own keyword arguments (those the headline does not use are accepted and
    ignored, so one dict serves both calls). Returns N floats (float64), one per image."""
    if paper not in PER_IMAGE_HEADLINES:
        raise ValueError(f"paper must be one of {list(PER_IMAGE_HEADLINES)}, got {paper!r}")
    kw = _paper_kwargs(paper, kwargs)
    model = _check_model(model)
    x, y = _check_batch(x, y)
    seed = _count("seed", kw["seed"], 0)
    y = _target(model, x, y)
    if paper == "joo2023":
        from robattr.metrics import rps

        v = rps(model, _methods_003()["Grad"], x, y, eps=_positive("rps_eps", kw["rps_eps"]),
                n_samples=_count("rps_samples", kw["rps_samples"]), generator=_gen(x, seed))
    elif paper == "wangkong2025":
        T = kw["T"]
        if isinstance(T, bool) or not isinstance(T, numbers.Real) or not 0 < T < 1:
            raise ValueError(f"T must be a number in (0, 1), got {T!r}")
        unit = _unit(_base_002(kw["base"], _count("ig_steps", kw["ig_steps"])))
        v, _ = _certified_eps_per_image(model, x, y, unit, r=_positive("r", kw["r"]), T=T,
                                        n_samples=_count("n_samples", kw["n_samples"], 2),
                                        seed=seed)
    else:
        table = _methods_000(_count("ig_steps", kw["ig_steps"]),
                             _count("n_samples", kw["n_samples"]), kw["sg_noise"],
                             kw["ug_radius"], kw["multiply_by_input"])
        curves = attack_eval_000(model, x, attack="topk", method="SM",
                                 eps_list=_eps_list(kw["eps_list"]), k=_k(kw["k"], x),
                                 steps=_count("steps", kw["steps"]), step_size=kw["step_size"],
                                 surrogate_beta=kw["surrogate_beta"], methods=table, seed=seed,
                                 target=y, per_image=True)
        v = auc_000(curves[curves.metric == "k-in"], by="image").sort_values("image").value
    v = v.detach().cpu() if torch.is_tensor(v) else v
    return np.asarray(v, dtype=np.float64).reshape(-1)


def defenses_against_reference(matrix, defenses: dict, headlines: Sequence,
                               reference: str = "CE"):
    """Each paper's own claim, read off the matrix: do the defenses it evaluates beat the
    ``reference`` row (standard training) on its headline, and on how many of the other
    papers' headlines?

    ``matrix`` is a DataFrame with one row per training method and ``(paper, key)``
    columns; ``defenses`` maps a paper to ``(its defense rows, its headline column)``;
    ``headlines`` lists the headline columns of all papers (those of the same paper are
    skipped when counting the others). Directions come from :func:`higher_is_better`.
    A paper is left out when ``reference`` or all its defenses are missing from the
    matrix. Returns a DataFrame with one row per (paper, defense): ``paper``,
    ``defense``, ``headline`` (its key), ``<reference>`` and ``defense_value`` (the two
    headline cells), ``beats_<reference>`` (strictly better) and
    ``beats_<reference>_on_other_headlines`` (``"i of n"``)."""
    import pandas as pd

    if not isinstance(matrix, pd.DataFrame) or matrix.columns.nlevels != 2:
        raise ValueError("matrix must be a DataFrame with (paper, key) columns")
    if not isinstance(defenses, dict):
        raise ValueError(f"defenses must map a paper to (rows, headline column), got "
                         f"{type(defenses).__name__}")
    headlines = [tuple(c) for c in headlines]
    for col in headlines + [tuple(v[1]) for v in defenses.values()]:
        if col not in matrix.columns:
            raise ValueError(f"column {col!r} is not in the matrix")
    beats = f"beats_{reference}"
    rows = []
    for paper, (defs, col) in defenses.items():
        defs = [d for d in defs if d in matrix.index]
        if reference not in matrix.index or not defs:
            continue
        s = 1.0 if higher_is_better(col[1]) else -1.0
        ref_v = float(matrix.loc[reference, col])
        others = [c for c in headlines if c[0] != paper]
        for d in defs:
            own = float(matrix.loc[d, col])
            wins = sum(float(np.sign((matrix.loc[d, c] - matrix.loc[reference, c]) *
                                     (1 if higher_is_better(c[1]) else -1))) > 0 for c in others)
            rows.append({"paper": paper, "defense": d, "headline": col[1], reference: ref_v,
                         "defense_value": own, beats: bool(s * (own - ref_v) > 0),
                         f"{beats}_on_other_headlines": f"{int(wins)} of {len(others)}"})
    return pd.DataFrame(rows)


def spearman_terms(a, b) -> np.ndarray:
    """The per-row terms whose mean is Spearman's ρ between ``a`` and ``b``: the products
    of their standardised ranks (average ranks for ties, population standard deviation).
    Resampling these terms gives a bootstrap interval for ρ over the rows."""
    from scipy import stats

    a, b = np.asarray(a, dtype=float), np.asarray(b, dtype=float)
    if a.ndim != 1 or a.shape != b.shape or a.size < 2:
        raise ValueError(f"a and b must be 1-D of the same length >= 2, got shapes "
                         f"{a.shape} and {b.shape}")
    if not (np.isfinite(a).all() and np.isfinite(b).all()):
        raise ValueError("a and b must be finite")
    terms = []
    for name, v in (("a", a), ("b", b)):
        r = stats.rankdata(v)
        if r.std() == 0:
            raise ValueError(f"{name} is constant: it has no ranking")
        terms.append((r - r.mean()) / r.std())
    return terms[0] * terms[1]


def learned_rows(test_acc, min_acc: float, *, at_least: int = 2) -> tuple[list, list]:
    """Split the rows of a comparison by clean test accuracy: ``(kept, dropped)``, the rows
    with ``test_acc >= min_acc`` and those below it, each in the input's order.

    A model that did not learn its task (a collapsed one predicts a single class) can look
    robust because its maps barely depend on the input, so it is no evidence for or
    against a defense. ``test_acc`` maps a row name to its accuracy (a dict or a Series).
    Raises ``ValueError`` when fewer than ``at_least`` rows are kept (nothing left to rank),
    naming the rows and their accuracies."""
    if not 0 <= min_acc < 1:
        raise ValueError(f"min_acc must be in [0, 1), got {min_acc!r}")
    if isinstance(at_least, bool) or int(at_least) != at_least or at_least < 0:
        raise ValueError(f"at_least must be an integer >= 0, got {at_least!r}")
    acc = {str(k): float(v) for k, v in dict(test_acc).items()}
    if any(not 0 <= v <= 1 for v in acc.values()):
        raise ValueError(f"test accuracies must be in [0, 1], got {acc}")
    kept = [k for k, v in acc.items() if v >= min_acc]
    dropped = [k for k in acc if k not in kept]
    if len(kept) < at_least:
        listing = ", ".join(f"{k} {v:.3f}" for k, v in acc.items())
        raise ValueError(f"only {len(kept)} of {len(acc)} rows reach the clean test accuracy "
                         f"{min_acc} ({listing}); at least {at_least} are needed: lower min_acc "
                         "or train the models longer")
    return kept, dropped


def pareto_front(score, cost) -> list:
    """The rows that no other row beats on both ``score`` and ``cost`` (lower is better for
    both; a row beats another when it is no worse on both and better on one). ``score`` and
    ``cost`` are pandas Series over the same rows, without NaN. Returns the front's row
    labels in the order of ``score``'s index."""
    import pandas as pd

    if not isinstance(score, pd.Series) or not isinstance(cost, pd.Series):
        raise ValueError("score and cost must be pandas Series")
    if set(score.index) != set(cost.index) or score.index.has_duplicates:
        raise ValueError("score and cost must share one set of distinct row labels")
    if score.isna().any() or cost.isna().any():
        raise ValueError("score and cost must not hold NaN")
    return [r for r in score.index
            if not any(score[o] <= score[r] and cost[o] <= cost[r]
                       and (score[o] < score[r] or cost[o] < cost[r]) for o in score.index)]

"""000's attack protocol (Wang et al., NeurIPS 2020, Tables 2-6): attack a map, compare.

One attack on one attribution method over a list of budgets, scored by 000's four metrics:

* :data:`METHODS_WANG2020` (:data:`ATTACK_METHODS_WANG2020`, the paper's names SM, IG, SG, UG) and
  :func:`attribution_map_wang2020`: the four attributions as 000 reduces them;
* :func:`metrics_wang2020` (:data:`METRICS_WANG2020`): k-in (mass form), Spearman, centre
  dislocation and cosine distance between a clean and a perturbed map;
* :func:`attack_eval_wang2020`: one attack (top-k, manipulate, mass centre) on one method over
  the budgets, per image or averaged, beside random noise of the same size on request;
* :func:`auc_wang2020`: 000's area under a metric-vs-ε curve; :data:`ROBUST_DIRECTION_WANG2020`:
  which way each metric is "more robust".

In the library rather than in a chapter: the wang2020 chapter's tables run this protocol,
and so does the cross-paper matrix's 000 headline (the top-k k-in AUC of every model); any
model can be scored with it.
"""
from __future__ import annotations

import torch
from torch import nn

__all__ = ["ATTACK_METHODS_WANG2020", "METHODS_WANG2020", "METRICS_WANG2020", "ROBUST_DIRECTION_WANG2020",
           "attribution_map_wang2020", "metrics_wang2020", "attack_eval_wang2020", "auc_wang2020"]

#: 000's four attributions, by the paper's names.
ATTACK_METHODS_WANG2020 = ("SM", "IG", "SG", "UG")

#: 000's four attribution methods as (robattr method name, options): grad × input for SM,
#: SG and UG (App. C1, change 2); IG with the zero baseline (it already multiplies by x).
METHODS_WANG2020 = {
    "SM": ("input_x_grad", {}),
    "IG": ("integrated_gradients", {"steps": 50, "method": "right"}),
    "SG": ("smoothgrad", {"multiply_by_input": True, "n_samples": 50, "noise_ratio": 0.1}),
    "UG": ("uniform_grad", {"multiply_by_input": True, "n_samples": 50, "radius": 4 / 255}),
}

#: The four metrics of 000's tables, in their order: k-in (mass form), Spearman, centre
#: dislocation (pixels), cosine distance.
METRICS_WANG2020 = ("k-in", "cor", "cdl", "cosd")

#: The robust direction of each of 000's metrics: +1 when a larger value means a more
#: robust map (k-in, cor), -1 when a smaller one does (cdl, cosd).
ROBUST_DIRECTION_WANG2020 = {"k-in": 1, "cor": 1, "cdl": -1, "cosd": -1}


def _seeded(name, opts, seed):
    o = dict(opts)
    if name in ("smoothgrad", "uniform_grad"):
        o["seed"] = seed                       # the same noise for the clean and attacked map
    return o


def attribution_map_wang2020(method: str, options: dict, model: nn.Module, x: torch.Tensor,
                        target, seed: int = 0) -> torch.Tensor:
    """The reduced map (N×H×W, ``|a|`` summed over channels) of robattr method ``method``
    with ``options``; SG/UG draw their noise from ``seed`` (the same draws every call)."""
    from robattr.attributions import METHODS, reduce_channels
    return reduce_channels(METHODS[method](model, x, target, **_seeded(method, options, seed))
                           .detach(), "abs_sum")


def metrics_wang2020(map0: torch.Tensor, map1: torch.Tensor, k: int) -> dict[str, torch.Tensor]:
    """000's four metrics between clean and perturbed maps (N×H×W, non-negative), per
    example: ``k-in`` = ``Σ_{i∈K(map0)} n(map1)_i`` (mass form), ``cor`` = Spearman,
    ``cdl`` = centre-of-mass distance in pixels, ``cosd`` = ``1 − cos``."""
    from robattr.metrics import center_dislocation, cosine_distance, spearman, topk_intersection
    return {"k-in": topk_intersection(map0, map1, k, variant="mass"),
            "cor": spearman(map0, map1),
            "cdl": center_dislocation(map0, map1, reduce=None),
            "cosd": cosine_distance(map0, map1)}


def attack_eval_wang2020(model: nn.Module, x: torch.Tensor, *, attack: str, method: str,
                    eps_list, k: int, steps: int = 50, surrogate_beta=None,
                    methods: dict | None = None, eval_methods=None, seed: int = 0,
                    progress: bool = False, target=None, step_size: float | None = None,
                    per_image: bool = False, random_baseline: bool = False):
    """000's protocol (Tables 2-6) for one attacked method: for each ε of ``eps_list``
    (ℓ∞, pixel units) attack ``method`` (a key of ``methods``, default
    :data:`METHODS_WANG2020`) with ``attack`` = ``"topk"`` (Ghorbani et al., original top-k
    fixed, mass criterion), ``"manipulate"`` (Dombrowski et al., weights 1e11 / 1e6, the
    target map that of the next image in the batch) or ``"mass_center"``; then compare the
    clean and attacked maps of each method in ``eval_methods`` (default: the attacked one;
    others give 000's transfer Table 6) by :func:`metrics_wang2020`, with the same noise draws
    for both maps. The label constraint is on. ``target`` is the explained class (default:
    the model's prediction, 000's protocol); ``step_size`` is the attack's (default: that of
    :mod:`robattr.attacks`). Returns a pandas DataFrame with columns
    ``method, metric, eps, value`` (the mean over images). ``per_image=True`` keeps one row
    per image instead (an ``image`` column; a verdict needs the spread over images).
    ``random_baseline=True`` also evaluates random ℓ∞ noise of the same size (``±ε`` on
    every pixel, :func:`robattr.attacks.random_perturbation` with ``linf="vertices"``), the
    baseline of :func:`robattr.report.verdicts.attack_effective`: a ``source`` column says
    ``"attack"`` or ``"random"``.
    """
    import pandas as pd

    from robattr.attacks import (mass_center_attack, random_perturbation, targeted_attack,
                                 topk_attack)
    from robattr.bounds.geometry import _check_x

    methods = dict(METHODS_WANG2020 if methods is None else methods)
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
    clean = {m: attribution_map_wang2020(*methods[m], model, x, target, seed) for m in eval_methods}
    rows = []
    for eps in eps_list:
        if attack == "topk":
            res = topk_attack(model, x, target, k=k, eps=eps, criterion="mass", **common)
        elif attack == "manipulate":
            tmap = attribution_map_wang2020(name, opts, model, x.roll(1, 0), target.roll(1, 0), seed)
            res = targeted_attack(model, x, target, target_map=tmap, eps=eps, **common)
        else:
            res = mass_center_attack(model, x, target, eps=eps, **common)
        moved = [("attack", res.x_adv)]
        if random_baseline:
            moved.append(("random", random_perturbation(x, eps=eps, norm="linf",
                                                        linf="vertices", seed=seed)))
        for m in eval_methods:
            for source, xs in moved:
                adv = attribution_map_wang2020(*methods[m], model, xs, target, seed)
                for metric, val in metrics_wang2020(clean[m], adv, k).items():
                    tag = {"source": source} if random_baseline else {}
                    if per_image:
                        rows += [dict(method=m, metric=metric, eps=eps, **tag, image=i, value=v)
                                 for i, v in enumerate(val.tolist())]
                    else:
                        rows.append(dict(method=m, metric=metric, eps=eps, **tag,
                                         value=val.mean().item()))
    return pd.DataFrame(rows)


def auc_wang2020(curves, by=("attack", "method", "metric")):
    """000's aggregation of metric-vs-ε curves (the output of :func:`attack_eval_wang2020`,
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

"""The zoo models of the cross-paper matrix, declared once: for the notebook
(:func:`robattr.chapters.crosspaper.load_row_models`, which gives them to
``zoo.get_models``) and for ``robattr plan`` (:mod:`robattr.chapters.crosspaper.plan`).

:func:`matrix`, named after the notebook: its parameters (``run.params``) -> ``{label:
spec}``, one per row of the matrix (labelled by the row), a spec being
:func:`robattr.zoo.get_model`'s keyword arguments as one dict (:func:`robattr.cost.spec`).
This module imports no torch (ATEX's teacher key is derived with a lazy import of the zoo).
"""
from __future__ import annotations

from robattr.cost import spec

__all__ = ["BASELINE_ROWS", "TEACHER", "row_methods", "matrix"]

#: the value of the parameter ``baselines`` -> its row
BASELINE_ROWS = {"ATEX": "ATEX", "IGA": "IGA / ART", "AdvAAT": "AdvAAT"}
#: the label of ATEX's teacher, the CE model of the rows' settings, when CE is not a row
TEACHER = "ATEX's teacher (CE)"


def row_methods(at_l2_eps: float) -> dict[str, tuple[str, dict]]:
    """Every row the matrix can have: ``{row: (zoo method, its hyper-parameters)}`` (each
    loss's defaults otherwise). ``at_l2_eps`` is the ℓ2 radius (pixel units) of the row
    AT-l2 (7-step ℓ2 PGD training, step a quarter of it). ATEX's teacher, the CE model's
    zoo key, is set by :func:`matrix`."""
    if isinstance(at_l2_eps, bool) or not isinstance(at_l2_eps, (int, float)) or at_l2_eps <= 0:
        raise ValueError(f"at_l2_eps must be a number > 0, got {at_l2_eps!r}")
    return {
        "CE": ("ce", {}),
        "AT-linf": ("at", {}),
        "AT-l2": ("at", dict(norm="l2", eps=at_l2_eps, steps=7, step_size=at_l2_eps / 4)),
        "TRADES": ("trades", {}),
        # wang2020 Table 1's batch: its l1 term is summed over the batch
        "IG-NORM": ("ig_norm", dict(batch_size=16)),
        "IGR": ("igr", {}),
        "SSR": ("ssr", {}),
        "Hessian": ("hessian", {}),
        "l2": ("l2", {}),
        "l2+cosd": ("l2_cosd", {}),
        # the papers' baselines (parameter baselines)
        "ATEX": ("atex", {}),
        "IGA / ART": ("iga", {}),
        "AdvAAT": ("advaat", {}),
    }


def matrix(p: dict) -> dict[str, dict]:
    """The rows of ``rows``, then those of ``baselines`` (:data:`BASELINE_ROWS`), each the
    Softplus(``beta``) model of ``dataset`` and ``arch`` trained ``epochs`` epochs. ATEX
    distils the CE model of the same settings, named by its zoo key (computed here, in the
    kernel's environment, as the zoo computes it); that model is declared too, as
    :data:`TEACHER` just before ATEX, when CE is not a row."""
    methods = row_methods(p["at_l2_eps"])
    names = [*p["rows"], *(BASELINE_ROWS[b] for b in p["baselines"])]
    unknown = [n for n in names if n not in methods]
    if unknown:
        raise ValueError(f"rows {unknown} are not known; known: {list(methods)}")
    common = dict(epochs=p["epochs"], activation="softplus", beta=p["beta"])
    out = {}
    for name in names:
        method, hp = methods[name]
        if method == "atex":
            from robattr import zoo

            if "CE" not in p["rows"]:
                out[TEACHER] = spec(p["dataset"], p["arch"], "ce", **common)
            hp = dict(teacher=zoo.config_hash(p["dataset"], p["arch"], "ce", **common))
        out[name] = spec(p["dataset"], p["arch"], method, **common, **hp)
    return out

"""The zoo models the example chapter's notebooks train, declared once: for the notebooks
(``zoo.get_models(specs, device=..., ...)``) and for ``robattr plan``
(:mod:`robattr.chapters.example.plan`).

One function per notebook that trains models, named after it: the notebook's parameters
(``run.params``) -> ``{label: spec}`` in the order the notebook asks for them, a spec being
:func:`robattr.zoo.get_model`'s keyword arguments as one dict (:func:`robattr.cost.spec`).
This module imports no torch.
"""
from __future__ import annotations

from robattr.catalog import BASELINE_LOSSES, LOSS_NAMES
from robattr.cost import spec

__all__ = ["ATTACKED", "own_losses", "digits_saliency", "attribution_methods",
           "attacks_and_defenses"]

#: the label of attacks_and_defenses' attacked model (the others are named by their loss)
ATTACKED = "attacked"


def own_losses() -> list[str]:
    """The training losses of ``robattr.train`` that the five papers propose (the baselines
    they compare against left out: those appear in their chapters)."""
    return [name for name in LOSS_NAMES if name not in BASELINE_LOSSES]


def digits_saliency(p: dict) -> dict[str, dict]:
    """The one CE model whose Grad maps the notebook shows (trained at the seed ``seed``)."""
    return {"CE": spec(p["dataset"], p["arch"], epochs=p["epochs"], seed=p["seed"])}


def attribution_methods(p: dict) -> dict[str, dict]:
    """The CE model every attribution method explains (seed 0: the first example's model
    when ``epochs`` is the same; the notebook's ``seed`` is its noise's)."""
    return {"CE": spec(p["dataset"], p["arch"], epochs=p["epochs"], seed=0)}


def attacks_and_defenses(p: dict) -> dict[str, dict]:
    """:data:`ATTACKED`, the ReLU CE model every attack runs on (seed 0), then the loss
    table's models: one Softplus(3) model per loss of :func:`own_losses`, labelled by the
    loss, trained ``train_epochs`` epochs at the seed ``seed``."""
    out = {ATTACKED: spec(p["dataset"], p["arch"], epochs=p["epochs"], seed=0)}
    for name in own_losses():
        out[name] = spec(p["dataset"], p["arch"], name, epochs=p["train_epochs"], seed=p["seed"],
                         activation="softplus", beta=3.0)
    return out

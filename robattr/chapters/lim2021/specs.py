"""The zoo models the lim2021 chapter's notebooks train, declared once: for the notebooks
(:func:`robattr.chapters.lim2021.chapter_models`, which gives them to ``zoo.get_models``)
and for ``robattr plan`` (:mod:`robattr.chapters.lim2021.plan`).

One function per notebook, named after it: the notebook's parameters (``run.params``) ->
``{label: spec}``, a spec being :func:`robattr.zoo.get_model`'s keyword arguments as one
dict (:func:`robattr.cost.spec`). The chapter has two models, :data:`CHAPTER_MODELS`; a model whose
weights file the user gives (its parameter in :data:`CHAPTER_MODELS`) is loaded from it, not from the
zoo, and so is not declared. This module imports no torch.
"""
from __future__ import annotations

from robattr.cost import spec

__all__ = ["CHAPTER_MODELS", "clean_classes", "targeted_transfer", "theory_relex", "untargeted"]

#: the chapter's models: label -> (zoo method, the parameter naming a weights file that
#: replaces the zoo's model); the natural model first
CHAPTER_MODELS = {"natural": ("ce", "weights"), "robust": ("at", "robust_weights")}


def _zoo_specs(p: dict, labels) -> dict[str, dict]:
    """The zoo specs of the models ``labels`` whose weights parameter is empty."""
    return {label: spec(p["dataset"], p["arch"], CHAPTER_MODELS[label][0], epochs=p["epochs"])
            for label in labels if not p.get(CHAPTER_MODELS[label][1])}


def clean_classes(p: dict) -> dict[str, dict]:
    """The natural model (none when ``weights`` names a file)."""
    return _zoo_specs(p, ["natural"])


def targeted_transfer(p: dict) -> dict[str, dict]:
    """The natural model (none when ``weights`` names a file)."""
    return _zoo_specs(p, ["natural"])


def theory_relex(p: dict) -> dict[str, dict]:
    """The natural and the PGD-trained (``"robust"``) model, each unless its weights
    parameter names a file."""
    return _zoo_specs(p, ["natural", "robust"])


def untargeted(p: dict) -> dict[str, dict]:
    """The natural and the PGD-trained (``"robust"``) model, each unless its weights
    parameter names a file."""
    return _zoo_specs(p, ["natural", "robust"])

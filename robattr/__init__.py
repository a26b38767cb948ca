"""robattr: robustness of feature attributions, the package behind the book.

Submodules (imported on first use, so ``import robattr`` stays cheap):

``data``          datasets with pixels in [0, 1] (digits ships offline)
``catalog``       names and sizes of datasets, architectures, losses (no torch)
``models``        LeNet, small CNN/MLP, ResNets, ``set_activation``
``attributions``  differentiable, batched attribution methods
``train``         one trainer and its losses
``zoo``           ``get_model``: train once, cache by configuration hash
``metrics``       similarity and faithfulness metrics, batched
``attacks``       PGD and attacks on attributions
``bounds``        the papers' bounds and certificates
``precision``     full fp32 on CUDA by default; TF32 / bf16 on request
``memory``        probes of what autograd keeps for backward
``params``        notebook parameters: rules declared in the parameters cell, checked
``pipeline``      papermill + jupyter-book build, profiles
``evaluate``      each paper's headline evaluation as one function (the cross-paper matrix)
``executors``     where notebook runs execute: here, worker processes, a Ray cluster
``sweep``         one notebook over a grid of parameter values, results as one CSV
``results``       scalars a notebook records, kept next to the executed notebook
``papers``        citations and the papers' printed tables, our-vs-paper helpers, ``claim``
``verdicts``      rules that compute a claim's verdict (uncertainty, scale)
``verdicts_page`` the book's Verdicts page, from the recorded claims
``viz``           heatmaps and tables for the book
"""
from __future__ import annotations

import importlib

__version__ = "0.1.0"

_SUBMODULES = {
    "attacks", "attributions", "bounds", "catalog", "data", "evaluate", "executors", "memory", "metrics", "models",
    "papers",
    "params", "precision", "pipeline", "results", "sweep", "train", "utils", "verdicts", "verdicts_page", "viz",
    "zoo",
}

__all__ = sorted(_SUBMODULES | {"__version__", "check_params", "get_device", "seed_everything"})


def __getattr__(name: str):
    if name in _SUBMODULES:
        return importlib.import_module(f"robattr.{name}")
    if name in {"get_device", "seed_everything"}:
        return getattr(importlib.import_module("robattr.utils"), name)
    if name == "check_params":
        return importlib.import_module("robattr.params").check_notebook
    raise AttributeError(f"module 'robattr' has no attribute {name!r}")

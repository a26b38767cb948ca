"""robattr: robustness of feature attributions, the package behind the book.

Three halves, with imports running one way (``tests/book/test_layout.py`` enforces it)::

    the library        robattr.*            knows nothing of the chapters or the book
         ^  imported by
    the chapters       robattr.chapters.*   one package per chapter; never imports the book
         ^  declarations read through robattr.chapters.declaration(s) only
    the book machinery robattr.book.*       runs notebooks, profiles, plan, the HTML book

The library (submodules imported on first use, so ``import robattr`` stays cheap):

``data``          datasets with pixels in [0, 1] (digits ships offline)
``catalog``       names and sizes of datasets, architectures, losses (no torch)
``models``        LeNet, small CNN/MLP, ResNets, ``set_activation``
``attributions``  differentiable, batched attribution methods
``train``         one trainer (batches cut and augmented on the device) and its losses
``zoo``           ``get_model``: train once, cache by configuration hash
``metrics``       similarity and faithfulness metrics, batched
``attacks``       PGD and attacks on attributions
``bounds``        the papers' bounds and certificates
``precision``     full fp32 on CUDA by default; TF32 / bf16 on request
``memory``        probes of what autograd keeps for backward
``attack_protocol``  000's attack protocol: attack a map over budgets, four metrics, AUC
``timing``        training time per step, in paired rounds, and the verdict "faster"
``cost``          the units of work ``robattr plan`` counts in (what a declaration uses)
``report``        what a page shows and records: ``papers`` (citations, printed tables,
                  our number beside theirs, ``claim``, ``statement``, ``check``),
                  ``verdicts`` (the rules, scale, guards), ``results``, ``references``,
                  ``reader``, ``tables``, ``viz``
``utils``         ``get_device``, ``seed_everything``

and the book machinery, :mod:`robattr.book` (notebooks, parameters, profiles, stamps,
execution and executors, the HTML book, sweeps, the ``robattr`` command), which the
core never imports. ``robattr.start()`` is a notebook's prologue
(:func:`robattr.book.session.start`: checks the parameters, sets the theme, the table
display, the precision policy, the seed and the device, starts the clock).

What only one chapter's notebooks use lives in :mod:`robattr.chapters` (one package per
chapter: ``robattr.chapters.crosspaper`` holds the five papers' headline evaluations and
the cross-paper matrix), which the core never imports either.
"""
from __future__ import annotations

import importlib

_SUBMODULES = {
    "attack_protocol", "attacks", "attributions", "book", "bounds", "catalog", "cost", "data",
    "memory", "metrics", "models", "precision", "report", "timing", "train", "utils", "zoo",
}

__all__ = sorted(_SUBMODULES | {"__version__", "get_device", "seed_everything", "start"})


def __getattr__(name: str):
    if name == "__version__":                  # robattr.version, loaded on first use
        return importlib.import_module("robattr.version").__version__
    if name in _SUBMODULES:
        return importlib.import_module(f"robattr.{name}")
    if name in {"get_device", "seed_everything"}:
        return getattr(importlib.import_module("robattr.utils"), name)
    if name == "start":
        return importlib.import_module("robattr.book.session").start
    raise AttributeError(f"module 'robattr' has no attribute {name!r}")

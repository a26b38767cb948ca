"""The joo2023 notebooks' models once the zoo has them: their printed names, and the groups a
notebook takes out of ``zoo.get_models``' ``{label: model}`` (the labels of
:mod:`robattr.chapters.joo2023.specs`, where the models and the units of their λ are
declared)."""
from __future__ import annotations

from robattr.chapters.joo2023.specs import REGULARIZERS, seed_label

__all__ = ["ARCH_NAMES", "arch_name", "model_name", "block", "seed_models"]

#: the architecture names the chapter's captions print
ARCH_NAMES = {"mlp": "MLP", "cnn": "CNN", "lenet": "LeNet"}


def arch_name(arch: str) -> str:
    """The printed name of a zoo architecture (``"cnn"`` -> ``"CNN"``; others as they are)."""
    return ARCH_NAMES.get(arch, arch)


def model_name(arch: str, beta: float) -> str:
    """The scale line's model: ``"CNN with Softplus(3)"``."""
    return f"{arch_name(arch)} with Softplus({beta:g})"


def block(models: dict, prefix: str = "") -> dict:
    """A block of Table 1 out of a notebook's ``{label: model}``: the models labelled
    ``prefix + row`` for each row of :data:`~robattr.chapters.joo2023.specs.REGULARIZERS`
    that has one, by row, in the table's row order."""
    return {row: models[prefix + row] for row in REGULARIZERS if prefix + row in models}


def seed_models(models: dict, label: str, n_seeds: int) -> list:
    """The model ``label`` of ``models`` (seed 0) and the same model at seeds 1 ..
    ``n_seeds`` - 1 (:func:`~robattr.chapters.joo2023.specs.seed_label`)."""
    return [models[label]] + [models[seed_label(label, s)] for s in range(1, int(n_seeds))]

"""The wangkong2025 chapter's inputs and models, shared by its notebooks.

* :func:`test_inputs`: ``n`` inputs of a data set's split in a random order fixed by a seed;
* :func:`softplus_models`: the zoo's Softplus models, one per training loss.
"""
from __future__ import annotations

from typing import Sequence

import torch

__all__ = ["test_inputs", "softplus_models", "model_device"]


def test_inputs(name: str, n: int, seed: int, *, split: str = "test",
                size: int | None = None) -> tuple[torch.Tensor, torch.Tensor]:
    """``(x, y)`` on the CPU: the first ``n`` items of a permutation of ``name``'s ``split``
    drawn by ``torch.randperm`` with a generator seeded by ``seed`` (``size``: the image side,
    for a data set outside :data:`robattr.data.DATASETS`)."""
    from robattr import data

    if n < 1:
        raise ValueError(f"n must be at least 1, got {n}")
    ds = data.load(name, split, size=size)
    idx = torch.randperm(len(ds), generator=torch.Generator().manual_seed(seed))[:n]
    x = torch.stack([ds[int(i)][0] for i in idx])
    y = torch.tensor([int(ds[int(i)][1]) for i in idx])
    return x, y


def softplus_models(dataset: str, arch: str, methods: Sequence[str], *, epochs: int,
                    beta: float, device) -> dict:
    """The zoo's Softplus(``beta``) ``arch`` models on ``dataset`` (``epochs`` epochs, seed 0),
    one per training loss of ``methods``, by loss."""
    from robattr import zoo

    return {m: zoo.get_model(dataset, arch, m, epochs=epochs, seed=0, activation="softplus",
                             beta=beta, device=device, progress=False) for m in methods}


def model_device(models: dict) -> torch.device:
    """The device of the first model of ``models`` (a dict of modules)."""
    return next(next(iter(models.values())).parameters()).device

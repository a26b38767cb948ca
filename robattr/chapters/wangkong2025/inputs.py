"""The wangkong2025 chapter's inputs and models, shared by its notebooks.

* :func:`test_inputs`: ``n`` inputs of a data set's split in a random order fixed by a seed;
* :func:`model_device`: where a dict of models runs.

The zoo's Softplus models, one per training loss, are declared in
:mod:`robattr.chapters.wangkong2025.specs`.
"""
from __future__ import annotations

import torch

__all__ = ["test_inputs", "model_device"]


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


def model_device(models: dict) -> torch.device:
    """The device of the first model of ``models`` (a dict of modules)."""
    return next(next(iter(models.values())).parameters()).device

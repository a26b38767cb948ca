"""Fixtures of the crosspaper tests: a small digits CNN and a batch of digits-shaped images,
each made from its own seed (so a test gets the same ones whatever ran before it)."""
from __future__ import annotations

import pytest
import torch

from robattr.models import build


def _cnn(seed=0):
    torch.manual_seed(seed)
    return build("cnn", "digits", "softplus", 3.0).eval()


def _batch(n=3, seed=0):
    g = torch.Generator().manual_seed(seed)
    return torch.rand(n, 1, 8, 8, generator=g), torch.tensor([0, 1, 2, 3, 4, 5][:n])


@pytest.fixture(scope="session")
def cnn():
    """``cnn(seed=0)``: a softplus(3) CNN for 8x8 digits, its weights drawn from ``seed``."""
    return _cnn


@pytest.fixture(scope="session")
def batch():
    """``batch(n=3, seed=0)``: ``n`` images in [0, 1] of shape 1x8x8 and labels 0, 1, ..."""
    return _batch

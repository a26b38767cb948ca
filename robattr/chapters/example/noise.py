"""A first look at fragility: Grad maps under uniform noise (``example/digits_saliency``)."""
from __future__ import annotations

from typing import Sequence

import torch
from torch import nn

from robattr import attributions

__all__ = ["uniform_noisy", "grad_cosines", "stability_answer"]


def uniform_noisy(x: torch.Tensor, eps: float, generator: torch.Generator) -> torch.Tensor:
    """``x`` plus uniform noise in [-eps, eps] per pixel (drawn on the CPU from
    ``generator``, so that a seed gives the same noise on any device), clamped to [0, 1]."""
    if eps < 0:
        raise ValueError(f"eps must be >= 0, got {eps!r}")
    noise = (torch.rand(x.shape, generator=generator) * 2 - 1).to(x.device) * eps
    return (x + noise).clamp(0, 1)


def grad_cosines(model: nn.Module, x: torch.Tensor, target: torch.Tensor,
                 reference: torch.Tensor) -> torch.Tensor:
    """Per image, the cosine similarity between the Grad map of ``model`` at ``x`` (class
    ``target``) and the map ``reference`` (N values)."""
    g = attributions.grad(model, x, target)
    if g.shape != reference.shape:
        raise ValueError(f"reference has shape {tuple(reference.shape)}, the maps {tuple(g.shape)}")
    return torch.nn.functional.cosine_similarity(reference.flatten(1), g.flatten(1), dim=1)


def stability_answer(found: Sequence) -> str:
    """The exercise's answer from its verdicts (one per budget, Softplus − ReLU cosine):
    more stable at every budget, less stable at some budget, or not more stable beyond
    the noise at some budget."""
    if not found:
        raise ValueError("found must hold at least one verdict")
    return "answer: the Softplus gradient is " + (
        "more stable at both budgets" if all(f.holds for f in found) else
        "less stable at some budget" if any(f.fails for f in found) else
        "not more stable beyond the noise at some budget (its interval holds zero)")

"""Turning attributions into heatmaps: the papers' reductions and normalizations.

All are batched torch (one map per input) and differentiable where the maths is
(``reduce_channels``, ``saliency_wang2020``), so attacks can use them.
"""
from __future__ import annotations

import torch

from ._core import check_input, check_positive

__all__ = ["reduce_channels", "percentile_normalize", "minmax_normalize", "saliency_wang2020",
           "MASK_KINDS", "to_mask"]

REDUCTIONS = ("abs_sum", "sum", "mean", "abs_mean", "abs")


def _need_image(a, name="a"):
    if not isinstance(a, torch.Tensor) or a.ndim != 4:
        raise ValueError(f"{name} must be a batch N x C x H x W, got "
                         f"{tuple(a.shape) if isinstance(a, torch.Tensor) else type(a).__name__}")


def reduce_channels(a: torch.Tensor, how="abs_sum", keepdim: bool = False) -> torch.Tensor:
    """One value per pixel, as the papers do before plotting or comparing maps.

    Over the channel axis of an N x C x H x W batch: ``"abs_sum"`` (000's saliency,
    003's heat maps, 004's code), ``"sum"``, ``"mean"``, ``"abs_mean"`` (004's text:
    "the expectation of absolute values of 3 channels"); the result is N x H x W
    (N x 1 x H x W with ``keepdim``). ``"abs"`` is the elementwise ``|a|``, shape kept;
    ``None`` returns ``a``; a callable is applied as is. A batch with fewer than four
    axes has no channel axis: it is taken as already reduced, so ``"abs_sum"`` and
    ``"abs_mean"`` give ``|a|`` and ``"sum"``/``"mean"`` give ``a``.
    """
    if how is None or how == "none":
        return a
    if callable(how):
        return how(a)
    if how not in REDUCTIONS:
        raise ValueError(f"channel reduction (how=/reduce=) must be one of {REDUCTIONS}, None "
                         f"or a callable, got {how!r}")
    if not isinstance(a, torch.Tensor):
        raise ValueError(f"a must be a tensor, got {type(a).__name__}")
    b = a.abs() if how.startswith("abs") else a
    if how == "abs" or a.ndim < 4:
        return b
    return b.sum(1, keepdim=keepdim) if how.endswith("sum") else b.mean(1, keepdim=keepdim)


def percentile_normalize(a: torch.Tensor, q: float = 99.0) -> torch.Tensor:
    """004's first post-processing (after Smilkov et al.'s code): per input,
    ``clamp((a - min) / (P_q - min), 0, 1)`` with ``P_q`` the ``q``-th percentile (linear
    interpolation, as ``numpy.percentile``). Reduce the channels first (e.g.
    ``reduce_channels(a, "abs_sum")``); any shape N x ... works."""
    if not isinstance(a, torch.Tensor) or a.ndim < 2:
        raise ValueError("a must be a batch tensor with one map per row")
    q = check_positive("q", q)
    if q > 100:
        raise ValueError(f"q must be in (0, 100], got {q}")
    flat = a.flatten(1)
    lo = flat.amin(1, keepdim=True)
    hi = torch.quantile(flat, q / 100, dim=1, keepdim=True)
    out = ((flat - lo) / (hi - lo).clamp_min(torch.finfo(flat.dtype).tiny)).clamp(0, 1)
    return out.reshape(a.shape)


def minmax_normalize(a: torch.Tensor) -> torch.Tensor:
    """004's second post-processing (Grad-CAM, RT-Sal): ``(a - min) / (max - min)`` per
    input (``percentile_normalize`` with ``q=100``)."""
    return percentile_normalize(a, q=100.0)


def saliency_wang2020(a: torch.Tensor, x: torch.Tensor | None = None) -> torch.Tensor:
    """000's saliency map (its reference code, ``SMWrapper`` / ``BallWrapper``):
    ``s = sum_c |a * x|``, rescaled so that each map sums to ``H * W``:
    ``s * H W / sum(s)``. Pass ``x=None`` when ``a`` is already multiplied by the input
    (Integrated Gradients: 000 multiplies the mean gradient by ``x - baseline``).
    Returns N x H x W; differentiable."""
    _need_image(a)
    if x is not None:
        _need_image(check_input(x), "x")
        a = a * x
    s = a.abs().sum(1)
    h, w = s.shape[1:]
    total = s.flatten(1).sum(1).clamp_min(torch.finfo(s.dtype).tiny)
    return s * (h * w) / total[:, None, None]


#: How :func:`to_mask` turns each kind of map into a mask.
MASK_KINDS = ("grad", "cam", "mask")


def to_mask(a: torch.Tensor, kind: str) -> torch.Tensor:
    """A map ``a`` (batch-first) as a mask in [0, 1] of ``a``'s shape, as 004's S2.1 does.

    ``"grad"`` (gradient-type maps): ``|a|`` summed over channels, divided by its 99th
    percentile and clipped at 1, then repeated over the channels; ``"cam"`` (Grad-CAM):
    min-max scaled; ``"mask"`` (RelEx, MASK: already masks): clamped to [0, 1].

    In the library, not the lim2021 chapter: that chapter's notebooks and the cross-paper
    matrix's 004 evaluation (class retrieval of a masked input) both make masks this way.
    """
    if kind == "grad":
        return percentile_normalize(reduce_channels(a, "abs_sum", keepdim=True),
                                    99.0).expand_as(a)
    if kind == "cam":
        return minmax_normalize(a)
    if kind == "mask":
        return a.clamp(0, 1)
    raise ValueError(f"kind must be one of {MASK_KINDS}, got {kind!r}")

"""Shared helpers of :mod:`robattr.metrics`: input checks, channel reduction, map
normalisation and the AUC-over-epsilon aggregation of 000."""
from __future__ import annotations

from collections.abc import Callable, Sequence

import torch

from robattr.attributions.postprocess import percentile_normalize, reduce_channels

__all__ = ["reduce_channels", "normalize_map", "auc_over_eps"]

Reduce = str | Callable[[torch.Tensor], torch.Tensor] | None


def check_batch(a, name: str) -> torch.Tensor:
    """``a`` as a floating tensor with a batch axis first (N×D, N×H×W or N×C×H×W)."""
    if not isinstance(a, torch.Tensor):
        raise ValueError(f"{name} must be a torch.Tensor, got {type(a).__name__}")
    if a.ndim < 2:
        raise ValueError(f"{name} must be batch-first with at least 2 dims (N×D, N×H×W or "
                         f"N×C×H×W), got shape {tuple(a.shape)}")
    if a.shape[0] == 0 or a[0].numel() == 0:
        raise ValueError(f"{name} is empty: shape {tuple(a.shape)}")
    if not a.is_floating_point():
        a = a.to(torch.get_default_dtype())
    return a


def check_pair(a, b, names: tuple[str, str] = ("a", "b")) -> tuple[torch.Tensor, torch.Tensor]:
    a = check_batch(a, names[0])
    b = check_batch(b, names[1])
    if a.shape != b.shape:
        raise ValueError(f"{names[0]} and {names[1]} must have the same shape, got "
                         f"{tuple(a.shape)} and {tuple(b.shape)}")
    if a.dtype != b.dtype:
        dtype = torch.promote_types(a.dtype, b.dtype)
        a, b = a.to(dtype), b.to(dtype)
    return a, b


NORMALIZE_MODES = ("max", "sum", "minmax")


def normalize_map(a: torch.Tensor, mode: str = "max", *, q: float = 1.0) -> torch.Tensor:
    """Normalise each map of a batch (all non-batch axes together); the shape is kept.

    ``"max"``: ``a / max|a|`` (003's code, ``hm_norm="standard"`` on ``|.|`` maps).
    ``"sum"``: ``|a| / sum|a|``, the ``n(.)`` of 000's top-k intersection.
    ``"minmax"``: ``(a - min) / (Q_q(a) - min)`` clamped to [0, 1], with ``Q_q`` the
    ``q``-quantile (``q = 1``: the max; ``q = 0.99`` reproduces the 99th-percentile
    scaling of 004's released code). A zero (or constant, for ``"minmax"``) map maps
    to all zeros.
    """
    a = check_batch(a, "a")
    if mode not in NORMALIZE_MODES:
        raise ValueError(f"mode must be one of {NORMALIZE_MODES}, got {mode!r}")
    if not (isinstance(q, (int, float)) and 0.0 < q <= 1.0):
        raise ValueError(f"q must be a quantile in (0, 1], got {q!r}")
    flat = a.reshape(a.shape[0], -1)
    if mode == "max":
        s = flat.abs().amax(dim=1, keepdim=True)
        out = torch.where(s > 0, flat / torch.where(s > 0, s, torch.ones_like(s)), torch.zeros_like(flat))
    elif mode == "sum":
        s = flat.abs().sum(dim=1, keepdim=True)
        out = torch.where(s > 0, flat.abs() / torch.where(s > 0, s, torch.ones_like(s)),
                          torch.zeros_like(flat))
    else:
        out = percentile_normalize(flat, q=100.0 * q)
    return out.reshape(a.shape)


def auc_over_eps(values, eps: Sequence[float] | torch.Tensor | None = None, *,
                 spacing: str = "unit") -> torch.Tensor:
    """Area under a metric-vs-epsilon curve, over the last axis of ``values``.

    ``spacing="unit"`` is 000's aggregation (Tables 2-6): the trapezoid rule with unit
    spacing between consecutive eps points, whatever their values; a metric equal to 1
    at eps = 2, 4, 8, 16 gives 3. ``spacing="eps"`` integrates against the eps values
    themselves (needs ``eps``). ``eps``, when given, must be strictly increasing with one
    value per point.
    """
    v = torch.as_tensor(values)
    if not v.is_floating_point():
        v = v.to(torch.get_default_dtype())
    if v.ndim == 0 or v.shape[-1] < 2:
        raise ValueError(f"values needs at least 2 eps points on its last axis, got shape "
                         f"{tuple(v.shape)}")
    if spacing not in ("unit", "eps"):
        raise ValueError(f"spacing must be 'unit' or 'eps', got {spacing!r}")
    e = None
    if eps is not None:
        e = torch.as_tensor(eps, dtype=v.dtype, device=v.device)
        if e.ndim != 1 or e.shape[0] != v.shape[-1]:
            raise ValueError(f"eps must hold one value per point ({v.shape[-1]}), got shape "
                             f"{tuple(e.shape)}")
        if not bool((e[1:] > e[:-1]).all()):
            raise ValueError(f"eps must be strictly increasing, got {e.tolist()}")
    if spacing == "eps":
        if e is None:
            raise ValueError("spacing='eps' needs the eps values")
        return torch.trapezoid(v, x=e, dim=-1)
    return torch.trapezoid(v, dx=1.0, dim=-1)



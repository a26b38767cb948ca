"""Argument checks shared by the numpy-valued bounds: a ValueError that names the argument."""
from __future__ import annotations

import numpy as _np


def _arr(name: str, v, *, low: float | None = None, strict: bool = False,
         high: float | None = None, high_strict: bool = False) -> _np.ndarray:
    """``v`` (a number, an array or a tensor on any device) as a float array, with a
    ValueError naming ``name`` on NaN or out-of-range."""
    try:
        a = _np.asarray(v.detach().cpu() if hasattr(v, "detach") else v, dtype=float)
    except (TypeError, ValueError):
        raise ValueError(f"{name} must be a number or an array of numbers, got {v!r}") from None
    if _np.isnan(a).any():
        raise ValueError(f"{name} must not be NaN")
    if low is not None and (_np.any(a <= low) if strict else _np.any(a < low)):
        raise ValueError(f"{name} must be {'>' if strict else '>='} {low}, got {v!r}")
    if high is not None and (_np.any(a >= high) if high_strict else _np.any(a > high)):
        raise ValueError(f"{name} must be {'<' if high_strict else '<='} {high}, got {v!r}")
    return a


def _dim(d) -> _np.ndarray:
    a = _np.asarray(d)
    if a.dtype == bool or not (_np.issubdtype(a.dtype, _np.integer)
                               or (_np.issubdtype(a.dtype, _np.floating)
                                   and _np.all(_np.isfinite(a)) and _np.all(a == _np.round(a)))):
        raise ValueError(f"d must be an integer >= 1 (or an array of them), got {d!r}")
    if _np.any(a < 1):
        raise ValueError(f"d must be an integer >= 1, got {d!r}")
    return a.astype(float)


def _out(x: _np.ndarray):
    return float(x) if x.ndim == 0 else x

"""Validate a notebook's parameters before any work is done.

Every notebook's second cell is ``robattr.check_params(**params)``; the CLI
(``robattr run``) applies the same rules to ``-p`` values before it starts
papermill, so a bad value fails in one line that names the parameter.

Rules are keyed by parameter name, so all notebooks share them:

* ``dataset``: a name from :data:`robattr.data.DATASETS` or an ImageFolder path;
* ``arch``: a name from :data:`robattr.models.ARCHS`;
* ``method``: a training method known to :mod:`robattr.train`;
* ``device``: ``"auto"``, ``"cpu"`` or ``"cuda[:N]"``;
* ``seed``: an integer >= 0;
* counts (``epochs``, ``steps``, ``batch_size``, ``n_*``, ``k``, ...): integers >= 1;
* sizes (``lr``, ``sigma``, ``beta``, ``radius``, ...): numbers > 0;
* ``eps`` / ``eps_*`` / ``*_eps``: a number >= 0 or a non-empty list of them.

Names without a rule are accepted as they are.
"""
from __future__ import annotations

import numbers
import os
from typing import Any, Callable

__all__ = ["check", "ParameterError", "RULES"]


class ParameterError(ValueError):
    """A notebook parameter has a value that cannot work."""


def _is_int(v: Any) -> bool:
    return isinstance(v, numbers.Integral) and not isinstance(v, bool)


def _is_num(v: Any) -> bool:
    return isinstance(v, numbers.Real) and not isinstance(v, bool)


def _positive_int(name: str, v: Any) -> None:
    if not _is_int(v) or v < 1:
        raise ParameterError(f"parameter {name!r} must be an integer >= 1, got {v!r}")


def _nonneg_int(name: str, v: Any) -> None:
    if not _is_int(v) or v < 0:
        raise ParameterError(f"parameter {name!r} must be an integer >= 0, got {v!r}")


def _positive_num(name: str, v: Any) -> None:
    if not _is_num(v) or not v > 0:
        raise ParameterError(f"parameter {name!r} must be a number > 0, got {v!r}")


def _eps(name: str, v: Any) -> None:
    values = v if isinstance(v, (list, tuple)) else [v]
    if not values or not all(_is_num(e) and e >= 0 for e in values):
        raise ParameterError(
            f"parameter {name!r} must be a number >= 0 or a non-empty list of them, got {v!r}")


def _dataset(name: str, v: Any) -> None:
    from robattr.data import DATASETS

    if isinstance(v, str) and (v in DATASETS or os.path.isdir(os.path.expanduser(v))):
        return
    raise ParameterError(
        f"parameter {name!r} must be one of {', '.join(DATASETS)} or an ImageFolder path, got {v!r}")


def _arch(name: str, v: Any) -> None:
    from robattr.models import ARCHS

    if v not in ARCHS:
        raise ParameterError(f"parameter {name!r} must be one of {', '.join(ARCHS)}, got {v!r}")


def _method(name: str, v: Any) -> None:
    from robattr.train import LOSSES

    if v not in LOSSES:
        raise ParameterError(f"parameter {name!r} must be one of {', '.join(LOSSES)}, got {v!r}")


def _device(name: str, v: Any) -> None:
    if not isinstance(v, str) or not (v in {"auto", "cpu"} or v.startswith("cuda")):
        raise ParameterError(f"parameter {name!r} must be 'auto', 'cpu' or 'cuda[:N]', got {v!r}")


_COUNTS = {"epochs", "steps", "batch_size", "k", "restarts", "iters", "iterations"}
_SIZES = {"lr", "sigma", "beta", "radius", "step_size", "noise_ratio", "r"}

RULES: dict[str, Callable[[str, Any], None]] = {
    "dataset": _dataset,
    "arch": _arch,
    "method": _method,
    "device": _device,
    "seed": _nonneg_int,
    **{n: _positive_int for n in _COUNTS},
    **{n: _positive_num for n in _SIZES},
}


def rule_for(name: str) -> Callable[[str, Any], None] | None:
    """The rule that applies to a parameter name, or None."""
    if name in RULES:
        return RULES[name]
    if name.startswith("n_"):
        return _positive_int
    if name == "eps" or name.startswith("eps_") or name.endswith("_eps") or name == "epsilons":
        return _eps
    return None


def check(**params: Any) -> dict[str, Any]:
    """Raise :class:`ParameterError` naming the first bad parameter; return ``params``.

    >>> check(epochs=3, dataset="digits")["epochs"]
    3
    >>> check(epochs=-1)
    Traceback (most recent call last):
    ...
    robattr.params.ParameterError: parameter 'epochs' must be an integer >= 1, got -1
    """
    for name, value in params.items():
        rule = rule_for(name)
        if rule is not None:
            rule(name, value)
    return params

"""Numerical precision on CUDA: full fp32 unless the user opts into TF32 or bf16.

The book measures robustness as small differences between attribution maps, so the
arithmetic must not be coarser than those differences. PyTorch lets cuDNN convolutions
use TF32 by default on Ampere and later GPUs (a 10-bit mantissa for the products): on
a random CIFAR ResNet-18 that alone moves a gradient map by about 6 % (relative l2)
against the CPU, more than many of the effects the book measures. robattr's policy:

``"fp32"`` (the default)
    TF32 off for matrix products and for cuDNN convolutions: full fp32.
``"tf32"``
    TF32 on for both (PyTorch's speed setting on Ampere and later).
``"bf16"``
    Inside :func:`scope` only: ``torch.autocast`` to bfloat16 on CUDA (products and
    convolutions in bf16, reductions and losses in fp32 as autocast decides), TF32 for
    what autocast leaves in fp32. Fast, and coarse: use it where a result is shown to
    agree with fp32 (``benchmarks/relex.py`` measures RelEx's masks this way);
    :func:`robattr.attributions.relex` takes ``precision="bf16"`` directly.

How to choose:

* ``robattr.precision.set("tf32")``: the process-wide mode, ``"fp32"`` or ``"tf32"``;
* ``with robattr.precision.scope("bf16"): ...``: a mode for a block, restored after;
* ``ROBATTR_PRECISION=tf32``: the mode :func:`apply` sets (a profile's ``precision:`` key
  sets it for every notebook it runs).

No import changes PyTorch's flags. The policy is applied, visibly, by :func:`apply`: a
notebook's prologue (:func:`robattr.start`) calls it, and so does
:func:`robattr.utils.get_device` the first time it hands out a CUDA device. It sets
PyTorch's global flags (``torch.backends.cuda.matmul.allow_tf32``,
``torch.backends.cudnn.allow_tf32``), so code of your own that runs after it inherits them;
a script that puts tensors on CUDA without ``get_device`` calls :func:`apply` (or
:func:`set`) first, or cuDNN keeps PyTorch's TF32 default. CPU arithmetic is unaffected by
every mode except ``bf16`` inside :func:`scope`, which autocasts CUDA only.
"""
from __future__ import annotations

import contextlib

import torch

from robattr import context
from robattr.catalog import PRECISIONS

__all__ = ["MODES", "ENV", "apply", "set", "get", "scope", "autocast", "check"]

#: the modes, in order of decreasing precision
MODES = ("fp32", "tf32", "bf16")
#: the environment variable read when the policy is first applied
ENV = context.PRECISION_ENV

_GLOBAL_MODES = PRECISIONS
_state = {"mode": "fp32", "autocast": False, "applied": False}


def check(mode, allowed=MODES) -> str:
    """``mode`` if it is one of ``allowed`` (default :data:`MODES`), else a ValueError."""
    if mode not in allowed:
        where = "process-wide" if allowed == _GLOBAL_MODES else "here"
        hint = " (bf16 only inside robattr.precision.scope('bf16'))" \
            if mode == "bf16" and allowed == _GLOBAL_MODES else ""
        raise ValueError(f"precision must be one of {', '.join(map(repr, allowed))} {where}, "
                         f"got {mode!r}{hint}")
    return mode


def _flags(tf32: bool) -> None:
    torch.backends.cuda.matmul.allow_tf32 = tf32
    torch.backends.cudnn.allow_tf32 = tf32


def set(mode: str) -> None:  # noqa: A001 - robattr.precision.set reads as intended
    """Set the process-wide mode, ``"fp32"`` (robattr's default) or ``"tf32"``."""
    _state["mode"] = check(mode, _GLOBAL_MODES)
    _state["applied"] = True
    _flags(mode == "tf32")


def get() -> str:
    """The mode in force: ``"fp32"``, ``"tf32"``, or ``"bf16"`` inside a bf16 scope."""
    return _state["mode"]


@contextlib.contextmanager
def scope(mode: str):
    """Run a block under ``mode`` (one of :data:`MODES`); the previous mode and PyTorch's
    flags are restored afterwards, also on an exception."""
    check(mode)
    saved = (_state["mode"], torch.backends.cuda.matmul.allow_tf32,
             torch.backends.cudnn.allow_tf32)
    _state["mode"] = mode
    _flags(mode != "fp32")
    try:
        with autocast(mode):
            yield
    finally:
        _state["mode"] = saved[0]
        torch.backends.cuda.matmul.allow_tf32 = saved[1]
        torch.backends.cudnn.allow_tf32 = saved[2]


def autocast(mode: str | None = None):
    """``torch.autocast("cuda", bfloat16)`` when ``mode`` (default: the mode in force) is
    ``"bf16"`` and CUDA is present, else a context that does nothing."""
    mode = get() if mode is None else check(mode)
    if mode == "bf16" and torch.cuda.is_available():
        return torch.autocast("cuda", dtype=torch.bfloat16)
    return contextlib.nullcontext()


def apply() -> str:
    """Set the process-wide mode from the run context (``$ROBATTR_PRECISION``; default
    ``"fp32"``) and return it. Later calls apply it again (the value may have changed)."""
    value = context.current().precision or "fp32"
    try:
        set(value)
    except ValueError as e:
        raise ValueError(f"${ENV}: {e}") from None
    _state["applied"] = True
    return value


def applied() -> bool:
    """Whether :func:`apply` or :func:`set` has run in this process."""
    return _state["applied"]

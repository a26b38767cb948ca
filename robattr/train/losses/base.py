"""The loss protocol (:class:`Loss`), the registry (:data:`LOSSES`, :func:`register_loss`,
:func:`make_loss`, :data:`RESERVED_HPARAMS`) and plain cross-entropy (``ce``).

The protocol every loss follows is described in :mod:`robattr.train.losses`.
"""
from __future__ import annotations

import math
import numbers
import sys
from typing import Any, ClassVar

import torch
from torch import nn
from torch.nn import functional as F

__all__ = ["Loss", "LOSSES", "RESERVED_HPARAMS", "register_loss", "make_loss", "CrossEntropy"]


# --------------------------------------------------------------------------- protocol
class Loss:
    """Base class of training losses: ``loss(model, x, y) -> (scalar, logs)``.

    ``hparams`` holds every hyper-parameter, defaults filled in (ints given for float
    defaults become floats, so ``lam=1`` and ``lam=1.0`` are the same configuration);
    each is also readable as an attribute (``loss.lam``). Invalid values raise a
    ValueError at construction (so the zoo rejects a bad configuration before training).
    """

    name: ClassVar[str] = ""
    defaults: ClassVar[dict[str, Any]] = {}

    def __init__(self, **hparams: Any):
        unknown = sorted(set(hparams) - set(self.defaults))
        if unknown:
            known = ", ".join(self.defaults) or "none"
            raise ValueError(f"loss {self.name!r} has no hyper-parameter "
                             f"{', '.join(map(repr, unknown))} (it takes: {known})")
        self.hparams = {k: _coerce(k, d, hparams.get(k, d)) for k, d in self.defaults.items()}
        self.validate()

    def validate(self) -> None:
        """Check ``self.hparams``; raise ValueError with a clear message. Override."""

    def __getattr__(self, key: str) -> Any:
        hp = self.__dict__.get("hparams", {})
        if key in hp:
            return hp[key]
        raise AttributeError(f"{type(self).__name__!s} has no attribute {key!r}")

    def __call__(self, model: nn.Module, x: torch.Tensor,
                 y: torch.Tensor) -> tuple[torch.Tensor, dict[str, Any]]:
        raise NotImplementedError

    def config(self) -> dict[str, Any]:
        """``{"name": ..., **hparams}``: what defines this loss (used by the zoo's key)."""
        return {"name": self.name, **self.hparams}

    def __repr__(self) -> str:
        args = ", ".join(f"{k}={v!r}" for k, v in self.hparams.items())
        return f"{type(self).__name__}({args})"

    @staticmethod
    def accuracy(logits: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
        """Batch accuracy as a detached 0-dim tensor (no device sync)."""
        return (logits.detach().argmax(1) == y).float().mean()

    # validation helpers for subclasses
    def _real(self, key: str, positive: bool = False) -> None:
        v = self.hparams[key]
        if isinstance(v, bool) or not isinstance(v, numbers.Real) or not math.isfinite(v) \
                or (v <= 0 if positive else v < 0):
            raise ValueError(f"loss {self.name!r}: {key} must be a finite number "
                             f"{'> 0' if positive else '>= 0'}, got {v!r}")

    def _int(self, key: str, lo: int = 1) -> None:
        v = self.hparams[key]
        if isinstance(v, bool) or not isinstance(v, numbers.Integral) or v < lo:
            raise ValueError(f"loss {self.name!r}: {key} must be an integer >= {lo}, got {v!r}")

    def _choice(self, key: str, choices: tuple) -> None:
        if self.hparams[key] not in choices:
            raise ValueError(f"loss {self.name!r}: {key} must be one of "
                             f"{', '.join(map(repr, choices))}, got {self.hparams[key]!r}")


def _coerce(key: str, default: Any, value: Any) -> Any:
    if isinstance(default, float) and isinstance(value, int) and not isinstance(value, bool):
        return float(value)
    return value


LOSSES: dict[str, type[Loss]] = {}

#: Names a loss hyper-parameter may not take: :func:`robattr.zoo.get_model` passes its
#: extra keyword arguments to the loss, so these would be ambiguous there (e.g. TRADES'
#: beta must be called something else, since ``beta`` is the Softplus beta).
RESERVED_HPARAMS = frozenset({
    "dataset", "arch", "method", "epochs", "lr", "batch_size", "optimizer", "weight_decay",
    "milestones", "seed", "activation", "beta", "device", "retrain", "progress", "name",
})


def _registry() -> dict[str, type[Loss]]:
    """The live registry: ``robattr.train.LOSSES`` (so swapping that attribute, as a test
    may, swaps the registry used by :func:`register_loss` and :func:`make_loss`)."""
    pkg = sys.modules.get("robattr.train")
    reg = getattr(pkg, "LOSSES", None)
    return reg if isinstance(reg, dict) else LOSSES


def register_loss(cls: type[Loss]) -> type[Loss]:
    """Class decorator: add a :class:`Loss` subclass to :data:`LOSSES` under ``cls.name``."""
    if not cls.name:
        raise ValueError(f"{cls.__name__} needs a non-empty `name`")
    clash = sorted(RESERVED_HPARAMS & set(cls.defaults))
    if clash:
        raise ValueError(f"loss {cls.name!r}: hyper-parameter name(s) {clash} are reserved "
                         "(they mean something else to fit/get_model); rename them")
    reg = _registry()
    if cls.name in reg and reg[cls.name] is not cls:
        raise ValueError(f"a loss named {cls.name!r} is already registered")
    reg[cls.name] = cls
    return cls


def make_loss(name: str | Loss, **hparams: Any) -> Loss:
    """Build a registered loss by name (``make_loss("ce")``); a Loss object passes through."""
    if isinstance(name, Loss):
        if hparams:
            raise ValueError("hyper-parameters go to the Loss constructor, not make_loss")
        return name
    reg = _registry()
    if name not in reg:
        raise ValueError(f"unknown loss {name!r}; known: {', '.join(reg)}")
    return reg[name](**hparams)



# --------------------------------------------------------------------------- CE
@register_loss
class CrossEntropy(Loss):
    """Plain cross-entropy on clean inputs (the "CE only" baseline of every paper)."""

    name = "ce"
    defaults: ClassVar[dict[str, Any]] = {}

    def __call__(self, model, x, y):
        logits = model(x)
        loss = F.cross_entropy(logits, y)
        return loss, {"ce": loss.detach(), "acc": self.accuracy(logits, y)}

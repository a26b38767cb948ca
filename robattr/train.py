"""One trainer (:func:`fit`), :func:`evaluate`, and the training losses.

A loss is a small object built from its hyper-parameters and called on a batch::

    loss = make_loss("ce")                 # or CrossEntropy(), or LOSSES["ce"](**hparams)
    value, logs = loss(model, x, y)        # scalar tensor to backprop, dict of logged values

The protocol every loss follows (the robust losses -- AT, TRADES, IG-NORM, IGR, SSR,
Hessian, l2, cosd -- slot in the same way):

* subclass :class:`Loss`, set ``name`` (the key in :data:`LOSSES` and the zoo's
  ``method``) and ``defaults`` (every hyper-parameter with its default; the zoo hashes
  the full set, so adding a hyper-parameter later changes no existing key only if its
  default reproduces the old behaviour);
* decorate with :func:`register_loss`;
* ``__call__(model, x, y)`` returns ``(loss, logs)``: ``loss`` a scalar tensor, ``logs``
  a dict name -> 0-dim tensor or float (batch means; the trainer averages them over the
  epoch, weighted by batch size, and reads them once per epoch). By convention
  ``logs["acc"]`` is the clean accuracy of the batch, which :class:`History` reports as
  train accuracy. The loss may switch the model to eval mode inside (e.g. for an
  attack) but must switch it back to train mode before returning.
"""
from __future__ import annotations

import math
import numbers
import time
from dataclasses import dataclass, field
from typing import Any, Callable, ClassVar

import torch
from torch import nn
from torch.nn import functional as F

from robattr.utils import get_device, seed_everything

__all__ = [
    "Loss", "CrossEntropy", "LOSSES", "RESERVED_HPARAMS", "register_loss", "make_loss", "History", "fit",
    "evaluate", "OPTIMIZERS",
]


# --------------------------------------------------------------------------- losses
class Loss:
    """Base class of training losses: ``loss(model, x, y) -> (scalar, logs)``.

    ``hparams`` holds every hyper-parameter, defaults filled in (ints given for float
    defaults become floats, so ``lam=1`` and ``lam=1.0`` are the same configuration);
    each is also readable as an attribute (``loss.lam``).
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


def register_loss(cls: type[Loss]) -> type[Loss]:
    """Class decorator: add a :class:`Loss` subclass to :data:`LOSSES` under ``cls.name``."""
    if not cls.name:
        raise ValueError(f"{cls.__name__} needs a non-empty `name`")
    clash = sorted(RESERVED_HPARAMS & set(cls.defaults))
    if clash:
        raise ValueError(f"loss {cls.name!r}: hyper-parameter name(s) {clash} are reserved "
                         "(they mean something else to fit/get_model); rename them")
    if cls.name in LOSSES and LOSSES[cls.name] is not cls:
        raise ValueError(f"a loss named {cls.name!r} is already registered")
    LOSSES[cls.name] = cls
    return cls


def make_loss(name: str | Loss, **hparams: Any) -> Loss:
    """Build a registered loss by name (``make_loss("ce")``); a Loss object passes through."""
    if isinstance(name, Loss):
        if hparams:
            raise ValueError("hyper-parameters go to the Loss constructor, not make_loss")
        return name
    if name not in LOSSES:
        raise ValueError(f"unknown loss {name!r}; known: {', '.join(LOSSES)}")
    return LOSSES[name](**hparams)


@register_loss
class CrossEntropy(Loss):
    """Plain cross-entropy on clean inputs (the "CE only" baseline of every paper)."""

    name = "ce"
    defaults: ClassVar[dict[str, Any]] = {}

    def __call__(self, model, x, y):
        logits = model(x)
        loss = F.cross_entropy(logits, y)
        return loss, {"ce": loss.detach(), "acc": self.accuracy(logits, y)}


# --------------------------------------------------------------------------- trainer
@dataclass
class History:
    """Per-epoch record of :func:`fit`: mean loss, train accuracy, seconds, learning rate,
    and every value the loss logged (epoch means)."""

    loss: list[float] = field(default_factory=list)
    train_acc: list[float] = field(default_factory=list)
    seconds: list[float] = field(default_factory=list)
    lr: list[float] = field(default_factory=list)
    logs: list[dict[str, float]] = field(default_factory=list)

    @property
    def epochs(self) -> int:
        return len(self.loss)

    @property
    def total_seconds(self) -> float:
        return float(sum(self.seconds))

    @property
    def seconds_per_epoch(self) -> float:
        return self.total_seconds / max(1, self.epochs)

    def to_frame(self):
        """A pandas DataFrame, one row per epoch."""
        import pandas as pd

        rows = [{"epoch": i + 1, "loss": self.loss[i], "train_acc": self.train_acc[i],
                 "seconds": self.seconds[i], "lr": self.lr[i], **self.logs[i]}
                for i in range(self.epochs)]
        return pd.DataFrame(rows).set_index("epoch") if rows else pd.DataFrame()


OPTIMIZERS: dict[str, Callable[..., torch.optim.Optimizer]] = {
    "adam": lambda p, lr, wd: torch.optim.Adam(p, lr=lr, weight_decay=wd),
    "adamw": lambda p, lr, wd: torch.optim.AdamW(p, lr=lr, weight_decay=wd),
    "sgd": lambda p, lr, wd: torch.optim.SGD(p, lr=lr, momentum=0.9, weight_decay=wd),
}


def _as_dataset(ds: Any) -> Any:
    if isinstance(ds, (tuple, list)) and len(ds) == 2 and all(isinstance(t, torch.Tensor) for t in ds):
        return torch.utils.data.TensorDataset(ds[0], ds[1])
    return ds


def _loader(ds: Any, batch_size: int, shuffle: bool, seed: int):
    from robattr import data

    return data.loader(ds, batch_size=batch_size, shuffle=shuffle, seed=seed)


def fit(model: nn.Module, train_set: Any, loss: str | Loss = "ce", epochs: int = 10,
        batch_size: int = 128, lr: float = 1e-3, optimizer: str = "adam",
        weight_decay: float = 0.0, milestones: list[int] | None = None, seed: int = 0,
        device: str | torch.device = "auto", progress: bool = True) -> History:
    """Train ``model`` in place on ``train_set`` and return its :class:`History`.

    ``train_set`` is a Dataset of ``(x, y)`` or a tuple of tensors ``(X, y)``.
    ``optimizer``: ``"adam"``, ``"adamw"`` or ``"sgd"`` (momentum 0.9); ``milestones``:
    epochs at which the learning rate is multiplied by 0.1. Seeds everything with
    ``seed`` (shuffling included); full precision (no AMP). One tqdm bar over all batches
    unless ``progress=False``. The model ends on ``device`` in eval mode.
    """
    if not (isinstance(epochs, numbers.Integral) and epochs >= 1):
        raise ValueError(f"epochs must be an integer >= 1, got {epochs!r}")
    if optimizer not in OPTIMIZERS:
        raise ValueError(f"optimizer must be one of {', '.join(OPTIMIZERS)}, got {optimizer!r}")
    loss_fn = make_loss(loss)
    dev = get_device(device)
    seed_everything(seed)
    model.to(dev)
    dl = _loader(_as_dataset(train_set), batch_size, True, seed)
    opt = OPTIMIZERS[optimizer](model.parameters(), lr, weight_decay)
    sched = (torch.optim.lr_scheduler.MultiStepLR(opt, sorted(milestones), gamma=0.1)
             if milestones else None)
    has_bn = any(isinstance(m, nn.modules.batchnorm._BatchNorm) for m in model.modules())
    hist = History()

    from tqdm import tqdm

    bar = tqdm(total=epochs * len(dl), disable=not progress, unit="batch", leave=False,
               desc=f"{loss_fn.name} 1/{epochs}", dynamic_ncols=True)
    try:
        for epoch in range(epochs):
            bar.set_description(f"{loss_fn.name} {epoch + 1}/{epochs}")
            model.train()
            t0 = time.perf_counter()
            n, sums = 0, {}
            for x, y in dl:
                if has_bn and len(y) < 2:  # BatchNorm cannot train on a single sample
                    bar.update()
                    continue
                x = x.to(dev, non_blocking=True)
                y = torch.as_tensor(y).to(dev, non_blocking=True)
                opt.zero_grad(set_to_none=True)
                value, logs = loss_fn(model, x, y)
                value.backward()
                opt.step()
                b = len(y)
                n += b
                for k, v in {"loss": value.detach(), **logs}.items():
                    sums[k] = sums.get(k, 0.0) + (v.detach() if torch.is_tensor(v) else v) * b
                bar.update()
            if dev.type == "cuda":
                torch.cuda.synchronize(dev)
            means = {k: float(v) / max(1, n) for k, v in sums.items()}
            hist.seconds.append(time.perf_counter() - t0)
            hist.lr.append(opt.param_groups[0]["lr"])
            hist.loss.append(means.pop("loss", math.nan))
            hist.train_acc.append(means.get("acc", math.nan))
            hist.logs.append(means)
            if not math.isfinite(hist.loss[-1]):
                raise FloatingPointError(
                    f"training diverged: mean loss is {hist.loss[-1]} in epoch {epoch + 1} "
                    f"(lr={hist.lr[-1]}); try a smaller learning rate")
            bar.set_postfix(loss=f"{hist.loss[-1]:.4f}", acc=f"{hist.train_acc[-1]:.3f}")
            if sched is not None:
                sched.step()
    finally:
        bar.close()
        model.eval()
    return hist


@torch.no_grad()
def evaluate(model: nn.Module, dataset: Any, batch_size: int = 512,
             device: str | torch.device = "auto") -> float:
    """Top-1 accuracy of ``model`` on ``dataset`` (a Dataset or a tuple ``(X, y)``), in [0, 1].

    Runs in eval mode on ``device`` (the model is moved there); restores the model's
    train/eval mode afterwards.
    """
    dev = get_device(device)
    was_training = model.training
    model.to(dev).eval()
    correct, n = torch.zeros((), dtype=torch.long, device=dev), 0
    try:
        for x, y in _loader(_as_dataset(dataset), batch_size, False, 0):
            y = torch.as_tensor(y).to(dev, non_blocking=True)
            correct += (model(x.to(dev, non_blocking=True)).argmax(1) == y).sum()
            n += len(y)
    finally:
        model.train(was_training)
    if n == 0:
        raise ValueError("evaluate() got an empty dataset")
    return float(correct) / n

"""The trainer (:func:`fit`), :func:`evaluate`, :class:`History`, and peak-memory probes.

**Peak memory.** :func:`fit` records two numbers in :class:`History`:

* ``saved_tensor_peak_bytes`` (every device): the peak, during the *first training
  step*, of the bytes of the distinct tensor storages that autograd holds for backward,
  parameters excluded -- the activation memory of a step, the part that robust losses
  grow (tracked with ``torch.autograd.graph.saved_tensors_hooks``: +bytes when a storage
  is first saved, -bytes when the last graph node holding it is freed; double-backward
  graphs and the graphs of inner attack loops count while they are alive; temporaries
  that are never saved for backward are not seen). It is deterministic and does not
  depend on the process's history (an RSS delta would: ``ru_maxrss`` only moves when a
  step beats the process's earlier peak, e.g. set by an earlier test). One step
  suffices (all steps have the same shapes but the last); the hooks cost Python time,
  so the other steps run without them.
* ``peak_memory_bytes``: on CUDA, ``torch.cuda.max_memory_allocated`` over the whole
  run (reset at the start: parameters, gradients, optimizer state, batches,
  activations and temporaries, as a GPU memory table reports it); on the CPU, the
  activation peak above plus the training state (the bytes of the parameters, their
  gradients and the optimizer's state tensors after the first step).
  ``memory_measure`` says which.
"""
from __future__ import annotations

import contextlib
import math
import numbers
import time
from dataclasses import dataclass, field
from typing import Any, Callable

import torch
from torch import nn

from robattr.memory import SavedTensorPeak
from robattr.train.checkpoint import Checkpoint, rng_state, set_rng_state
from robattr.train.losses import Loss, make_loss
from robattr.utils import get_device, seed_everything

__all__ = ["History", "fit", "evaluate", "OPTIMIZERS", "SavedTensorPeak"]


@dataclass
class History:
    """Per-epoch record of :func:`fit`: mean loss, train accuracy, seconds, learning rate,
    and every value the loss logged (epoch means); plus the peak memory of the run (see
    the module docstring). ``seconds`` is wall time, which counts whatever else the machine
    ran (and any time the process was stopped); ``cpu_seconds`` is the process's CPU time
    (all its threads) in the same epoch, which does not (None for the epochs of a
    checkpoint written before it was recorded)."""

    loss: list[float] = field(default_factory=list)
    train_acc: list[float] = field(default_factory=list)
    seconds: list[float] = field(default_factory=list)
    cpu_seconds: list[float | None] = field(default_factory=list)
    lr: list[float] = field(default_factory=list)
    logs: list[dict[str, float]] = field(default_factory=list)
    peak_memory_bytes: int | None = None
    memory_measure: str | None = None
    saved_tensor_peak_bytes: int | None = None

    @property
    def epochs(self) -> int:
        return len(self.loss)

    @property
    def total_seconds(self) -> float:
        return float(sum(self.seconds))

    @property
    def seconds_per_epoch(self) -> float:
        return self.total_seconds / max(1, self.epochs)

    @property
    def cpu_seconds_per_epoch(self) -> float | None:
        """Mean CPU seconds of an epoch (None when an epoch has none recorded)."""
        known = [c for c in self.cpu_seconds if c is not None]
        return float(sum(known)) / len(known) \
            if self.epochs and len(known) == self.epochs else None

    def to_frame(self):
        """A pandas DataFrame, one row per epoch."""
        import pandas as pd

        rows = [{"epoch": i + 1, "loss": self.loss[i], "train_acc": self.train_acc[i],
                 "seconds": self.seconds[i], "lr": self.lr[i], **self.logs[i]}
                for i in range(self.epochs)]
        return pd.DataFrame(rows).set_index("epoch") if rows else pd.DataFrame()


# --------------------------------------------------------------------------- memory
def _state_bytes(model: nn.Module, opt: torch.optim.Optimizer) -> int:
    """Bytes of the distinct storages of the parameters, their gradients and the optimizer
    state tensors."""
    seen: dict[tuple, int] = {}

    def add(t):
        if torch.is_tensor(t):
            st = t.untyped_storage()
            seen[(st.data_ptr(), str(t.device))] = st.nbytes()

    for p in model.parameters():
        add(p)
        add(p.grad)
    for state in opt.state.values():
        for v in state.values():
            add(v)
    return sum(seen.values())


# --------------------------------------------------------------------------- trainer
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
        device: str | torch.device = "auto", progress: bool = True,
        measure_memory: bool = True, augment: str = "none",
        schedule: str = "step", checkpoint: Checkpoint | None = None,
        progress_file=None, fused: bool = True) -> History:
    """Train ``model`` in place on ``train_set`` and return its :class:`History`.

    ``train_set`` is a Dataset of ``(x, y)`` or a tuple of tensors ``(X, y)``. A set held
    in memory (the digits, MNIST, Fashion-MNIST, CIFAR-10 and any decoded folder; tensors)
    is moved to ``device`` whole and its batches are cut, converted and augmented there
    (:mod:`robattr.train.batches`); other datasets are read through a DataLoader.
    ``loss``: a name in :data:`robattr.train.LOSSES` or a :class:`Loss` object.
    ``optimizer``: ``"adam"``, ``"adamw"`` or ``"sgd"`` (momentum 0.9).
    ``augment``: ``"none"``, ``"crop"``, ``"flip"`` or ``"crop+flip"`` (random crop with
    4 pixels of padding, horizontal flip; needs an in-memory set). ``schedule``:
    ``"step"`` (the rate times 0.1 at each of the ``milestones`` epochs; constant without
    them), ``"cosine"`` or ``"onecycle"`` (per batch). Seeds everything with ``seed``
    (shuffling and augmentation included); full precision (no AMP). One tqdm bar over all
    batches unless ``progress=False``, written to ``progress_file`` (default: stderr).
    ``measure_memory`` records the peak memory (module
    docstring). The model ends on ``device`` in eval mode. ``fused`` trains its
    ``nn.Softplus`` layers as :class:`~robattr.train.fused.FusedSoftplus` (the same function
    from vectorised ops, faster on the CPU; the model keeps its own layers afterwards).

    ``checkpoint`` (a :class:`~robattr.train.checkpoint.Checkpoint`, e.g. a
    :class:`~robattr.train.checkpoint.FileCheckpoint`) keeps the whole state of the run
    after every epoch, and a run that finds a saved state there goes on from it: the
    model, optimizer, schedule, history and random generators are restored, so it ends
    where an uninterrupted run ends. Call it again with the same arguments and a fresh
    ``model``; the history it returns covers every epoch.
    """
    from robattr.train.fused import fused_softplus
    from robattr.train.batches import (check_augment, check_schedule, device_batches,
                                       make_scheduler)

    if not (isinstance(epochs, numbers.Integral) and epochs >= 1):
        raise ValueError(f"epochs must be an integer >= 1, got {epochs!r}")
    if optimizer not in OPTIMIZERS:
        raise ValueError(f"optimizer must be one of {', '.join(OPTIMIZERS)}, got {optimizer!r}")
    check_augment(augment)
    check_schedule(schedule)
    if milestones and schedule != "step":
        raise ValueError(f"milestones belong to the 'step' schedule, not {schedule!r}")
    loss_fn = make_loss(loss)
    dev = get_device(device)
    seed_everything(seed)
    model.to(dev)
    has_bn = any(isinstance(m, nn.modules.batchnorm._BatchNorm) for m in model.modules())
    dl = device_batches(train_set, batch_size=batch_size, seed=seed, device=dev,
                        augment=augment, drop_single=has_bn)
    if dl is None:
        if augment != "none":
            raise ValueError(f"augment={augment!r} needs a training set held in memory "
                             "(robattr.data.load gives one for every built-in dataset)")
        dl = _loader(_as_dataset(train_set), batch_size, True, seed)
    opt = OPTIMIZERS[optimizer](model.parameters(), lr, weight_decay)
    sched, per_step = make_scheduler(opt, schedule, lr=lr, epochs=epochs,
                                     steps_per_epoch=len(dl), milestones=milestones)
    hist = History()
    probe = SavedTensorPeak(exclude=model.parameters()) if measure_memory else None
    state_bytes = 0
    start = 0
    saved = checkpoint.load() if checkpoint is not None else None
    if saved is not None:
        start, state_bytes = _restore(saved, model, opt, sched, hist, dl, epochs)
        if start > 0:
            probe = None            # the first step, which it measures, is behind us
    if measure_memory and dev.type == "cuda":
        torch.cuda.synchronize(dev)
        torch.cuda.reset_peak_memory_stats(dev)

    from tqdm import tqdm

    bar = tqdm(total=epochs * len(dl), initial=start * len(dl), disable=not progress,
               file=progress_file,
               unit="batch", leave=False, desc=f"{loss_fn.name} {start + 1}/{epochs}",
               dynamic_ncols=True)
    try:
        with fused_softplus(model) if fused else contextlib.nullcontext():
            for epoch in range(start, epochs):
                bar.set_description(f"{loss_fn.name} {epoch + 1}/{epochs}")
                model.train()
                t0, c0 = time.perf_counter(), time.process_time()
                measure = probe if epoch == 0 else None
                n, sums, state = _epoch(model, dl, loss_fn, opt, sched if per_step else None,
                                        has_bn, dev, bar, measure)
                if state is not None:
                    state_bytes = state
                    hist.saved_tensor_peak_bytes = int(probe.peak_bytes)
                if dev.type == "cuda":
                    torch.cuda.synchronize(dev)
                means = {k: float(v) / max(1, n) for k, v in sums.items()}
                hist.seconds.append(time.perf_counter() - t0)
                hist.cpu_seconds.append(time.process_time() - c0)
                hist.lr.append(opt.param_groups[0]["lr"])
                hist.loss.append(means.pop("loss", math.nan))
                hist.train_acc.append(means.get("acc", math.nan))
                hist.logs.append(means)
                if not math.isfinite(hist.loss[-1]):
                    raise FloatingPointError(
                        f"training diverged: mean loss is {hist.loss[-1]} in epoch {epoch + 1} "
                        f"(lr={hist.lr[-1]}); try a smaller learning rate")
                bar.set_postfix(loss=f"{hist.loss[-1]:.4f}", acc=f"{hist.train_acc[-1]:.3f}")
                if sched is not None and not per_step:
                    sched.step()
                if checkpoint is not None:
                    checkpoint.save(_capture(epoch + 1, model, opt, sched, hist, dl, state_bytes))
    finally:
        bar.close()
        model.eval()
    if hist.saved_tensor_peak_bytes is not None:
        if dev.type == "cuda":
            hist.peak_memory_bytes = int(torch.cuda.max_memory_allocated(dev))
            hist.memory_measure = "torch.cuda.max_memory_allocated (whole run)"
        else:
            hist.peak_memory_bytes = hist.saved_tensor_peak_bytes + state_bytes
            hist.memory_measure = ("peak activation bytes held by autograd (first step) "
                                   "+ parameters, gradients and optimizer state")
    return hist


def _epoch(model, dl, loss_fn, opt, step_sched, has_bn: bool, dev, bar, probe):
    """One pass over ``dl``: ``(examples seen, summed logs, state bytes)``. ``probe``
    measures the first step (the state bytes are then those of parameters, gradients and
    optimizer, else ``None``); ``step_sched`` is stepped after every batch when given."""
    n, sums, state = 0, {}, None
    for x, y in dl:
        if has_bn and len(y) < 2:  # BatchNorm cannot train on a single sample
            bar.update()
            continue
        x = x.to(dev, non_blocking=True)
        y = torch.as_tensor(y).to(dev, non_blocking=True)
        opt.zero_grad(set_to_none=True)
        first = probe is not None and n == 0
        with probe if first else contextlib.nullcontext():
            value, logs = loss_fn(model, x, y)
            value.backward()
        opt.step()
        if step_sched is not None:
            step_sched.step()
        if first:
            state = _state_bytes(model, opt)
        b = len(y)
        n += b
        for k, v in {"loss": value.detach(), **logs}.items():
            sums[k] = sums.get(k, 0.0) + (v.detach() if torch.is_tensor(v) else v) * b
        bar.update()
    return n, sums, state


# --------------------------------------------------------------------------- checkpoints
_HISTORY_FIELDS = ("loss", "train_acc", "seconds", "cpu_seconds", "lr", "logs")


def _capture(epochs_done: int, model, opt, sched, hist: History, dl, state_bytes: int) -> dict:
    """The whole state of a run after ``epochs_done`` epochs (robattr.train.checkpoint)."""
    return {"epoch": epochs_done,
            "model": {k: v.detach().to("cpu") for k, v in model.state_dict().items()},
            "optimizer": opt.state_dict(),
            "scheduler": sched.state_dict() if sched is not None else None,
            "history": {f: list(getattr(hist, f)) for f in _HISTORY_FIELDS},
            "saved_tensor_peak_bytes": hist.saved_tensor_peak_bytes,
            "state_bytes": int(state_bytes),
            "rng": rng_state(getattr(dl, "generator", None))}


def _restore(saved: dict, model, opt, sched, hist: History, dl, epochs: int) -> tuple[int, int]:
    """Load a captured state into the run; ``(epochs done, state bytes)``."""
    done = int(saved["epoch"])
    if not 0 <= done <= epochs:
        raise ValueError(f"the checkpoint holds {done} epochs, more than the {epochs} asked "
                         "for; clear it or train for as many epochs")
    model.load_state_dict(saved["model"])
    opt.load_state_dict(saved["optimizer"])
    if sched is not None and saved["scheduler"] is not None:
        sched.load_state_dict(saved["scheduler"])
    for f in _HISTORY_FIELDS:
        # a checkpoint written before CPU seconds were recorded: None for its epochs
        setattr(hist, f, list(saved["history"].get(f, [None] * done)))
    hist.saved_tensor_peak_bytes = saved["saved_tensor_peak_bytes"]
    set_rng_state(saved["rng"], getattr(dl, "generator", None))
    return done, int(saved["state_bytes"])


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

"""Checkpoints of a training run, so that :func:`robattr.train.fit` can stop and go on.

    ckpt = FileCheckpoint("run.ckpt", tag="my model")
    fit(model, train_set, epochs=30, checkpoint=ckpt)   # interrupted after epoch 12 ...
    fit(model, train_set, epochs=30, checkpoint=ckpt)   # ... goes on from epoch 13

After every epoch :func:`~robattr.train.fit` hands :meth:`Checkpoint.save` the whole state
of the run: the model's and the optimizer's state, the learning-rate scheduler's, the
history so far, the state of the generator that shuffles and augments the batches, and
the global random generators (Python, NumPy, torch on every device: the random starts of
adversarial training draw from them). Restoring all of it makes a resumed run compute
exactly what an uninterrupted one computes, step for step, on the same machine
(``tests/library/test_train_checkpoint.py`` checks it bit for bit).

A :class:`FileCheckpoint` writes one file with :func:`torch.save` atomically (temporary
file, then ``os.replace``), and reads it back with ``weights_only=True`` (tensors,
numbers, strings, lists and dicts only; no code is unpickled). Its ``tag`` is stored with
the state and compared on reading: a checkpoint of another run, an unreadable file or a
file of another format is reported (:class:`CheckpointWarning`) and ignored, and the run
starts from the beginning.
"""
from __future__ import annotations

import contextlib
import os
import random
import tempfile
import time
import warnings
from pathlib import Path
from typing import Any, Protocol

import numpy as np
import torch

__all__ = ["Checkpoint", "FileCheckpoint", "CheckpointWarning", "CHECKPOINT_FORMAT",
           "rng_state", "set_rng_state"]

#: bump when the stored state changes meaning: older files are then ignored
CHECKPOINT_FORMAT = 1


class CheckpointWarning(UserWarning):
    """A checkpoint could not be used (unreadable, another run's, another format)."""


class Checkpoint(Protocol):
    """Where :func:`robattr.train.fit` keeps the state of a run between epochs."""

    def load(self) -> dict[str, Any] | None:
        """The last saved state, or None to start from the beginning."""

    def save(self, state: dict[str, Any]) -> None:
        """Keep ``state`` (called after every epoch)."""


def rng_state(generator: torch.Generator | None = None) -> dict[str, Any]:
    """The state of Python's, NumPy's and torch's global generators (CPU and every CUDA
    device), and of ``generator`` when given, as tensors, numbers and lists only."""
    kind, keys, pos, has_gauss, cached = np.random.get_state()
    state = {"python": list(_listify(random.getstate())),
             "numpy": {"kind": kind, "keys": torch.from_numpy(keys.astype(np.int64)),
                       "pos": int(pos), "has_gauss": int(has_gauss),
                       "cached": float(cached)},
             "torch": torch.get_rng_state(),
             "cuda": torch.cuda.get_rng_state_all() if torch.cuda.is_available() else []}
    if generator is not None:
        state["generator"] = generator.get_state()
    return state


def set_rng_state(state: dict[str, Any], generator: torch.Generator | None = None) -> None:
    """Restore what :func:`rng_state` captured (``generator`` too when both have one)."""
    version, internal, gauss = state["python"]
    random.setstate((version, tuple(internal), gauss))
    n = state["numpy"]
    np.random.set_state((n["kind"], n["keys"].numpy().astype(np.uint32), n["pos"],
                         n["has_gauss"], n["cached"]))
    torch.set_rng_state(state["torch"])
    if state["cuda"] and torch.cuda.is_available():
        torch.cuda.set_rng_state_all(state["cuda"])
    if generator is not None and "generator" in state:
        generator.set_state(state["generator"])


def _listify(obj):
    return [_listify(x) for x in obj] if isinstance(obj, tuple) else obj


class FileCheckpoint:
    """A :class:`Checkpoint` in one file at ``path``, for the run named by ``tag`` (a
    string: a file saved under another tag is not this run's and is ignored).
    ``min_interval`` (seconds) skips a save that would follow the last one (or the start)
    sooner than that: short epochs are not worth a file each."""

    def __init__(self, path: str | os.PathLike, tag: str = "", min_interval: float = 0.0):
        self.path = Path(path)
        self.tag = str(tag)
        self.min_interval = float(min_interval)
        self._last = time.monotonic()

    def __repr__(self) -> str:
        return f"FileCheckpoint({os.fspath(self.path)!r}, tag={self.tag!r})"

    def load(self) -> dict[str, Any] | None:
        if not self.path.exists():
            return None
        try:
            state = torch.load(self.path, map_location="cpu", weights_only=True)
            if not isinstance(state, dict):
                raise ValueError("it holds no state")
            if state.get("format") != CHECKPOINT_FORMAT:
                raise ValueError(f"format {state.get('format')!r}, not {CHECKPOINT_FORMAT}")
            if state.get("tag") != self.tag:
                raise ValueError(f"it belongs to another run ({str(state.get('tag'))[:40]!r})")
        except Exception as e:  # noqa: BLE001 - torch.load raises many types on bad files
            warnings.warn(f"robattr: ignoring the checkpoint {self.path}: {e}; training "
                          "starts from the first epoch", CheckpointWarning, stacklevel=3)
            return None
        return state

    def save(self, state: dict[str, Any]) -> None:
        if time.monotonic() - self._last < self.min_interval:
            return
        self.write(state)

    def write(self, state: dict[str, Any]) -> None:
        """Write ``state`` now, whatever the interval."""
        self.path.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(dir=self.path.parent, prefix=f".{self.path.name}.",
                                   suffix=".tmp")
        os.close(fd)
        try:
            torch.save({**state, "format": CHECKPOINT_FORMAT, "tag": self.tag}, tmp)
            with open(tmp, "rb") as f:
                os.fsync(f.fileno())
            os.chmod(tmp, 0o644)
            os.replace(tmp, self.path)
            self._last = time.monotonic()
        finally:
            with contextlib.suppress(FileNotFoundError):
                os.unlink(tmp)

    def epochs_done(self) -> int | None:
        """How many epochs the saved state holds (None without a usable file)."""
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", CheckpointWarning)
            state = self.load()
        return None if state is None else int(state["epoch"])

    def clear(self) -> None:
        """Delete the file (the run is finished)."""
        with contextlib.suppress(FileNotFoundError):
            self.path.unlink()

"""Small helpers every module shares: device resolution and seeding."""
from __future__ import annotations

import math
import numbers
import os
import random
from pathlib import Path

import numpy as np
import torch

__all__ = ["get_device", "seed_everything", "make_generator", "cache_dir", "check_int",
           "check_number", "check_eps", "check_model", "check_image_batch", "process_start"]


def get_device(device: str | torch.device = "auto") -> torch.device:
    """Resolve ``"auto"`` to CUDA when present, else the CPU; pass anything else through.
    The first CUDA device it hands out applies robattr's precision policy
    (:func:`robattr.precision.apply`: full fp32 unless ``$ROBATTR_PRECISION`` says otherwise).

    >>> get_device("cpu")
    device(type='cpu')
    """
    if isinstance(device, torch.device):
        return _policy(device)
    if device == "auto":
        return _policy(torch.device("cuda" if torch.cuda.is_available() else "cpu"))
    if not isinstance(device, str) or not (device == "cpu" or device.startswith("cuda")):
        raise ValueError(f"device must be 'auto', 'cpu' or 'cuda[:N]', got {device!r}")
    if device.startswith("cuda") and not torch.cuda.is_available():
        raise ValueError(f"device {device!r} was asked for but CUDA is not available here")
    return _policy(torch.device(device))


def _policy(device: torch.device) -> torch.device:
    from robattr import precision

    if device.type == "cuda" and not precision.applied():
        precision.apply()
    return device


def seed_everything(seed: int) -> torch.Generator:
    """Seed Python, NumPy and torch (all devices); return a CPU generator seeded the same."""
    random.seed(seed)
    np.random.seed(seed % 2**32)
    torch.manual_seed(seed)
    return torch.Generator().manual_seed(seed)


def make_generator(x: torch.Tensor, generator=None, seed=None) -> torch.Generator | None:
    """The generator a sampling routine draws from: ``generator`` as given, a fresh one
    seeded with ``seed`` on ``x``'s device, or None (torch's global generator)."""
    if generator is not None and seed is not None:
        raise ValueError("give either generator or seed, not both")
    if generator is not None:
        if not isinstance(generator, torch.Generator):
            raise ValueError(f"generator must be a torch.Generator, got {type(generator).__name__}")
        return generator
    if seed is not None:
        if isinstance(seed, bool) or not isinstance(seed, numbers.Integral):
            raise ValueError(f"seed must be an integer, got {seed!r}")
        return torch.Generator(device=x.device).manual_seed(int(seed))
    return None


def cache_dir() -> "os.PathLike[str]":
    """The robattr cache folder: ``$ROBATTR_CACHE``, else ``$XDG_CACHE_HOME/robattr``
    (``~/.cache/robattr``). Created on demand."""
    from robattr import context

    root = context.current().cache
    if root:
        path = Path(root).expanduser()
    else:
        xdg = os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache"
        path = Path(xdg) / "robattr"
    path.mkdir(parents=True, exist_ok=True)
    return path


# --------------------------------------------------------------------------- argument checks
def check_int(name: str, value, lo: int = 1) -> int:
    """``value`` as an int if it is an integer >= ``lo`` (bools refused), else a ValueError
    that names the argument."""
    if isinstance(value, bool) or not isinstance(value, numbers.Integral) or value < lo:
        raise ValueError(f"{name} must be an integer >= {lo}, got {value!r}")
    return int(value)


def check_number(name: str, value, *, positive: bool = False) -> float:
    """``value`` as a float if it is a finite real number, > 0 with ``positive`` and
    >= 0 otherwise (bools refused), else a ValueError that names the argument."""
    if isinstance(value, bool) or not isinstance(value, numbers.Real) or not math.isfinite(value) \
            or (value <= 0 if positive else value < 0):
        raise ValueError(f"{name} must be a finite number {'> 0' if positive else '>= 0'}, "
                         f"got {value!r}")
    return float(value)


def check_eps(eps, name: str = "eps") -> float:
    """A perturbation budget: a finite number >= 0 in pixel units ([0, 1] scale)."""
    if isinstance(eps, bool) or not isinstance(eps, numbers.Real) or not math.isfinite(eps) \
            or eps < 0:
        raise ValueError(f"{name} must be a finite number >= 0 (pixel units, [0, 1] scale), "
                         f"got {eps!r}")
    return float(eps)


def check_model(model):
    """``model`` if it is a ``torch.nn.Module``, else a ValueError."""
    if not isinstance(model, torch.nn.Module):
        raise ValueError(f"model must be a torch.nn.Module, got {type(model).__name__}")
    return model


def check_image_batch(x, y):
    """``(x detached, y as int64 or None)`` for a non-empty floating image batch ``x``
    (N x C x H x W, pixels in [0, 1]) and ``y`` one integer label per image (or None),
    else a ValueError that says what is wrong. The evaluations of a model on a labelled
    batch (the cross-paper matrix, the training-time measurements) check their input so."""
    if not torch.is_tensor(x) or not x.is_floating_point() or x.ndim != 4 or x.shape[0] < 1:
        raise ValueError("x must be a non-empty floating-point image batch N x C x H x W, got "
                         f"{getattr(x, 'shape', type(x).__name__)}")
    if float(x.min()) < 0.0 or float(x.max()) > 1.0:
        raise ValueError("x must be pixels in [0, 1] (robattr models normalise inside)")
    if y is not None:
        y = torch.as_tensor(y, device=x.device)
        if y.shape != (x.shape[0],) or y.is_floating_point():
            raise ValueError(f"y must hold one integer label per example, shape ({x.shape[0]},), "
                             f"got {tuple(y.shape)}")
        y = y.long()
    return x.detach(), y


def process_start(pid: int) -> float | None:
    """When process ``pid`` started, in seconds since the epoch, read from Linux's
    ``/proc`` (field 22 of ``/proc/<pid>/stat``, clock ticks after ``btime``); None where
    there is no ``/proc`` or it cannot be read."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
        btime = next(int(line.split()[1]) for line in
                     Path("/proc/stat").read_text().splitlines() if line.startswith("btime "))
        return btime + int(fields[19]) / os.sysconf("SC_CLK_TCK")
    except (OSError, ValueError, IndexError, StopIteration):
        return None

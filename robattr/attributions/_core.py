"""Plumbing every attribution method shares: argument checks, targets, random draws.

Nothing here is an attribution method; each method's module imports what it needs.
"""
from __future__ import annotations

import weakref

import torch
from torch import nn

from robattr.utils import check_int, check_number
from robattr.utils import make_generator  # noqa: F401  (re-exported for the methods)

__all__ = ["NotDifferentiableError", "resolve_target", "logit_grad", "chunk_rows",
           "last_chunk_rows"]


class NotDifferentiableError(ValueError):
    """Raised when ``create_graph=True`` is asked of a method that has no useful derivative."""


def refuse_graph(create_graph: bool, name: str, why: str) -> None:
    if create_graph:
        raise NotDifferentiableError(
            f"{name} is not differentiable w.r.t. x ({why}); call it with create_graph=False")


# --------------------------------------------------------------------------- argument checks
def check_model(model) -> nn.Module:
    if not isinstance(model, nn.Module):
        raise ValueError(f"model must be a torch.nn.Module, got {type(model).__name__}")
    return model


def check_input(x, name: str = "x") -> torch.Tensor:
    """``x`` must be a floating batch, N x D or N x C x H x W, with N >= 1."""
    if not isinstance(x, torch.Tensor):
        raise ValueError(f"{name} must be a torch.Tensor, got {type(x).__name__}")
    if not x.is_floating_point():
        raise ValueError(f"{name} must be a floating-point tensor, got dtype {x.dtype}")
    if x.ndim not in (2, 4):
        raise ValueError(f"{name} must be a batch shaped N x D or N x C x H x W, "
                         f"got shape {tuple(x.shape)}")
    if x.shape[0] == 0 or x[0].numel() == 0:
        raise ValueError(f"{name} must hold at least one non-empty input, got shape {tuple(x.shape)}")
    return x


def check_count(name: str, value) -> int:
    """A count: an integer >= 1."""
    return check_int(name, value, 1)


def check_positive(name: str, value) -> float:
    return check_number(name, value, positive=True)


def check_nonnegative(name: str, value) -> float:
    return check_number(name, value)


def check_like(name: str, value, x: torch.Tensor) -> torch.Tensor:
    """A tensor broadcastable to ``x`` (e.g. a baseline), on ``x``'s device and dtype."""
    value = torch.as_tensor(value, dtype=x.dtype, device=x.device)
    try:
        ok = torch.broadcast_shapes(value.shape, x.shape) == x.shape
    except RuntimeError:
        ok = False
    if not ok:
        raise ValueError(f"{name} must broadcast to x's shape {tuple(x.shape)}, "
                         f"got shape {tuple(value.shape)}")
    return value.expand_as(x)


# --------------------------------------------------------------------------- targets
def resolve_target(model: nn.Module, x: torch.Tensor, target,
                   num_classes: int | None = None) -> torch.Tensor:
    """``target`` as a LongTensor of N indices on ``x``'s device (None: predicted class).

    Accepts an int, a sequence of ints or an integer tensor (one index, broadcast, or
    one per input). Floating or boolean targets, negative indices and (when
    ``num_classes`` is given) indices >= num_classes raise ``ValueError``.
    """
    if target is None:
        with torch.no_grad():
            return model(x).argmax(dim=1)
    if isinstance(target, torch.Tensor):
        if target.is_floating_point() or target.is_complex() or target.dtype == torch.bool:
            raise ValueError(f"target must hold integer class indices, got dtype {target.dtype}")
    elif isinstance(target, (bool, float)):
        raise ValueError(f"target must hold integer class indices, got {target!r}")
    try:
        t = torch.as_tensor(target, device=x.device)
    except (TypeError, ValueError, RuntimeError) as e:
        raise ValueError(f"target must hold integer class indices, got {target!r}") from e
    if t.is_floating_point() or t.is_complex() or t.dtype == torch.bool:
        raise ValueError(f"target must hold integer class indices, got dtype {t.dtype}")
    t = t.to(torch.long)
    if t.ndim == 0:
        t = t.expand(x.shape[0])
    if t.shape != (x.shape[0],):
        raise ValueError(f"target must hold one class per input: shape ({x.shape[0]},), "
                         f"got {tuple(t.shape)}")
    if bool((t < 0).any()):
        raise ValueError(f"target must be >= 0, got {t.min().item()}")
    if num_classes is not None:
        check_target_range(t, num_classes)
    return t


def num_classes(model: nn.Module, x: torch.Tensor) -> int:
    """The number of logits the model returns (one input, no graph)."""
    with torch.no_grad():
        out = model(x[:1].detach())
    if out.ndim != 2:
        raise ValueError(f"the model must return N x classes logits, got shape {tuple(out.shape)}")
    return out.shape[1]


def check_target_range(target: torch.Tensor, num_classes: int) -> None:
    if target.numel() and int(target.max()) >= num_classes:
        raise ValueError(f"target {int(target.max())} is out of range: "
                         f"the model has {num_classes} classes")


def select(logits: torch.Tensor, target: torch.Tensor, check: bool = True) -> torch.Tensor:
    """``logits[i, target[i]]`` for every row, after checking the output's shape and the range."""
    if logits.ndim != 2:
        raise ValueError(f"the model must return N x classes logits, got shape {tuple(logits.shape)}")
    if check:
        check_target_range(target, logits.shape[1])
    return logits.gather(1, target[:, None]).squeeze(1)


def as_input(x: torch.Tensor, create_graph: bool) -> torch.Tensor:
    """``x`` itself when its graph must be kept, else a fresh leaf that requires grad."""
    return x if (create_graph and x.requires_grad) else x.detach().requires_grad_(True)


def logit_grad(model: nn.Module, x: torch.Tensor, target: torch.Tensor,
               create_graph: bool = False, check: bool = True) -> torch.Tensor:
    """Gradient of each input's own target logit, one backward pass for the batch."""
    inp = as_input(x, create_graph)
    with torch.enable_grad():
        selected = select(model(inp), target, check).sum()
        (g,) = torch.autograd.grad(selected, inp, create_graph=create_graph)
    return g


# --------------------------------------------------------------------------- randomness
def randn(shape, x: torch.Tensor, generator) -> torch.Tensor:
    """Standard normal draws of ``shape`` with ``x``'s dtype, on ``x``'s device."""
    if generator is None:
        return torch.randn(shape, dtype=x.dtype, device=x.device)
    out = torch.randn(shape, dtype=x.dtype, device=generator.device, generator=generator)
    return out.to(x.device)


def rand(shape, x: torch.Tensor, generator) -> torch.Tensor:
    """U[0, 1) draws of ``shape`` with ``x``'s dtype, on ``x``'s device."""
    if generator is None:
        return torch.rand(shape, dtype=x.dtype, device=x.device)
    out = torch.rand(shape, dtype=x.dtype, device=generator.device, generator=generator)
    return out.to(x.device)


def per_input(v: torch.Tensor, x: torch.Tensor) -> torch.Tensor:
    """Reshape a length-N vector to broadcast against a batch shaped like ``x``."""
    return v.reshape((-1,) + (1,) * (x.ndim - 1))


def value_range(x: torch.Tensor) -> torch.Tensor:
    """max - min of each input (length N), detached: noise levels are held fixed."""
    flat = x.detach().flatten(1)
    return flat.amax(1) - flat.amin(1)


#: rows of one forward pass when ``batch_size`` is None on the CPU (cache-sized chunks
#: beat one huge pass there)
CPU_ROWS = 128
#: on CUDA, the share of the free memory that one chunk's saved activations may take
CUDA_MEMORY_SHARE = 0.4
#: on CUDA, the ratio of a chunk's peak memory to what autograd saves for backward
#: (gradient buffers and temporaries of the backward pass come on top)
CUDA_OVERHEAD = 3.0

# bytes that autograd saves per row, per model and call shape (learned on the first chunk)
_ROW_BYTES: "weakref.WeakKeyDictionary[nn.Module, dict]" = weakref.WeakKeyDictionary()
_LAST = {"rows": None}


def samples_per_chunk(batch_size, n: int) -> int:
    """How many whole copies of an N-input batch fit in ``batch_size`` rows (at least one)."""
    batch_size = check_count("batch_size", batch_size)
    return max(1, batch_size // n)


def last_chunk_rows() -> int | None:
    """Rows of the largest forward pass of the last chunked call (IG, the noise averages,
    RelEx, the ball statistics): what ``batch_size=None`` chose."""
    return _LAST["rows"]


def chunk_rows(model: nn.Module, x: torch.Tensor, copies: int, *, kind: str = "grad",
               create_graph: bool = False) -> int | None:
    """The rows per forward pass that ``batch_size=None`` picks for ``copies`` copies of
    ``x`` through ``model``: on the CPU, :data:`CPU_ROWS`; on CUDA, all the rows that fit
    in :data:`CUDA_MEMORY_SHARE` of the free memory at the bytes per row that autograd
    saved on an earlier call with this model and input shape, or ``None`` when no call
    has measured it yet (the first chunk then measures it)."""
    n = x.shape[0]
    free = _free_bytes(x.device)
    if free is None:
        return max(n, CPU_ROWS)
    per_row = _ROW_BYTES.get(model, {}).get(_row_key(x, kind, create_graph))
    if per_row is None:
        return None
    fit = int(CUDA_MEMORY_SHARE * free / (CUDA_OVERHEAD * max(per_row, 1.0)))
    return max(n, min(copies * n, fit))


def _free_bytes(device: torch.device) -> int | None:
    """Bytes a chunk may still use on ``device`` (CUDA: free plus cached-but-unused), or
    None where chunks are not sized by memory (the CPU)."""
    if device.type != "cuda":
        return None
    free, _ = torch.cuda.mem_get_info(device)
    return free + torch.cuda.memory_reserved(device) - torch.cuda.memory_allocated(device)


def _row_key(x: torch.Tensor, kind: str, create_graph: bool) -> tuple:
    return (kind, tuple(x.shape[1:]), x.dtype, str(x.device), bool(create_graph))


def chunks(batch_size, model: nn.Module, x: torch.Tensor, copies: int, *, kind: str = "grad",
           create_graph: bool = False):
    """Split ``copies`` copies of the batch ``x`` into forward passes: yields
    ``(start, count)`` pairs of copies.

    ``batch_size`` (rows, an int) fixes the pass size, in whole copies of the batch, at
    least one. ``batch_size=None`` is device-aware (:func:`chunk_rows`): 128 rows on the
    CPU; on CUDA as many rows as the free memory holds, learned from the bytes autograd
    saves for backward during the first pass of the first call with a model and input
    shape (that pass takes 128 rows; later calls start at the learned size). Chunking
    changes only the order of a floating-point sum, never the random draws: methods draw
    their noise copy by copy.
    """
    n = x.shape[0]
    measure = False
    if batch_size is not None:
        k = samples_per_chunk(batch_size, n)
    else:
        rows = chunk_rows(model, x, copies, kind=kind, create_graph=create_graph)
        measure = rows is None
        k = max(1, (CPU_ROWS if measure else rows) // n)
    start = 0
    _LAST["rows"] = 0
    while start < copies:
        count = min(k, copies - start)
        _LAST["rows"] = max(_LAST["rows"], count * n)
        if measure:
            from robattr.memory import SavedTensorPeak

            with SavedTensorPeak(exclude=model.parameters()) as probe:
                yield start, count
            _ROW_BYTES.setdefault(model, {})[_row_key(x, kind, create_graph)] = \
                probe.peak_bytes / (count * n)
            measure = False
            rows = chunk_rows(model, x, copies - start - count, kind=kind,
                              create_graph=create_graph)
            k = max(1, rows // n)
        else:
            yield start, count
        start += count

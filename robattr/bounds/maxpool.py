"""Where a max-pooling network is not differentiable: pooling switches and ties.

A max-pool passes on the gradient of the largest input of each window (its *switch*). When
a perturbation moves a switch, the input gradient jumps, so a network with max-pooling is not
twice differentiable even with Softplus activations (003 Thm. 6, 001 Sec. B.1). Two views:

* :func:`pool_switches` -- the argmax of every window of every ``nn.MaxPool2d``; compare it at
  ``x`` and ``x + δ`` (:func:`switch_moved`) to tell the smooth cases from the jumps;
* :func:`pool_gaps` -- the gap between the largest and second-largest input of every window;
  a gap of exactly 0 is a tie, where the gradient jumps under *any* perturbation.

Both run the model once with forward hooks on its ``nn.MaxPool2d`` modules.
"""
from __future__ import annotations

import torch
from torch import nn
from torch.nn import functional as F

__all__ = ["pool_inputs", "pool_switches", "switch_moved", "pool_gaps"]


def pool_inputs(model: nn.Module, x: torch.Tensor) -> list[tuple[nn.MaxPool2d, torch.Tensor]]:
    """The input of every ``nn.MaxPool2d`` of ``model`` on the batch ``x``, in call order (no grad)."""
    if not isinstance(model, nn.Module):
        raise ValueError(f"model must be a torch.nn.Module, got {type(model).__name__}")
    if not torch.is_tensor(x) or x.ndim < 2 or x.shape[0] == 0:
        raise ValueError("x must be a non-empty batch tensor (N, ...)")
    found: list[tuple[nn.MaxPool2d, torch.Tensor]] = []
    hooks = [m.register_forward_hook(lambda mod, inp, out: found.append((mod, inp[0].detach())))
             for m in model.modules() if isinstance(m, nn.MaxPool2d)]
    try:
        with torch.no_grad():
            model(x)
    finally:
        for h in hooks:
            h.remove()
    return found


def pool_switches(model: nn.Module, x: torch.Tensor) -> torch.Tensor:
    """(N, windows) long tensor: the argmax index of every max-pooling window, all pools
    concatenated per example; (N, 0) for a model without ``nn.MaxPool2d``."""
    found = [F.max_pool2d(inp, mod.kernel_size, mod.stride, mod.padding, mod.dilation,
                          ceil_mode=mod.ceil_mode, return_indices=True)[1].flatten(1)
             for mod, inp in pool_inputs(model, x)]
    return torch.cat(found, 1) if found else torch.zeros(x.shape[0], 0, dtype=torch.long)


def switch_moved(model: nn.Module, x: torch.Tensor, delta: torch.Tensor) -> torch.Tensor:
    """(N,) bool: does any pooling switch differ between ``x`` and ``x + delta``?"""
    if not torch.is_tensor(delta) or delta.shape != x.shape:
        raise ValueError(f"delta must be a tensor shaped like x {tuple(x.shape)}")
    return (pool_switches(model, x) != pool_switches(model, x + delta)).any(1)


def pool_gaps(model: nn.Module, x: torch.Tensor) -> list[torch.Tensor]:
    """Per ``nn.MaxPool2d`` (call order), the gap between the two largest inputs of each window,
    shaped (N, C, H_out, W_out); 0 marks an exact tie. Needs square non-overlapping windows
    without padding or dilation (``kernel_size == stride``), as in every model of the zoo."""
    gaps = []
    for mod, inp in pool_inputs(model, x):
        k, s = mod.kernel_size, mod.stride
        if isinstance(k, tuple) or isinstance(s, tuple) or k != s or mod.padding != 0 or mod.dilation != 1:
            raise ValueError("pool_gaps needs kernel_size == stride (ints), padding 0, dilation 1; "
                             f"got {mod}")
        if k < 2:
            raise ValueError(f"pool_gaps needs windows of at least 2 inputs; got {mod}")
        win = inp.unfold(2, k, k).unfold(3, k, k).flatten(-2)
        top2 = win.topk(2, dim=-1).values
        gaps.append(top2[..., 0] - top2[..., 1])
    return gaps

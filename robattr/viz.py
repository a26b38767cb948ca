"""Figures and tables for the book: heatmaps and paper-vs-ours tables."""
from __future__ import annotations

from typing import Sequence

import numpy as np
import torch

__all__ = ["to_image", "heatmap_grid"]


def to_image(x: torch.Tensor) -> np.ndarray:
    """One C×H×W tensor in [0, 1] as an H×W (grey) or H×W×3 array for imshow."""
    arr = x.detach().cpu().float().numpy()
    return arr[0] if arr.shape[0] == 1 else np.transpose(arr, (1, 2, 0)).clip(0, 1)


def _saliency(a: torch.Tensor, signed: bool) -> np.ndarray:
    """Sum over channels; signed maps keep their sign, others take the absolute value."""
    a = a.detach().cpu().float()
    a = a.sum(0) if signed else a.abs().sum(0)
    return a.numpy()


def heatmap_grid(images: torch.Tensor, maps: dict[str, torch.Tensor] | torch.Tensor,
                 titles: Sequence[str] | None = None, *, signed: bool = True,
                 cmap: str | None = None, size: float = 1.6):
    """A grid: one column per image, the image on top and one row per attribution map.

    ``maps`` is a tensor shaped like ``images`` or a dict ``{row label: tensor}``.
    Signed maps use a diverging colour map centred at zero (red positive, blue
    negative); unsigned ones show the absolute value summed over channels.
    Returns the matplotlib figure.
    """
    import matplotlib.pyplot as plt

    if isinstance(maps, torch.Tensor):
        maps = {"attribution": maps}
    n = images.shape[0]
    rows = 1 + len(maps)
    fig, axes = plt.subplots(rows, n, figsize=(size * n, size * rows), squeeze=False)
    for j in range(n):
        img = to_image(images[j])
        axes[0, j].imshow(img, cmap="gray" if img.ndim == 2 else None, vmin=0, vmax=1)
        if titles is not None:
            axes[0, j].set_title(titles[j], fontsize=9)
        for i, (label, m) in enumerate(maps.items(), start=1):
            s = _saliency(m[j], signed)
            if signed:
                lim = float(np.abs(s).max()) or 1.0
                axes[i, j].imshow(s, cmap=cmap or "bwr", vmin=-lim, vmax=lim)
            else:
                axes[i, j].imshow(s, cmap=cmap or "hot")
            if j == 0:
                axes[i, j].set_ylabel(label, fontsize=9)
    for ax in axes.flat:
        ax.set_xticks([]), ax.set_yticks([])
    fig.tight_layout()
    return fig
